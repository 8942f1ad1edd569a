// The Watch-stream side of epoch_watch_load (watch_load.cc): watchers multiplexed on Watch
// streams driven by gRPC's asynchronous API on a few completion-queue threads, each event matched
// by revision to the writer's put. Header-only: one program uses it.
//
// Threads: QueuePool's threads run every WatchStream (a stream belongs to one queue, so its state
// is touched by one thread); Cancel() may be called from any thread. PutLog slots are written by
// the writer and read by the queue threads through atomics; Deliveries and Counters::stream_errors
// sit behind their mutexes, the other counters are atomics.
#pragma once

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "etcdserverpb/rpc.grpc.pb.h"
#include "histogram.h"

namespace epoch::bench::watch {

using Clock = std::chrono::steady_clock;
using etcdserverpb::WatchRequest;
using etcdserverpb::WatchResponse;

inline std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

inline double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One put of the writer. Written by the writer only: `measured`, then `ack_ns` (release), so a
// reader that sees ack_ns != 0 also sees `measured`; readers only count deliveries into it.
struct PutSlot {
  std::atomic<std::int64_t> ack_ns{0};  // steady-clock ns of the reply; 0: not acknowledged (yet)
  std::atomic<std::int64_t> delivered{0};
  bool measured = false;  // sent inside the window
};

// The writer's puts by revision: the writer is the only one writing, so its k-th put has
// revision base + k. Close() ends the matching (later puts are the throughput phase's).
class PutLog {
 public:
  PutLog(std::int64_t base_revision, std::int64_t capacity)
      : base_(base_revision), slots_(static_cast<std::size_t>(capacity)) {}
  PutSlot* Find(std::int64_t revision) {
    const std::int64_t i = revision - base_ - 1;
    if (closed_.load(std::memory_order_relaxed) || i < 0 || i >= std::ssize(slots_)) return nullptr;
    return &slots_[static_cast<std::size_t>(i)];
  }
  std::vector<PutSlot>& slots() { return slots_; }
  void Close() { closed_ = true; }

 private:
  const std::int64_t base_;
  std::vector<PutSlot> slots_;
  std::atomic<bool> closed_{false};
};

// Delivery latencies seen by one queue thread, signed: `late` holds receive - ack >= 0, `early`
// ack - receive for events that arrived before the reply; `pending` the events whose put was not
// yet acknowledged when they arrived (resolved once the writer is done).
struct Deliveries {
  std::mutex mu;
  LatencyHistogram late;                                   // guarded by mu
  LatencyHistogram early;                                  // guarded by mu
  std::vector<std::pair<PutSlot*, std::int64_t>> pending;  // guarded by mu

  void Record(const PutSlot& slot, std::int64_t receive_ns) {
    const std::int64_t d = receive_ns - slot.ack_ns.load(std::memory_order_acquire);
    if (!slot.measured) return;
    if (d >= 0) late.Record(static_cast<std::uint64_t>(d));
    if (d < 0) early.Record(static_cast<std::uint64_t>(-d));
  }
};

struct Counters {
  std::atomic<std::int64_t> created{0};
  std::atomic<std::int64_t> duplicates{0};  // an event at or below its watcher's last revision
  std::atomic<std::int64_t> wrong_key{0};   // an event for a key its watcher does not watch
  std::atomic<std::int64_t> untracked{0};   // events of puts other than the writer's
  std::atomic<std::int64_t> finished{0};    // streams whose Finish completed
  std::mutex mu;
  std::vector<std::string> stream_errors;  // guarded by mu

  void Error(std::string what) {
    std::lock_guard lock(mu);
    if (stream_errors.size() < 20) stream_errors.push_back(std::move(what));
  }
};

// What every stream shares: the keys, the writer's log, the counters.
struct Plan {
  bool prefix_mode = false;
  std::string key_prefix;                   // PREFIX
  std::string watched_prefix, watched_end;  // PREFIX/p/ and its range end (prefix mode)
  PutLog* log = nullptr;
  Counters* counters = nullptr;

  std::string WatchedKey(std::int64_t i) const { return fmt::format("{}/w/{:08d}", key_prefix, i); }
  bool KeyMatches(std::int64_t watcher, const std::string& key) const {
    return prefix_mode ? key.starts_with(watched_prefix) : key == WatchedKey(watcher);
  }
};

// One Watch stream of watchers first .. first + count - 1, driven by completion-queue events:
// the creates are written one after the other while a read is always outstanding.
class WatchStream {
 public:
  enum Op { kStart, kWrite, kRead, kFinish };
  struct Tag {
    WatchStream* stream;
    Op op;
  };

  WatchStream(etcdserverpb::Watch::Stub& stub, grpc::CompletionQueue* cq, const Plan& plan,
              std::int64_t first, std::int64_t count, Deliveries& deliveries)
      : plan_(plan),
        first_(first),
        count_(count),
        deliveries_(deliveries),
        last_revision_(static_cast<std::size_t>(count), 0) {
    for (int op = kStart; op <= kFinish; ++op) tags_[op] = Tag{this, static_cast<Op>(op)};
    rw_ = stub.PrepareAsyncWatch(&ctx_, cq);
    rw_->StartCall(&tags_[kStart]);
  }

  void Cancel() {
    canceling_ = true;
    ctx_.TryCancel();
  }

