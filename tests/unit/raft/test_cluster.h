// TestCluster: a tiny deterministic in-test network for raft::Node unit tests. Each node has a
// MemoryLog as its "disk"; Process() handles one Ready the way a synchronous driver does
// (persist, send, apply, Advance); messages wait in a queue until Deliver*() steps them into
// their destination, through an optional drop filter. No sleeps, no threads: time advances only
// through Tick().
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "epoch/raft/conf_change.h"
#include "epoch/raft/config.h"
#include "epoch/raft/memory_log.h"
#include "epoch/raft/node.h"

namespace epoch::raft::test {

inline NodeId Id(std::uint64_t v) { return NodeId(v); }
inline LogIndex Idx(std::uint64_t v) { return LogIndex(v); }
inline Term T(std::uint64_t v) { return Term(v); }

// Entries with the given terms at indexes first, first + 1, ... (data "i<index>").
inline std::vector<Entry> EntriesWithTerms(std::uint64_t first, const std::vector<int>& terms) {
  std::vector<Entry> out;
  for (std::size_t k = 0; k < terms.size(); ++k) {
    const std::uint64_t index = first + k;
    out.push_back(Entry{Term(static_cast<std::uint64_t>(terms[k])), LogIndex(index),
                        EntryType::kNormal, "i" + std::to_string(index)});
  }
  return out;
}

inline Message Msg(MessageType type, std::uint64_t from, std::uint64_t to, std::uint64_t term) {
  Message m;
  m.type = type;
  m.from = NodeId(from);
  m.to = NodeId(to);
  m.term = Term(term);
  return m;
}

// Messages of `type` in `messages`.
inline std::vector<Message> OfType(const std::vector<Message>& messages, MessageType type) {
  std::vector<Message> out;
  for (const Message& m : messages) {
    if (m.type == type) out.push_back(m);
  }
  return out;
}

inline Config TestConfig(std::uint64_t id) {
  Config c;
  c.id = NodeId(id);
  c.heartbeat_ticks = 2;
  c.election_timeout_min_ticks = 10;
  c.election_jitter_ticks = 10;
  c.max_election_timeout_ticks = 40;
  c.durability_stall_ticks = 20;
  return c;
}

struct TestNode {
  std::unique_ptr<MemoryLog> log = std::make_unique<MemoryLog>();
  Config config;
  std::unique_ptr<Node> node;
  std::uint64_t seed = 0;
  std::vector<Entry> applied;    // every committed entry handed out, in order
  std::vector<ReadState> reads;  // every read state handed out
  std::vector<Ready> readies;    // copies of the Readies handed out (for inspection)
  bool keep_readies = false;
  ConfState last_conf_state;
};

class TestCluster {
 public:
  using ConfigTweak = std::function<void(Config&)>;

  // Nodes 1..n, all initial voters, bootstrapped; node i gets seed base_seed + i.
  explicit TestCluster(std::size_t n, const ConfigTweak& tweak = {}, std::uint64_t base_seed = 1) {
    for (std::uint64_t i = 1; i <= n; ++i) voters_.push_back(NodeId(i));
    for (std::uint64_t i = 1; i <= n; ++i) {
      TestNode& t = nodes_[NodeId(i)];
      *t.log = MemoryLog::Bootstrapped(voters_);
      t.config = TestConfig(i);
      if (tweak) tweak(t.config);
      t.seed = base_seed + i;
      t.node = std::make_unique<Node>(t.config, *t.log, t.seed);
      // Prefer a seed whose first timeout exceeds the floor, so PassBootWindow() can tick through
      // the boot vote-withholding window without an election (deterministic: same seeds always).
      while (t.node->election_timeout_ticks() <= t.config.election_timeout_min_ticks) {
        t.seed += 1000;
        t.node = std::make_unique<Node>(t.config, *t.log, t.seed);
      }
    }
  }

  // Rebuilds node `id` from a bootstrapped log followed by `entries` (indexes from 2) and `hs`.
  void SetLog(std::uint64_t id, const std::vector<Entry>& entries, HardState hs) {
    TestNode& t = at(id);
    *t.log = MemoryLog::Bootstrapped(voters_);
    t.log->Append(entries);
    t.log->SetHardState(hs);
    t.node = std::make_unique<Node>(t.config, *t.log, t.seed);
  }

  // Ticks every node through its boot vote-withholding window (one floor). Returns false if a
  // node's election timer fired meanwhile (then pick another seed).
  bool PassBootWindow() {
    for (auto& [id, t] : nodes_) {
      for (int i = 0; i < t.config.election_timeout_min_ticks; ++i) t.node->Tick();
      if (t.node->role() != Role::kFollower) return false;
    }
    return true;
  }

  // Adds a node with an empty log (to join through a conf change).
  void AddEmptyNode(std::uint64_t id, const ConfigTweak& tweak = {}) {
    TestNode& t = nodes_[NodeId(id)];
    t.config = TestConfig(id);
    if (tweak) tweak(t.config);
    t.seed = id * 7919;
    t.node = std::make_unique<Node>(t.config, *t.log, t.seed);
  }

  Node& node(std::uint64_t id) { return *nodes_.at(NodeId(id)).node; }
  TestNode& at(std::uint64_t id) { return nodes_.at(NodeId(id)); }
  MemoryLog& log(std::uint64_t id) { return *nodes_.at(NodeId(id)).log; }
  std::vector<NodeId> ids() const {
    std::vector<NodeId> out;
    for (const auto& [id, t] : nodes_) out.push_back(id);
    return out;
  }

