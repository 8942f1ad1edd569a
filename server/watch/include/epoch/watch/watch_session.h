// WatchSession: the server side of one etcdserverpb.Watch stream, without gRPC — its watchers
// (IDs assigned from 0 per stream when a create request carries 0), the queue of responses to
// write, and the per-watcher delivery rules: created reply before any event and in request order,
// events in revision order and never split within a revision across responses (unless the
// watcher asked for `fragment`), filters and prev_kv, cancel, RequestProgress (answered with
// watch_id -1 once every watcher of the stream is synced, so header.revision promises that all
// events up to it were sent), the compacted-start cancel. WatchHub (watch_hub.h) feeds it.
//
// Who calls it: the gRPC reactor (watch_service.cc) — Handle() for each request read, the write
// callback of Transport, OnWriteDone() when that write completes, Close() when the stream ends;
// WatchHub (the *Locked methods, hub lock held). Unit tests drive it directly.
//
// Threading: thread-safe. One write is in flight at a time: Transport::start_write is called
// with no lock held, and the next one only after OnWriteDone(). A write is started with `more`
// set when another response is queued behind it, so the transport may hold it in its buffer and
// send a burst in one socket write; the last response of a burst is started without `more`,
// so nothing stays buffered once the queue is empty.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "epoch/watch/encoded_event.h"
#include "epoch/watch/watch_hub.h"
#include "epoch/watch/watch_spec.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::server {

enum class WatcherState {
  kSynced,      // gets live dispatch rounds
  kCatchingUp,  // reads history; live rounds go to its buffer
  kCanceled,
};

// One watcher. Created by its session, indexed by the hub; everything below `spec` is guarded by
// the owning session's mutex.
struct Watcher {
  Watcher(std::weak_ptr<WatchSession> owner, std::int64_t watch_id, WatchSpec watch_spec)
      : session(std::move(owner)), id(watch_id), spec(std::move(watch_spec)) {}

  const std::weak_ptr<WatchSession> session;
  const std::int64_t id;
  const WatchSpec spec;

  WatcherState state = WatcherState::kSynced;
  // Invariant: every wanted event of a revision below `next` is queued on the stream (or was
  // written); none at or above it is.
  Revision next;
  // Event bytes of this watcher queued or being written. Bounded (see WatchHubOptions).
  std::size_t queued_bytes = 0;
  bool history_read_running = false;  // at most one history read at a time
  // kCatchingUp: wanted live events of revisions above buffer_floor, in revision order.
  struct BufferedRevision {
    Revision revision;
    std::vector<EncodedEvent> events;
  };
  std::vector<BufferedRevision> buffer;
  Revision buffer_floor;
  std::size_t buffer_bytes = 0;
  bool sent_since_progress_tick = false;
};

class WatchSession : public std::enable_shared_from_this<WatchSession> {
 public:
  struct Transport {
    // Starts writing `response` (valid until OnWriteDone()). `more`: another response is queued
    // behind it and will be written next, so this one need not reach the socket before that one
    // (gRPC's buffer hint); false for the last response queued.
    std::function<void(const etcdserverpb::WatchResponse&, bool more)> start_write;
    // Fills cluster_id, member_id and raft_term of a header whose revision is already set.
    std::function<void(etcdserverpb::ResponseHeader*)> fill_header;
    // Whether the stream's caller may watch what `create` asks for (null: anyone). A refusal is
    // answered as a refused create, its message as the cancel reason (etcd's).
    std::function<Status(const etcdserverpb::WatchCreateRequest&)> authorize_create;
  };

  static std::shared_ptr<WatchSession> Create(std::shared_ptr<WatchHub> hub, Transport transport);
  ~WatchSession();
  WatchSession(const WatchSession&) = delete;
  WatchSession& operator=(const WatchSession&) = delete;

  // One request read from the stream, in stream order.
  // Returns false when the stream must end: its client left more than
  // WatchHubOptions::control_queue_max replies unread (kWatchControlQueueExceeded).
  [[nodiscard]] bool Handle(const etcdserverpb::WatchRequest& request);
  // The write started by Transport::start_write finished (`ok` false: the stream is broken).
  void OnWriteDone(bool ok);
  // The stream ended: cancels every watcher and drops queued responses. Idempotent.
  void Close();

