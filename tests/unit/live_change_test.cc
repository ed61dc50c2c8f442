// The pure parts of confirmed live changes (issue 22): config generations and the stage's answer,
// loss in parts per million and the one-transaction loss swap, the supervisor's spec and state
// fields for stages, journals written before the loss rule counted in ppm, and `status` showing
// the scenario's figures beside a changed link's figures in force.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "lab/daemons.h"
#include "plan/op.h"
#include "plan/plan.h"
#include "report/status.h"
#include "runner/supervisor.h"
#include "scenario/loader.h"
#include "stage/netfilter_rules.h"
#include "stage/queue_spec.h"

namespace tb {
namespace {

TEST(LiveChange, ConfigCarriesItsGeneration) {
  std::vector<stage::QueueSpec> q{{3, Duration{5'000'000}, Duration{}, 1024}};
  const std::string text = stage::to_config(q, 7);
  EXPECT_EQ(text.substr(0, 15), "# generation 7\n");
  EXPECT_EQ(stage::config_generation(text), 7u);
  auto back = stage::parse_queue_config(text);  // a comment to the queue parser
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, q);
  EXPECT_EQ(stage::config_generation(stage::to_config(q)), 0u);  // none written
  EXPECT_EQ(stage::config_generation("# a note\n# generation 12\n1:delay_us=1\n"), 12u);
  // A config whose queues do not parse still says which change it was.
  EXPECT_EQ(stage::config_generation("# generation 4\n1:delay=banana\n"), 4u);
  EXPECT_EQ(stage::config_generation("# generation x4\n"), 0u);
}

TEST(LiveChange, ReloadAnswerIsForThatGenerationOnly) {
  using nlohmann::json;
  EXPECT_FALSE(lab::read_reload_answer(json(), 3).answered);                // no stats file yet
  EXPECT_FALSE(lab::read_reload_answer(json{{"reloads", 2}}, 3).answered);  // a stage without
  EXPECT_FALSE(lab::read_reload_answer(json{{"generation", 2}, {"reload_error", ""}}, 3).answered);
  // A stats file left by an earlier stage process says nothing of this change.
  EXPECT_FALSE(lab::read_reload_answer(json{{"generation", 9}, {"reload_error", ""}}, 3).answered);
  auto ok = lab::read_reload_answer(json{{"generation", 3}, {"reload_error", ""}}, 3);
  EXPECT_TRUE(ok.answered);
  EXPECT_EQ(ok.error, "");
  auto refused = lab::read_reload_answer(
      json{{"generation", 3}, {"reload_error", "bind NFQUEUE 4: EPERM"}}, 3);
  EXPECT_TRUE(refused.answered);
  EXPECT_EQ(refused.error, "bind NFQUEUE 4: EPERM");
}

TEST(LiveChange, LossIsInPartsPerMillionAndNeverRoundedAway) {
  EXPECT_EQ(stage::kLossModulus, 1'000'000u);
  EXPECT_EQ(stage::loss_ppm(0.001), 10u);  // rounded to 0 in 0.01 % steps before
  EXPECT_EQ(stage::loss_ppm(0.004), 40u);
  EXPECT_EQ(stage::loss_ppm(0.0001), 1u);
  EXPECT_EQ(stage::loss_ppm(0.00001), 1u);  // below the step: the step, not nothing
  EXPECT_EQ(stage::loss_ppm(0.5), 5000u);
  EXPECT_EQ(stage::loss_ppm(100), 1'000'000u);
  EXPECT_EQ(stage::loss_ppm(0), 0u);
  EXPECT_EQ(stage::loss_ppm(std::nan("")), 0u);
}

TEST(LiveChange, LossSwapIsOneScriptAddingBeforeDeleting) {
  stage::MarkedRule old_in, old_out;
  old_in.kind = old_out.kind = stage::MarkedRule::Kind::kLoss;
  old_in.handle = 5;
  old_out.handle = 9;
  old_out.chain = stage::kLossEgressChain;
  const std::string s = stage::loss_swap_script({"vb", 10}, "m loss", {old_in, old_out});
  EXPECT_EQ(s,
            "add table inet tb_loss; add chain inet tb_loss prerouting { type filter hook "
            "prerouting priority raw; policy accept; }; add chain inet tb_loss postrouting "
            "{ type filter hook postrouting priority raw; policy accept; }; add rule inet "
            "tb_loss prerouting iif \"vb\" numgen random mod 1000000 < 10 counter drop comment "
            "\"m loss\"; delete rule inet tb_loss prerouting handle 5; delete rule inet tb_loss "
            "postrouting handle 9");
  // Loss 0: only the deletes (still one transaction).
  const std::string off = stage::loss_swap_script({"vb", 0, true}, "m loss", {old_out});
  EXPECT_EQ(off.find("add rule"), std::string::npos) << off;
  EXPECT_NE(off.find("delete rule inet tb_loss postrouting handle 9"), std::string::npos) << off;
  // Egress, 100 %: oif, no numgen.
  const std::string all = stage::loss_swap_script({"vb", 1'000'000, true}, "m", {});
  EXPECT_NE(all.find("add rule inet tb_loss postrouting oif \"vb\" counter drop comment \"m\""),
            std::string::npos)
      << all;
}

TEST(LiveChange, NftReadbackScalesAnyModulusToPpm) {
  auto rules = stage::parse_nft_rules(
      R"({"nftables": [{"rule": {"handle": 2, "comment": "tb x loss", "expr": [
        {"match": {"op": "==", "left": {"meta": {"key": "iif"}}, "right": "va"}},
        {"match": {"op": "<", "left": {"numgen": {"mode": "random", "mod": 1000000}}, "right": 10}},
        {"drop": null}]}},
      {"rule": {"handle": 3, "comment": "tb y loss", "expr": [
        {"match": {"op": "<", "left": {"numgen": {"mode": "random", "mod": -1}}, "right": 4295}},
        {"drop": null}]}}]})",
      "tb ");
  ASSERT_TRUE(rules) << rules.error().message;
  ASSERT_EQ(rules->size(), 2u);
  EXPECT_EQ((*rules)[0].ppm, 10u);
  // nft -j prints the largest modulus the kernel takes, 2^32 - 1, as -1.
  EXPECT_EQ((*rules)[1].ppm, 1u);
}

