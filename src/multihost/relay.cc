#include "multihost/relay.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/clock.h"

namespace tb::multihost {
namespace {
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kBackgroundTurn{5};

std::string seconds_text(milliseconds limit) {
  return std::to_string(limit.count() / 1000) + " s";
}

}  // namespace

namespace detail {

// The thread that turns a relay in the background: `turn` under the caller's lock every few ms.
class Turner {
 public:
  ~Turner() { halt(); }
  void start(std::function<void()> turn) {
    if (thread_.joinable()) return;
    halt_ = false;
    thread_ = std::thread([this, turn = std::move(turn)] {
      for (int64_t rounds = 0; !halt_.load() && rounds < 1'000'000'000; ++rounds) {
        turn();
        std::this_thread::sleep_for(kBackgroundTurn);
      }
    });
  }
  void halt() {
    halt_ = true;
    if (thread_.joinable()) thread_.join();
  }
  bool running() const { return thread_.joinable(); }

 private:
  std::atomic<bool> halt_{false};
  std::thread thread_;
};

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// The coordinator's side.

struct CoordinatorRelay::State {
  explicit State(Coordinator c) : coord(std::move(c)) {}
  mutable std::mutex mu;
  std::condition_variable cv;
  Coordinator coord;
  std::optional<DirMirror> store, results;
  std::vector<std::string> rank_host;
  std::set<std::string> byes, gone;
  std::map<std::string, std::string> gone_why;
  std::vector<std::string> errors;
  std::vector<Message> inbox;
  std::vector<RankEnd> ends;
  std::vector<Chunk> appended;
  bool keep_appended = false;
  std::function<void(const std::vector<RankEnd>&)> on_ends;
  std::function<void(const std::string&, const std::string&)> on_gone;
  NowNs now = [] { return monotonic_ns(); };
  detail::Turner turner;

  bool all_bye() const {
    for (const auto& h : coord.hosts())
      if (!byes.contains(h) && !gone.contains(h)) return false;
    return true;
  }

