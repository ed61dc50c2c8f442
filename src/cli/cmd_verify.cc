// verify: measure a live lab's links and compare them with the figures in force on them (the
// scenario's, or what `link set` made them; verify/). One representative link per class
// (tier + profile), or the one --link names; with --paths, one pair of nodes per path class,
// end to end (verify/paths.h), and with --under-load while bulk flows load the lab.
// Exit 0 when every class (path) is within tolerance, 1 when one is not (or a measurement
// failed), 2 for bad input (unknown lab or link, not root, tb-probe missing, lab busy) or when
// a class was NOT JUDGED and none failed: it missed while the host stalled, in each of up to
// three readings (verify/result.h); measure again on a quieter host, as `exercise check`'s
// NOT JUDGED says.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/flag_checks.h"
#include "cli/progress.h"
#include "cli/stop_signals.h"
#include "lab/daemons.h"
#include "lab/link_change.h"
#include "lab/live.h"
#include "lab/state.h"
#include "plan/plan.h"
#include "report/html.h"
#include "report/status.h"
#include "report/verify.h"
#include "verify/across_hosts.h"

namespace tb::cli {
namespace {

struct VerifyFlags {
  std::string lab;
  std::vector<std::string> link_ends;
  bool json = false, quick = false, paths = false, under_load = false;
  std::string html;  // --html FILE
  int rendezvous_port = multihost::kDefaultPort;
};

// The text or JSON on stdout; with --html also the page (report/html.h), its path on stderr. A
// page that cannot be written is an error of its own (exit 2) after the measurement is shown.
int print_report(const verify::VerifyReport& rep, bool json, const std::string& html,
                 const lab::LabState& st) {
  if (json)
    std::cout << report::verify_json(rep).dump(1) << "\n";
  else
    std::cout << report::verify_text(rep);
  std::cout << std::flush;
  const auto v = rep.verdict();
  const int rc = v == verify::ClassVerdict::kPass   ? kExitOk
                 : v == verify::ClassVerdict::kFail ? kExitFailed
                                                    : kExitBadInput;
  if (html.empty()) return rc;
  report::ReportInput in;
  in.kind = report::ReportKind::kVerify;
  in.source = "testbedctl verify " + st.lab + (rep.paths.empty() ? "" : " --paths");
  in.doc = report::verify_json(rep);
  in.topo = st.topo;
  auto w = report::write_html(in, html);
  if (!w) return report(Error{"--html: " + w.error().message, w.error().sys_errno, kExitBadInput});
  std::fprintf(stderr, "verify %s: report: %s\n", st.lab.c_str(), w->c_str());
  return rc;
}

// --under-load: the candidate flows whose paths (out and back) share no link with a probed one.
std::vector<verify::LoadFlow> load_flows(const lab::LabState& st,
                                         const std::vector<verify::PathResult>& probed,
                                         const verify::FiguresOf& figures,
                                         std::vector<std::string>& skipped) {
  std::set<size_t> busy;
  for (const auto& p : probed)
    for (const auto* path : {&p.out, &p.back})
      for (const auto& h : path->hops) busy.insert(h.link);
  std::vector<verify::LoadFlow> flows;
  for (const auto& c : verify::load_pairs(st.topo)) {
    auto out = verify::walk_path(st.topo, c.from, c.addr, verify::live_route_lookup, figures);
    auto src = verify::source_address(st.topo, c.from, c.addr, verify::live_route_lookup);
    auto back = src ? verify::walk_path(st.topo, c.to, *src, verify::live_route_lookup, figures)
                    : Result<verify::Path>(std::unexpected(src.error()));
    const std::string what = c.from + " -> " + c.to + " (" + c.cls + ")";
    if (!out || !back || out->hops.empty()) {
      skipped.push_back(what + ": " +
                        (!out    ? out.error().message
                         : !back ? back.error().message
                                 : std::string("no hop")));
      continue;
    }
    bool shares = false;
    for (const auto* path : {&*out, &*back})
      for (const auto& h : path->hops) shares = shares || busy.contains(h.link);
    if (shares) {
      skipped.push_back(what + ": shares a link with a probed path");
      continue;
    }
    // Every next hop of the first route: a flow hashed to the other ToR is counted too.
    std::vector<std::string> devs{out->hops.front().from_if};
    if (auto r = verify::live_route_lookup(*st.topo.node(c.from), c.addr))
      for (const auto& h : r->hops)
        if (std::ranges::find(devs, h.ifname) == devs.end()) devs.push_back(h.ifname);
    flows.push_back({what, st.topo.node(c.from)->netns, devs, st.topo.node(c.to)->netns, c.addr});
  }
  return flows;
}

int cmd_verify_paths(const lab::LabState& st, const std::string& tb_probe, bool json, bool quick,
                     bool under_load, const std::string& html) {
  StopSignals signals;
  const std::string& lab = st.lab;
  verify::VerifyReport rep;
  rep.lab = lab;
  rep.scenario = st.scenario;
  rep.backends = report::backends_json(st);
  rep.shaping = rep.backends.value("shaping", "unknown");
  rep.quick = quick;
  rep.settings = verify::settings(quick);
  rep.paths_mode = true;
  rep.under_load = under_load;
  const auto figures = verify::figures_in_force(st);
  const std::string work = lab::lab_dir(lab) + "/verify-" + std::to_string(::getpid());
  // Find every path first: the load must avoid all of them.
  for (const auto& pair : verify::path_pairs(st.topo)) {
    verify::PathResult p;
    p.pair = pair;
    auto out = verify::walk_path(st.topo, pair.from, pair.addr, verify::live_route_lookup, figures);
    auto src = verify::source_address(st.topo, pair.from, pair.addr, verify::live_route_lookup);
    if (!out) p.errors.push_back(out.error().message);
    if (!src) p.errors.push_back(src.error().message);
    if (out && src) {
      p.out = *out;
      auto back = verify::walk_path(st.topo, pair.to, *src, verify::live_route_lookup, figures);
      if (back)
        p.back = *back;
      else
        p.errors.push_back(back.error().message);
      const plan::Node* from = st.topo.node(pair.from);
      const plan::Node* to = st.topo.node(pair.to);
      p.target = {from->netns,
                  "",
                  *src,
                  to->netns,
                  pair.addr,
                  "",
                  "plan::reach: " + pair.to + "'s " + pair.label +
                      " address, as its hosts file "
                      "names it; sent by the namespace's routes"};
    }
    rep.paths.push_back(std::move(p));
  }
  int64_t total_ms = 0;
  for (auto& p : rep.paths) {
    if (!p.errors.empty()) continue;
    const Duration rtt{p.out.delay().ns + p.back.delay().ns};
    const Duration sigma{
        static_cast<int64_t>(std::hypot(static_cast<double>(p.out.jitter_sigma().ns),
                                        static_cast<double>(p.back.jitter_sigma().ns)))};
    p.request = verify::plan_path_request(p.target, rep.settings, rtt, sigma);
    p.request.tb_probe = tb_probe;
    p.request.owner = plan::owner_marker(lab);
    total_ms += 2 * (int64_t{p.request.probes} * p.request.interval_us / 1000 + p.request.wait_ms);
  }
  std::optional<verify::Load> load;
  std::vector<std::string> stage_files;
  for (const auto& s : st.stages) stage_files.push_back(lab::stage_stats_path(lab, s.netns));
  if (under_load) {
    std::vector<std::string> skipped;
    auto flows = load_flows(st, rep.paths, figures, skipped);
    for (const auto& k : skipped) rep.load.push_back("not started: " + k);
    if (flows.empty()) {
      rep.load_errors.push_back(
          "no load flow avoids the probed paths; nothing to load the lab with");
    } else {
      std::fprintf(stderr, "verify %s: starting %zu load flows\n", lab.c_str(), flows.size());
      auto l = verify::Load::start(flows, tb_probe, plan::owner_marker(lab), work + "/load",
                                   static_cast<double>(total_ms) / 1000 + 10,
                                   verify::kProbePort + 10, signals.flag());
      if (!l)
        rep.load_errors.push_back("load: " + l.error().message);
      else
        load.emplace(std::move(*l));
      std::this_thread::sleep_for(std::chrono::seconds(2));  // past slow start
    }
  }
  const auto before = verify::sample_host(stage_files);
  Progress progress("verify " + lab + " --paths");
  for (size_t n = 0; n < rep.paths.size(); ++n) {
    auto& p = rep.paths[n];
    if (stop_requested()) {
      rep.interrupted = true;
      break;
    }
    progress.step(n + 1, rep.paths.size(),
                  "path " + p.pair.cls + "  " + p.pair.from + " -> " + p.pair.to);
    if (!p.errors.empty()) continue;
    // Read as a class is (verify/result.h): the host sampled around each reading, a miss read
    // again once, and again while the host stalled; the newest judged.
    for (int reading = 1;; ++reading) {
      p.request.work_dir = work + "/path" + std::to_string(n) + "-" + std::to_string(reading);
      const auto host_before = verify::sample_host(stage_files);
      verify::PromptnessWatch watch;
      p.outcome = verify::measure_link(p.request, signals.flag());
      p.host = verify::host_load(host_before, verify::sample_host(stage_files));
      p.host->promptness = watch.stop();
      p.check = verify::check_path(p.out, p.back, p.outcome.m.rtt, p.outcome.m.base);
      p.stall = verify::host_stall(p.outcome.m, p.host);
      if (!verify::measure_again(p.check, p.outcome, reading, p.stall) || stop_requested()) break;
      progress.step(n + 1, rep.paths.size(),
                    "path " + p.pair.cls + ": measuring it again (reading " +
                        std::to_string(reading + 1) + ", " +
                        (p.stall.empty() ? "out of tolerance" : "out of tolerance, host stalled") +
                        ")");
      p.earlier.push_back({p.check, p.stall});
    }
  }
  rep.host = verify::host_load(before, verify::sample_host(stage_files));
  if (load) {
    const auto carried = load->carried();
    rep.load.insert(rep.load.begin(), carried.begin(), carried.end());
    load.reset();  // senders and sinks stopped
  }
  if (stop_requested()) rep.interrupted = true;
  std::error_code ec;
  std::filesystem::remove_all(work, ec);
  progress.done();
  return print_report(rep, json, html, st);
}

int cmd_verify(const VerifyFlags& f) {
  const std::string& lab = f.lab;
  const auto& link = f.link_ends;
  if (f.paths && !link.empty())
    return report(
        Error{"--paths measures whole paths; --link one link: give one of them", 0, kExitBadInput});
  if (f.under_load && !f.paths)
    return report(Error{"--under-load goes with --paths", 0, kExitBadInput});
  auto st = lab::load_state(lab);
  if (!st) return report(Error{st.error().message, 0, kExitBadInput});
  if (st->phase != "up")
    return report(Error{"lab " + lab + " is " + st->phase + ", not up", 0, kExitBadInput});
  std::vector<verify::LinkClass> classes;
  std::string flags = std::string("quick=") + (f.quick ? "1" : "0");
  if (!link.empty()) {
    if (link.size() != 2)
      return report(Error{"--link takes two endpoints: NODE[:IF] NODE[:IF]", 0, kExitBadInput});
    auto i = verify::find_link(st->topo, verify::parse_endpoint(link[0]),
                               verify::parse_endpoint(link[1]));
    if (!i) return report(i.error());
    classes.push_back(verify::class_of(st->topo, *i));
    flags += " link=" + std::to_string(*i);
  } else {
    classes = verify::link_classes(st->topo);
  }
  if (f.paths && !st->host.empty())
    return report(Error{"--paths: lab " + lab + " is spread over several hosts (this is " +
                            st->host +
                            "), and whole paths across hosts are not measured yet; verify without "
                            "--paths measures every link class, the links between hosts too",
                        0, kExitBadInput});
  // A lab over several hosts: who measures what (verify/across_hosts.h).
  const auto hosts = verify::verify_hosts(*st, classes);
  if (!st->host.empty() && !hosts.has_part()) {
    std::string parts;
    for (const auto& h : hosts.parts) parts += (parts.empty() ? "" : ", ") + h;
    std::fprintf(stderr,
                 "verify %s: host %s holds no end of the %s measured (hosts %s do); nothing to "
                 "do here\n",
                 lab.c_str(), st->host.c_str(), link.empty() ? "links" : "link", parts.c_str());
    return kExitOk;
  }
  if (auto rc = require_root("verify")) return *rc;
  auto tb_probe = verify::find_tb_probe();
  if (!tb_probe) return report(tb_probe.error());
  auto lock = lab::LabLock::acquire(lab);
  if (!lock) return report(Error{lock.error().message, 0, kExitBadInput});
  if (f.paths) return cmd_verify_paths(*st, *tb_probe, f.json, f.quick, f.under_load, f.html);
  StopSignals signals;

  verify::ClassContext ctx;
  ctx.st = &*st;
  ctx.settings = verify::settings(f.quick);
  ctx.tb_probe = *tb_probe;
  ctx.work_dir = lab::lab_dir(lab) + "/verify-" + std::to_string(::getpid());
  for (const auto& s : st->stages) ctx.stage_files.push_back(lab::stage_stats_path(lab, s.netns));
  ctx.figures = verify::figures_in_force(*st);
  const std::string digest = verify::verify_digest(classes, flags);
  // The work directory goes however this ends.
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{ctx.work_dir};

  if (hosts.joins()) {
    std::fprintf(
        stderr, "verify %s: host %s takes part (hosts %s); host %s coordinates on %s:%d\n",
        lab.c_str(), hosts.me.c_str(),
        [&] {
          std::string p;
          for (const auto& h : hosts.parts) p += (p.empty() ? "" : ", ") + h;
          return p;
        }()
            .c_str(),
        hosts.coordinator.c_str(), hosts.coordinator_addr.to_string().c_str(), f.rendezvous_port);
    auto out = verify::serve_verify(
        ctx, classes, hosts, digest, f.rendezvous_port,
        [&](const std::string& line) {
          std::fprintf(stderr, "verify %s: %s\n", lab.c_str(), line.c_str());
        },
        signals.flag());
    if (!out) return report(out.error());
    const char* verdict = out->rc == kExitOk       ? "pass"
                          : out->rc == kExitFailed ? "FAIL"
                                                   : "NOT JUDGED";
    std::fprintf(stderr,
                 "verify %s: %s; this host measured %d class(es) and served %d; the report is on "
                 "host %s (%s)\n",
                 lab.c_str(), verdict, out->measured, out->served, out->coordinator.c_str(),
                 out->where.c_str());
    return out->rc;
  }
  std::optional<verify::VerifyCoordinator> coord;
  if (hosts.coordinates()) {
    std::fprintf(
        stderr,
        "verify %s: classes on hosts %s; this host (%s) coordinates on %s:%d and waits "
        "for the others to join\n",
        lab.c_str(),
        [&] {
          std::string p;
          for (const auto& h : hosts.parts) p += (p.empty() ? "" : ", ") + h;
          return p;
        }()
            .c_str(),
        hosts.me.c_str(), hosts.coordinator_addr.to_string().c_str(), f.rendezvous_port);
    auto c = verify::VerifyCoordinator::open(*st, hosts, digest, f.rendezvous_port, signals.flag());
    if (!c) return report(c.error());
    coord.emplace(std::move(*c));
  }

  verify::VerifyReport rep;
  rep.lab = lab;
  rep.scenario = st->scenario;
  // What `status --json` says under "backends" (no live view needed for it).
  rep.backends = report::backends_json(*st);
  rep.shaping = rep.backends.value("shaping", "unknown");
  rep.quick = f.quick;
  rep.settings = ctx.settings;
  rep.single_link = !link.empty();
  rep.lab_host = st->host;
  rep.hosts = hosts.parts;
  Progress progress("verify " + lab);
  for (size_t n = 0; n < classes.size(); ++n) {
    if (stop_requested()) {
      rep.interrupted = true;
      break;
    }
    const auto& cls = classes[n];
    const auto& l = st->topo.links[cls.link];
    progress.step(n + 1, classes.size(),
                  cls.name() + "  " + l.a.node + ":" + l.a.ifname + " -> " + l.b.node + ":" +
                      l.b.ifname + (cls.host.empty() ? "" : "  " + cls.where()));
    auto on_again = [&](int k, const std::string& why) {
      progress.step(
          n + 1, classes.size(),
          cls.name() + ": measuring it again (reading " + std::to_string(k) + ": " + why + ")");
    };
    // A class on this host alone is measured here; the coordinator asks the others.
    rep.classes.push_back(
        coord ? coord->measure(ctx, cls, n, signals.flag(), on_again)
              : verify::measure_here(ctx, cls, n, std::nullopt, signals.flag(), on_again));
  }
  if (stop_requested()) rep.interrupted = true;
  progress.done();
  const int rc = print_report(rep, f.json, f.html, *st);
  if (coord)
    coord->done(rc, "host " + st->host + "'s " + (f.json ? "JSON" : "report") + " on its stdout" +
                        (f.html.empty() ? "" : ", and its page " + f.html));
  return rc;
}

}  // namespace

void add_verify(CLI::App& app, int& rc) {
  auto f = std::make_shared<VerifyFlags>();
  auto* verify = app.add_subcommand(
      "verify", "measure each link class against the scenario; exit 1 out of tolerance (root)");
  verify->add_option("LAB", f->lab)->required()->check(lab_name());
  verify->add_option("--link", f->link_ends, "only the link between A and B: NODE[:IF] NODE[:IF]")
      ->expected(2);
  verify->add_flag("--json", f->json);
  verify->add_flag("--quick", f->quick,
                   "200 probes and a 2 s transfer per class, not 1000 and 5 s");
  verify->add_flag("--paths", f->paths,
                   "end-to-end RTT of one pair per path class against the sum of its hops' delays");
  verify->add_flag("--under-load", f->under_load,
                   "with --paths: measure while bulk TCP flows load the lab's other links");
  verify->add_option("--html", f->html,
                     "also write an HTML report (charts, topology) to this file");
  verify
      ->add_option("--rendezvous-port", f->rendezvous_port,
                   "a lab over several hosts: the TCP port the coordinating host listens on (its "
                   "underlay address), the same on every host")
      ->capture_default_str()
      ->check(whole_in({1, 65535}));
  verify->callback([f, &rc] { rc = cmd_verify(*f); });
}

}  // namespace tb::cli
