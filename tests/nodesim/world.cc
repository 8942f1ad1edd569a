#include "world.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <stdexcept>
#include <vector>

#include "epoch/etcd_errors.h"
#include "epoch/lincheck/revision_checker.h"
#include "epoch/peer/peer_codec.h"
#include "epoch/test_support/temp_dir.h"
#include "network.h"
#include "node_shell.h"
#include "prng.h"

namespace epoch::nodesim {
namespace {

using lincheck::kNeverReturned;
using lincheck::RevCompare;
using lincheck::RevInput;
using lincheck::RevMutation;
using lincheck::RevOp;
using lincheck::RevOpKind;
using lincheck::RevOutput;
using sim::Prng;

constexpr std::int64_t kMs = 1000;
constexpr std::int64_t kSec = 1000 * kMs;
constexpr std::int64_t kTickUs = 10 * kMs;  // RaftDriverOptions::tick's default
// An ordinary run of a minute processes about 300,000 events.
constexpr std::uint64_t kMaxEvents = 1'000'000;

// A violation ends the run.
struct Violation : std::runtime_error {
  Violation(std::string invariant_name, const std::string& what)
      : std::runtime_error(what), invariant(std::move(invariant_name)) {}
  std::string invariant;
};

// What the seed picks for the run ("swarm testing": most knobs vary per seed).
struct Swarm {
  int nodes = 3;
  int clients = 3;
  int keys = 3;
  double rho = 0.05;
  sim::LinkState link;
  std::int64_t client_delay_max_us = 300;
  std::int64_t disk_min_us = 100;
  std::int64_t disk_max_us = 2000;
  std::int64_t client_timeout_us = kSec;
  std::int64_t fault_gap_min_us = 200 * kMs;
  std::int64_t fault_gap_max_us = 2 * kSec;
  std::map<std::string, int> weights;  // fault kind -> weight (0 = off this run)

  Swarm(Prng rng, Profile profile) : Swarm(rng) {
    if (profile == Profile::kSwarm) return;
    nodes = 5;
    clients = 4;
    keys = 4;
    rho = 0.05;
    link = sim::LinkState{};
    link.delay_min_us = 50;
    link.delay_max_us = 200;
    client_delay_max_us = 200;
    disk_min_us = 500;
    disk_max_us = 2 * kMs;
    client_timeout_us = kSec;
    fault_gap_min_us = 2 * kSec;
    fault_gap_max_us = 4 * kSec;
    for (auto& [kind, weight] : weights) weight = 0;
    weights["kill-leader"] = 1;
  }

  explicit Swarm(Prng rng) {
    nodes = rng.Chance(0.25) ? 5 : 3;
    clients = static_cast<int>(rng.Range(2, 5));
    keys = static_cast<int>(rng.Range(2, 5));
    static constexpr double kRho[] = {0.02, 0.05, 0.10};
    rho = kRho[rng.Below(3)];
    link.delay_min_us = rng.Range(50, 1000);
    link.delay_max_us = link.delay_min_us + rng.Range(0, 5000);
    link.drop = rng.Chance(0.5) ? 0.0 : rng.Unit() * 0.03;
    link.duplicate = rng.Chance(0.7) ? 0.0 : rng.Unit() * 0.03;
    client_delay_max_us = rng.Range(50, 2000);
    disk_min_us = rng.Range(50, 500);
    disk_max_us = disk_min_us + rng.Range(0, 10 * kMs);
    client_timeout_us = rng.Range(300 * kMs, 1500 * kMs);
    fault_gap_min_us = rng.Range(100 * kMs, 500 * kMs);
    fault_gap_max_us = fault_gap_min_us + rng.Range(0, 2 * kSec);
    for (const char* kind : {"crash-restart", "disk-eio", "power-loss-in-sync", "pause",
                             "partition", "partition-oneway", "link-loss", "link-delay",
                             "clock-rate", "disk-slow", "leader-transfer"}) {
      weights[kind] = rng.Chance(0.3) ? 0 : static_cast<int>(rng.Range(1, 4));
    }
  }
};

class World;

class LinkSender final : public server::MessageSender {
 public:
  LinkSender(World& world, int from) : world_(world), from_(from) {}
  void Send(const raft::Message& message) override;
  void OnMembership(const raft::ConfState&) override {}