  // One synchronous driver iteration for `id`: persist, queue messages, apply, Advance.
  // Returns false when the node had nothing ready.
  bool Process(std::uint64_t id) {
    TestNode& t = at(id);
    if (!t.node->HasReady()) return false;
    Ready rd = t.node->GetReady();
    if (t.keep_readies) t.readies.push_back(rd);
    if (rd.snapshot) t.log->ApplySnapshot(*rd.snapshot);
    if (!rd.entries.empty()) t.log->Append(rd.entries);
    if (rd.hard_state) t.log->SetHardState(*rd.hard_state);
    for (Message& m : rd.messages) Enqueue(std::move(m));
    for (Message& m : rd.messages_after_persist) Enqueue(std::move(m));
    for (Entry& e : rd.committed_entries) t.applied.push_back(std::move(e));
    for (ReadState& r : rd.read_states) t.reads.push_back(r);
    if (rd.conf_state) t.last_conf_state = *rd.conf_state;
    t.node->Advance(rd);
    return true;
  }

  void ProcessAll() {
    for (auto& [id, t] : nodes_) {
      if (!paused_.contains(id)) Process(id.value());
    }
  }

  // Steps queued messages into their destinations (once each; those produced meanwhile stay
  // queued). Returns how many were delivered.
  std::size_t DeliverQueued() {
    std::deque<Message> batch;
    batch.swap(queue_);
    std::size_t delivered = 0;
    for (Message& m : batch) {
      if (!nodes_.contains(m.to) || Dropped(m)) continue;
      last_step_results_.push_back(nodes_.at(m.to).node->Step(m));
      ++delivered;
    }
    return delivered;
  }

  // Processes Readies and delivers messages until nothing moves (bounded).
  void Stabilize(int max_rounds = 1000) {
    for (int i = 0; i < max_rounds; ++i) {
      bool any = false;
      for (auto& [id, t] : nodes_) {
        if (!paused_.contains(id)) any = Process(id.value()) || any;
      }
      if (DeliverQueued() > 0) any = true;
      if (!any) return;
    }
  }

  void Tick(std::uint64_t id, int ticks = 1) {
    for (int i = 0; i < ticks; ++i) node(id).Tick();
  }
  void TickAll(int ticks = 1) {
    for (int i = 0; i < ticks; ++i) {
      for (auto& [id, t] : nodes_) t.node->Tick();
    }
  }
  // Ticks every node and stabilizes after each tick.
  void Run(int ticks) {
    for (int i = 0; i < ticks; ++i) {
      TickAll();
      Stabilize();
    }
  }

  // Elects `id` by having it campaign (after its boot vote-withholding window has passed).
  void Elect(std::uint64_t id) {
    node(id).Campaign();
    Stabilize();
  }
  // Bootstrapped nodes withhold votes for one floor after boot: tick past it without letting
  // anyone time out, then elect `id`.
  void BootAndElect(std::uint64_t id) {
    for (auto& [nid, t] : nodes_) {
      for (int i = 0; i < t.config.election_timeout_min_ticks; ++i) t.node->Tick();
    }
    Elect(id);
  }

  // Network faults: cut both directions between `id` and everyone else.
  void Isolate(std::uint64_t id) { isolated_.insert(NodeId(id)); }
  void Cut(std::uint64_t from, std::uint64_t to) { cut_.insert({NodeId(from), NodeId(to)}); }
  void Heal() {
    isolated_.clear();
    cut_.clear();
  }
  void SetDropFilter(std::function<bool(const Message&)> f) { drop_ = std::move(f); }
  // A paused node's Readies are not processed (its disk is stalled).
  void Pause(std::uint64_t id) { paused_.insert(NodeId(id)); }
  void Resume(std::uint64_t id) { paused_.erase(NodeId(id)); }

  // Crash-restart: the node is rebuilt from its MemoryLog (an outstanding Ready is lost).
  void Restart(std::uint64_t id) {
    TestNode& t = at(id);
    t.node = std::make_unique<Node>(t.config, *t.log, t.seed + 1000);
    t.applied.clear();
  }

  std::deque<Message>& queue() { return queue_; }
  std::vector<Message>& sent() { return sent_; }
  std::vector<StepResult>& step_results() { return last_step_results_; }
  // Messages sent so far of `type` (optionally from `from`).
  std::size_t CountSent(MessageType type, std::uint64_t from = 0) const {
    std::size_t n = 0;
    for (const Message& m : sent_) {
      if (m.type == type && (from == 0 || m.from == NodeId(from))) ++n;
    }
    return n;
  }

  NodeId Leader() const {
    NodeId leader = kNoNode;
    Term best;
    for (const auto& [id, t] : nodes_) {
      if (t.node->role() == Role::kLeader && t.node->term() >= best) {
        leader = id;
        best = t.node->term();
      }
    }
    return leader;
  }

 private:
  void Enqueue(Message m) {
    sent_.push_back(m);
    queue_.push_back(std::move(m));
  }
  bool Dropped(const Message& m) const {
    if (isolated_.contains(m.from) || isolated_.contains(m.to)) return true;
    if (cut_.contains({m.from, m.to})) return true;
    return drop_ && drop_(m);
  }

  std::vector<NodeId> voters_;
  std::map<NodeId, TestNode> nodes_;
  std::deque<Message> queue_;
  std::vector<Message> sent_;
  std::vector<StepResult> last_step_results_;
  std::set<NodeId> isolated_;
  std::set<std::pair<NodeId, NodeId>> cut_;
  std::set<NodeId> paused_;
  std::function<bool(const Message&)> drop_;
};

// Data of the normal, non-empty entries applied by a node (skips no-ops and conf changes).
inline std::vector<std::string> AppliedData(const TestNode& t) {
  std::vector<std::string> out;
  for (const Entry& e : t.applied) {
    if (e.type == EntryType::kNormal && !e.data.empty()) out.push_back(e.data);
  }
  return out;
}

}  // namespace epoch::raft::test
