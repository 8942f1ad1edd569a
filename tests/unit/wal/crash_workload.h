// A Raft-shaped WAL workload and its reference model, shared by the randomized simulated-crash
// test (wal_crash_sim_test.cc) and the real-process crash test (wal_crash_writer / wal_crash_test).
//
// Workload(seed, start) deterministically generates requests for the current state: appends,
// appends with a hard state, conflicting appends (truncation with a new term), hard states,
// snapshots that keep the log and snapshots that discard it. RefLog applies them with semantics
// written independently of the WAL's LogModel. CheckPrefix is the crash oracle: because a frame
// is atomic and requests are never split across frames, a recovered WAL must equal the reference
// state after some prefix of the submitted requests that contains every acknowledged one.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "epoch/raft/types.h"
#include "epoch/wal/wal.h"
#include "wal_test_util.h"

namespace epoch::wal::testing {

struct RefLog {
  raft::HardState hs;
  raft::SnapshotMeta snap;
  LogIndex first{1};
  std::vector<raft::Entry> entries;  // entries[i] has index first + i

  [[nodiscard]] LogIndex Last() const { return first + entries.size() - 1; }
  [[nodiscard]] std::optional<Term> TermAt(LogIndex i) const {
    if (i + 1 == first) return snap.term;
    if (i < first || i > Last()) return std::nullopt;
    return entries[i - first].term;
  }
};

struct Op {
  enum class Kind : std::uint8_t { kAppend, kSnapshot, kInstall };
  Kind kind = Kind::kAppend;
  std::vector<raft::Entry> entries;
  std::optional<raft::HardState> hs;
  raft::SnapshotMeta meta;
};

inline void ApplyOp(RefLog& log, const Op& op) {
  if (op.kind == Op::Kind::kInstall) {  // a snapshot from the leader: the log goes
    log.entries.clear();
    log.first = op.meta.index + 1;
    log.snap = op.meta;
    return;
  }
  if (op.kind == Op::Kind::kSnapshot) {
    const raft::SnapshotMeta& m = op.meta;
    const bool keeps = log.TermAt(m.index) == std::optional<Term>(m.term);
    if (keeps && m.index >= log.first) {
      log.entries.erase(log.entries.begin(),
                        log.entries.begin() + static_cast<std::ptrdiff_t>(m.index - log.first + 1));
    } else if (!keeps) {
      log.entries.clear();
    }
    log.first = m.index + 1;
    log.snap = m;
    return;
  }
  if (!op.entries.empty()) {
    const LogIndex f = op.entries.front().index;
    if (f <= log.Last()) log.entries.resize(f - log.first);
    log.entries.insert(log.entries.end(), op.entries.begin(), op.entries.end());
  }
  if (op.hs) log.hs = *op.hs;
}

inline RefLog FromWal(const Wal& wal) {
  RefLog log;
  log.hs = wal.InitialHardState();
  log.snap = wal.LastSnapshot();
  log.first = wal.FirstIndex();
  log.entries = ReadAll(wal);
  return log;
}

// "" when equal, else the first difference.
inline std::string Diff(const RefLog& want, const RefLog& got) {
  if (!(want.hs == got.hs)) {
    return fmt::format("hard state: want term {} vote {} commit {}, got term {} vote {} commit {}",
                       want.hs.term, want.hs.vote, want.hs.commit, got.hs.term, got.hs.vote,
                       got.hs.commit);
  }
  if (!(want.snap == got.snap)) {
    return fmt::format("snapshot: want {}@{}, got {}@{}", want.snap.index, want.snap.term,
                       got.snap.index, got.snap.term);
  }
  if (want.first != got.first || want.Last() != got.Last()) {
    return fmt::format("range: want [{}, {}], got [{}, {}]", want.first, want.Last(), got.first,
                       got.Last());
  }
  for (std::size_t i = 0; i < want.entries.size(); ++i) {
    if (!(want.entries[i] == got.entries[i])) {
      return fmt::format("entry {}: want term {} ({} bytes), got term {} ({} bytes)",
                         want.entries[i].index, want.entries[i].term, want.entries[i].data.size(),
                         got.entries[i].term, got.entries[i].data.size());
    }
  }
  return "";
}

// The crash oracle (see the file comment). Returns "" on success.
inline std::string CheckPrefix(const RefLog& start, const std::vector<Op>& ops, std::size_t acked,
                               const RefLog& recovered) {
  RefLog state = start;
  std::string last_diff;
  for (std::size_t k = 0; k <= ops.size(); ++k) {
    if (k >= acked) {
      last_diff = Diff(state, recovered);
      if (last_diff.empty()) return "";
    }
    if (k < ops.size()) ApplyOp(state, ops[k]);
  }
  return fmt::format(
      "recovered state matches no prefix of the {} submitted requests with all {} "
      "acknowledged ones (vs. all submitted: {})",
      ops.size(), acked, last_diff);
}

inline Status SubmitOp(Wal& wal, const Op& op, DurableCallback done) {
  if (op.kind == Op::Kind::kSnapshot) return wal.SaveSnapshot(op.meta, std::move(done));
  if (op.kind == Op::Kind::kInstall) return wal.InstallSnapshot(op.meta, std::move(done));
  return wal.Append(op.entries, op.hs, std::move(done));
}

class Workload {
 public:
  // `snapshots`: whether snapshot requests (and so compaction) are generated at all.
  Workload(std::uint64_t seed, RefLog start, std::size_t max_data_bytes, bool snapshots = true)
      : rng_(seed),
        state_(std::move(start)),
        max_data_bytes_(max_data_bytes),
        salt_(seed),
        snapshots_(snapshots) {}

