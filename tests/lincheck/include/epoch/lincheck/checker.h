// The linearizability checker: Wing & Gong's backtracking search with Lowe's memoisation, in the
// form Porcupine uses (anishathalye/porcupine checker.go), plus P-compositionality (Horn &
// Kroening): the history is split by the model's partition key and each partition is checked on
// its own, which is sound because linearizability is local (Herlihy & Wing 1990, Theorem 1).
//
// Who calls it: tests/sim after each seeded run, the chaos suite on recorded histories, and the
// unit tests. Pass a model (see the LinearizabilityModel concept; kv_model.h is one) and a history.
//
// The search, per partition: every operation contributes a call entry and a return entry, sorted
// by time (calls before returns at equal times: intervals are closed), kept in a doubly linked
// list. Walking the list from the front, a call entry may be linearized now if the model accepts
// it from the current state; it is then lifted out of the list (with its return entry) and the
// walk restarts. Meeting a return entry means an operation that already returned could not be
// placed: backtrack to the last choice. (bitset of linearized ops, state) pairs already explored
// are cached and never explored twice. An empty list is a linearization; an empty backtrack stack
// is a proof that none exists.
//
// Threading: Check() is a pure function of its arguments; call it from any thread.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "epoch/lincheck/history.h"

namespace epoch::lincheck {

// A sequential specification. Step is pure: given a state and one operation's input and observed
// output, it says whether that output is legal from that state (std::nullopt if not) and returns
// the next state. For an operation that never returned (return_time == kNeverReturned) the output
// is not meaningful and Step must accept any effect the operation could have had. PartitionKey
// groups operations that may interact; operations with different keys must be independent.
template <typename M>
concept LinearizabilityModel = requires(const M& m, const typename M::State& s,
                                        const typename M::Input& in, const typename M::Output& out,
                                        bool never_returned) {
  { m.Init() } -> std::same_as<typename M::State>;
  { m.Step(s, in, out, never_returned) } -> std::same_as<std::optional<typename M::State>>;
  { m.HashState(s) } -> std::convertible_to<std::uint64_t>;
  { s == s } -> std::convertible_to<bool>;
  { m.PartitionKey(in) } -> std::convertible_to<std::string>;
  { m.DescribeOperation(in, out, never_returned) } -> std::convertible_to<std::string>;
  { m.DescribeState(s) } -> std::convertible_to<std::string>;
};

namespace detail {

// Set of linearized operations of one partition.
class Bitset {
 public:
  explicit Bitset(std::size_t bits) : words_((bits + 63) / 64, 0) {}
  void Set(std::size_t i) { words_[i / 64] |= (std::uint64_t{1} << (i % 64)); }
  void Clear(std::size_t i) { words_[i / 64] &= ~(std::uint64_t{1} << (i % 64)); }
  [[nodiscard]] std::uint64_t Hash() const {
    std::uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (std::uint64_t w : words_) h = Mix(h ^ Mix(w));
    return h;
  }
  friend bool operator==(const Bitset&, const Bitset&) = default;

  // splitmix64's finaliser: a cheap, well-spread 64-bit mix.
  static std::uint64_t Mix(std::uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
  }

 private:
  std::vector<std::uint64_t> words_;
};

// One call or return entry in the linked list; index 0 is the head sentinel.
struct ListNode {
  std::int32_t op = -1;  // index into the partition's operations
  bool is_call = false;
  std::int32_t match = -1;  // for a call: its return node
  std::int32_t prev = -1;
  std::int32_t next = -1;  // -1 = end of list
};

std::string FormatTime(std::int64_t t);

// Shared by all partitions of one Check(): steps taken and the limits.
class BudgetClock {
 public:
  explicit BudgetClock(const Budget& budget)
      : budget_(budget), start_(std::chrono::steady_clock::now()) {}
  // Counts one step; false once the budget is spent.
  bool Tick() {
    ++steps_;
    if (budget_.max_steps != 0 && steps_ > budget_.max_steps) return false;
    if (budget_.time_limit.count() != 0 && (steps_ & 1023) == 0 &&
        std::chrono::steady_clock::now() - start_ > budget_.time_limit) {
      expired_ = true;
    }
    return !expired_;
  }
  [[nodiscard]] std::uint64_t steps() const { return steps_; }

 private:
  Budget budget_;
  std::chrono::steady_clock::time_point start_;
  std::uint64_t steps_ = 0;
  bool expired_ = false;
};

template <LinearizabilityModel M>
class PartitionSearch {
 public:
  using Op = Operation<typename M::Input, typename M::Output>;
  using State = typename M::State;

  PartitionSearch(const M& model, std::vector<const Op*> ops)
      : model_(model), ops_(std::move(ops)) {
    BuildList();
  }

  // Runs the search; returns kOk, kIllegal (description filled) or kUnknown (budget spent).
  Verdict Run(BudgetClock& clock, std::string* description);

 private:
  struct Frame {
    std::int32_t call_node;
    State state_before;
  };
  struct CacheEntry {
    Bitset linearized;
    State state;
  };

