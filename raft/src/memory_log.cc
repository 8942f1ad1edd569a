#include "epoch/raft/memory_log.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "epoch/raft/conf_change.h"

namespace epoch::raft {
namespace {

[[noreturn]] void ContractViolation(const std::string& what) {
  fmt::print(stderr, "MemoryLog contract violation: {}\n", what);
  std::abort();
}

}  // namespace

MemoryLog MemoryLog::Bootstrapped(std::vector<NodeId> voters) {
  MemoryLog log;
  log.snapshot_ = BootstrapSnapshot(std::move(voters));
  log.hard_state_ = HardState{kBootstrapTerm, kNoNode, kBootstrapIndex};
  return log;
}

LogIndex MemoryLog::FirstIndex() const { return snapshot_.index.Next(); }

LogIndex MemoryLog::LastIndex() const { return snapshot_.index + entries_.size(); }

std::optional<Term> MemoryLog::TermAt(LogIndex index) const {
  if (index < snapshot_.index || index > LastIndex()) return std::nullopt;
  if (index == snapshot_.index) return snapshot_.term;
  return entries_[index - FirstIndex()].term;
}

std::vector<Entry> MemoryLog::Entries(LogIndex lo, LogIndex hi, std::uint64_t max_bytes) const {
  if (lo < FirstIndex() || hi < lo || hi > LastIndex().Next()) {
    ContractViolation(
        fmt::format("Entries({}, {}) outside [{}, {}]", lo, hi, FirstIndex(), LastIndex().Next()));
  }
  std::vector<Entry> out;
  std::uint64_t bytes = 0;
  for (LogIndex i = lo; i < hi; ++i) {
    const Entry& e = entries_[i - FirstIndex()];
    bytes += e.data.size();
    if (!out.empty() && bytes > max_bytes) break;
    out.push_back(e);
  }
  return out;
}

void MemoryLog::Append(const std::vector<Entry>& entries) {
  if (entries.empty()) return;
  const LogIndex first = entries.front().index;
  if (first < FirstIndex() || first > LastIndex().Next()) {
    ContractViolation(
        fmt::format("Append at {} outside [{}, {}]", first, FirstIndex(), LastIndex().Next()));
  }
  while (LastIndex() >= first) {
    entry_bytes_ -= entries_.back().data.size();
    entries_.pop_back();
  }
  for (const Entry& e : entries) {
    if (e.index != LastIndex().Next()) {
      ContractViolation(
          fmt::format("Append of non-contiguous entry {} after {}", e.index, LastIndex()));
    }
    entry_bytes_ += e.data.size();
    entries_.push_back(e);
  }
}

void MemoryLog::ApplySnapshot(const SnapshotMeta& meta) {
  snapshot_ = meta;
  entries_.clear();
  entry_bytes_ = 0;
}

void MemoryLog::Compact(LogIndex index, const ConfState& conf) {
  if (index < FirstIndex()) return;
  if (index > LastIndex()) {
    ContractViolation(fmt::format("Compact({}) beyond last index {}", index, LastIndex()));
  }
  const Term term = *TermAt(index);
  const auto drop = static_cast<std::ptrdiff_t>(index - snapshot_.index);
  for (auto it = entries_.begin(); it != entries_.begin() + drop; ++it) {
    entry_bytes_ -= it->data.size();
  }
  entries_.erase(entries_.begin(), entries_.begin() + drop);
  snapshot_ = SnapshotMeta{index, term, conf};
}

}  // namespace epoch::raft
