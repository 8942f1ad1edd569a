#include "election_observe.h"

#include <fmt/format.h>

#include "epoch/api/election_service.h"
#include "epoch/rpc/grpc_util.h"

namespace epoch::server {
namespace {

// Batches of feed items processed per read-pool task before yielding the thread.
constexpr int kRoundsPerTask = 64;

}  // namespace

ObserveStream* ObserveStream::Start(NodeContext& node, RecipeEventFeed& feed, std::string prefix) {
  std::shared_ptr<ObserveStream> stream(new ObserveStream(node, feed, std::move(prefix)));
  stream->self_ = stream;
  std::weak_ptr<ObserveStream> weak = stream;
  // Subscribe before the first read: every change after it arrives as an event.
  stream->subscription_ = feed.Subscribe(
      stream->prefix_,
      [weak](Revision revision, const std::vector<mvccpb::Event>& events, bool resync) {
        if (auto s = weak.lock()) s->OnEvents(revision, events, resync);
      });
  recipe::LinearizableRange(node, recipe::FirstCreate(stream->prefix_),
                            [weak](const grpc::Status& s, const etcdserverpb::RangeResponse& r) {
                              if (auto self = weak.lock()) self->OnInitial(s, r);
                            });
  return stream.get();
}

ObserveStream::ObserveStream(NodeContext& node, RecipeEventFeed& feed, std::string prefix)
    : node_(node), feed_(feed), prefix_(std::move(prefix)) {}

void ObserveStream::OnEvents(Revision revision, const std::vector<mvccpb::Event>& events,
                             bool resync) {
  std::lock_guard lock(mu_);
  if (finishing_) return;
  pending_.push_back(Item{revision, events, resync});
  if (initialized_) SchedulePendingLocked();
}

void ObserveStream::OnInitial(const grpc::Status& status,
                              const etcdserverpb::RangeResponse& range) {
  if (!status.ok()) return End(status);
  std::vector<v3electionpb::LeaderResponse> outs;
  // Processor-owned state: nothing else touches it before initialized_ is set.
  base_ = Revision(range.header().revision());
  if (range.kvs_size() > 0) {
    leader_key_ = range.kvs(0).key();
    Emit(range.header(), range.kvs(0), &outs);
  }
  std::lock_guard lock(mu_);
  initialized_ = true;
  Deliver(std::move(outs));
  if (!pending_.empty()) SchedulePendingLocked();
}

void ObserveStream::SchedulePendingLocked() {
  if (processing_ || finishing_) return;
  processing_ = true;
  asio::post(node_.read_pool(), [self = shared_from_this()] { self->ProcessPending(); });
}

void ObserveStream::ProcessPending() {
  for (int round = 0; round < kRoundsPerTask; ++round) {
    std::deque<Item> items;
    {
      std::lock_guard lock(mu_);
      if (pending_.empty() || finishing_) {
        processing_ = false;
        return;
      }
      items.swap(pending_);
    }
    std::vector<v3electionpb::LeaderResponse> outs;
    grpc::Status failed;
    for (const Item& item : items) {
      failed = ProcessItem(item, &outs);
      if (!failed.ok()) break;
    }
    if (!failed.ok()) {
      {
        std::lock_guard lock(mu_);
        processing_ = false;
      }
      return End(failed);
    }
    std::lock_guard lock(mu_);
    Deliver(std::move(outs));
  }
  // More is queued: yield the read-pool thread and continue in a new task.
  std::lock_guard lock(mu_);
  processing_ = false;
  SchedulePendingLocked();
}

grpc::Status ObserveStream::ProcessItem(const Item& item,
                                        std::vector<v3electionpb::LeaderResponse>* outs) {
  if (item.resync) return RereadLeader(outs);
  if (item.revision <= base_) return grpc::Status::OK;  // the last read reflects it
  if (leader_key_.empty()) {
    // No leader: the first key put under the prefix becomes it (clientv3 observe()).
    for (const mvccpb::Event& e : item.events) {
      if (e.type() != mvccpb::Event::PUT) continue;
      leader_key_ = e.kv().key();
      etcdserverpb::ResponseHeader header;
      header.set_revision(e.kv().mod_revision());
      Emit(header, e.kv(), outs);
      return grpc::Status::OK;
    }
    return grpc::Status::OK;
  }
  for (const mvccpb::Event& e : item.events) {
    if (e.kv().key() != leader_key_) continue;
    if (e.type() == mvccpb::Event::DELETE) return RereadLeader(outs);
    etcdserverpb::ResponseHeader header;
    header.set_revision(item.revision.value());
    Emit(header, e.kv(), outs);
  }
  return grpc::Status::OK;
}

grpc::Status ObserveStream::RereadLeader(std::vector<v3electionpb::LeaderResponse>* outs) {
  Result<etcdserverpb::RangeResponse> r = node_.store().Range(recipe::FirstCreate(prefix_));
  if (!r.ok()) return ToGrpc(r.status());
  base_ = Revision(r->header().revision());
  if (r->kvs_size() == 0) {
    leader_key_.clear();
    return grpc::Status::OK;
  }
  leader_key_ = r->kvs(0).key();
  Emit(r->header(), r->kvs(0), outs);
  return grpc::Status::OK;
}

void ObserveStream::Emit(etcdserverpb::ResponseHeader header, const mvccpb::KeyValue& kv,
                         std::vector<v3electionpb::LeaderResponse>* outs) {
  std::string id = fmt::format("{}@{}", kv.key(), kv.mod_revision());
  if (id == last_sent_) return;  // a re-read found the leader already sent
  last_sent_ = std::move(id);
  v3electionpb::LeaderResponse response;
  *response.mutable_header() = std::move(header);
  node_.FillHeader(response.mutable_header());
  *response.mutable_kv() = kv;
  outs->push_back(std::move(response));
}

void ObserveStream::Deliver(std::vector<v3electionpb::LeaderResponse> outs) {
  if (outs.empty() || finishing_) return;
  if (out_.size() + outs.size() > kObserveQueueMax) {
    // A client that does not read: end the stream (asynchronously: mu_ is held here).
    asio::post(node_.read_pool(), [self = shared_from_this()] {
      self->End(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                             "election observe: client is not reading"));
    });
    return;
  }
  for (auto& r : outs) out_.push_back(std::move(r));
  if (writing_) return;
  writing_ = true;
  // StartWrite outside mu_ (a reaction may run inline): post it. The element's address is
  // stable (deque::push_back keeps references) until OnWriteDone pops it.
  const v3electionpb::LeaderResponse* next = &out_.front();
  asio::post(node_.read_pool(), [self = shared_from_this(), next] { self->StartWrite(next); });
}

