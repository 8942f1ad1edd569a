#include "epoch/watch/watch_session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>

#include "epoch/etcd_errors.h"

namespace epoch::server {
namespace {

// A PUT that replaced a live version but carries no prev_kv: the applier left it out
// (KvStoreOptions::lazy_prev_values), so a watcher that wants it reads the revision from history.
bool LacksPrevValue(const std::vector<const mvccpb::Event*>& events) {
  for (const mvccpb::Event* e : events) {
    if (e->type() == mvccpb::Event::PUT && e->kv().version() > 1 && !e->has_prev_kv()) return true;
  }
  return false;
}

}  // namespace

std::shared_ptr<WatchSession> WatchSession::Create(std::shared_ptr<WatchHub> hub,
                                                   Transport transport) {
  return std::shared_ptr<WatchSession>(new WatchSession(std::move(hub), std::move(transport)));
}

WatchSession::WatchSession(std::shared_ptr<WatchHub> hub, Transport transport)
    : hub_(std::move(hub)), transport_(std::move(transport)) {}

WatchSession::~WatchSession() = default;

bool WatchSession::Handle(const etcdserverpb::WatchRequest& request) {
  switch (request.request_union_case()) {
    case etcdserverpb::WatchRequest::kCreateRequest: HandleCreate(request.create_request()); break;
    case etcdserverpb::WatchRequest::kCancelRequest:
      HandleCancel(request.cancel_request().watch_id());
      break;
    case etcdserverpb::WatchRequest::kProgressRequest: HandleProgressRequest(); break;
    default:
      // etcd ignores a request it does not understand and keeps the stream.
      break;
  }
  Flush();
  std::lock_guard lock(mu_);
  if (closed_ || control_queued_ <= hub_->options().control_queue_max) return true;
  hub_->NoteStreamCut();
  return false;
}

etcdserverpb::WatchResponse WatchSession::NewResponse(std::int64_t watch_id,
                                                      Revision header_revision) const {
  etcdserverpb::WatchResponse response;
  response.set_watch_id(watch_id);
  response.mutable_header()->set_revision(header_revision.value());
  if (transport_.fill_header) transport_.fill_header(response.mutable_header());
  return response;
}

void WatchSession::HandleCreate(const etcdserverpb::WatchCreateRequest& request) {
  Result<WatchSpec> spec = ParseWatchCreate(request);
  // Checked before any lock: the check reads the auth state.
  if (spec.ok() && transport_.authorize_create) {
    Status allowed = transport_.authorize_create(request);
    if (!allowed.ok()) spec = allowed;
  }
  std::unique_lock hub_lock = hub_->Lock();
  std::lock_guard lock(mu_);
  if (closed_) return;
  const Revision dispatched = hub_->DispatchedLocked();
  // A refused create still gets its created reply (canceled, ID -1, etcd's reason), in order.
  auto refuse = [&](std::string_view reason) {
    etcdserverpb::WatchResponse response = NewResponse(-1, dispatched);
    response.set_created(true);
    response.set_canceled(true);
    response.set_cancel_reason(std::string(reason));
    QueueControlLocked(std::move(response));
  };
  if (!spec.ok()) return refuse(spec.status().message());
  if (watchers_.size() >= hub_->options().watchers_per_stream_max) {
    hub_->NoteWatcherRefused();
    return refuse(kWatchersPerStreamExceeded);
  }
  std::int64_t id = spec->requested_id;
  if (id != 0) {
    if (watchers_.contains(id)) return refuse(kWatcherDuplicateId);
  } else {
    while (watchers_.contains(next_auto_id_)) ++next_auto_id_;
    id = next_auto_id_++;
  }
  auto watcher = std::make_shared<Watcher>(weak_from_this(), id, std::move(*spec));
  watchers_.emplace(id, watcher);

  etcdserverpb::WatchResponse created = NewResponse(id, dispatched);
  created.set_created(true);
  QueueControlLocked(std::move(created));

  const Revision start = watcher->spec.start_revision;
  if (start == Revision(0) || start > dispatched) {
    // Live from the next round (or from a future start revision).
    watcher->state = WatcherState::kSynced;
    watcher->next = start == Revision(0) ? dispatched.Next() : start;
  } else {
    // History [start, dispatched] from the store; rounds after `dispatched` into the buffer.
    watcher->state = WatcherState::kCatchingUp;
    watcher->next = start;
    watcher->buffer_floor = dispatched;
  }
  hub_->AddLocked(watcher);
  MaybeStartHistoryReadLocked(watcher);
}

void WatchSession::HandleCancel(std::int64_t watch_id) {
  std::unique_lock hub_lock = hub_->Lock();
  std::lock_guard lock(mu_);
  auto it = watchers_.find(watch_id);
  // etcd answers a cancel of an unknown ID with nothing.
  if (closed_ || it == watchers_.end()) return;
  std::shared_ptr<Watcher> watcher = it->second;
  CancelLocked(watcher);
  etcdserverpb::WatchResponse response = NewResponse(watch_id, hub_->DispatchedLocked());
  response.set_canceled(true);
  QueueControlLocked(std::move(response));
  if (progress_requested_ && TryAnswerProgress(hub_->DispatchedLocked())) {
    hub_->StopWaitingProgressLocked(shared_from_this());
  }
}

void WatchSession::HandleProgressRequest() {
  std::unique_lock hub_lock = hub_->Lock();
  std::lock_guard lock(mu_);
  if (closed_) return;
  progress_requested_ = true;
  if (!TryAnswerProgress(hub_->DispatchedLocked())) hub_->WaitProgressLocked(shared_from_this());
}

bool WatchSession::AnswerProgressLocked(Revision dispatched) {
  std::lock_guard lock(mu_);
  return TryAnswerProgress(dispatched);
}

bool WatchSession::TryAnswerProgress(Revision dispatched) {
  if (!progress_requested_ || closed_) {
    progress_requested_ = false;
    return true;
  }
  // A progress response promises every event up to its revision was sent on this stream: only
  // when every watcher is synced and none starts in the future (etcd's progressIfSync).
  for (const auto& [id, w] : watchers_) {
    if (w->state != WatcherState::kSynced || w->next > dispatched.Next()) return false;
  }
  progress_requested_ = false;
  QueueControlLocked(NewResponse(-1, dispatched));
  return true;
}

void WatchSession::QueueControlLocked(etcdserverpb::WatchResponse response) {
  Outgoing out;
  out.response = std::move(response);
  queue_.push_back(std::move(out));
  ++control_queued_;
}

void WatchSession::CancelLocked(const std::shared_ptr<Watcher>& ref) {
  // `ref` may be the pointer stored in watchers_ (Close passes begin()->second): keep our own
  // reference before erasing it, or the hub would be handed a destroyed shared_ptr.
  const std::shared_ptr<Watcher> watcher = ref;
  watcher->state = WatcherState::kCanceled;
  watcher->buffer.clear();
  watcher->buffer_bytes = 0;
  watchers_.erase(watcher->id);
  hub_->RemoveLocked(watcher);
}

void WatchSession::Close() {
  std::unique_lock hub_lock = hub_->Lock();
  std::lock_guard lock(mu_);
  if (closed_) return;
  closed_ = true;
  while (!watchers_.empty()) CancelLocked(watchers_.begin()->second);
  queue_.clear();
  control_queued_ = 0;
  progress_requested_ = false;
  hub_->StopWaitingProgressLocked(shared_from_this());
}

// --- Live delivery (hub lock held) ---------------------------------------------------------

void WatchSession::DeliverLocked(const std::shared_ptr<Watcher>& watcher, Revision revision,
                                 const std::vector<const mvccpb::Event*>& events,
                                 RoundEncoder& encoder) {
  std::lock_guard lock(mu_);
  if (closed_ || watcher->state == WatcherState::kCanceled) return;
  if (watcher->state == WatcherState::kSynced && revision < watcher->next) return;
  if (watcher->state == WatcherState::kCatchingUp && revision <= watcher->buffer_floor) return;
  if (watcher->spec.prev_kv && LacksPrevValue(events)) {
    // History has it (ReadEvents fills prev_kv from the key's previous revision).
    LeaveToHistoryLocked(watcher, revision);
    return;
  }
  std::vector<EncodedEvent> copy;
  copy.reserve(events.size());
  for (const mvccpb::Event* e : events) copy.push_back(encoder.Encode(e, watcher->spec.prev_kv));
  const std::size_t bytes = EncodedBytes(copy);
  const std::size_t max_bytes = hub_->options().watcher_pending_bytes_max;

  if (watcher->state == WatcherState::kSynced) {
    if (watcher->queued_bytes + bytes > max_bytes) {
      // The stream does not drain fast enough: stop queuing, catch up from history later.
      LeaveToHistoryLocked(watcher, revision);
      return;
    }
    QueueRevisionLocked(watcher, revision, std::move(copy), bytes);
    return;
  }
  // Catching up: keep the live revision until history has reached the buffer floor.
  if (watcher->buffer_bytes + bytes > max_bytes) {
    // Too much to hold: history will have to cover this revision too.
    LeaveToHistoryLocked(watcher, revision);
    return;
  }
  watcher->buffer_bytes += bytes;
  watcher->buffer.push_back({revision, std::move(copy)});
}

void WatchSession::LeaveToHistoryLocked(const std::shared_ptr<Watcher>& watcher, Revision through) {
  if (watcher->state == WatcherState::kSynced) {
    FallBehindLocked(watcher, through);
    return;
  }
  // Catching up already: drop what is buffered; the history read now goes on through `through`.
  watcher->buffer.clear();
  watcher->buffer_bytes = 0;
  watcher->buffer_floor = through;
}

void WatchSession::GapLocked(const std::shared_ptr<Watcher>& watcher, Revision through) {
  std::lock_guard lock(mu_);
  if (closed_) return;
  switch (watcher->state) {
    case WatcherState::kCanceled: return;
    case WatcherState::kSynced:
      if (watcher->next > through) return;  // starts after the gap
      FallBehindLocked(watcher, through);
      return;
    case WatcherState::kCatchingUp:
      watcher->buffer.clear();
      watcher->buffer_bytes = 0;
      watcher->buffer_floor = std::max(watcher->buffer_floor, through);
      return;
  }
}

void WatchSession::FallBehindLocked(const std::shared_ptr<Watcher>& watcher, Revision through) {
  hub_->CountFallbackLocked();
  watcher->state = WatcherState::kCatchingUp;
  watcher->buffer.clear();
  watcher->buffer_bytes = 0;
  watcher->buffer_floor = through;
  MaybeStartHistoryReadLocked(watcher);
}

void WatchSession::ProgressTickLocked(const std::shared_ptr<Watcher>& watcher,
                                      Revision dispatched) {
  std::lock_guard lock(mu_);
  if (closed_ || watcher->state == WatcherState::kCanceled) return;
  const bool idle = !watcher->sent_since_progress_tick;
  watcher->sent_since_progress_tick = false;
  // Only a synced watcher whose start is not in the future can promise "nothing up to here".
  if (!idle || watcher->state != WatcherState::kSynced || watcher->next > dispatched.Next()) {
    return;
  }
  QueueControlLocked(NewResponse(watcher->id, dispatched));
}

// --- Building events responses (session mutex held) -------------------------------------------

void WatchSession::QueueRevisionLocked(const std::shared_ptr<Watcher>& watcher, Revision revision,
                                       std::vector<EncodedEvent> events, std::size_t bytes) {
  watcher->next = std::max(watcher->next, revision.Next());
  if (events.empty()) return;
  watcher->queued_bytes += bytes;
  watcher->sent_since_progress_tick = true;
  const std::size_t max_response = hub_->options().response_bytes_max;
  if (bytes > max_response && events.size() > 1 && watcher->spec.fragment) {
    return QueueFragmentsLocked(watcher, revision, std::move(events));
  }
  // Append to this watcher's unsent response when it is last in the queue: responses then
  // carry several whole revisions, still in order.
  if (!queue_.empty()) {
    Outgoing& back = queue_.back();
    if (back.mergeable && back.watcher == watcher && back.event_bytes + bytes <= max_response) {
      for (EncodedEvent& e : events) back.events.push_back(std::move(e));
      back.response.mutable_header()->set_revision(revision.value());
      back.event_bytes += bytes;
      return;
    }
  }
  Outgoing out;
  out.response = NewResponse(watcher->id, revision);
  out.events = std::move(events);
  out.watcher = watcher;
  out.event_bytes = bytes;
  out.mergeable = true;
  queue_.push_back(std::move(out));
}

void WatchSession::QueueFragmentsLocked(const std::shared_ptr<Watcher>& watcher, Revision revision,
                                        std::vector<EncodedEvent> events) {
  // etcd's sendFragments: as many events per fragment as fit (at least one); every fragment but
  // the last has fragment=true; the client joins them.
  const std::size_t max_response = hub_->options().response_bytes_max;
  Outgoing out;
  for (EncodedEvent& event : events) {
    const std::size_t size = event->size();
    if (!out.events.empty() && out.event_bytes + size > max_response) {
      out.response.set_fragment(true);
      queue_.push_back(std::move(out));
      out = Outgoing{};
    }
    if (out.events.empty()) {
      out.response = NewResponse(watcher->id, revision);
      out.watcher = watcher;
    }
    out.events.push_back(std::move(event));
    out.event_bytes += size;
  }
  queue_.push_back(std::move(out));
}

// --- Catching up from history ---------------------------------------------------------------

void WatchSession::MaybeStartHistoryReadLocked(const std::shared_ptr<Watcher>& watcher) {
  if (closed_ || watcher->state != WatcherState::kCatchingUp || watcher->history_read_running) {
    return;
  }
  // Pace history by the stream: read more only once half the allowance has been written.
  if (watcher->queued_bytes > hub_->options().watcher_pending_bytes_max / 2) return;
  watcher->history_read_running = true;
  asio::post(hub_->read_executor(),
             [self = shared_from_this(), watcher] { self->ReadHistory(watcher); });
}

void WatchSession::ReadHistory(const std::shared_ptr<Watcher>& watcher) {
  Revision from;
  {
    std::lock_guard lock(mu_);
    if (closed_ || watcher->state != WatcherState::kCatchingUp) {
      watcher->history_read_running = false;
      return;
    }
    from = watcher->next;
  }
  Result<EventBatch> batch =
      hub_->store().ReadEvents(from, hub_->options().history_batch_events, watcher->spec.prev_kv);
  {
    std::unique_lock hub_lock = hub_->Lock();
    std::lock_guard lock(mu_);
    hub_->CountHistoryReadLocked();
    watcher->history_read_running = false;
    if (closed_ || watcher->state != WatcherState::kCatchingUp) return;
    // Only this read moves `next` while the watcher catches up.
    assert(watcher->next == from);
    if (!batch.ok()) {
      etcdserverpb::WatchResponse response = NewResponse(watcher->id, hub_->DispatchedLocked());
      response.set_canceled(true);
      if (batch.status().message() == etcd_errors::kCompacted.message) {
        // etcd: compact_revision set and canceled; the client surfaces ErrCompacted.
        response.set_compact_revision(
            std::max<std::int64_t>(hub_->store().CompactRevision().value(), 1));
      } else {
        spdlog::error("watch {}: reading history from revision {}: {}", watcher->id, from,
                      batch.status().ToString());
        response.set_cancel_reason(batch.status().message());
      }
      CancelLocked(watcher);
      QueueControlLocked(std::move(response));
    } else {
      ApplyHistoryLocked(watcher, *batch);
      if (watcher->next > watcher->buffer_floor) {
        FinishCatchUpLocked(watcher, hub_->DispatchedLocked());
      } else {
        MaybeStartHistoryReadLocked(watcher);
      }
    }
    if (progress_requested_ && TryAnswerProgress(hub_->DispatchedLocked())) {
      hub_->StopWaitingProgressLocked(shared_from_this());
    }
  }
  Flush();
}

void WatchSession::ApplyHistoryLocked(const std::shared_ptr<Watcher>& watcher,
                                      const EventBatch& batch) {
  std::size_t i = 0;
  while (i < batch.events.size()) {
    const Revision revision = batch.revisions[i];
    std::vector<EncodedEvent> events;
    for (; i < batch.events.size() && batch.revisions[i] == revision; ++i) {
      if (revision >= watcher->next && watcher->spec.Wants(batch.events[i])) {
        events.push_back(EncodeEvent(batch.events[i], watcher->spec.prev_kv));
      }
    }
    if (revision < watcher->next) continue;
    const std::size_t bytes = EncodedBytes(events);
    QueueRevisionLocked(watcher, revision, std::move(events), bytes);
  }
  // Revisions without wanted events are covered too. Never move `next` back (a future start).
  watcher->next = std::max(watcher->next, batch.next);
}

void WatchSession::FinishCatchUpLocked(const std::shared_ptr<Watcher>& watcher,
                                       Revision dispatched) {
  // History covered everything below `next` > buffer_floor; the buffer holds every wanted live
  // event above the floor. Skip what history already queued, then go live.
  std::vector<Watcher::BufferedRevision> buffer = std::move(watcher->buffer);
  watcher->buffer.clear();
  watcher->buffer_bytes = 0;
  for (Watcher::BufferedRevision& b : buffer) {
    if (b.revision < watcher->next) continue;
    const std::size_t bytes = EncodedBytes(b.events);
    QueueRevisionLocked(watcher, b.revision, std::move(b.events), bytes);
  }
  watcher->next = std::max(watcher->next, dispatched.Next());
  watcher->state = WatcherState::kSynced;
}

// --- Writing --------------------------------------------------------------------------------

void WatchSession::Flush() {
  std::unique_lock lock(mu_);
  if (closed_ || writing_ || queue_.empty()) return;
  writing_ = true;
  in_flight_ = std::move(queue_.front());
  queue_.pop_front();
  if (!in_flight_.watcher && control_queued_ > 0) --control_queued_;
  const etcdserverpb::WatchResponse* response = &in_flight_.response;
  // Only Flush and Close take responses off the queue: a response written with `more` is always
  // followed by another write (or by the end of the stream, which flushes gRPC's buffer).
  const bool more = !queue_.empty();
  lock.unlock();
  // in_flight_ is this writer's until OnWriteDone: the events go in without the lock.
  AppendEncodedEvents(in_flight_.events, &in_flight_.response);
  transport_.start_write(*response, more);
}

void WatchSession::OnWriteDone(bool ok) {
  {
    std::lock_guard lock(mu_);
    writing_ = false;
    std::shared_ptr<Watcher> watcher = std::move(in_flight_.watcher);
    if (watcher) {
      watcher->queued_bytes -= std::min(watcher->queued_bytes, in_flight_.event_bytes);
      MaybeStartHistoryReadLocked(watcher);
    }
    in_flight_ = Outgoing{};
    if (!ok) return;
  }
  Flush();
}

std::size_t WatchSession::queued_responses() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

std::size_t WatchSession::watcher_count() const {
  std::lock_guard lock(mu_);
  return watchers_.size();
}

WatcherState WatchSession::watcher_state(std::int64_t id) const {
  std::lock_guard lock(mu_);
  auto it = watchers_.find(id);
  return it == watchers_.end() ? WatcherState::kCanceled : it->second->state;
}

}  // namespace epoch::server