  // For tests and metrics.
  [[nodiscard]] std::size_t queued_responses() const;
  [[nodiscard]] std::size_t watcher_count() const;
  // State of watcher `id`, or kCanceled when it does not exist.
  [[nodiscard]] WatcherState watcher_state(std::int64_t id) const;

  // --- for WatchHub: the hub lock is held; each takes the session mutex ---
  // Live events of one revision that `watcher` wants (in sub-revision order); `encoder` holds
  // the round's events serialized for every watcher that takes them.
  void DeliverLocked(const std::shared_ptr<Watcher>& watcher, Revision revision,
                     const std::vector<const mvccpb::Event*>& events, RoundEncoder& encoder);
  // Events up to `through` were not carried live: the watcher must read them from history.
  void GapLocked(const std::shared_ptr<Watcher>& watcher, Revision through);
  // Periodic progress for one watcher (see WatchHub::TickProgress).
  void ProgressTickLocked(const std::shared_ptr<Watcher>& watcher, Revision dispatched);
  // Answers a pending RequestProgress if every watcher is synced; true when none is pending.
  bool AnswerProgressLocked(Revision dispatched);
  // Starts the next write if none is in flight. Called with no lock held.
  void Flush();

 private:
  struct Outgoing {
    etcdserverpb::WatchResponse response;  // all but its events
    std::vector<EncodedEvent> events;      // put into `response` when its write starts
    std::shared_ptr<Watcher> watcher;      // set on events responses: whose bytes these are
    std::size_t event_bytes = 0;
    bool mergeable = false;  // an events response later revisions may be appended to
  };
  using Lock = std::unique_lock<std::mutex>;

  WatchSession(std::shared_ptr<WatchHub> hub, Transport transport);

  void HandleCreate(const etcdserverpb::WatchCreateRequest& request);
  void HandleCancel(std::int64_t watch_id);
  void HandleProgressRequest();

  etcdserverpb::WatchResponse NewResponse(std::int64_t watch_id, Revision header_revision) const;
  void QueueControlLocked(etcdserverpb::WatchResponse response);
  // Queues the events of one revision for `watcher` and advances its `next` past it.
  void QueueRevisionLocked(const std::shared_ptr<Watcher>& watcher, Revision revision,
                           std::vector<EncodedEvent> events, std::size_t bytes);
  void QueueFragmentsLocked(const std::shared_ptr<Watcher>& watcher, Revision revision,
                            std::vector<EncodedEvent> events);
  // Synced -> catching up: live events go to the buffer, history from `next` is read.
  void FallBehindLocked(const std::shared_ptr<Watcher>& watcher, Revision through);
  // History, not the live round, must bring this watcher everything through `through` (the live
  // copy would overflow, or lacks a prev_kv it asked for): synced watchers fall behind,
  // catching-up ones drop their buffer and move the floor.
  void LeaveToHistoryLocked(const std::shared_ptr<Watcher>& watcher, Revision through);
  void MaybeStartHistoryReadLocked(const std::shared_ptr<Watcher>& watcher);
  void ReadHistory(const std::shared_ptr<Watcher>& watcher);
  void ApplyHistoryLocked(const std::shared_ptr<Watcher>& watcher, const EventBatch& batch);
  void FinishCatchUpLocked(const std::shared_ptr<Watcher>& watcher, Revision dispatched);
  void CancelLocked(const std::shared_ptr<Watcher>& watcher);
  // AnswerProgressLocked with the session mutex held too.
  bool TryAnswerProgress(Revision dispatched);

  const std::shared_ptr<WatchHub> hub_;
  const Transport transport_;

  mutable std::mutex mu_;
  bool closed_ = false;
  std::map<std::int64_t, std::shared_ptr<Watcher>> watchers_;
  std::int64_t next_auto_id_ = 0;
  bool progress_requested_ = false;
  std::deque<Outgoing> queue_;
  std::size_t control_queued_ = 0;  // replies in queue_ that are not events
  bool writing_ = false;  // Invariant: at most one Transport::start_write without OnWriteDone.
  Outgoing in_flight_;    // the response being written (stable while writing_)
};

}  // namespace epoch::server