 private:
  World& world_;
  int from_;
};

class World {
 public:
  explicit World(const WorldOptions& options)
      : options_(options),
        rng_(options.seed),
        swarm_(rng_.Fork(1), options.profile),
        client_rng_(rng_.Fork(3)),
        nemesis_rng_(rng_.Fork(4)),
        disk_rng_(rng_.Fork(5)),
        network_(swarm_.nodes, swarm_.link, swarm_.client_delay_max_us, rng_.Fork(6)),
        dir_("epoch-nodesim") {
    std::vector<NodeId> ids;
    for (int i = 0; i < swarm_.nodes; ++i) ids.emplace_back(i + 1);
    Prng rates = rng_.Fork(7);
    for (int i = 0; i < swarm_.nodes; ++i) {
      senders_.push_back(std::make_unique<LinkSender>(*this, i));
      NodeShellOptions o;
      o.raft.id = ids[i];
      o.raft.max_clock_drift = swarm_.rho;
      o.raft.mutations = options_.mutations;
      o.driver_mutations = options_.driver_mutations;
      o.store_dir = fmt::format("{}/n{}", dir_.path(), i + 1);
      o.seed = options_.seed * 31 + static_cast<std::uint64_t>(i);
      o.schedule = [this, i](std::int64_t delay_us, std::uint64_t life,
                             std::function<void()> fire) {
        AtNode(
            i, now_ + delay_us,
            [this, i, life, fire = std::move(fire)] {
              if (!nodes_[i]->up() || nodes_[i]->incarnation() != life) return;
              fire();
              Poll(i);
            },
            /*timer=*/true);
      };
      nodes_.push_back(std::make_unique<NodeShell>(o, ids, &now_, *senders_.back()));
      nodes_.back()->clock().SetRate(DrawRate(rates));
      disk_busy_.push_back(false);
      disk_slow_.push_back(1);
      paused_until_.push_back(0);
      last_serializable_.push_back(0);
    }
    if (options_.profile == Profile::kGeo) PlaceInRegions();
    result_.seed = options_.seed;
    result_.nodes = swarm_.nodes;
    result_.clients = swarm_.clients;
    result_.rho = swarm_.rho;
  }

  // Members 0-1 in region A, 2-3 in B, 4 in C; one-way delay between regions with ±15 % jitter.
  void PlaceInRegions() {
    static constexpr int kRegion[] = {0, 0, 1, 1, 2};
    static constexpr std::int64_t kDelayUs[3][3] = {
        {300, 10 * kMs, 40 * kMs}, {10 * kMs, 300, 75 * kMs}, {40 * kMs, 75 * kMs, 300}};
    for (int i = 0; i < swarm_.nodes; ++i) {
      for (int j = 0; j < swarm_.nodes; ++j) {
        if (i == j) continue;
        const std::int64_t d = kDelayUs[kRegion[i]][kRegion[j]];
        sim::LinkState& l = network_.link(i, j);
        l.delay_min_us = d == 300 ? 200 : d * 85 / 100;
        l.delay_max_us = d == 300 ? 500 : d * 115 / 100;
      }
    }
  }

  WorldResult Run() {
    try {
      for (int i = 0; i < swarm_.nodes; ++i) StartNode(i);
      for (int c = 0; c < swarm_.clients; ++c) {
        clients_.emplace_back(c);
        At(now_ + client_rng_.Range(0, 50 * kMs), [this, c] { Issue(c); });
      }
      At(now_ + NextFaultGap(), [this] { Nemesis(); });
      RunUntil(options_.fault_phase_us);
      Heal();
      CheckLiveness();
      Drain();
      CheckConvergence();
      CheckHistory();
    } catch (const Violation& v) {
      Fail(v.invariant, v.what());
    } catch (const std::exception& e) {
      Fail("fail-stop", e.what());
    }
    result_.simulated_us = now_;
    result_.messages = network_.delivered;
    for (auto& node : nodes_) (void)node->Crash(0);
    return result_;
  }

  // --- called by LinkSender, inside a node's poll ---
  void Send(int from, const raft::Message& message) {
    const int to = static_cast<int>(message.to.value()) - 1;
    if (to < 0 || to >= swarm_.nodes) return;
    for (std::int64_t at : network_.Route(from, to, now_)) {
      AtNode(to, at, [this, from, to, message] { Deliver(from, to, message); });
    }
  }

 private:
  struct Event {
    std::int64_t at;
    std::uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  struct Pending {
    RevOp op;
    bool read = false;
  };
  struct Client {
    explicit Client(int client_id) : id(client_id) {}
    int id;
    int target = 0;
    std::uint64_t seq = 0;  // the current operation; a late answer to an older one is ignored
    std::optional<Pending> pending;
    std::map<std::string, std::string> seen;  // last value read or written per key
    std::uint64_t values = 0;
  };

  double DrawRate(Prng& rng) const {
    // Extremes favoured: the lease bound is tightest between the slowest and the fastest clock.
    const double u = rng.Unit();
    if (u < 0.35) return 1.0;
    if (u < 0.7) return 1.0 + swarm_.rho;
    return 1.0 + rng.Unit() * swarm_.rho;
  }

  void At(std::int64_t at, std::function<void()> fn) {
    events_.push(Event{std::max(at, now_), next_seq_++, std::move(fn)});
  }

