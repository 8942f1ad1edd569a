// KeepAliveStream: the server side of a keep-alive bidi stream (etcdserverpb.Lease/LeaseKeepAlive
// and epoch.v1.Lease/KeepAlive). Each request is handed to LeaseManager::KeepAlive (batched on the
// leader, forwarded from a follower) as soon as it is read; answers are written in the order they
// come back (clients match them by lease ID, as etcd's clientv3 does). A keep-alive that could not
// be decided (no leader, leader changed) gets no answer: clients send the next one on their own
// schedule (clientv3: every 500 ms until answered), which is how a stream rides out a failover.
// The stream ends with OK once the client half-closed and every answer is written. A client that
// sends keep-alives without reading the answers is cut off: past `queue_max` unwritten answers
// the stream stops reading and ends with RESOURCE_EXHAUSTED once the write in flight completes
// (LeaseManager counts it), so its memory stays bounded. Streams are admitted by the manager's
// keep-alive stream slots (--max-keepalive-streams, --max-keepalive-streams-per-address); one
// refused ends at once with RESOURCE_EXHAUSTED.
//
// Threading: gRPC calls the reactions on its threads; answers arrive on a read-pool thread, the
// driver's strand or a gRPC client thread (LeaseManager::KeepAlive). All state is guarded by one
// mutex that lives in a block shared with the answer callbacks, which see a null stream once OnDone
// ran (the reactor deletes itself there). The mutex is recursive in case gRPC runs a reaction
// inline from StartWrite or Finish.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>

#include "epoch/lease/lease_manager.h"
#include "epoch/rpc/async_rpc.h"
#include "epoch/stream_slots.h"

namespace epoch::server {

template <typename Request, typename Response>
class KeepAliveStream final : public rpc::BidiReactor<Request, Response> {
 public:
  // `id_of` reads the lease ID from a request; `to_response` builds the answer. `peer` is the
  // client's address (rpc::ClientPeers::Resolve of gRPC's peer()): the stream takes
  // one of the manager's keep-alive stream slots or ends at once with RESOURCE_EXHAUSTED.
  KeepAliveStream(LeaseManager& leases, std::size_t queue_max, std::string_view peer,
                  std::function<std::int64_t(const Request&)> id_of,
                  std::function<Response(const KeepAliveOutcome&)> to_response)
      : leases_(leases),
        queue_max_(queue_max),
        id_of_(std::move(id_of)),
        to_response_(std::move(to_response)),
        shared_(std::make_shared<Shared>()) {
    shared_->stream = this;
    StreamSlots::Refusal why = StreamSlots::Refusal::kNone;
    slot_ = leases_.keepalive_slots().Acquire(peer, &why);
    if (!slot_) {
      std::lock_guard lock(shared_->mu);
      reads_done_ = finishing_ = true;
      this->Finish(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          why == StreamSlots::Refusal::kTotal
              ? "epoch: too many keep-alive streams on this member (--max-keepalive-streams)"
              : "epoch: too many keep-alive streams from this address "
                "(--max-keepalive-streams-per-address)"));
      return;
    }
    this->StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    auto shared = shared_;
    if (!ok) {
      std::lock_guard lock(shared->mu);
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    const LeaseId id(id_of_(request_));
    {
      std::lock_guard lock(shared->mu);
      if (cut_) {
        reads_done_ = true;  // no further reads: the client's sends wait in flow control
        MaybeFinishLocked();
        return;
      }
      ++outstanding_;
    }
    leases_.KeepAlive(id, /*forwarded=*/false, [shared](const KeepAliveOutcome& out) {
      std::lock_guard lock(shared->mu);
      if (shared->stream) shared->stream->OnOutcomeLocked(out);
    });
    this->StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    auto shared = shared_;
    std::lock_guard lock(shared->mu);
    writing_ = false;
    if (!ok) {
      write_failed_ = true;
      queue_.clear();
    }
    MaybeWriteLocked();
    MaybeFinishLocked();
  }

  void OnDone() override {
    {
      auto shared = shared_;
      std::lock_guard lock(shared->mu);
      shared->stream = nullptr;
    }
    delete this;
  }

 private:
  struct Shared {
    std::recursive_mutex mu;
    KeepAliveStream* stream = nullptr;  // guarded by mu; null once OnDone ran
  };

  void OnOutcomeLocked(const KeepAliveOutcome& out) {
    --outstanding_;
    if (out.status.ok() && !write_failed_ && !finishing_ && !cut_) {
      if (queue_.size() >= queue_max_) {
        cut_ = true;
        queue_.clear();
        leases_.NoteKeepAliveStreamCut();
      } else {
        queue_.push_back(to_response_(out));
        MaybeWriteLocked();
      }
    }
    MaybeFinishLocked();
  }

  void MaybeWriteLocked() {
    if (writing_ || queue_.empty() || finishing_) return;
    writing_ = true;
    current_ = std::move(queue_.front());
    queue_.pop_front();
    this->StartWrite(&current_);
  }

  void MaybeFinishLocked() {
    if (finishing_ || writing_) return;
    if (cut_ && reads_done_) {
      finishing_ = true;
      this->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                "epoch: keep-alive answers not read (more than "
                                "--keepalive-queue-max queued)"));
      return;
    }
    const bool drained = reads_done_ && outstanding_ == 0 && queue_.empty();
    if (!drained && !write_failed_) return;
    // After a failed write the client is gone; its pending reads complete with ok = false.
    if (!reads_done_) return;
    finishing_ = true;
    this->Finish(grpc::Status::OK);
  }

  LeaseManager& leases_;
  const std::size_t queue_max_;
  const std::function<std::int64_t(const Request&)> id_of_;
  const std::function<Response(const KeepAliveOutcome&)> to_response_;
  std::shared_ptr<Shared> shared_;
  std::unique_ptr<StreamSlots::Slot> slot_;  // null: refused at open
  Request request_;                          // the read in progress (one at a time)

  // Guarded by shared_->mu.
  bool reads_done_ = false;
  bool writing_ = false;
  bool write_failed_ = false;
  bool finishing_ = false;
  bool cut_ = false;     // queue_max_ passed: no more reads, ends with RESOURCE_EXHAUSTED
  int outstanding_ = 0;  // keep-alives handed to the manager and not answered yet
  std::deque<Response> queue_;
  Response current_;  // the write in progress
};

}  // namespace epoch::server
