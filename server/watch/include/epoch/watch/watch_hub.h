// WatchHub: the node's one source of watch events. The applied hook of KvStateMachine publishes
// each applied revision's events here (on the driver's strand: a copy into an inbox, nothing
// more); a dispatch strand matches them against every registered watcher and hands them to the
// watchers' sessions (WatchSession), which queue the responses of their gRPC stream.
//
// How a watcher never misses or repeats an event (docs/etcd-compatibility.md §3.5):
//   - `dispatched` (D) is the last revision whose dispatch round is complete. A watcher
//     registered with start 0 or start > D is *synced*: it gets every later round. Its created
//     reply carries header.revision = D, so "start 0 = events after the created revision".
//   - A watcher starting at or below D is *catching up*: it is registered for live rounds at
//     once, but those only go into a buffer (complete for revisions above `buffer_floor` = D);
//     meanwhile it reads history from the store (KvStore::ReadEvents, on the read executor) from
//     its next revision. When history has covered everything up to the floor, the buffer is
//     drained, skipping revisions history already delivered, and the watcher is synced — no gap,
//     no duplicate (switches happen under the hub lock, between rounds).
//   - A slow watcher (its stream does not drain: more than watcher_pending_bytes_max queued) is
//     never canceled and never grows without bound: it falls back to catching up from history,
//     reading a new batch only when its stream has drained below half the bound. If its next
//     revision is compacted meanwhile it gets etcd's compacted cancel, like any late watcher.
//   - If the dispatch strand falls behind by more than inbox_bytes_max, the hub stops carrying
//     events and every watcher catches up from history (a "gap"); the same happens when the
//     published revisions jump (e.g. the store was replaced by a snapshot: call Resync()).
//
// Threading: Publish/Resync from the driver strand only; everything else from any thread. Lock
// order: hub mutex, then a session's mutex. Neither is held while calling gRPC.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "epoch/state/kv_store.h"
#include "epoch/strong_int.h"
#include "epoch/watch/range_watcher_index.h"
#include "mvccpb/kv.pb.h"

namespace epoch::server {

class WatchSession;
struct Watcher;

struct WatchHubOptions {
  // Event bytes one watcher may have queued on its stream and not yet written (and, while it
  // catches up, buffered from live rounds) before it falls back to reading history.
  std::size_t watcher_pending_bytes_max = 4u << 20;
  // Bytes of applied events waiting for dispatch before the hub stops carrying them.
  std::size_t inbox_bytes_max = 64u << 20;
  // Events per history read (KvStore::ReadEvents; a revision is never split, so a read may return
  // more).
  std::size_t history_batch_events = 256;
  // Largest events response; a single revision larger than this is split into fragments only
  // for watchers that asked for `fragment` (etcd's rule), otherwise sent whole.
  std::size_t response_bytes_max = 1u << 20;
  // --max-watchers-per-stream: watchers one stream may hold; a create past it is refused (a
  // created+canceled reply, as etcd refuses a create).
  std::size_t watchers_per_stream_max = 1000;
  // --watch-control-queue-max: create/cancel/progress replies queued on one stream for a client
  // that does not read them; past it the stream ends with RESOURCE_EXHAUSTED.
  std::size_t control_queue_max = 1024;
};

struct WatchHubStats {
  std::uint64_t rounds = 0;            // dispatch rounds (one per applied revision)
  std::uint64_t fallbacks = 0;         // synced watchers that fell back to history (slow or gap)
  std::uint64_t history_reads = 0;     // ReadEvents calls by catching-up watchers
  std::uint64_t gaps = 0;              // inbox overflows and revision jumps
  std::uint64_t unwatched = 0;         // revisions no watcher wanted: marked dispatched at once
  std::size_t watchers = 0;            // registered now
  std::uint64_t watchers_refused = 0;  // creates past watchers_per_stream_max
  std::uint64_t streams_cut = 0;       // streams ended past control_queue_max
};

class WatchHub : public std::enable_shared_from_this<WatchHub> {
 public:
  // `dispatch` runs the dispatch rounds (wrapped in a strand here); `reads` runs history reads.
  // `store` must outlive the hub's last task.
  static std::shared_ptr<WatchHub> Create(const KvStore& store, asio::any_io_executor dispatch,
                                          asio::any_io_executor reads, WatchHubOptions options);
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // --- driver strand ---
  // The events of one applied entry at `revision` (ApplyResult). Entries without events are
  // ignored. Cheap: copies the events into the inbox and schedules a round — or, with no
  // watcher and nothing queued, only marks the revision dispatched (later watchers read it from
  // history).
  void Publish(Revision revision, const std::vector<mvccpb::Event>& events);
  // When the store holds revisions that were never published (a snapshot replaced it), every
  // watcher re-reads history from its position. Cheap otherwise; the watch service calls it
  // periodically, and a snapshot install may call it at once.
  void Resync();