  // An event of member i's process: while it is paused (SIGSTOP) the event waits for the end of
  // the pause. What piled up then runs in any order among I/O (which ready socket a thread reads
  // first is arbitrary) and timers after it, as Asio's reactor hands out what one epoll_wait
  // found: descriptors first, then expired timers.
  void AtNode(int i, std::int64_t at, std::function<void()> fn, bool timer = false) {
    At(at, [this, i, timer, fn = std::move(fn)]() mutable {
      const std::int64_t until = paused_until_[static_cast<std::size_t>(i)];
      if (until <= now_) return fn();
      const std::int64_t resume = until + (timer ? 200 : nemesis_rng_.Range(0, 100));
      AtNode(i, resume, std::move(fn), timer);
    });
  }

  void RunUntil(std::int64_t end) {
    while (!events_.empty() && events_.top().at <= end) {
      // top() is const only to keep the heap's order; the event is popped right after.
      Event e = std::move(const_cast<Event&>(events_.top()));
      events_.pop();
      if (++events_run_ > kMaxEvents) {
        throw Violation("runaway",
                        fmt::format("{} events by {:.3f} s simulated: a message or timer "
                                    "storm",
                                    events_run_, static_cast<double>(e.at) / 1e6));
      }
      now_ = e.at;
      e.fn();
    }
    now_ = std::max(now_, end);
  }

  void Trace(std::uint64_t x) { result_.trace = (result_.trace ^ x) * 0x100000001b3ULL; }

  void Poll(int i) {
    NodeShell& node = *nodes_[i];
    if (!node.up() || paused_until_[static_cast<std::size_t>(i)] > now_) return;
    node.Poll();
    if (node.failed()) {
      // Fail-stop (the WAL failed): the process exits with the frame it could not sync on a dead
      // disk, and a supervisor starts it again.
      ++result_.fail_stops;
      CrashNode(i);
      At(now_ + nemesis_rng_.Range(10 * kMs, kSec), [this, i] {
        if (!nodes_[i]->up()) StartNode(i);
      });
      return;
    }
    PumpDisk(i);
    const server::DriverStatus status = node.driver().status();
    if (status.role == raft::Role::kLeader) {
      auto [it, fresh] = leaders_.emplace(status.term.value(), status.id.value());
      if (!fresh && it->second != status.id.value()) {
        throw Violation("election-safety",
                        fmt::format("term {}: leaders {:x} and {:x}", status.term.value(),
                                    it->second, status.id.value()));
      }
    }
  }

  void PumpDisk(int i) {
    NodeShell& node = *nodes_[i];
    if (disk_busy_[i] || !node.DiskPending()) return;
    disk_busy_[i] = true;
    const std::int64_t latency =
        disk_rng_.Range(swarm_.disk_min_us, swarm_.disk_max_us) * disk_slow_[i];
    AtNode(i, now_ + latency, [this, i, life = node.incarnation()] {
      NodeShell& n = *nodes_[i];
      if (!n.up() || n.incarnation() != life) return;
      disk_busy_[i] = false;
      n.SyncDisk();
      Poll(i);
    });
  }

  void Deliver(int from, int to, const raft::Message& message) {
    if (network_.Cut(from, to) || !nodes_[to]->up()) return;
    // Through the peer codec, as the TCP transport carries it.
    Result<raft::Message> decoded = server::DecodeFrame(server::EncodeFrame(message));
    if (!decoded.ok()) throw Violation("codec", decoded.status().ToString());
    Trace(static_cast<std::uint64_t>(now_) ^ (static_cast<std::uint64_t>(to) << 56) ^
          static_cast<std::uint64_t>(message.type));
    nodes_[to]->driver().Receive(std::move(*decoded));
    Poll(to);
  }

  void StartNode(int i) {
    last_serializable_[static_cast<std::size_t>(i)] = 0;
    nodes_[i]->Start();
    disk_busy_[i] = false;
    Poll(i);
  }

  void CrashNode(int i) {
    const wal::CrashStats c = nodes_[i]->Crash(nemesis_rng_.Next());
    result_.pages_lost += c.pages_lost;
    result_.pages_torn += c.pages_torn;
    result_.files_reordered += c.files_reordered;
    disk_busy_[i] = false;
  }

  int LeaderIndex() const {
    std::uint64_t best_term = 0;
    int best = -1;
    for (int i = 0; i < swarm_.nodes; ++i) {
      if (!nodes_[i]->up()) continue;
      const server::DriverStatus s = nodes_[i]->driver().status();
      if (s.role == raft::Role::kLeader && s.term.value() >= best_term) {
        best_term = s.term.value();
        best = i;
      }
    }
    return best;
  }

  // ---------------------------------------------------------------- clients

  std::string Key(int k) const { return fmt::format("/k/{}", k); }

