// tb-probe: the measuring end of `testbedctl verify`, run inside lab namespaces.
//
//   tb-probe [--realtime PRIO] MODE ...: run SCHED_FIFO PRIO where the host allows it (verify
//   does, for serve, rtt and goodput: core/realtime.h); refused, it says so on stderr and runs on.
//   tb-probe serve   --port P --seconds N [--dev IF] [--addr A] [--buffer BYTES] [--dscp N]
//   tb-probe rtt     --to ADDR --port P [--dev IF] --count N --interval-us I [--wait-ms W]
//                    [--samples] [--dscp N]
//   tb-probe agent   --config FILE --events FILE   (runs until SIGTERM)
//   tb-probe fabric  --config FILE --events FILE   (runs until SIGTERM)
//   tb-probe congestion --config FILE [--stats FILE] [--control FILE] [--episodes FILE]
//                    [--events FILE]
//                    (runs until SIGTERM; SIGHUP re-reads the control document; stats and
//                    control default: congestion.stats.json, congestion.control.json beside
//                    the config; pause episodes: none unless --episodes)
//   tb-probe goodput --to ADDR --port P [--dev IF] --seconds T [--warmup-ms W] [--pace-bps R]
//                    [--buffer BYTES] [--drain-ms D] [--dscp N]
//   tb-probe ckpt-recv --port P --dir D [--dscp N] [--seconds S]
//   tb-probe ckpt-send --to ADDR --port P --shard I --bytes B [--block N] [--seed S]
//                    [--mode full|incremental|layered] [--changed F] [--full-every K] --rep R
//                    [--streams N] [--dscp N] [--timeout-ms T]     (probe/checkpoint.h)
//
// rtt and goodput print one JSON object on stdout; serve prints JSON lines ("ready", then
// "done"). Every mode is bounded in time. Exit codes: 0 done, 1 failed, 2 bad command line, 3 a
// step ran out of time (probe::kExitTimedOut).
#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "congestion/agent.h"
#include "congestion/control.h"
#include "congestion/stats.h"
#include "core/realtime.h"
#include "failover/agent.h"
#include "failover/fabric.h"
#include "probe/checkpoint.h"
#include "probe/goodput.h"
#include "probe/rtt.h"
#include "probe/serve.h"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};

void on_signal(int) {
  g_stop = true;
}
void on_hup(int) {
  g_reload = true;
}

// SIGTERM and SIGINT set g_stop (the long-running modes end cleanly on either).
void stop_on_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

int fail_with(const tb::Error& e) {
  std::fprintf(stderr, "tb-probe: %s\n", e.message.c_str());
  return e.sys_errno == ETIMEDOUT ? tb::probe::kExitTimedOut : e.exit_code;
}

