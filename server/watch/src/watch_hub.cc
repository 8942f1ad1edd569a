#include "epoch/watch/watch_hub.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "epoch/watch/watch_session.h"

namespace epoch::server {
namespace {

std::size_t EventBytes(const std::vector<mvccpb::Event>& events) {
  std::size_t bytes = 0;
  for (const mvccpb::Event& e : events) bytes += e.ByteSizeLong();
  return bytes;
}

// True if `watcher` was in `list`.
bool EraseWatcher(std::vector<std::shared_ptr<Watcher>>* list,
                  const std::shared_ptr<Watcher>& watcher) {
  auto it = std::find(list->begin(), list->end(), watcher);
  if (it == list->end()) return false;
  std::swap(*it, list->back());
  list->pop_back();
  return true;
}

}  // namespace

std::shared_ptr<WatchHub> WatchHub::Create(const KvStore& store, asio::any_io_executor dispatch,
                                           asio::any_io_executor reads, WatchHubOptions options) {
  return std::shared_ptr<WatchHub>(
      new WatchHub(store, std::move(dispatch), std::move(reads), options));
}

WatchHub::WatchHub(const KvStore& store, asio::any_io_executor dispatch,
                   asio::any_io_executor reads, WatchHubOptions options)
    : store_(store),
      dispatch_(asio::make_strand(std::move(dispatch))),
      reads_(std::move(reads)),
      options_(options),
      last_published_(store.CurrentRevision()),
      dispatched_(store.CurrentRevision()) {}

void WatchHub::Publish(Revision revision, const std::vector<mvccpb::Event>& events) {
  if (events.empty()) return;
  if (SkipUnwatchedRevision(revision, events)) return;
  std::lock_guard lock(inbox_mu_);
  if (detached_) return;
  if (revision <= last_published_) {
    spdlog::error("watch hub: revision {} published after {}; ignored", revision, last_published_);
    return;
  }
  // Revisions without a publish in between (a store replaced under us): history has them.
  if (revision != last_published_.Next()) PushGapLocked(revision - 1);
  last_published_ = revision;
  const std::size_t bytes = EventBytes(events);
  if (inbox_bytes_ + bytes > options_.inbox_bytes_max) {
    PushGapLocked(revision);
  } else {
    inbox_.push_back({revision, std::make_shared<const std::vector<mvccpb::Event>>(events)});
    inbox_bytes_ += bytes;
  }
  ScheduleDispatchLocked();
}

// With nothing queued, a revision no watcher wants has nobody to go to: it is marked dispatched
// at once instead of being copied into the inbox and handed to the dispatch thread (a copy of
// every event with both values, and a thread wake-up per applied batch, for nothing). That is
// what dispatching it would do: DeliverLocked only ever gets the events a watcher wants. A
// watcher added later reads these revisions from history, as it reads any revision up to
// dispatched_. With watchers registered this runs on the applier only if the hub lock is free
// (a dispatch round holds it, and then the inbox is not empty anyway), so the applier never
// waits for a dispatch round.
bool WatchHub::SkipUnwatchedRevision(Revision revision, const std::vector<mvccpb::Event>& events) {
  std::unique_lock hub(mu_, std::defer_lock);  // mu_ before inbox_mu_: never the other way round
  if (watchers_.load() == 0) {
    hub.lock();
  } else if (!hub.try_lock()) {
    return false;
  }
  std::lock_guard lock(inbox_mu_);
  if (detached_ || !progress_waiters_.empty() || !inbox_.empty() || dispatch_scheduled_ ||
      revision <= last_published_) {
    return false;
  }
  if (watchers_.load() != 0 && AnyWatcherMayWantLocked(events)) return false;
  last_published_ = revision;
  dispatched_ = revision;
  ++stats_.unwatched;
  return true;
}

template <typename Fn>
void WatchHub::ForEachWatcherWantingLocked(const mvccpb::Event& event, Fn&& fn) const {
  auto it = key_watchers_.find(event.kv().key());
  if (it != key_watchers_.end()) {
    for (const auto& w : it->second) {
      if (w->spec.Wants(event) && !fn(w)) return;
    }
  }
  // The index found the range: only the filters are left to check.
  range_watchers_.ForEachGroupCovering(event.kv().key(), [&](const RangeWatcherIndex::Group& g) {
    if (!g.AnyWants(event.type())) return true;
    for (const auto& w : g.watchers) {
      if (w->spec.WantsType(event.type()) && !fn(w)) return false;
    }
    return true;
  });
}

bool WatchHub::AnyWatcherMayWantLocked(const std::vector<mvccpb::Event>& events) const {
  for (const mvccpb::Event& event : events) {
    auto it = key_watchers_.find(event.kv().key());
    if (it != key_watchers_.end()) {
      for (const auto& w : it->second) {
        if (w->spec.WantsType(event.type())) return true;
      }
    }
    if (range_watchers_.AnyWants(event)) return true;
  }
  return false;
}

void WatchHub::Resync() {
  std::lock_guard lock(inbox_mu_);
  if (detached_) return;
  const Revision current = store_.CurrentRevision();
  if (current <= last_published_) return;
  last_published_ = current;
  PushGapLocked(current);
  ScheduleDispatchLocked();
}

void WatchHub::PushGapLocked(Revision through) {
  // Consecutive gaps merge; a gap's events are not held in memory.
  if (!inbox_.empty() && inbox_.back().events == nullptr) {
    inbox_.back().revision = through;
  } else {
    inbox_.push_back({through, nullptr});
  }
}

void WatchHub::ScheduleDispatchLocked() {
  if (dispatch_scheduled_) return;
  dispatch_scheduled_ = true;
  asio::post(dispatch_, [self = shared_from_this()] { self->Dispatch(); });
}

void WatchHub::Detach() {
  std::lock_guard lock(inbox_mu_);
  detached_ = true;
  inbox_.clear();
  inbox_bytes_ = 0;
}

void WatchHub::Dispatch() {
  std::deque<Published> items;
  {
    std::lock_guard lock(inbox_mu_);
    items.swap(inbox_);
    inbox_bytes_ = 0;
    dispatch_scheduled_ = false;
  }
  Touched touched;
  {
    std::lock_guard lock(mu_);
    for (const Published& item : items) {
      if (item.events == nullptr) {
        GapLocked(item.revision, &touched);
      } else {
        DispatchRevisionLocked(item, &touched);
      }
      dispatched_ = std::max(dispatched_, item.revision);
      ++stats_.rounds;
    }
    AnswerProgressWaitersLocked(&touched);
  }
  for (const auto& session : touched) session->Flush();
}

void WatchHub::DispatchRevisionLocked(const Published& item, Touched* touched) {
  // Consecutive watchers mostly share a session (a stream holds up to 1000 of them): the touched
  // set is only probed when the session changes.
  const WatchSession* last_session = nullptr;
  // Each event is serialized once for all the watchers that take it.
  RoundEncoder encoder(*item.events);
  auto deliver = [&](const std::shared_ptr<Watcher>& watcher,
                     const std::vector<const mvccpb::Event*>& events) {
    std::shared_ptr<WatchSession> session = watcher->session.lock();
    if (!session) return;
    session->DeliverLocked(watcher, item.revision, events, encoder);
    if (session.get() == last_session) return;
    last_session = session.get();
    touched->insert(std::move(session));
  };
  if (item.events->size() == 1) {
    // One event (a put or a single delete, the common case): each wanting watcher takes it as
    // is, with no per-watcher list to build.
    const std::vector<const mvccpb::Event*> events{&item.events->front()};
    ForEachWatcherWantingLocked(*events.front(), [&](const std::shared_ptr<Watcher>& w) {
      deliver(w, events);
      return true;
    });
    return;
  }
  // Per watcher, the events of this revision it wants, in sub-revision order.
  std::unordered_map<std::shared_ptr<Watcher>, std::vector<const mvccpb::Event*>> wanted;
  for (const mvccpb::Event& event : *item.events) {
    ForEachWatcherWantingLocked(event, [&](const std::shared_ptr<Watcher>& w) {
      wanted[w].push_back(&event);
      return true;
    });
  }
  for (const auto& [watcher, events] : wanted) deliver(watcher, events);
}

template <typename Fn>
void WatchHub::ForEachWatcherLocked(Fn&& fn) {
  for (const auto& [key, list] : key_watchers_) {
    for (const auto& w : list) fn(w);
  }
  range_watchers_.ForEachWatcher(fn);
}

void WatchHub::GapLocked(Revision through, Touched* touched) {
  ++stats_.gaps;
  spdlog::warn("watch hub: events up to revision {} not carried live; watchers read history",
               through);
  ForEachWatcherLocked([&](const std::shared_ptr<Watcher>& w) {
    std::shared_ptr<WatchSession> session = w->session.lock();
    if (!session) return;
    session->GapLocked(w, through);
    touched->insert(std::move(session));
  });
}

void WatchHub::AnswerProgressWaitersLocked(Touched* touched) {
  for (auto it = progress_waiters_.begin(); it != progress_waiters_.end();) {
    if ((*it)->AnswerProgressLocked(dispatched_)) {
      touched->insert(*it);
      it = progress_waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

void WatchHub::TickProgress() {
  Touched touched;
  {
    std::lock_guard lock(mu_);
    ForEachWatcherLocked([&](const std::shared_ptr<Watcher>& w) {
      if (!w->spec.progress_notify) return;
      std::shared_ptr<WatchSession> session = w->session.lock();
      if (!session) return;
      session->ProgressTickLocked(w, dispatched_);
      touched.insert(std::move(session));
    });
  }
  for (const auto& session : touched) session->Flush();
}

Revision WatchHub::dispatched_revision() const {
  std::lock_guard lock(mu_);
  return dispatched_;
}

WatchHubStats WatchHub::stats() const {
  std::lock_guard lock(mu_);
  WatchHubStats s = stats_;
  s.watchers = watchers_.load();
  s.watchers_refused = watchers_refused_.load();
  s.streams_cut = streams_cut_.load();
  return s;
}

void WatchHub::AddLocked(const std::shared_ptr<Watcher>& watcher) {
  watchers_.fetch_add(1);
  // The applier puts previous values into PUT events again from its next batch; events applied
  // before that reach this watcher without them and make it read history (DeliverLocked).
  if (watcher->spec.prev_kv) store_.AddPrevValueReaders(1);
  if (watcher->spec.single_key()) {
    key_watchers_[watcher->spec.key].push_back(watcher);
  } else {
    range_watchers_.Add(watcher);
  }
}

void WatchHub::RemoveLocked(const std::shared_ptr<Watcher>& watcher) {
  auto erased = [&] {
    watchers_.fetch_sub(1);
    if (watcher->spec.prev_kv) store_.AddPrevValueReaders(-1);
  };
  if (!watcher->spec.single_key()) {
    if (range_watchers_.Remove(watcher)) erased();
    return;
  }
  auto it = key_watchers_.find(watcher->spec.key);
  if (it == key_watchers_.end()) return;
  if (EraseWatcher(&it->second, watcher)) erased();
  if (it->second.empty()) key_watchers_.erase(it);
}

void WatchHub::WaitProgressLocked(const std::shared_ptr<WatchSession>& session) {
  progress_waiters_.insert(session);
}

void WatchHub::StopWaitingProgressLocked(const std::shared_ptr<WatchSession>& session) {
  progress_waiters_.erase(session);
}

}  // namespace epoch::server