void ObserveStream::OnWriteDone(bool ok) {
  grpc::Status finish_with;
  bool finish = false;
  const v3electionpb::LeaderResponse* next = nullptr;
  {
    std::lock_guard lock(mu_);
    writing_ = false;
    if (!out_.empty()) out_.pop_front();
    if (finishing_) {
      finish = true;
      finish_with = final_status_;
    } else if (!ok) {
      finishing_ = true;
      finish = true;
      finish_with = grpc::Status(grpc::StatusCode::CANCELLED, "observe stream broken");
    } else if (!out_.empty()) {
      writing_ = true;
      next = &out_.front();
    }
  }
  if (finish) return Finish(finish_with);
  if (next != nullptr) StartWrite(next);
}

void ObserveStream::End(const grpc::Status& status) {
  {
    std::lock_guard lock(mu_);
    if (finishing_) return;
    finishing_ = true;
    if (writing_) {
      final_status_ = status;  // OnWriteDone finishes
      return;
    }
  }
  Finish(status);
}

void ObserveStream::OnCancel() { End(ContextCanceled()); }

void ObserveStream::OnDone() {
  feed_.Unsubscribe(subscription_);
  std::shared_ptr<ObserveStream> keep = std::move(self_);  // may destroy *this on return
}

}  // namespace epoch::server