  RevInput DrawOperation(Client& c) {
    Prng& r = client_rng_;
    const std::string key = Key(static_cast<int>(r.Below(static_cast<std::uint64_t>(swarm_.keys))));
    auto value = [&] { return fmt::format("c{}-{}", c.id, ++c.values); };
    const std::uint64_t dice = r.Below(100);
    if (dice < 30) return RevInput::Put(key, value());
    if (dice < 50) return RevInput::Range(key);
    if (dice < 58) return RevInput::Range("/k/", "/k0");  // every key
    if (dice < 66) return RevInput::Range(key, {}, /*serializable=*/true);
    if (dice < 82) {
      // A different key (etcd refuses a txn that puts one key twice).
      const int first = std::stoi(key.substr(3));
      const std::string other =
          Key((first + 1 + static_cast<int>(r.Below(static_cast<std::uint64_t>(swarm_.keys - 1)))) %
              swarm_.keys);
      RevCompare compare{key, std::nullopt};
      if (auto it = c.seen.find(key); it != c.seen.end() && r.Chance(0.7))
        compare.value = it->second;
      return RevInput::Txn({compare},
                           {RevMutation::Put(key, value()), RevMutation::Put(other, value())},
                           {RevMutation::Put(other, value())});
    }
    if (dice < 95) return RevInput::DeleteRange(key);
    return RevInput::DeleteRange("/k/", "/k0");
  }

  static void ToRequestOp(const RevMutation& m, etcdserverpb::RequestOp* op) {
    if (m.is_delete) {
      op->mutable_request_delete_range()->set_key(m.key);
      op->mutable_request_delete_range()->set_range_end(m.range_end);
    } else {
      op->mutable_request_put()->set_key(m.key);
      op->mutable_request_put()->set_value(m.value);
    }
  }

  static v1::InternalRequest ToRequest(const RevInput& in) {
    v1::InternalRequest req;
    switch (in.kind) {
      case RevOpKind::kPut:
        req.mutable_put()->set_key(in.success[0].key);
        req.mutable_put()->set_value(in.success[0].value);
        break;
      case RevOpKind::kDeleteRange:
        req.mutable_delete_range()->set_key(in.success[0].key);
        req.mutable_delete_range()->set_range_end(in.success[0].range_end);
        break;
      case RevOpKind::kTxn: {
        auto* txn = req.mutable_txn();
        for (const RevCompare& c : in.compares) {
          auto* cmp = txn->add_compare();
          cmp->set_key(c.key);
          cmp->set_result(etcdserverpb::Compare::EQUAL);
          if (c.value) {
            cmp->set_target(etcdserverpb::Compare::VALUE);
            cmp->set_value(*c.value);
          } else {
            cmp->set_target(etcdserverpb::Compare::CREATE);
            cmp->set_create_revision(0);
          }
        }
        for (const RevMutation& m : in.success) ToRequestOp(m, txn->add_success());
        for (const RevMutation& m : in.failure) ToRequestOp(m, txn->add_failure());
        break;
      }
      case RevOpKind::kRange: break;
    }
    return req;
  }

  static RevOutput ToOutput(const RevInput& in, const v1::InternalResponse& resp) {
    RevOutput out;
    switch (in.kind) {
      case RevOpKind::kPut: out.header_revision = resp.put().header().revision(); break;
      case RevOpKind::kDeleteRange:
        out.header_revision = resp.delete_range().header().revision();
        out.deleted = resp.delete_range().deleted();
        break;
      case RevOpKind::kTxn:
        out.header_revision = resp.txn().header().revision();
        out.succeeded = resp.txn().succeeded();
        for (const auto& r : resp.txn().responses()) {
          if (r.has_response_delete_range()) out.deleted += r.response_delete_range().deleted();
        }
        break;
      case RevOpKind::kRange: break;
    }
    return out;
  }

  static RevOutput ReadStore(const RevInput& in, server::KvStore& store) {
    etcdserverpb::RangeRequest req;
    req.set_key(in.key);
    req.set_range_end(in.range_end);
    Result<etcdserverpb::RangeResponse> resp = store.Range(req);
    if (!resp.ok()) throw Violation("store-read", resp.status().ToString());
    RevOutput out;
    out.header_revision = store.CurrentRevision().value();
    for (const auto& kv : resp->kvs()) {
      out.kvs.push_back(
          {kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.version()});
    }
    return out;
  }

  void Issue(int c) {
    if (draining_) return;
    Client& client = clients_[static_cast<std::size_t>(c)];
    const std::uint64_t seq = ++client.seq;
    RevOp op;
    op.client_id = static_cast<std::uint64_t>(c);
    op.call_time = now_;
    op.input = DrawOperation(client);
    const bool read = op.input.kind == RevOpKind::kRange;
    client.pending = Pending{std::move(op), read};
    const int target = client.target;
    At(now_ + swarm_.client_timeout_us, [this, c, seq] { TimeOut(c, seq); });
    if (!network_.ClientReachable(target)) return;  // the timeout answers
    AtNode(target, now_ + network_.ClientDelay(),
           [this, c, seq, target] { Arrive(c, seq, target); });
  }