  // Under mu.
  bool turn(int wait_ms) {
    bool activity = false;
    if (store)
      for (auto& chunk : store->scan()) coord.broadcast({{"put", to_json(chunk)}});
    std::vector<RankEnd> new_ends;
    for (auto& m : coord.receive(wait_ms)) {
      activity = true;
      const auto& b = m.body;
      if (b.contains("put") || b.contains("append")) {
        const bool put = b.contains("put");
        auto chunk = chunk_from_json(put ? b["put"] : b["append"]);
        Status w = !chunk    ? Status(std::unexpected(chunk.error()))
                   : put     ? (store ? store->apply(*chunk) : Status{})
                   : results ? results->apply(*chunk)
                             : Status{};
        if (!w) {
          errors.push_back("from host " + m.host + ": " + w.error().message);
          continue;
        }
        if (put) coord.broadcast({{"put", b["put"]}}, m.host);
        if (!put && keep_appended) appended.push_back(std::move(*chunk));
      } else if (b.contains("exit")) {
        const auto& e = b["exit"];
        const size_t r = e.value("rank", size_t{0});
        if (r < rank_host.size() && rank_host[r] == m.host)
          new_ends.push_back(
              {static_cast<int>(r), e.value("code", 1), e.value("how", std::string("exit ?"))});
      } else if (b.contains("bye")) {
        byes.insert(m.host);
      } else if (b.contains("leaving") && b["leaving"].is_string()) {
        gone_why[m.host] = b["leaving"].get<std::string>();  // the host's own reason comes first
      } else if (b.contains("closed")) {
        gone.insert(m.host);
        if (b.contains("why") && !gone_why.contains(m.host))
          gone_why[m.host] = b["why"].get<std::string>();
        const auto said = gone_why.find(m.host);
        const std::string why = said == gone_why.end() ? "" : " (" + said->second + ")";
        if (!byes.contains(m.host)) {
          errors.push_back("host " + m.host + " went away before it was done" + why);
          if (on_gone) on_gone(m.host, "host " + m.host + " went away" + why);
        }
        for (size_t r = 0; r < rank_host.size(); ++r)
          if (rank_host[r] == m.host)
            new_ends.push_back(
                {static_cast<int>(r), 128 + 9, "host " + m.host + "'s testbedctl went away" + why});
      } else {
        inbox.push_back(std::move(m));
      }
    }
    if (!new_ends.empty()) ends.insert(ends.end(), new_ends.begin(), new_ends.end());
    deliver_ends();
    if (activity) cv.notify_all();
    return activity;
  }
  void deliver_ends() {
    if (!on_ends || ends.empty()) return;
    on_ends(ends);
    ends.clear();
  }
  // Waits for more (under the lock `lk`): the background thread's next turn, or a turn here.
  void wait_more(std::unique_lock<std::mutex>& lk) {
    if (turner.running())
      cv.wait_for(lk, milliseconds(20));
    else
      turn(20);
  }
  std::string gone_text(const std::string& host) const {
    auto it = gone_why.find(host);
    return "host " + host + " went away" + (it == gone_why.end() ? "" : " (" + it->second + ")");
  }
};

CoordinatorRelay::CoordinatorRelay(std::unique_ptr<State> s) : s_(std::move(s)) {}
CoordinatorRelay::CoordinatorRelay(CoordinatorRelay&&) noexcept = default;
CoordinatorRelay& CoordinatorRelay::operator=(CoordinatorRelay&&) noexcept = default;
CoordinatorRelay::~CoordinatorRelay() {
  if (s_) s_->turner.halt();
}

Result<CoordinatorRelay> CoordinatorRelay::open(const Hello& mine, const Roles& roles, int port,
                                                milliseconds join_timeout,
                                                const std::atomic<bool>& stop) {
  auto c = Coordinator::gather(mine, roles.coordinator_addr, port, roles.peers, join_timeout, stop);
  if (!c) return std::unexpected(c.error());
  return CoordinatorRelay(std::make_unique<State>(std::move(*c)));
}

void CoordinatorRelay::attach(const Dirs& dirs, std::vector<std::string> rank_host) {
  std::lock_guard lk(s_->mu);
  if (!dirs.store.empty()) s_->store.emplace(dirs.store, DirMirror::Mode::kWhole);
  if (!dirs.results.empty()) s_->results.emplace(dirs.results, DirMirror::Mode::kAppend, dirs.skip);
  s_->rank_host = std::move(rank_host);
}

void CoordinatorRelay::on_ends(std::function<void(const std::vector<RankEnd>&)> f) {
  std::lock_guard lk(s_->mu);
  s_->on_ends = std::move(f);
  s_->deliver_ends();
}

void CoordinatorRelay::on_gone(std::function<void(const std::string&, const std::string&)> f) {
  std::lock_guard lk(s_->mu);
  s_->on_gone = std::move(f);
}

void CoordinatorRelay::keep_appended() {
  std::lock_guard lk(s_->mu);
  s_->keep_appended = true;
}

void CoordinatorRelay::broadcast(const nlohmann::json& msg, const std::string& except) {
  std::lock_guard lk(s_->mu);
  s_->coord.broadcast(msg, except);
}

Status CoordinatorRelay::send(const std::string& host, const nlohmann::json& msg) {
  std::lock_guard lk(s_->mu);
  return s_->coord.send(host, msg);
}

bool CoordinatorRelay::turn(int wait_ms) {
  std::lock_guard lk(s_->mu);
  if (s_->turner.running()) return false;
  return s_->turn(wait_ms);
}

std::vector<RankEnd> CoordinatorRelay::take_ends() {
  std::lock_guard lk(s_->mu);
  return std::exchange(s_->ends, {});
}

std::vector<Chunk> CoordinatorRelay::take_appended() {
  std::lock_guard lk(s_->mu);
  return std::exchange(s_->appended, {});
}

Result<nlohmann::json> CoordinatorRelay::await(
    const std::string& host, const std::string& key, milliseconds limit,
    const std::atomic<bool>& stop, const std::function<void(const nlohmann::json&)>& on_other) {
  const auto deadline = Clock::now() + limit;
  std::unique_lock lk(s_->mu);
  for (int64_t rounds = 0; rounds < 100'000'000; ++rounds) {
    auto& inbox = s_->inbox;
    for (auto it = inbox.begin(); it != inbox.end();) {
      if (it->host != host) {
        ++it;
        continue;
      }
      if (it->body.contains(key)) {
        nlohmann::json v = std::move(it->body[key]);
        inbox.erase(it);
        return v;
      }
      if (on_other) {
        const nlohmann::json body = std::move(it->body);
        it = inbox.erase(it);
        on_other(body);
      } else {
        ++it;
      }
    }
    if (s_->gone.contains(host)) return fail(s_->gone_text(host));
    if (stop.load()) return fail("interrupted");
    if (Clock::now() >= deadline) break;
    s_->wait_more(lk);
  }
  return fail("host " + host + " did not answer \"" + key + "\" within " +
              std::to_string(limit.count() / 1000) + " s");
}

Result<std::map<std::string, nlohmann::json>> CoordinatorRelay::from_all(
    const std::string& key, milliseconds limit, const std::atomic<bool>& stop) {
  std::map<std::string, nlohmann::json> got;
  const auto deadline = Clock::now() + limit;
  std::unique_lock lk(s_->mu);
  const auto hosts = s_->coord.hosts();
  for (int64_t rounds = 0; rounds < 100'000'000; ++rounds) {
    auto& inbox = s_->inbox;
    for (auto it = inbox.begin(); it != inbox.end();) {
      if (it->body.contains(key) && !got.contains(it->host)) {
        got[it->host] = std::move(it->body[key]);
        it = inbox.erase(it);
      } else {
        ++it;
      }
    }
    if (got.size() == hosts.size()) return got;
    for (const auto& h : hosts)
      if (!got.contains(h) && s_->gone.contains(h))
        return fail(s_->gone_text(h) + " before it sent its " + key);
    if (stop.load()) return fail("interrupted while waiting for the other hosts' " + key);
    if (Clock::now() >= deadline) break;
    s_->wait_more(lk);
  }
  std::string missing;
  for (const auto& h : hosts)
    if (!got.contains(h)) missing += (missing.empty() ? "" : ", ") + h;
  return fail("no " + key + " from host " + missing + " within " + seconds_text(limit));
}

Result<CoordinatorRelay::Clocks> CoordinatorRelay::measure_clocks(const std::atomic<bool>& stop) {
  Clocks out;
  for (const auto& h : hosts()) {
    std::vector<ClockSample> samples;
    for (int k = 0; k < kClockRounds; ++k) {
      const int64_t sent = s_->now();
      if (auto s = send(h, {{"clock", sent}}); !s)
        return std::unexpected(with_context(s.error(), "host " + h));
      for (int tries = 0; tries < 100; ++tries) {  // answers of earlier rounds are skipped
        auto ans = await(h, "clock", milliseconds(10000), stop);
        if (!ans) return fail(ans.error().message + " during the clock exchange");
        if (ans->value("t", int64_t{-1}) != sent) continue;
        samples.push_back({sent, ans->value("host_ns", int64_t{0}), s_->now()});
        break;
      }
    }
    if (samples.size() < static_cast<size_t>(kClockRounds))
      return fail("host " + h + " did not answer the clock exchange");
    out.offset[h] = clock_offset(samples);
    out.error[h] = clock_error(samples);
  }
  return out;
}

void CoordinatorRelay::start_at(int64_t t0, const std::map<std::string, int64_t>& offsets) {
  std::lock_guard lk(s_->mu);
  for (const auto& h : s_->coord.hosts()) {
    auto it = offsets.find(h);
    (void)s_->coord.send(h, {{"start", {{"t0_ns", t0 + (it == offsets.end() ? 0 : it->second)}}}});
  }
}

void CoordinatorRelay::kill(int grace_ms) {
  broadcast({{"kill", grace_ms}});
}

void CoordinatorRelay::finish(milliseconds limit, const std::function<bool()>& also) {
  const auto deadline = Clock::now() + limit;
  std::unique_lock lk(s_->mu);
  for (int rounds = 0; rounds < 100000 && Clock::now() < deadline; ++rounds) {
    if (s_->all_bye()) {
      if (!also) return;
      lk.unlock();
      const bool ok = also();
      lk.lock();
      if (ok) return;
    }
    s_->wait_more(lk);
  }
  for (const auto& h : s_->coord.hosts())
    if (!s_->byes.contains(h) && !s_->gone.contains(h))
      s_->errors.push_back("host " + h + " sent no last word within " + seconds_text(limit));
}

void CoordinatorRelay::done(const Verdict& v) {
  halt();
  broadcast({{"done", to_json(v)}});
}

std::vector<std::string> CoordinatorRelay::errors() const {
  std::lock_guard lk(s_->mu);
  return s_->errors;
}

std::vector<std::string> CoordinatorRelay::hosts() const {
  std::lock_guard lk(s_->mu);
  return s_->coord.hosts();
}

void CoordinatorRelay::run_in_background() {
  State* s = s_.get();
  s->turner.start([s] {
    std::lock_guard lk(s->mu);
    s->turn(0);
  });
}

void CoordinatorRelay::halt() {
  s_->turner.halt();
}

void CoordinatorRelay::set_clock(NowNs now) {
  std::lock_guard lk(s_->mu);
  s_->now = std::move(now);
}

// ---------------------------------------------------------------------------------------------
// A joining host's side.

struct PeerRelay::State {
  State(Peer p, milliseconds join) : peer(std::move(p)), join_timeout(join) {}
  mutable std::mutex mu;
  std::condition_variable cv;
  Peer peer;
  milliseconds join_timeout;
  std::optional<DirMirror> store, results;
  std::vector<char> local, exit_sent;
  std::function<std::vector<RankState>()> ranks;
  std::function<void(int)> on_kill;
  std::function<void(const std::string&)> on_gone;
  std::vector<nlohmann::json> inbox;
  std::vector<std::string> errors;
  bool gone = false;
  std::string gone_why;
  int clocks_answered = 0;
  NowNs now = [] { return monotonic_ns(); };
  detail::Turner turner;