  [[nodiscard]] bool NeverReturned(std::int32_t op) const {
    return ops_[op]->return_time == kNeverReturned;
  }
  void BuildList();
  void Lift(std::int32_t call);
  void Unlift(std::int32_t call);
  bool CacheInsert(const Bitset& linearized, const State& state);
  void NoteProgress();
  void NoteStuck(std::int32_t return_node);
  [[nodiscard]] std::string DescribeOp(std::int32_t op) const;
  [[nodiscard]] std::string Describe() const;

  const M& model_;
  std::vector<const Op*> ops_;
  std::vector<ListNode> nodes_;  // nodes_[0] is the head
  std::vector<Frame> stack_;     // the current partial linearization, oldest first
  std::unordered_map<std::uint64_t, std::vector<CacheEntry>> cache_;

  // Diagnostics: the longest partial linearization seen, the state after it, and the operations
  // that were candidates when the search first got stuck at that depth.
  std::vector<std::int32_t> best_prefix_;
  std::optional<State> best_state_;
  std::int32_t stuck_return_op_ = -1;
  std::vector<std::int32_t> stuck_candidates_;
};

template <LinearizabilityModel M>
void PartitionSearch<M>::BuildList() {
  struct Event {
    std::int64_t time;
    bool is_call;
    std::int32_t op;
  };
  std::vector<Event> events;
  events.reserve(ops_.size() * 2);
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    events.push_back({ops_[i]->call_time, true, static_cast<std::int32_t>(i)});
    events.push_back({ops_[i]->return_time, false, static_cast<std::int32_t>(i)});
  }
  // Calls before returns at equal times (closed intervals); then by op for determinism.
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.is_call != b.is_call) return a.is_call;
    return a.op < b.op;
  });
  nodes_.assign(events.size() + 1, ListNode{});
  std::vector<std::int32_t> call_node_of(ops_.size(), -1);
  for (std::size_t i = 0; i < events.size(); ++i) {
    auto n = static_cast<std::int32_t>(i + 1);
    nodes_[n].op = events[i].op;
    nodes_[n].is_call = events[i].is_call;
    nodes_[n].prev = n - 1;
    nodes_[n].next = (i + 1 < events.size()) ? n + 1 : -1;
    if (events[i].is_call) {
      call_node_of[events[i].op] = n;
    } else {
      nodes_[call_node_of[events[i].op]].match = n;
    }
  }
  nodes_[0].next = events.empty() ? -1 : 1;
}

template <LinearizabilityModel M>
void PartitionSearch<M>::Lift(std::int32_t call) {
  ListNode& c = nodes_[call];
  nodes_[c.prev].next = c.next;
  if (c.next != -1) nodes_[c.next].prev = c.prev;
  ListNode& r = nodes_[c.match];
  nodes_[r.prev].next = r.next;
  if (r.next != -1) nodes_[r.next].prev = r.prev;
}

// Exact inverse of Lift; frames are unlifted in LIFO order, so the saved links are still valid.
template <LinearizabilityModel M>
void PartitionSearch<M>::Unlift(std::int32_t call) {
  ListNode& c = nodes_[call];
  std::int32_t ret = c.match;
  ListNode& r = nodes_[ret];
  nodes_[r.prev].next = ret;
  if (r.next != -1) nodes_[r.next].prev = ret;
  nodes_[c.prev].next = call;
  if (c.next != -1) nodes_[c.next].prev = call;
}

// Returns true if (linearized, state) was not cached yet (and caches it).
template <LinearizabilityModel M>
bool PartitionSearch<M>::CacheInsert(const Bitset& linearized, const State& state) {
  std::uint64_t key = linearized.Hash() ^ static_cast<std::uint64_t>(model_.HashState(state));
  auto& bucket = cache_[key];
  for (const CacheEntry& e : bucket) {
    if (e.linearized == linearized && e.state == state) return false;
  }
  bucket.push_back(CacheEntry{linearized, state});
  return true;
}

template <LinearizabilityModel M>
void PartitionSearch<M>::NoteProgress() {
  if (stack_.size() <= best_prefix_.size()) return;
  best_prefix_.clear();
  for (const Frame& f : stack_) best_prefix_.push_back(nodes_[f.call_node].op);
  stuck_return_op_ = -1;
  stuck_candidates_.clear();
}

template <LinearizabilityModel M>
void PartitionSearch<M>::NoteStuck(std::int32_t return_node) {
  if (stack_.size() != best_prefix_.size() || stuck_return_op_ != -1) return;
  stuck_return_op_ = nodes_[return_node].op;
  for (std::int32_t n = nodes_[0].next; n != return_node && n != -1; n = nodes_[n].next) {
    if (nodes_[n].is_call) stuck_candidates_.push_back(nodes_[n].op);
  }
}