void print(const nlohmann::json& j) {
  std::cout << j.dump() << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tb-probe: RTT, loss and goodput across one link of a lab"};
  app.require_subcommand(1);
  int realtime = 0;
  app.add_option("--realtime", realtime,
                 "SCHED_FIFO with this priority (1-99) where the host allows it (before MODE)")
      ->check(CLI::Range(1, 99));
  tb::probe::ServeOptions so;
  tb::probe::RttOptions ro;
  tb::probe::GoodputOptions go;

  auto* serve = app.add_subcommand("serve", "UDP echo + TCP sink until --seconds or SIGTERM");
  serve->add_option("--port", so.port)->required();
  serve->add_option("--seconds", so.seconds, "exit after this many seconds")->required();
  serve->add_option("--dev", so.dev, "bind to this interface (SO_BINDTODEVICE)");
  serve->add_option("--addr", so.addr, "local address to bind")->capture_default_str();
  serve->add_option("--buffer", so.buffer, "SO_RCVBUF of the TCP sink in bytes (0 = autotune)");
  serve->add_option("--dscp", so.dscp, "DSCP of the echoes and the sink's ACKs")
      ->check(CLI::Range(0, 63));

  auto* rtt = app.add_subcommand("rtt", "UDP echo probes with sequence numbers");
  rtt->add_option("--to", ro.to)->required();
  rtt->add_option("--port", ro.port)->required();
  rtt->add_option("--dev", ro.dev, "send through this interface only (SO_BINDTODEVICE)");
  rtt->add_option("--count", ro.count)->required();
  rtt->add_option("--interval-us", ro.interval_us)->required();
  rtt->add_option("--wait-ms", ro.wait_ms, "wait for late echoes after the last send")
      ->capture_default_str();
  rtt->add_flag("--samples", ro.samples, "print every RTT too");
  rtt->add_option("--warmup-ms", ro.warmup_ms,
                  "untimed probes first, one every 100 ms until one is answered or this passes")
      ->capture_default_str();
  rtt->add_option("--dscp", ro.dscp, "DSCP of the probes (a QoS class)")->check(CLI::Range(0, 63));

  auto* goodput = app.add_subcommand("goodput", "TCP bulk transfer counted by the receiver");
  goodput->add_option("--to", go.to)->required();
  goodput->add_option("--port", go.port)->required();
  goodput->add_option("--dev", go.dev, "send through this interface only (SO_BINDTODEVICE)");
  goodput->add_option("--seconds", go.seconds)->required();
  goodput->add_option("--warmup-ms", go.warmup_ms, "excluded from the measured window")
      ->capture_default_str();
  goodput->add_option("--buffer", go.buffer, "SO_SNDBUF in bytes (0 = autotune)");
  goodput->add_option("--pace-bps", go.pace_bps, "SO_MAX_PACING_RATE in bit/s (0 = none)");
  goodput->add_option("--drain-ms", go.drain_ms, "wait this long for the receiver's report")
      ->capture_default_str();
  goodput->add_option("--dscp", go.dscp, "DSCP of the transfer (a QoS class)")
      ->check(CLI::Range(0, 63));

  std::string agent_config, agent_events;
  auto* agent = app.add_subcommand("agent", "the WAN failover agent of a transit router");
  agent->add_option("--config", agent_config, "its JSON config (written by `up`)")->required();
  agent->add_option("--events", agent_events, "the lab's events.jsonl")->required();
  auto* fabric =
      app.add_subcommand("fabric", "dual-ToR host-route withdrawal for the spines of a region");
  fabric->add_option("--config", agent_config, "its JSON config (written by `up`)")->required();
  fabric->add_option("--events", agent_events, "the lab's events.jsonl")->required();
  std::string congestion_stats, congestion_episodes;
  auto* congestion =
      app.add_subcommand("congestion", "the lossless rails' pause agent (congestion/agent.h)");
  congestion->add_option("--config", agent_config, "its JSON config (written by `up`)")->required();
  congestion->add_option("--stats", congestion_stats,
                         "its stats file (default: congestion.stats.json beside the config)");
  congestion->add_option("--episodes", congestion_episodes,
                         "the pause-episode timeline it appends to (congestion/episodes.h)");
  std::string congestion_control;
  congestion->add_option("--control", congestion_control,
                         "its control document (default: congestion.control.json beside the "
                         "config; congestion/control.h)");
  congestion->add_option("--events", agent_events,
                         "the lab's events.jsonl (the watchdog's pfcwd_detect/pfcwd_restore)");

  tb::probe::CkptServeOptions cro;
  auto* ckrecv = app.add_subcommand("ckpt-recv", "checkpoint receiver: rebuilds shards in --dir");
  ckrecv->add_option("--port", cro.port)->required();
  ckrecv->add_option("--dir", cro.dir, "where shard-<N>.bin files are written")->required();
  ckrecv->add_option("--dscp", cro.dscp, "DSCP of its answers and ACKs")->check(CLI::Range(0, 63));
  ckrecv->add_option("--seconds", cro.seconds, "exit after this many seconds")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  tb::probe::CkptSendOptions cso;
  std::string ckpt_mode = "full";
  auto* cksend = app.add_subcommand("ckpt-send", "one checkpoint replication of one shard");
  cksend->add_option("--to", cso.to)->required();
  cksend->add_option("--port", cso.port)->required();
  cksend->add_option("--shard", cso.shard)->required();
  cksend->add_option("--bytes", cso.data.bytes)->required();
  cksend->add_option("--block", cso.data.block)->capture_default_str();
  cksend->add_option("--seed", cso.data.seed)->capture_default_str();
  cksend->add_option("--mode", ckpt_mode)
      ->check(CLI::IsMember({"full", "incremental", "layered"}))
      ->capture_default_str();
  cksend->add_option("--changed", cso.changed, "fraction of blocks changed per replication")
      ->capture_default_str();
  cksend->add_option("--full-every", cso.full_every)->capture_default_str();
  cksend->add_option("--rep", cso.rep, "the replication's number, 0 first")->required();
  cksend->add_option("--streams", cso.streams)->capture_default_str();
  cksend->add_option("--dscp", cso.dscp)->capture_default_str();
  cksend->add_option("--timeout-ms", cso.timeout_ms)->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : tb::kExitBadInput;
  }
  std::signal(SIGPIPE, SIG_IGN);
  if (realtime > 0) {
    const tb::Scheduling sched = tb::try_realtime(realtime);
    if (!sched.realtime)
      std::fprintf(stderr, "tb-probe: %s; timings will include a busy host's waits\n",
                   sched.text.c_str());
  }

  if (*serve) {
    stop_on_signals();
    auto r = tb::probe::serve(so, g_stop, print);
    if (!r) return fail_with(r.error());
    print({{"event", "done"},
           {"echoed", r->echoed},
           {"tcp_sessions", r->tcp_sessions},
           {"tcp_bytes", r->tcp_bytes}});
    return tb::kExitOk;
  }
  if (*congestion) {
    stop_on_signals();
    std::ifstream in(agent_config);
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded()) return fail_with(tb::Error{agent_config + ": not JSON"});
    tb::plan::CongestionAgent c;
    try {
      c = tb::plan::congestion_from_json(j);
    } catch (const nlohmann::json::exception& e) {
      return fail_with(tb::Error{agent_config + ": " + e.what()});
    }
    tb::congestion::AgentOptions o;
    const auto slash = agent_config.rfind('/');
    const std::string beside =
        slash == std::string::npos ? std::string() : agent_config.substr(0, slash + 1);
    o.stats_path =
        congestion_stats.empty() ? beside + tb::congestion::kStatsFile : congestion_stats;
    o.control_path =
        congestion_control.empty() ? beside + tb::congestion::kControlFile : congestion_control;
    o.events_path = agent_events;
    o.episodes_path = congestion_episodes;
    // SIGHUP: re-read the control document. The supervisor keeps it blocked across exec
    // (runner/supervisor.h hup_blocked), so one sent while this starts waits for the handler.
    struct sigaction hup {};
    hup.sa_handler = on_hup;
    sigaction(SIGHUP, &hup, nullptr);
    sigset_t hs;
    sigemptyset(&hs);
    sigaddset(&hs, SIGHUP);
    sigprocmask(SIG_UNBLOCK, &hs, nullptr);
    o.reload = &g_reload;
    auto r = tb::congestion::run_congestion_agent(c, o, g_stop);
    if (!r) return fail_with(r.error());
    return tb::kExitOk;
  }
  if (*agent || *fabric) {
    stop_on_signals();
    std::ifstream in(agent_config);
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (*fabric) {
      auto c = tb::failover::fabric_config_from_json(j);
      if (!c) return fail_with(c.error());
      auto r = tb::failover::run_fabric(*c, agent_events, g_stop);
      if (!r) return fail_with(r.error());
      return tb::kExitOk;
    }
    auto c = tb::failover::agent_config_from_json(j);
    if (!c) return fail_with(c.error());
    auto r = tb::failover::run_agent(*c, agent_events, g_stop);
    if (!r) return fail_with(r.error());
    return tb::kExitOk;
  }
  if (*ckrecv) {
    stop_on_signals();
    auto r = tb::probe::serve_ckpt(cro, g_stop, print);
    if (!r) return fail_with(r.error());
    return tb::kExitOk;
  }
  if (*cksend) {
    cso.mode = *tb::probe::parse_ckpt_mode(ckpt_mode);
    auto r = tb::probe::run_ckpt_send(cso);
    if (!r) return fail_with(r.error());
    print(tb::probe::to_json(cso, *r));
    return r->ok() ? tb::kExitOk : tb::kExitFailed;
  }
  if (*rtt) {
    auto r = tb::probe::run_rtt(ro);
    if (!r) return fail_with(r.error());
    print(tb::probe::to_json(ro, *r));
    return tb::kExitOk;
  }
  auto r = tb::probe::run_goodput(go);
  if (!r) return fail_with(r.error());
  print(tb::probe::to_json(go, *r));
  return tb::kExitOk;
}
