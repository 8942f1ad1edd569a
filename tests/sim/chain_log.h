// ChainLog: a compact shadow of one node's Raft log for the invariant checkers: the term of each
// entry and a running hash chain (chain[i] covers entries 1..i), so "same prefix" is one compare.
// Two per node: the log the core holds (mirrored from each Ready) and the durable log.
//
// Threading: a plain value.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "epoch/raft/types.h"

namespace epoch::sim {

class ChainLog {
 public:
  // A log that starts at a snapshot: index `base` with term `base_term` and chain value `chain`.
  void Reset(LogIndex base, Term base_term, std::uint64_t chain) {
    base_ = base;
    terms_.assign(1, base_term);
    chain_.assign(1, chain);
  }

  // Appends (or overwrites from e.index on); requires base < e.index <= last() + 1.
  void Append(const raft::Entry& e) {
    auto pos = static_cast<std::size_t>(e.index - base_);
    terms_.resize(pos);
    chain_.resize(pos);
    terms_.push_back(e.term);
    chain_.push_back(Link(chain_.back(), e));
  }
  void TruncateAfter(LogIndex index) {
    if (index < last()) {
      terms_.resize(static_cast<std::size_t>(index - base_) + 1);
      chain_.resize(terms_.size());
    }
  }

  [[nodiscard]] LogIndex base() const { return base_; }
  [[nodiscard]] LogIndex last() const { return base_ + (terms_.size() - 1); }
  [[nodiscard]] bool Has(LogIndex i) const { return i >= base_ && i <= last(); }
  [[nodiscard]] Term TermAt(LogIndex i) const { return terms_[i - base_]; }
  [[nodiscard]] std::uint64_t ChainAt(LogIndex i) const { return chain_[i - base_]; }

  static std::uint64_t EntryHash(const raft::Entry& e) {
    return Mix(std::hash<std::string>{}(e.data) ^ Mix(e.term.value()) ^
               (static_cast<std::uint64_t>(e.type) << 56));
  }
  static std::uint64_t Link(std::uint64_t prev, const raft::Entry& e) {
    return Mix(prev * 0x9e3779b97f4a7c15ULL + EntryHash(e));
  }
  static std::uint64_t Mix(std::uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }

 private:
  LogIndex base_{0};
  std::vector<Term> terms_{Term(0)};     // terms_[i - base_]
  std::vector<std::uint64_t> chain_{0};  // chain_[i - base_]
};

}  // namespace epoch::sim