template <LinearizabilityModel M>
Verdict PartitionSearch<M>::Run(BudgetClock& clock, std::string* description) {
  State state = model_.Init();
  best_state_ = state;
  Bitset linearized(ops_.size());
  std::int32_t entry = nodes_[0].next;
  while (nodes_[0].next != -1) {
    if (!clock.Tick()) return Verdict::kUnknown;
    const ListNode& node = nodes_[entry];
    if (node.is_call) {
      std::optional<State> next =
          model_.Step(state, ops_[node.op]->input, ops_[node.op]->output, NeverReturned(node.op));
      if (next.has_value()) {
        linearized.Set(node.op);
        if (CacheInsert(linearized, *next)) {
          stack_.push_back(Frame{entry, std::move(state)});
          state = std::move(*next);
          Lift(entry);
          if (stack_.size() > best_prefix_.size()) {
            NoteProgress();
            best_state_ = state;
          }
          entry = nodes_[0].next;
          continue;
        }
        linearized.Clear(node.op);
      }
      entry = node.next;
      continue;
    }
    // A return entry: the operation returned before it could be linearized. Backtrack.
    NoteStuck(entry);
    if (stack_.empty()) {
      *description = Describe();
      return Verdict::kIllegal;
    }
    Frame top = std::move(stack_.back());
    stack_.pop_back();
    state = std::move(top.state_before);
    linearized.Clear(nodes_[top.call_node].op);
    Unlift(top.call_node);
    entry = nodes_[top.call_node].next;
  }
  return Verdict::kOk;
}

template <LinearizabilityModel M>
std::string PartitionSearch<M>::DescribeOp(std::int32_t op) const {
  const Op& o = *ops_[op];
  return fmt::format("client {} [{}, {}] {}", o.client_id, FormatTime(o.call_time),
                     FormatTime(o.return_time),
                     model_.DescribeOperation(o.input, o.output, NeverReturned(op)));
}

template <LinearizabilityModel M>
std::string PartitionSearch<M>::Describe() const {
  constexpr std::size_t kPrefixShown = 8;
  std::string out =
      fmt::format("not linearizable: {} operations; longest linearizable prefix has {}",
                  ops_.size(), best_prefix_.size());
  std::size_t first = best_prefix_.size() > kPrefixShown ? best_prefix_.size() - kPrefixShown : 0;
  if (first > 0) out += fmt::format(" (last {} shown)", kPrefixShown);
  out += ":\n";
  for (std::size_t i = first; i < best_prefix_.size(); ++i) {
    out += fmt::format("  {:>4}. {}\n", i + 1, DescribeOp(best_prefix_[i]));
  }
  out += fmt::format("state after the prefix: {}\n", model_.DescribeState(*best_state_));
  if (stuck_return_op_ != -1) {
    out += fmt::format("this operation returned before it could be linearized:\n  {}\n",
                       DescribeOp(stuck_return_op_));
    out += "no candidate could be linearized next from that state:\n";
    for (std::int32_t op : stuck_candidates_) out += fmt::format("  {}\n", DescribeOp(op));
  }
  return out;
}

}  // namespace detail

// Checks `history` against `model`, partition by partition. Stops at the first illegal partition;
// a spent budget anywhere (with no illegal partition found) gives kUnknown. Malformed operations
// (return before call) give kUnknown with an explanation: the caller's recorder is broken.
template <LinearizabilityModel M>
CheckResult Check(const M& model,
                  std::span<const Operation<typename M::Input, typename M::Output>> history,
                  const Budget& budget = {}) {
  using Op = Operation<typename M::Input, typename M::Output>;
  CheckResult result;
  result.operations = history.size();
  std::map<std::string, std::vector<const Op*>> partitions;  // ordered: deterministic reports
  for (const Op& op : history) {
    if (op.return_time < op.call_time) {
      result.verdict = Verdict::kUnknown;
      result.description = fmt::format(
          "malformed history: operation of client {} returns at {} "
          "before its call at {}",
          op.client_id, op.return_time, op.call_time);
      return result;
    }
    partitions[model.PartitionKey(op.input)].push_back(&op);
  }
  detail::BudgetClock clock(budget);
  bool budget_spent = false;
  for (auto& [key, ops] : partitions) {
    result.max_partition_ops = std::max(result.max_partition_ops, ops.size());
    ++result.partitions;
    detail::PartitionSearch<M> search(model, std::move(ops));
    std::string description;
    Verdict v = search.Run(clock, &description);
    if (v == Verdict::kIllegal) {
      result.verdict = v;
      result.failing_partition = key;
      result.description = std::move(description);
      result.steps = clock.steps();
      return result;
    }
    if (v == Verdict::kUnknown) {
      if (!budget_spent) {
        result.failing_partition = key;
        result.description = fmt::format(
            "budget spent after {} steps while searching this "
            "partition: the answer is unknown, not a pass",
            clock.steps());
      }
      budget_spent = true;
      break;
    }
  }
  result.steps = clock.steps();
  result.verdict = budget_spent ? Verdict::kUnknown : Verdict::kOk;
  return result;
}

// Convenience overload for vectors.
template <LinearizabilityModel M>
CheckResult Check(const M& model,
                  const std::vector<Operation<typename M::Input, typename M::Output>>& history,
                  const Budget& budget = {}) {
  return Check(model,
               std::span<const Operation<typename M::Input, typename M::Output>>(history.data(),
                                                                                 history.size()),
               budget);
}

}  // namespace epoch::lincheck