  // The request reaches its member.
  void Arrive(int c, std::uint64_t seq, int target) {
    Client& client = clients_[static_cast<std::size_t>(c)];
    if (client.seq != seq || !client.pending) return;
    NodeShell& node = *nodes_[target];
    if (!node.up()) return Refused(c, seq, /*unknown=*/false);
    const RevInput& in = client.pending->op.input;
    if (in.kind == RevOpKind::kRange && in.serializable) {
      RevOutput out = ReadStore(in, node.store());
      // A member's serializable reads never go back in revision while it runs.
      std::int64_t& last = last_serializable_[static_cast<std::size_t>(target)];
      if (out.header_revision < last) {
        throw Violation("serializable-monotonic",
                        fmt::format("member {} answered revision {} after {}", target + 1,
                                    out.header_revision, last));
      }
      last = out.header_revision;
      return Answer(c, seq, out);
    }
    if (in.kind == RevOpKind::kRange && node.driver().TryLeaseRead()) {
      // The leader's lease, checked off the strand (NodeContext::ReadBarrier's first step).
      return Answer(c, seq, ReadStore(in, node.store()));
    }
    if (in.kind == RevOpKind::kRange) {
      node.driver().ReadIndex([this, c, seq, target, life = node.incarnation()](const Status& s) {
        if (!s.ok()) return Refused(c, seq, false);
        NodeShell& n = *nodes_[target];
        if (!n.up() || n.incarnation() != life) return;
        Client& cl = clients_[static_cast<std::size_t>(c)];
        if (cl.seq != seq || !cl.pending) return;
        Answer(c, seq, ReadStore(cl.pending->op.input, n.store()));
      });
    } else {
      node.driver().Propose(ToRequest(in), [this, c, seq, target](const Status& s,
                                                                  const v1::InternalResponse& r) {
        Client& cl = clients_[static_cast<std::size_t>(c)];
        if (cl.seq != seq || !cl.pending) return;
        if (s.ok()) return Answer(c, seq, ToOutput(cl.pending->op.input, r));
        if (s.Is(ErrorId::kNotLeader)) {
          const NodeId hint = nodes_[target]->driver().status().leader;
          if (hint != raft::kNoNode) cl.target = static_cast<int>(hint.value()) - 1;
        }
        // Refusals before the log (not leader, no leader, dropped) and a lost index (leader
        // changed) prove the write was not applied; stopping does not.
        const bool definite = s.Is(ErrorId::kNotLeader) || s.Is(ErrorId::kNoLeader) ||
                              s.Is(ErrorId::kLeaderChanged) || s.Is(ErrorId::kProposalDropped) ||
                              s.Is(ErrorId::kLearnerNotReady);
        if (!definite && !s.Is(ErrorId::kStopped)) {
          throw Violation("client-error", fmt::format("unexpected answer {}", s.ToString()));
        }
        Refused(c, seq, !definite);
      });
    }
    Poll(target);
  }

  // The answer travels back; the client records it and goes on.
  void Answer(int c, std::uint64_t seq, RevOutput out) {
    Client& client = clients_[static_cast<std::size_t>(c)];
    Pending pending = std::move(*client.pending);
    client.pending.reset();
    pending.op.output = std::move(out);
    pending.op.return_time = now_ + network_.ClientDelay();
    for (const RevMutation& m : pending.op.input.success) {
      if (!m.is_delete) client.seen[m.key] = m.value;
    }
    for (const auto& kv : pending.op.output.kvs) client.seen[kv.key] = kv.value;
    if (pending.op.input.kind != RevOpKind::kRange) {
      result_.write_latencies_us.push_back(pending.op.return_time - pending.op.call_time);
      if (killed_at_ && pending.op.call_time >= *killed_at_) {
        result_.failovers_us.push_back(pending.op.return_time - *killed_at_);
        killed_at_.reset();
      }
    }
    Trace(static_cast<std::uint64_t>(pending.op.output.header_revision) * 0x9e37 + seq);
    history_.push_back(std::move(pending.op));
    At(history_.back().return_time + client_rng_.Range(0, 20 * kMs), [this, c, seq] {
      if (clients_[static_cast<std::size_t>(c)].seq == seq) Issue(c);
    });
  }

  // No answer: a read is dropped; a write is recorded with an unknown outcome when it may have
  // been applied. The client tries another member after a short backoff.
  void Refused(int c, std::uint64_t seq, bool unknown) {
    Client& client = clients_[static_cast<std::size_t>(c)];
    if (client.seq != seq || !client.pending) return;
    Pending pending = std::move(*client.pending);
    client.pending.reset();
    if (unknown && !pending.read) history_.push_back(std::move(pending.op));
    if (!unknown)
      client.target = static_cast<int>(client_rng_.Below(static_cast<std::uint64_t>(swarm_.nodes)));
    At(now_ + 10 * kMs + client_rng_.Range(0, 40 * kMs), [this, c, seq] {
      if (clients_[static_cast<std::size_t>(c)].seq == seq) Issue(c);
    });
  }