  // --- any thread ---
  // Stops accepting events (the dispatch executor is going away). Idempotent.
  void Detach();
  // The periodic progress_notify: every synced watcher that asked for it and was sent no events
  // since the previous tick gets an empty response with header.revision = dispatched revision.
  void TickProgress();
  [[nodiscard]] Revision dispatched_revision() const;
  [[nodiscard]] WatchHubStats stats() const;
  [[nodiscard]] const WatchHubOptions& options() const { return options_; }
  // A session refused a create or was ended for one of the limits above (counted in stats()).
  void NoteWatcherRefused() { watchers_refused_.fetch_add(1); }
  void NoteStreamCut() { streams_cut_.fetch_add(1); }
  [[nodiscard]] const KvStore& store() const { return store_; }
  [[nodiscard]] const asio::any_io_executor& read_executor() const { return reads_; }

  // --- for WatchSession (the hub lock must be held: Lock()) ---
  [[nodiscard]] std::unique_lock<std::mutex> Lock() const { return std::unique_lock(mu_); }
  [[nodiscard]] Revision DispatchedLocked() const { return dispatched_; }
  void AddLocked(const std::shared_ptr<Watcher>& watcher);
  void RemoveLocked(const std::shared_ptr<Watcher>& watcher);
  // The session has an unanswered RequestProgress; retried after every round.
  void WaitProgressLocked(const std::shared_ptr<WatchSession>& session);
  void StopWaitingProgressLocked(const std::shared_ptr<WatchSession>& session);
  void CountHistoryReadLocked() { ++stats_.history_reads; }
  void CountFallbackLocked() { ++stats_.fallbacks; }

 private:
  // One inbox item: a revision's events, or a gap (events up to `revision` not carried).
  struct Published {
    Revision revision;
    std::shared_ptr<const std::vector<mvccpb::Event>> events;  // null for a gap
  };
  using Touched = std::unordered_set<std::shared_ptr<WatchSession>>;

  WatchHub(const KvStore& store, asio::any_io_executor dispatch, asio::any_io_executor reads,
           WatchHubOptions options);
  bool SkipUnwatchedRevision(Revision revision, const std::vector<mvccpb::Event>& events);
  // Whether some watcher wants one of `events` (mu_ held). A hash lookup and an index lookup per
  // event: cheap whatever the number of watchers.
  [[nodiscard]] bool AnyWatcherMayWantLocked(const std::vector<mvccpb::Event>& events) const;
  // Calls fn(watcher) for each watcher that wants `event` (key watchers of its key first, then
  // range watchers), until fn returns false (mu_ held).
  template <typename Fn>
  void ForEachWatcherWantingLocked(const mvccpb::Event& event, Fn&& fn) const;
  void PushGapLocked(Revision through);  // inbox_mu_ held
  void ScheduleDispatchLocked();         // inbox_mu_ held
  void Dispatch();
  void DispatchRevisionLocked(const Published& item, Touched* touched);
  void GapLocked(Revision through, Touched* touched);
  void AnswerProgressWaitersLocked(Touched* touched);
  template <typename Fn>
  void ForEachWatcherLocked(Fn&& fn);

  const KvStore& store_;
  asio::strand<asio::any_io_executor> dispatch_;
  asio::any_io_executor reads_;
  const WatchHubOptions options_;

  // Watchers registered (AddLocked - RemoveLocked); written under mu_, read without it as a hint.
  std::atomic<std::size_t> watchers_{0};
  std::atomic<std::uint64_t> watchers_refused_{0};
  std::atomic<std::uint64_t> streams_cut_{0};

  // Inbox: filled on the driver strand, drained by Dispatch(). Guarded by inbox_mu_, which is
  // never held while taking mu_ (SkipUnwatchedRevision takes mu_ first, then inbox_mu_).
  std::mutex inbox_mu_;
  std::deque<Published> inbox_;
  std::size_t inbox_bytes_ = 0;
  Revision last_published_;  // Invariant: every revision up to here is in the inbox, dispatched, or
                             // covered by a gap.
  bool dispatch_scheduled_ = false;
  bool detached_ = false;

  // Guarded by mu_ (the hub lock).
  mutable std::mutex mu_;
  // Invariant: every round up to here is complete: each synced watcher has had every event of
  // revisions <= dispatched_ queued, each catching-up watcher has it in history or its buffer.
  Revision dispatched_;
  // Single-key watchers by key; range and from-key watchers grouped by range in an interval index.
  std::unordered_map<std::string, std::vector<std::shared_ptr<Watcher>>> key_watchers_;
  RangeWatcherIndex range_watchers_;
  std::unordered_set<std::shared_ptr<WatchSession>> progress_waiters_;
  WatchHubStats stats_;
};

}  // namespace epoch::server
