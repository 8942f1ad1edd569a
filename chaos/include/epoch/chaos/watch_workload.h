// WatchWorkload: watchers on a key prefix, each resuming after a broken stream at the revision
// after the last one it saw, and the check that every watcher saw exactly the cluster's history:
// no gap, no duplicate, no reordering.
//
// How it is checked: at the end of a round the harness writes a marker key under the prefix and
// waits until every watcher has seen it (WaitForRevision), then reads the authoritative event list
// from `start_revision` to the marker's revision with a fresh watch on the healed cluster
// (ReadHistory). Each watcher's list must equal it event for event (revision, key, type, value).
//
// Threading: Start/Stop/Check/WaitForRevision from one thread; watcher threads in between.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "epoch/status.h"

namespace epoch::chaos {

struct WatchEvent {
  std::int64_t revision = 0;
  std::string key;
  bool is_delete = false;
  std::string value;
  friend bool operator==(const WatchEvent&, const WatchEvent&) = default;
};

struct WatchOptions {
  std::vector<std::string> endpoints;
  int watchers = 2;
  std::string prefix = "/reg/";
  std::int64_t start_revision = 1;
};

struct WatchReport {
  std::uint64_t events = 0;      // events received over all watchers
  std::uint64_t reconnects = 0;  // streams re-opened after a break
  std::string violation;         // empty when every watcher matched the history
};

class WatchWorkload {
 public:
  explicit WatchWorkload(WatchOptions options) : options_(std::move(options)) {}
  ~WatchWorkload() { Stop(); }

  void Start();
  void Stop();
  // True once every watcher has seen an event at `revision` or later.
  [[nodiscard]] bool WaitForRevision(std::int64_t revision, std::chrono::milliseconds timeout);
  [[nodiscard]] WatchReport Check(const std::vector<WatchEvent>& history) const;
  [[nodiscard]] std::string Dump() const;

 private:
  struct Watcher {
    std::mutex mu;
    std::vector<WatchEvent> events;  // guarded by mu
    std::uint64_t reconnects = 0;    // guarded by mu
    std::string error;               // guarded by mu: a protocol problem (e.g. compacted)
  };
  void Run(int index, Watcher* w);

  WatchOptions options_;
  std::stop_source stop_;
  std::vector<std::unique_ptr<Watcher>> watchers_;
  std::vector<std::thread> threads_;
};

// Empty when `seen` equals `history` event for event; otherwise says where it first differs (a gap,
// a duplicate or a reordering) or that the lengths differ.
[[nodiscard]] std::string CompareWatchEvents(const std::vector<WatchEvent>& seen,
                                             const std::vector<WatchEvent>& history);

// Every event under `prefix` in [from, to], read with one watch stream from `endpoint`.
[[nodiscard]] Result<std::vector<WatchEvent>> ReadHistory(const std::vector<std::string>& endpoints,
                                                          const std::string& prefix,
                                                          std::int64_t from, std::int64_t to,
                                                          std::chrono::milliseconds timeout);

}  // namespace epoch::chaos