TEST(LiveChange, StageChildSpecAndStateRoundTrip) {
  runner::ChildSpec spec{"stage dc/tr", "tb-x-dc-tr", {"/bin/tb-delayd"}, 0, true, true};
  auto back = runner::specs_from_json(runner::specs_to_json({spec}));
  ASSERT_TRUE(back);
  ASSERT_EQ(back->size(), 1u);
  EXPECT_TRUE((*back)[0].hup_blocked);
  EXPECT_TRUE((*back)[0].notify_ready);
  // A spec written before these fields: neither.
  auto old = runner::specs_from_json(
      nlohmann::json::parse(R"([{"name": "a", "netns": "n", "argv": ["/bin/true"]}])"));
  ASSERT_TRUE(old);
  EXPECT_FALSE((*old)[0].hup_blocked);
  EXPECT_FALSE((*old)[0].notify_ready);
  runner::ChildState st{"stage dc/tr", 42, false, true, false, 0, ""};
  auto states = runner::states_from_json(runner::states_to_json({st}));
  ASSERT_EQ(states.size(), 1u);
  EXPECT_TRUE(states[0].starting);
  EXPECT_FALSE(states[0].running);
}

TEST(LiveChange, StageRuleOpCarriesPpmAndReadsOldJournals) {
  plan::AddStageRule r{"ns", "vb", false, 3, 10, "m"};
  auto back = plan::op_from_json(plan::to_json(plan::Op{r}));
  ASSERT_TRUE(back);
  EXPECT_EQ(std::get<plan::AddStageRule>(*back).loss_ppm, 10u);
  EXPECT_NE(plan::to_text(plan::Op{r}).find("loss 10 ppm"), std::string::npos);
  auto old = plan::op_from_json(nlohmann::json::parse(
      R"({"op": "stage-rule", "netns": "ns", "ifname": "vb", "egress": false, "queue": 0,
          "loss_per_10000": 25, "marker": "m"})"));
  ASSERT_TRUE(old) << old.error().message;
  EXPECT_EQ(std::get<plan::AddStageRule>(*old).loss_ppm, 2500u);
}

// Issue 22: every report shows the figures in force and the scenario's beside them when they
// differ. `status` lists a changed link with both (text) and marks it (JSON); unchanged links
// are not listed, and without changes there is no such section.
TEST(LiveChange, StatusShowsTheScenarioBesideAChangedLink) {
  auto sc = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/mini.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  auto p = plan::compile(*sc);
  ASSERT_TRUE(p) << p.error().message;
  lab::LabState st;
  st.lab = p->lab;
  st.topo = p->topo;
  st.phase = "up";
  size_t rail = st.topo.links.size();
  for (size_t i = 0; i < st.topo.links.size(); ++i) {
    const auto& l = st.topo.links[i];
    if ((l.a.node == "dc/s0/g0" && l.b.node == "dc/tor0") ||
        (l.a.node == "dc/tor0" && l.b.node == "dc/s0/g0"))
      rail = i;
  }
  ASSERT_LT(rail, st.topo.links.size());
  const auto& link = st.topo.links[rail];
  EXPECT_EQ(report::status_text(st, nullptr).find("CHANGED LINKS"), std::string::npos);

  const plan::EmulatedFigures scenario = st.topo.links[rail].emulated;
  st.topo.links[rail].emulated.rate = Rate{100e6};
  st.topo.links[rail].emulated.delay = Duration{5'000'000};
  const std::map<size_t, plan::EmulatedFigures> changed{{rail, scenario}};
  const std::string text = report::status_text(st, nullptr, changed);
  const auto at = text.find("CHANGED LINKS");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_NE(text.find(link.a.node + ":" + link.a.ifname + " <-> " + link.b.node + ":" +
                          link.b.ifname + "  in force: ",
                      at),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("in force: rate 100Mbit, delay 5ms; the scenario's: rate 400Mbit", at),
            std::string::npos)
      << text;

  const auto j = report::status_json(st, nullptr, changed);
  int differs = 0;
  for (const auto& l : j["links"]) differs += l["in_force_differs"].get<bool>();
  EXPECT_EQ(differs, 1);
  const auto& l = j["links"][rail];
  EXPECT_EQ(l["emulated"]["rate_bps"], 100e6);
  EXPECT_EQ(l["scenario_emulated"]["rate_bps"], scenario.rate.bps);
  EXPECT_EQ(l["scenario_emulated"]["delay_ns"], scenario.delay.ns);
}

}  // namespace
}  // namespace tb
