// WatchSpec: one watcher's request — an etcdserverpb.WatchCreateRequest normalized the way etcd's
// v3rpc layer does it (docs/etcd-compatibility.md §3.5) — and the event-matching rule built on it.
//
// Who calls it: WatchSession parses every create request with ParseWatchCreate(); WatchHub asks
// Wants() for every applied event and watcher whose key range may cover it.
//
// Threading: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "epoch/etcd_errors.h"
#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "etcdserverpb/rpc.pb.h"
#include "mvccpb/kv.pb.h"

namespace epoch::server {

// etcd's cancel reasons for a create request that does not make a watcher
// (etcd-io/etcd:mvcc/watcher.go). A negative start revision gets etcd_errors::kCompacted's text.
inline constexpr std::string_view kWatcherRangeEmpty = "mvcc: watcher range is empty";
inline constexpr std::string_view kWatcherDuplicateId =
    "mvcc: duplicate watch ID provided on the WatchStream";
// Epoch's own limits (WatchHubOptions).
inline constexpr std::string_view kWatchersPerStreamExceeded =
    "epoch: too many watchers on this stream (--max-watchers-per-stream)";
inline constexpr std::string_view kWatchControlQueueExceeded =
    "epoch: watch replies not read (more than --watch-control-queue-max queued)";

struct WatchSpec {
  // Never empty: a request without a key watches from "\0", the smallest key (as etcd does).
  std::string key;
  // Exclusive end of the range; empty means the single key `key` (unless from_key).
  std::string range_end;
  // range_end was "\0": every key >= key.
  bool from_key = false;
  // 0: only events after the created reply's header.revision; otherwise replay from here
  // (inclusive).
  Revision start_revision;
  // 0: the session assigns the next free ID.
  std::int64_t requested_id = 0;
  bool progress_notify = false;
  bool no_put = false;     // filter NOPUT
  bool no_delete = false;  // filter NODELETE
  bool prev_kv = false;
  bool fragment = false;

  [[nodiscard]] bool single_key() const { return !from_key && range_end.empty(); }
  // Whether `user_key` lies in the watched range.
  [[nodiscard]] bool Covers(std::string_view user_key) const;
  // Whether no filter drops events of `type`.
  [[nodiscard]] bool WantsType(mvccpb::Event::EventType type) const {
    return type == mvccpb::Event::PUT ? !no_put : !(type == mvccpb::Event::DELETE && no_delete);
  }
  // Whether the watcher receives `event`: its key is covered and no filter drops its type.
  [[nodiscard]] bool Wants(const mvccpb::Event& event) const;
};

// Normalizes `request` as etcd does. Errors carry the cancel reason etcd sends with a
// created+canceled reply: a negative start revision (etcd_errors::kCompacted: "mvcc: required
// revision has been compacted"), an empty or inverted range (kWatcherRangeEmpty).
[[nodiscard]] Result<WatchSpec> ParseWatchCreate(const etcdserverpb::WatchCreateRequest& request);

}  // namespace epoch::server
