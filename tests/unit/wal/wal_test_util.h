// Helpers shared by the WAL tests: deterministic entries, waiting for durability callbacks with a
// deadline (never a sleep), reading the whole log back.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "epoch/raft/types.h"
#include "epoch/status.h"
#include "epoch/wal/wal.h"

namespace epoch::wal::testing {

inline constexpr auto kWaitTimeout = std::chrono::seconds(20);

// Data that depends on (index, term, salt), so a misplaced or stale entry cannot pass a check.
inline std::string EntryData(std::uint64_t index, std::uint64_t term, std::size_t bytes,
                             std::uint64_t salt = 0) {
  std::string data(bytes, '\0');
  std::uint64_t x = index * 0x9e3779b97f4a7c15ull ^ (term + 1) * 0xbf58476d1ce4e5b9ull ^ salt;
  for (char& c : data) {
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 29;
    c = static_cast<char>(x & 0xff);
  }
  return data;
}

inline raft::Entry MakeEntry(std::uint64_t index, std::uint64_t term, std::size_t bytes = 32,
                             std::uint64_t salt = 0) {
  return raft::Entry{Term(term), LogIndex(index), raft::EntryType::kNormal,
                     EntryData(index, term, bytes, salt)};
}

inline std::vector<raft::Entry> MakeEntries(std::uint64_t first, std::uint64_t last,
                                            std::uint64_t term, std::size_t bytes = 32) {
  std::vector<raft::Entry> out;
  for (std::uint64_t i = first; i <= last; ++i) out.push_back(MakeEntry(i, term, bytes));
  return out;
}

// Collects durability callbacks; Wait blocks (with a deadline) until n have arrived.
class Callbacks {
 public:
  DurableCallback Make() {
    return [this](const Status& s) {
      std::lock_guard lock(mu_);
      statuses_.push_back(s);
      cv_.notify_all();
    };
  }
  bool Wait(std::size_t n, std::chrono::milliseconds timeout = kWaitTimeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return statuses_.size() >= n; });
  }
  std::size_t Count() {
    std::lock_guard lock(mu_);
    return statuses_.size();
  }
  std::vector<Status> Statuses() {
    std::lock_guard lock(mu_);
    return statuses_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Status> statuses_;
};

// Submits and waits for durability; returns the callback's status.
inline Status AppendDurably(Wal& wal, std::vector<raft::Entry> entries,
                            std::optional<raft::HardState> hs = std::nullopt) {
  Callbacks cb;
  Status s = wal.Append(std::move(entries), hs, cb.Make());
  if (!s.ok()) return s;
  if (!cb.Wait(1)) return Status::Timeout("no durability callback");
  return cb.Statuses().front();
}

inline Status SnapshotDurably(Wal& wal, const raft::SnapshotMeta& meta) {
  Callbacks cb;
  Status s = wal.SaveSnapshot(meta, cb.Make());
  if (!s.ok()) return s;
  if (!cb.Wait(1)) return Status::Timeout("no durability callback");
  return cb.Statuses().front();
}

// Returns once everything submitted before it is durable and the sync thread has finished the
// work that follows those batches (e.g. deleting compacted segments).
inline Status Barrier(Wal& wal) {
  Callbacks cb;
  wal.Sync(cb.Make());
  if (!cb.Wait(1)) return Status::Timeout("no barrier callback");
  return cb.Statuses().front();
}

inline std::vector<raft::Entry> ReadAll(const Wal& wal) {
  if (wal.LastIndex() < wal.FirstIndex()) return {};
  return wal.Entries(wal.FirstIndex(), wal.LastIndex() + 1, UINT64_MAX);
}

}  // namespace epoch::wal::testing