  void Handle(Op op, bool ok) {
    switch (op) {
      case kStart:
        if (!ok) return rw_->Finish(&status_, &tags_[kFinish]);
        rw_->Read(&resp_, &tags_[kRead]);
        return WriteNextCreate();
      case kWrite:
        if (ok) WriteNextCreate();  // else the read fails too, and Finish says why
        return;
      case kRead:
        if (!ok) return rw_->Finish(&status_, &tags_[kFinish]);
        OnResponse(NowNs());
        return rw_->Read(&resp_, &tags_[kRead]);
      case kFinish:
        if (!canceling_ || status_.error_code() != grpc::StatusCode::CANCELLED) {
          plan_.counters->Error(fmt::format("stream of watcher {}: code {}: {}", first_,
                                            static_cast<int>(status_.error_code()),
                                            status_.error_message()));
        }
        ++plan_.counters->finished;
        return;
    }
  }

 private:
  void WriteNextCreate() {
    if (sent_ == count_) return;
    auto* create = req_.mutable_create_request();
    create->set_key(plan_.prefix_mode ? plan_.watched_prefix : plan_.WatchedKey(first_ + sent_));
    if (plan_.prefix_mode) create->set_range_end(plan_.watched_end);
    ++sent_;
    rw_->Write(req_, &tags_[kWrite]);
  }

  // Created answers come in the order of the creates on a stream (etcd's contract, which
  // clientv3 relies on): the k-th is watcher first_ + k.
  void OnResponse(std::int64_t receive_ns) {
    if (resp_.canceled() || resp_.compact_revision() != 0) {
      plan_.counters->Error(fmt::format("watch {} canceled (compact revision {}): {}",
                                        resp_.watch_id(), resp_.compact_revision(),
                                        resp_.cancel_reason()));
      return;
    }
    if (resp_.created()) {
      index_of_[resp_.watch_id()] = static_cast<std::int32_t>(created_++);
      ++plan_.counters->created;
    }
    if (resp_.events_size() == 0) return;
    const auto it = index_of_.find(resp_.watch_id());
    if (it == index_of_.end()) {
      plan_.counters->wrong_key += resp_.events_size();
      return;
    }
    std::lock_guard lock(deliveries_.mu);
    for (const mvccpb::Event& ev : resp_.events()) OnEvent(it->second, ev, receive_ns);
  }

  void OnEvent(std::int32_t watcher, const mvccpb::Event& ev, std::int64_t receive_ns) {
    const std::int64_t revision = ev.kv().mod_revision();
    std::int64_t& last = last_revision_[static_cast<std::size_t>(watcher)];
    if (revision <= last) {
      ++plan_.counters->duplicates;
      return;
    }
    last = revision;
    if (!plan_.KeyMatches(first_ + watcher, ev.kv().key())) {
      ++plan_.counters->wrong_key;
      return;
    }
    PutSlot* slot = plan_.log->Find(revision);
    if (slot == nullptr) {
      ++plan_.counters->untracked;
      return;
    }
    slot->delivered.fetch_add(1, std::memory_order_relaxed);
    if (slot->ack_ns.load(std::memory_order_acquire) == 0) {
      deliveries_.pending.emplace_back(slot, receive_ns);
    } else {
      deliveries_.Record(*slot, receive_ns);
    }
  }

  const Plan& plan_;
  const std::int64_t first_;
  const std::int64_t count_;
  Deliveries& deliveries_;
  std::int64_t sent_ = 0;
  std::int64_t created_ = 0;
  std::unordered_map<std::int64_t, std::int32_t> index_of_;  // watch id -> watcher - first_
  std::vector<std::int64_t> last_revision_;                  // per watcher - first_
  std::atomic<bool> canceling_{false};
  Tag tags_[kFinish + 1];
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<WatchRequest, WatchResponse>> rw_;
  WatchRequest req_;    // the create being written
  WatchResponse resp_;  // the response being read
  grpc::Status status_;
};

// The completion-queue threads: each polls its queue and hands every event to its stream.
// Shutdown() (also on destruction) returns once every queued operation has completed.
class QueuePool {
 public:
  explicit QueuePool(int threads) : deliveries_(static_cast<std::size_t>(threads)) {
    for (int t = 0; t < threads; ++t) {
      queues_.push_back(std::make_unique<grpc::CompletionQueue>());
      threads_.emplace_back([cq = queues_.back().get()] {
        void* tag = nullptr;
        bool ok = false;
        while (cq->Next(&tag, &ok)) {
          auto* e = static_cast<WatchStream::Tag*>(tag);
          e->stream->Handle(e->op, ok);
        }
      });
    }
  }
  ~QueuePool() { Shutdown(); }
  void Shutdown() {
    if (threads_.empty()) return;
    for (auto& q : queues_) q->Shutdown();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  int size() const { return static_cast<int>(queues_.size()); }
  grpc::CompletionQueue* queue(int i) { return queues_[static_cast<std::size_t>(i)].get(); }
  std::vector<Deliveries>& deliveries() { return deliveries_; }

 private:
  std::vector<Deliveries> deliveries_;
  std::vector<std::unique_ptr<grpc::CompletionQueue>> queues_;
  std::vector<std::thread> threads_;
};

}  // namespace epoch::bench::watch