  void TimeOut(int c, std::uint64_t seq) {
    Client& client = clients_[static_cast<std::size_t>(c)];
    if (client.seq != seq || !client.pending) return;
    Refused(c, seq, /*unknown=*/true);
    client.target = static_cast<int>(client_rng_.Below(static_cast<std::uint64_t>(swarm_.nodes)));
  }

  // ---------------------------------------------------------------- nemesis

  std::int64_t NextFaultGap() {
    return nemesis_rng_.Range(swarm_.fault_gap_min_us, swarm_.fault_gap_max_us);
  }

  std::string DrawFault() {
    int total = 0;
    for (const auto& [kind, w] : swarm_.weights) total += w;
    if (total == 0) return {};
    auto pick = static_cast<int>(nemesis_rng_.Below(static_cast<std::uint64_t>(total)));
    for (const auto& [kind, w] : swarm_.weights) {
      if (pick < w) return kind;
      pick -= w;
    }
    return {};
  }

  int Victim() {
    const int leader = LeaderIndex();
    if (leader >= 0 && nemesis_rng_.Chance(0.5)) return leader;
    return static_cast<int>(nemesis_rng_.Below(static_cast<std::uint64_t>(swarm_.nodes)));
  }

  std::int64_t Hold() { return nemesis_rng_.Range(300 * kMs, 3 * kSec); }

  // Every peer link to and from `node`, both directions.
  template <typename Fn>
  void ForEachLinkOf(int node, Fn fn) {
    for (int j = 0; j < swarm_.nodes; ++j) {
      if (j == node) continue;
      fn(network_.link(node, j));
      fn(network_.link(j, node));
    }
  }

  void RestoreLinks(int node) {
    ForEachLinkOf(node, [this](sim::LinkState& l) { l = network_.base(); });
  }

  void Nemesis() {
    if (healed_) return;
    At(now_ + NextFaultGap(), [this] { Nemesis(); });
    const std::string kind = DrawFault();
    if (kind.empty()) return;
    const int v = Victim();
    ++result_.faults[kind];
    Trace(std::hash<std::string>{}(kind) ^ static_cast<std::uint64_t>(v));
    if (kind == "crash-restart") {
      if (!nodes_[v]->up()) return;
      CrashNode(v);
      At(now_ + nemesis_rng_.Range(10 * kMs, 1500 * kMs), [this, v] {
        if (!nodes_[v]->up()) StartNode(v);
      });
    } else if (kind == "kill-leader") {
      const int leader = LeaderIndex();
      if (leader < 0 || killed_at_) return;  // measure one failover at a time
      CrashNode(leader);
      killed_at_ = now_;
      At(now_ + kSec, [this, leader] {
        if (!nodes_[leader]->up()) StartNode(leader);
      });
    } else if (kind == "disk-eio") {
      if (nodes_[v]->up()) nodes_[v]->FailNextSync(false, 0);
    } else if (kind == "power-loss-in-sync") {
      if (nodes_[v]->up()) nodes_[v]->FailNextSync(true, nemesis_rng_.Next());
    } else if (kind == "pause") {
      paused_until_[static_cast<std::size_t>(v)] = now_ + nemesis_rng_.Range(50 * kMs, 2 * kSec);
    } else if (kind == "partition") {
      ForEachLinkOf(v, [](sim::LinkState& l) { l.cut = true; });
      At(now_ + Hold(), [this, v] { RestoreLinks(v); });
    } else if (kind == "partition-oneway") {
      const bool out = nemesis_rng_.Chance(0.5);
      for (int j = 0; j < swarm_.nodes; ++j) {
        if (j != v) (out ? network_.link(v, j) : network_.link(j, v)).cut = true;
      }
      At(now_ + Hold(), [this, v] { RestoreLinks(v); });
    } else if (kind == "link-loss") {
      const double p = 0.05 + nemesis_rng_.Unit() * 0.25;
      ForEachLinkOf(v, [p](sim::LinkState& l) { l.drop = p; });
      At(now_ + Hold(), [this, v] { RestoreLinks(v); });
    } else if (kind == "link-delay") {
      const std::int64_t extra = nemesis_rng_.Range(10 * kMs, 100 * kMs);
      ForEachLinkOf(v, [extra](sim::LinkState& l) {
        l.delay_min_us += extra;
        l.delay_max_us += extra;
      });
      At(now_ + Hold(), [this, v] { RestoreLinks(v); });
    } else if (kind == "clock-rate") {
      nodes_[v]->clock().SetRate(DrawRate(nemesis_rng_));
    } else if (kind == "disk-slow") {
      disk_slow_[v] = nemesis_rng_.Range(5, 50);
      At(now_ + Hold(), [this, v] { disk_slow_[v] = 1; });
    } else if (kind == "leader-transfer") {
      const int leader = LeaderIndex();
      if (leader < 0) return;
      const int to = static_cast<int>(
          (leader + 1 +
           static_cast<int>(nemesis_rng_.Below(static_cast<std::uint64_t>(swarm_.nodes - 1)))) %
          swarm_.nodes);
      nodes_[leader]->driver().TransferLeadership(NodeId(static_cast<std::uint64_t>(to + 1)),
                                                  [](const Status&) {});
      Poll(leader);
    }
  }

