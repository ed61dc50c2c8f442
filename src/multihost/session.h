// A verb's session across the hosts of a lab (issue 19): the coordinator — one host, chosen the
// same way on every host — listens on its underlay address; every other host that takes part
// joins it with a hello naming the lab, the verb, the plan digest (plan.h digest: what every host
// must agree on) and the job digest (what this verb's run must agree on: its ranks and options).
// A host whose digests differ is refused and told why, and the coordinator stops with exit 2:
// a mismatched plan is bad input, not a run that fails half-way. After the hellos the hosts
// exchange JSON messages (wire.h) until the coordinator says done.
// Not thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/ipv4.h"
#include "multihost/wire.h"

namespace tb::multihost {

// 2: relay.h's messages (t0 on each host's clock, one verdict shape), long messages in pieces.
inline constexpr int kProtocol = 2;
// The coordinator's TCP port unless the verb's --rendezvous-port says another.
inline constexpr int kDefaultPort = 29411;

// How long the coordinator waits for the other hosts to join, and a host for the coordinator.
inline constexpr std::chrono::seconds kJoinTimeout{60};

// A digest two hosts compare: FNV-1a 64 of `text`, as 16 hex digits.
std::string digest(std::string_view text);

// A host of the lab as every host's state names it.
struct HostAddr {
  std::string name;
  Ipv4 underlay;
};

// Who does what in one verb's session, worked out alike on every host: the hosts with a part,
// [[host]] order; the first of them coordinates, listening on its underlay address; the others
// join it.
struct Roles {
  std::string me;           // this host ("" : the lab is on one host)
  std::string coordinator;  // "" : no host has a part, or the lab is on one host
  Ipv4 coordinator_addr;
  std::vector<std::string> peers;  // hosts with a part other than the coordinator
  std::vector<std::string> parts;  // every host with a part, [[host]] order
};
// `hosts` in [[host]] order; `has_part` says which take part. Pure.
Roles choose_roles(const std::string& me, const std::vector<HostAddr>& hosts,
                   const std::function<bool(const std::string&)>& has_part);

// The coordinator's verdict, the last message every joining host gets: {"done": {"ok", "rc",
// "where"}} (rc: the verb's exit code; where: where the report or results are).
struct Verdict {
  bool ok = false;
  int rc = 1;
  std::string where;
};
nlohmann::json to_json(const Verdict& v);
Verdict verdict_from_json(const nlohmann::json& j);

// One round trip of the clock exchange: sent and received on the coordinator's clock, the
// other host's clock when it answered.
struct ClockSample {
  int64_t sent_ns = 0, host_ns = 0, received_ns = 0;
};
// The other host's clock minus the coordinator's, from the sample with the shortest round trip
// (its answer taken as half-way); 0 without samples. Pure.
int64_t clock_offset(const std::vector<ClockSample>& samples);
// The largest error of clock_offset's answer: half the shortest round trip; 0 without samples.
int64_t clock_error(const std::vector<ClockSample>& samples);

struct Hello {
  std::string lab, host, verb;
  std::string plan_digest, job_digest;
};

nlohmann::json to_json(const Hello& h);
// Why `theirs` may not join `mine` ("" when it may).
std::string mismatch(const Hello& mine, const Hello& theirs);

struct Message {
  std::string host;
  nlohmann::json body;  // {"closed": true} once the host's connection ended
};

class Coordinator {
 public:
  // Listens on `addr`:`port` and waits until every host of `peers` joined with `mine`'s lab,
  // verb and digests, within `timeout` (`stop` cuts it). A mismatch, a host that does not join
  // in time, a port in use: exit 2 naming the host and what to do. A host that is not in
  // `peers` (or joins twice) is refused and the wait goes on.
  static Result<Coordinator> gather(const Hello& mine, Ipv4 addr, int port,
                                    const std::vector<std::string>& peers,
                                    std::chrono::milliseconds timeout,
                                    const std::atomic<bool>& stop);

  // To every host but `except`; a host whose connection fails is reported by receive().
  void broadcast(const nlohmann::json& msg, const std::string& except = "");
  Status send(const std::string& host, const nlohmann::json& msg);
  // Messages from the hosts, waiting up to `wait_ms` for the first.
  std::vector<Message> receive(int wait_ms);
  std::vector<std::string> hosts() const;
  bool open(const std::string& host) const;

 private:
  std::map<std::string, Conn> conns_;
  std::map<std::string, bool> reported_closed_;
};

class Peer {
 public:
  // Connects to the coordinator `coordinator` at `addr`:`port` (retrying while it does not
  // listen yet, within `timeout`) and says hello. Refused (another digest): exit 2 with the
  // coordinator's reason. Not reached in time: exit 2 naming the host, address and port.
  static Result<Peer> join(const Hello& mine, const std::string& coordinator, Ipv4 addr, int port,
                           std::chrono::milliseconds timeout, const std::atomic<bool>& stop);

  Status send(const nlohmann::json& msg) { return conn_.send(msg); }
  // The coordinator's messages, waiting up to `wait_ms`; {"closed": true} once it is gone.
  Result<std::vector<nlohmann::json>> receive(int wait_ms);
  const std::string& coordinator() const { return coordinator_; }

 private:
  Peer(Conn c, std::string coordinator)
      : conn_(std::move(c)), coordinator_(std::move(coordinator)) {}
  Conn conn_;
  std::vector<nlohmann::json> early_;  // what came in with the welcome
  std::string coordinator_;
  bool told_closed_ = false;
};

}  // namespace tb::multihost