  const std::string& coordinator() const { return peer.coordinator(); }

  // This host sent its part and bye (finish): an end from here on is the session's own.
  bool finished = false;
  bool told = false;  // on_gone said it
  // The coordinator ended the session before this host finished (went away, or sent its
  // verdict early: it failed on its side): said once, to on_gone.
  void tell(const std::string& what) {
    if (!on_gone || finished || told) return;
    told = true;
    on_gone(what);
  }
  void went(const std::string& why) {
    if (gone) return;
    gone = true;
    gone_why = why;
    tell(gone_text());
  }
  void send(const nlohmann::json& msg) {
    if (gone) return;
    if (auto s = peer.send(msg); !s) {
      errors.push_back(s.error().message);
      went(s.error().message);
    }
  }
  void send_files(bool final) {
    if (store)
      for (auto& c : store->scan()) send({{"put", to_json(c)}});
    if (results)
      for (auto& c : results->scan(final)) send({{"append", to_json(c)}});
  }
  void send_exit(size_t r, int code, const std::string& how) {
    if (r >= exit_sent.size() || exit_sent[r]) return;
    send_files(true);  // its last rows and log lines before its exit
    send({{"exit", {{"rank", r}, {"code", code}, {"how", how}}}});
    exit_sent[r] = 1;
  }
  // Local ranks that ended since the last call; `all`: every one not said yet.
  void send_exits(bool all) {
    if (!ranks) {
      if (!all) return;
      for (size_t r = 0; r < local.size(); ++r)
        if (local[r]) send_exit(r, 128 + 9, "never said");
      return;
    }
    const auto states = ranks();
    for (size_t r = 0; r < local.size(); ++r) {
      if (!local[r] || exit_sent[r]) continue;
      const bool known = r < states.size();
      if (!all && (!known || states[r].running)) continue;
      send_exit(r, known ? states[r].code : 128 + 9,
                known ? states[r].how : std::string("never started"));
    }
  }
  // Under mu.
  Status turn(int wait_ms) {
    send_files(false);
    send_exits(false);
    if (gone) return {};
    auto got = peer.receive(wait_ms);
    if (!got) {
      errors.push_back(got.error().message);
      went(got.error().message);
      cv.notify_all();
      return std::unexpected(got.error());
    }
    for (auto& m : *got) {
      if (m.contains("put")) {
        auto c = chunk_from_json(m["put"]);
        Status w = !c ? Status(std::unexpected(c.error())) : store ? store->apply(*c) : Status{};
        if (!w)
          errors.push_back("store file from host " + coordinator() + ": " + w.error().message);
      } else if (m.contains("clock") && m["clock"].is_number_integer()) {
        send({{"clock", {{"t", m["clock"].get<int64_t>()}, {"host_ns", now()}}}});
        ++clocks_answered;
      } else if (m.contains("kill")) {
        if (on_kill) on_kill(m.value("kill", 1000));
      } else if (m.contains("closed")) {
        went(m.contains("why") ? m["why"].get<std::string>() : std::string());
      } else {
        if (m.contains("done"))
          tell("host " + coordinator() + " ended the run before this host's part (see its output)");
        inbox.push_back(std::move(m));
      }
    }
    if (!got->empty()) cv.notify_all();
    return {};
  }
  void wait_more(std::unique_lock<std::mutex>& lk) {
    if (turner.running())
      cv.wait_for(lk, milliseconds(20));
    else
      (void)turn(20);
  }
  std::string gone_text() const {
    return "host " + coordinator() + " went away" + (gone_why.empty() ? "" : " (" + gone_why + ")");
  }
};

PeerRelay::PeerRelay(std::unique_ptr<State> s) : s_(std::move(s)) {}
PeerRelay::PeerRelay(PeerRelay&&) noexcept = default;
PeerRelay& PeerRelay::operator=(PeerRelay&&) noexcept = default;
PeerRelay::~PeerRelay() {
  if (s_) s_->turner.halt();
}

Result<PeerRelay> PeerRelay::join(const Hello& mine, const Roles& roles, int port,
                                  milliseconds join_timeout, const std::atomic<bool>& stop) {
  auto p = Peer::join(mine, roles.coordinator, roles.coordinator_addr, port, join_timeout, stop);
  if (!p) return std::unexpected(p.error());
  return PeerRelay(std::make_unique<State>(std::move(*p), join_timeout));
}

Result<nlohmann::json> PeerRelay::await_job(const std::atomic<bool>& stop) {
  // The coordinator sends the job once the last host joined: up to its join timeout after
  // this host did.
  auto job = await("job", s_->join_timeout + kJobMargin, stop);
  if (!job) return std::unexpected(job.error());
  return job;
}

void PeerRelay::attach(const Dirs& dirs, std::vector<char> local,
                       std::function<std::vector<RankState>()> ranks) {
  std::lock_guard lk(s_->mu);
  if (!dirs.store.empty()) s_->store.emplace(dirs.store, DirMirror::Mode::kWhole);
  if (!dirs.results.empty()) s_->results.emplace(dirs.results, DirMirror::Mode::kAppend, dirs.skip);
  s_->exit_sent.assign(local.size(), 0);
  s_->local = std::move(local);
  s_->ranks = std::move(ranks);
}

void PeerRelay::on_kill(std::function<void(int)> f) {
  std::lock_guard lk(s_->mu);
  s_->on_kill = std::move(f);
}

void PeerRelay::on_gone(std::function<void(const std::string& what)> f) {
  std::lock_guard lk(s_->mu);
  s_->on_gone = std::move(f);
}

Status PeerRelay::send(const nlohmann::json& msg) {
  std::lock_guard lk(s_->mu);
  if (s_->gone) return fail(s_->gone_text());
  return s_->peer.send(msg);
}

Status PeerRelay::turn(int wait_ms) {
  std::lock_guard lk(s_->mu);
  if (s_->turner.running()) return {};
  return s_->turn(wait_ms);
}

void PeerRelay::rank_ended(int r, int code, const std::string& how) {
  std::lock_guard lk(s_->mu);
  s_->send_exit(static_cast<size_t>(r), code, how);
}

Result<nlohmann::json> PeerRelay::await(const std::string& key, milliseconds limit,
                                        const std::atomic<bool>& stop) {
  const auto deadline = Clock::now() + limit;
  std::unique_lock lk(s_->mu);
  const std::string& from = s_->coordinator();
  for (int64_t rounds = 0; rounds < 100'000'000; ++rounds) {
    auto& inbox = s_->inbox;
    for (auto it = inbox.begin(); it != inbox.end(); ++it)
      if (it->contains(key)) {
        nlohmann::json v = std::move((*it)[key]);
        inbox.erase(it);
        return v;
      }
    for (const auto& m : inbox) {
      if (m.contains("refused"))
        return bad_input("host " + from + ": " + m["refused"].get<std::string>());
      if (m.contains("done"))  // it ended the run (it failed on its side)
        return fail("host " + from + " ended the run before it sent " + key + " (see its output)");
    }
    if (s_->gone) return fail(s_->gone_text() + " before it sent " + key);
    if (stop.load()) return fail("interrupted while waiting for host " + from);
    if (Clock::now() >= deadline) break;
    s_->wait_more(lk);
  }
  return fail("no " + key + " from host " + from + " within " + seconds_text(limit));
}

Result<nlohmann::json> PeerRelay::next(milliseconds limit, const std::atomic<bool>& stop) {
  const auto deadline = Clock::now() + limit;
  std::unique_lock lk(s_->mu);
  for (int64_t rounds = 0; rounds < 100'000'000; ++rounds) {
    if (!s_->inbox.empty()) {
      nlohmann::json m = std::move(s_->inbox.front());
      s_->inbox.erase(s_->inbox.begin());
      return m;
    }
    if (s_->gone) return fail(s_->gone_text());
    if (stop.load()) return fail("interrupted");
    if (Clock::now() >= deadline) break;
    s_->wait_more(lk);
  }
  return fail("no word from host " + s_->coordinator() + " within " + seconds_text(limit));
}

Status PeerRelay::answer_clocks(milliseconds limit, const std::atomic<bool>& stop) {
  const auto deadline = Clock::now() + limit;
  std::unique_lock lk(s_->mu);
  for (int rounds = 0; rounds < 1'000'000 && s_->clocks_answered < kClockRounds; ++rounds) {
    if (s_->gone) return fail(s_->gone_text() + " during the clock exchange");
    if (stop.load()) return fail("interrupted during the clock exchange");
    if (Clock::now() >= deadline)
      return fail("no clock exchange from host " + s_->coordinator() + " within " +
                  seconds_text(limit));
    s_->wait_more(lk);
  }
  return {};
}

int64_t PeerRelay::t0_of(const nlohmann::json& start) const {
  const int64_t now = s_->now();
  const int64_t t0 = start.value("t0_ns", now);
  return now + std::clamp<int64_t>(t0 - now, -60'000'000'000, 60'000'000'000);
}

Status PeerRelay::finish(const nlohmann::json* tail) {
  halt();
  std::lock_guard lk(s_->mu);
  s_->finished = true;
  s_->send_files(true);
  s_->send_exits(true);
  s_->send({{"bye", true}});
  if (tail) s_->send(*tail);
  if (s_->gone) return fail(s_->gone_text());
  return {};
}

void PeerRelay::leave(const std::string& why) {
  halt();
  std::lock_guard lk(s_->mu);
  s_->send({{"leaving", why}});
}

Result<std::optional<Verdict>> PeerRelay::check_verdict() {
  std::lock_guard lk(s_->mu);
  for (const auto& m : s_->inbox)
    if (m.contains("done")) return std::optional<Verdict>(verdict_from_json(m["done"]));
  if (s_->gone) return fail(s_->gone_text() + " before its verdict");
  return std::optional<Verdict>{};
}

Result<Verdict> PeerRelay::verdict(milliseconds limit, const std::atomic<bool>& stop) {
  const auto deadline = Clock::now() + limit;
  for (int64_t rounds = 0; rounds < 100'000'000; ++rounds) {
    auto v = check_verdict();
    if (!v) return std::unexpected(v.error());
    if (*v) return **v;
    if (stop.load()) return fail("interrupted while waiting for the verdict");
    if (Clock::now() >= deadline) break;
    std::unique_lock lk(s_->mu);
    s_->wait_more(lk);
  }
  return fail("no verdict from host " + s_->coordinator() + " within " + seconds_text(limit));
}

std::vector<std::string> PeerRelay::errors() const {
  std::lock_guard lk(s_->mu);
  return s_->errors;
}

const std::string& PeerRelay::coordinator() const {
  return s_->coordinator();
}

void PeerRelay::run_in_background() {
  State* s = s_.get();
  s->turner.start([s] {
    std::lock_guard lk(s->mu);
    if (!s->gone) (void)s->turn(0);
  });
}

void PeerRelay::halt() {
  s_->turner.halt();
}

void PeerRelay::set_clock(NowNs now) {
  std::lock_guard lk(s_->mu);
  s_->now = std::move(now);
}

}  // namespace tb::multihost