  // ---------------------------------------------------------------- end of run

  void Heal() {
    healed_ = true;
    network_.HealAll();
    for (int i = 0; i < swarm_.nodes; ++i) {
      nodes_[i]->ClearDiskFault();
      disk_slow_[i] = 1;
      paused_until_[static_cast<std::size_t>(i)] = 0;
      if (!nodes_[i]->up()) StartNode(i);
    }
  }

  // Without faults a write must be acknowledged within 3 × (max election timeout + jitter) + 1 s.
  void CheckLiveness() {
    const raft::Config defaults;
    const std::int64_t bound =
        3 * (defaults.max_election_timeout_ticks + defaults.election_jitter_ticks) * kTickUs + kSec;
    const std::int64_t healed = now_;
    bool done = false;
    std::uint64_t probes = 0;
    while (!done && now_ < healed + bound) {
      const int leader = LeaderIndex();
      if (leader >= 0) {
        v1::InternalRequest req;
        req.mutable_put()->set_key("/k/probe");
        req.mutable_put()->set_value(fmt::format("probe-{}", ++probes));
        RevOp op;
        op.client_id = static_cast<std::uint64_t>(swarm_.clients);
        op.call_time = now_;
        op.input = RevInput::Put("/k/probe", req.put().value());
        auto answered = std::make_shared<std::optional<RevOp>>();
        nodes_[leader]->driver().Propose(
            req, [this, op, answered](const Status& s, const v1::InternalResponse& r) mutable {
              if (!s.ok()) return;
              op.return_time = now_;
              op.output = ToOutput(op.input, r);
              *answered = op;
            });
        Poll(leader);
        RunUntil(now_ + 100 * kMs);
        if (*answered) {
          history_.push_back(**answered);
          done = true;
        } else {
          history_.push_back(op);  // unknown outcome
        }
      } else {
        RunUntil(now_ + 20 * kMs);
      }
    }
    if (!done) {
      throw Violation("liveness", fmt::format("no write acknowledged {} ms after the faults healed",
                                              bound / kMs));
    }
  }

  void Drain() {
    draining_ = true;
    RunUntil(now_ + swarm_.client_timeout_us + 100 * kMs);
    for (Client& c : clients_) {
      if (c.pending) throw Violation("drain", fmt::format("client {} still waiting", c.id));
    }
  }

  void CheckConvergence() {
    const std::int64_t give_up = now_ + 5 * kSec;
    while (now_ < give_up) {
      RunUntil(now_ + 50 * kMs);
      std::set<std::uint64_t> applied;
      bool all_up = true;
      for (auto& node : nodes_) {
        all_up = all_up && node->up();
        if (node->up()) applied.insert(node->driver().status().applied.value());
      }
      if (!all_up) continue;  // a member that failed-stop just before the heal restarts soon
      if (applied.size() != 1) continue;
      std::set<std::uint64_t> hashes;
      for (auto& node : nodes_) {
        Result<std::uint64_t> h = node->store().StateHash();
        if (!h.ok()) throw Violation("convergence", h.status().ToString());
        hashes.insert(*h);
      }
      if (hashes.size() != 1) {
        throw Violation("convergence",
                        fmt::format("members at applied index {} hold {} different states",
                                    *applied.begin(), hashes.size()));
      }
      Trace(*hashes.begin());
      return;
    }
    std::string members;
    for (auto& node : nodes_) {
      if (!node->up()) {
        members += fmt::format(" {:x}: down;", node->id().value());
        continue;
      }
      const server::DriverStatus st = node->driver().status();
      members += fmt::format(" {:x}: {} term {} commit {} applied {} last {}{};", st.id.value(),
                             raft::RoleName(st.role), st.term.value(), st.commit.value(),
                             st.applied.value(), st.last_index.value(),
                             node->DiskPending() ? ", WAL requests waiting for the disk" : "");
    }
    throw Violation("convergence", "members never reached the same applied index:" + members);
  }