  [[nodiscard]] const RefLog& state() const { return state_; }

  Op Next() {
    Op op = Generate();
    ApplyOp(state_, op);
    return op;
  }

 private:
  std::uint64_t Uniform(std::uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  Term CurrentTerm() const {
    Term t = std::max(state_.hs.term, state_.snap.term);
    if (!state_.entries.empty()) t = std::max(t, state_.entries.back().term);
    return t.IsZero() ? Term(1) : t;
  }

  std::vector<raft::Entry> Entries(LogIndex from, std::size_t n, Term term) {
    std::vector<raft::Entry> out;
    for (std::size_t i = 0; i < n; ++i) {
      out.push_back(
          MakeEntry((from + i).value(), term.value(), Uniform(max_data_bytes_ + 1), salt_));
    }
    return out;
  }

  raft::HardState RandomHardState(Term term, LogIndex last) {
    return raft::HardState{term, NodeId(Uniform(4)), LogIndex(Uniform(last.value() + 1))};
  }

  Op Generate() {
    const std::uint64_t r = Uniform(100);
    const LogIndex last = state_.Last();
    const bool has_entries = last > state_.snap.index;
    Op op;
    if (r < 60) {
      op.entries = Entries(last + 1, 1 + Uniform(8), CurrentTerm());
      if (r >= 50) op.hs = RandomHardState(CurrentTerm(), last + op.entries.size());
    } else if (r < 72 && has_entries) {
      // Conflict: a new leader overwrites a suffix (Raft §5.3), with the new term persisted.
      const LogIndex from = state_.snap.index + 1 + Uniform(last - state_.snap.index);
      const Term term = Term(CurrentTerm().value() + 1);
      op.entries = Entries(from, 1 + Uniform(6), term);
      op.hs = RandomHardState(term, from + op.entries.size() - 1);
    } else if (r < 86 || !snapshots_) {
      const Term term = Uniform(3) == 0 ? Term(CurrentTerm().value() + 1) : CurrentTerm();
      op.hs = RandomHardState(term, last);
    } else if (r < 97 && has_entries) {
      op.kind = Op::Kind::kSnapshot;
      const LogIndex at = state_.snap.index + 1 + Uniform(last - state_.snap.index);
      op.meta = raft::SnapshotMeta{at, *state_.TermAt(at), {{NodeId(1), NodeId(2)}, {}}};
    } else if (Uniform(2) == 0) {
      // A local snapshot past our log: the whole log goes (Raft §7).
      op.kind = Op::Kind::kSnapshot;
      op.meta = raft::SnapshotMeta{last + 1 + Uniform(5),
                                   Term(CurrentTerm().value() + 1),
                                   {{NodeId(1), NodeId(2), NodeId(3)}, {NodeId(4)}}};
    } else {
      // A snapshot installed from the leader, anywhere from our snapshot on: the log goes.
      op.kind = Op::Kind::kInstall;
      const LogIndex at = state_.snap.index + Uniform(last - state_.snap.index + 6);
      op.meta = raft::SnapshotMeta{at,
                                   state_.TermAt(at).value_or(Term(CurrentTerm().value() + 1)),
                                   {{NodeId(2), NodeId(3)}, {}}};
    }
    return op;
  }

  std::mt19937_64 rng_;
  RefLog state_;
  const std::size_t max_data_bytes_;
  const std::uint64_t salt_;
  const bool snapshots_;
};

}  // namespace epoch::wal::testing