  void CheckHistory() {
    lincheck::RevisionCheckOptions o;
    o.start_revision = 1;
    const lincheck::RevisionCheckResult r = lincheck::CheckRevisions(history_, o);
    result_.operations = r.operations;
    result_.writes = r.writes;
    result_.unknown = r.unknown;
    if (!r.Ok()) {
      const auto& v = r.violations.front();
      throw Violation("revision:" + v.rule, v.description);
    }
  }

  void Fail(const std::string& invariant, const std::string& detail) {
    if (!result_.ok) return;
    result_.ok = false;
    result_.invariant = invariant;
    result_.detail = detail;
  }

  const WorldOptions options_;
  Prng rng_;
  Swarm swarm_;
  Prng client_rng_;
  Prng nemesis_rng_;
  Prng disk_rng_;
  std::int64_t now_ = 0;
  sim::SimNetwork network_;
  test_support::TempDir dir_;
  std::vector<std::unique_ptr<LinkSender>> senders_;
  std::vector<std::unique_ptr<NodeShell>> nodes_;
  std::vector<bool> disk_busy_;
  std::vector<std::int64_t> disk_slow_;
  std::vector<std::int64_t> last_serializable_;  // per member, this life: the newest revision
  std::vector<std::int64_t> paused_until_;  // global µs; the member's process is stopped before
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::uint64_t next_seq_ = 0;
  std::uint64_t events_run_ = 0;
  std::vector<Client> clients_;
  std::vector<RevOp> history_;
  std::map<std::uint64_t, std::uint64_t> leaders_;  // term -> leader id
  bool draining_ = false;
  bool healed_ = false;                    // no fault is injected after Heal()
  std::optional<std::int64_t> killed_at_;  // a leader kill whose failover is being measured
  WorldResult result_;
};

void LinkSender::Send(const raft::Message& message) { world_.Send(from_, message); }

}  // namespace

std::string WorldResult::Describe() const {
  std::string faults_text;
  for (const auto& [kind, n] : faults) faults_text += fmt::format(" {}={}", kind, n);
  std::string s = fmt::format(
      "seed {} {}: {} nodes, {} clients, rho {:.2f}, {:.1f} s simulated, {} ops ({} writes, {} "
      "unknown), {} messages; {} fail-stops; power loss: {} pages lost, {} torn, {} files "
      "reordered; faults:{}",
      seed, ok ? "ok" : "VIOLATION " + invariant, nodes, clients, rho,
      static_cast<double>(simulated_us) / 1e6, operations, writes, unknown, messages, fail_stops,
      pages_lost, pages_torn, files_reordered, faults_text);
  if (!ok) s += "\n" + detail;
  return s;
}

namespace {
template <typename Flags>
struct NamedMutation {
  const char* name;
  bool Flags::*flag;
};
using CoreMutation = NamedMutation<raft::Config::Mutations>;
using DriverMutation = NamedMutation<server::RaftDriverOptions::Mutations>;
constexpr DriverMutation kDriverMutations[] = {
    {"node:answer_replaced_entry", &server::RaftDriverOptions::Mutations::answer_replaced_entry},
    {"node:read_before_apply", &server::RaftDriverOptions::Mutations::read_before_apply},
};
constexpr CoreMutation kCoreMutations[] = {
    {"no_election_restriction", &raft::Config::Mutations::no_election_restriction},
    {"commit_prior_term_by_counting", &raft::Config::Mutations::commit_prior_term_by_counting},
    {"lease_without_drift_margin", &raft::Config::Mutations::lease_without_drift_margin},
    {"vote_while_leader_live", &raft::Config::Mutations::vote_while_leader_live},
    {"reply_before_persist", &raft::Config::Mutations::reply_before_persist},
    {"read_index_without_quorum", &raft::Config::Mutations::read_index_without_quorum},
    {"apply_before_durable", &raft::Config::Mutations::apply_before_durable},
    {"lease_from_own_floor", &raft::Config::Mutations::lease_from_own_floor},
    {"lower_floor_without_hold", &raft::Config::Mutations::lower_floor_without_hold},
};

template <typename Flags, std::size_t N>
bool SetNamed(const NamedMutation<Flags> (&table)[N], const std::string& name, Flags* flags) {
  for (const NamedMutation<Flags>& m : table) {
    if (name == m.name) {
      flags->*m.flag = true;
      return true;
    }
  }
  return false;
}
}  // namespace

bool SetMutation(const std::string& name, WorldOptions* options) {
  return SetNamed(kDriverMutations, name, &options->driver_mutations) ||
         SetNamed(kCoreMutations, name, &options->mutations);
}

std::string MutationNames() {
  std::string names;
  for (const DriverMutation& m : kDriverMutations) names += std::string(m.name) + ", ";
  for (const CoreMutation& m : kCoreMutations) names += std::string(m.name) + ", ";
  return names.substr(0, names.size() - 2);
}

WorldResult RunWorld(const WorldOptions& options) {
  World world(options);
  return world.Run();
}

}  // namespace epoch::nodesim
