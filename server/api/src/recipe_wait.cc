#include "epoch/api/recipe_wait.h"

#include <fmt/format.h>

#include <algorithm>

#include "epoch/rpc/grpc_util.h"
#include "epoch/state/kv_validation.h"

namespace epoch::server {

// --- RecipeEventFeed ----------------------------------------------------------------------------

std::uint64_t RecipeEventFeed::Subscribe(std::string prefix, Listener listener) {
  std::lock_guard lock(mu_);
  const std::uint64_t id = next_id_++;
  subscriptions_.emplace(
      id, Subscription{std::move(prefix), std::make_shared<const Listener>(std::move(listener))});
  return id;
}

void RecipeEventFeed::Unsubscribe(std::uint64_t id) {
  std::lock_guard lock(mu_);
  subscriptions_.erase(id);
}

std::size_t RecipeEventFeed::subscribers() const {
  std::lock_guard lock(mu_);
  return subscriptions_.size();
}

void RecipeEventFeed::Publish(Revision revision, const std::vector<mvccpb::Event>& events) {
  if (events.empty()) return;
  std::vector<std::pair<std::shared_ptr<const Listener>, std::vector<mvccpb::Event>>> calls;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, sub] : subscriptions_) {
      std::vector<mvccpb::Event> matching;
      for (const mvccpb::Event& e : events) {
        if (e.kv().key().starts_with(sub.prefix)) matching.push_back(e);
      }
      if (!matching.empty()) calls.emplace_back(sub.listener, std::move(matching));
    }
  }
  // Outside the lock: a listener may subscribe or unsubscribe.
  for (const auto& [listener, matching] : calls) (*listener)(revision, matching, false);
}

void RecipeEventFeed::Resync() {
  std::vector<std::shared_ptr<const Listener>> listeners;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, sub] : subscriptions_) listeners.push_back(sub.listener);
  }
  for (const auto& listener : listeners) (*listener)(Revision(0), {}, true);
}

// --- recipe -------------------------------------------------------------------------------------

namespace recipe {
namespace {

namespace pb = etcdserverpb;

std::chrono::system_clock::time_point Bounded(std::chrono::system_clock::time_point deadline) {
  return std::min(deadline, std::chrono::system_clock::now() + kRecipeWriteTimeout);
}

// etcd's concurrency.NewSession default TTL, used when the caller passes lease 0.
constexpr std::int64_t kDefaultSessionTtlMs = 60'000;

}  // namespace

std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) < 0xff) {
      prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

std::string KeyFor(const std::string& prefix, std::int64_t lease) {
  return prefix + fmt::format("{:x}", static_cast<std::uint64_t>(lease));
}

pb::RangeRequest FirstCreate(const std::string& prefix) {
  pb::RangeRequest r;
  r.set_key(prefix);
  r.set_range_end(PrefixEnd(prefix));
  r.set_sort_target(pb::RangeRequest::CREATE);
  r.set_sort_order(pb::RangeRequest::ASCEND);
  r.set_limit(1);
  return r;
}

pb::TxnRequest CreateIfAbsent(const std::string& key, const std::string& value, std::int64_t lease,
                              const std::string* owner_prefix) {
  pb::TxnRequest txn;
  pb::Compare* cmp = txn.add_compare();
  cmp->set_result(pb::Compare::EQUAL);
  cmp->set_target(pb::Compare::CREATE);
  cmp->set_key(key);
  cmp->set_create_revision(0);
  pb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  txn.add_failure()->mutable_request_range()->set_key(key);
  if (owner_prefix != nullptr) {
    *txn.add_success()->mutable_request_range() = FirstCreate(*owner_prefix);
    *txn.add_failure()->mutable_request_range() = FirstCreate(*owner_prefix);
  }
  return txn;
}

pb::TxnRequest IfCreated(const std::string& key, std::int64_t rev, pb::RequestOp op) {
  pb::TxnRequest txn;
  pb::Compare* cmp = txn.add_compare();
  cmp->set_result(pb::Compare::EQUAL);
  cmp->set_target(pb::Compare::CREATE);
  cmp->set_key(key);
  cmp->set_create_revision(rev);
  *txn.add_success() = std::move(op);
  return txn;
}

void Txn(NodeContext& node, pb::TxnRequest txn, std::chrono::system_clock::time_point deadline,
         TxnDone done, const AuthStamp& stamp) {
  if (Status valid = ValidateTxn(txn, node.config().limits); !valid.ok())
    return done(ToGrpc(valid), {});
  v1::InternalRequest internal;
  *internal.mutable_txn() = std::move(txn);
  internal.set_auth_user(stamp.user);
  internal.set_auth_revision(stamp.revision);
  if (Status size = ValidateRequestSize(internal.ByteSizeLong(), node.config().limits);
      !size.ok()) {
    return done(ToGrpc(size), {});
  }
  node.Write(std::move(internal), Bounded(deadline),
             [&node, done = std::move(done)](const Status& s, const v1::InternalResponse& r) {
               if (!s.ok()) return done(ToGrpc(s), {});
               pb::TxnResponse response = r.txn();
               node.FillHeader(response.mutable_header());
               done(grpc::Status::OK, response);
             });
}

void Delete(NodeContext& node, const std::string& key,
            std::chrono::system_clock::time_point deadline, DeleteDone done) {
  v1::InternalRequest internal;
  internal.mutable_delete_range()->set_key(key);
  node.Write(std::move(internal), Bounded(deadline),
             [&node, done = std::move(done)](const Status& s, const v1::InternalResponse& r) {
               if (!s.ok()) return done(ToGrpc(s), {});
               pb::DeleteRangeResponse response = r.delete_range();
               node.FillHeader(response.mutable_header());
               done(grpc::Status::OK, response);
             });
}

void ResolveLease(NodeContext& node, std::int64_t lease,
                  std::chrono::system_clock::time_point deadline, LeaseDone done) {
  if (lease != 0) return done(grpc::Status::OK, lease);
  v1::InternalRequest internal;
  internal.mutable_lease_grant()->set_ttl_ms(kDefaultSessionTtlMs);  // id 0: the leader picks
  node.Write(std::move(internal), Bounded(deadline),
             [done = std::move(done)](const Status& s, const v1::InternalResponse& r) {
               if (!s.ok()) return done(ToGrpc(s), 0);
               done(grpc::Status::OK, r.lease_grant().id());
             });
}

void LinearizableRange(NodeContext& node, pb::RangeRequest request, RangeDone done) {
  node.ReadBarrier(false,
                   [&node, request = std::move(request), done = std::move(done)](const Status& s) {
                     if (!s.ok()) return done(ToGrpc(s), {});
                     Result<pb::RangeResponse> r = node.store().Range(request);
                     if (!r.ok()) return done(ToGrpc(r.status()), {});
                     node.FillHeader(r->mutable_header());
                     done(grpc::Status::OK, *r);
                   });
}

}  // namespace recipe

// --- PredecessorWait ----------------------------------------------------------------------------

std::shared_ptr<PredecessorWait> PredecessorWait::Start(NodeContext& node, RecipeEventFeed& feed,
                                                        Target target, Done done) {
  std::shared_ptr<PredecessorWait> wait(
      new PredecessorWait(node, feed, std::move(target), std::move(done)));
  std::weak_ptr<PredecessorWait> weak = wait;
  // Subscribe before the first read, so no delete between the read and the subscription is lost.
  wait->subscription_ = feed.Subscribe(
      wait->target_.prefix,
      [weak](Revision, const std::vector<mvccpb::Event>& events, bool resync) {
        const bool deleted =
            resync || std::any_of(events.begin(), events.end(), [](const mvccpb::Event& e) {
              return e.type() == mvccpb::Event::DELETE;
            });
        if (!deleted) return;
        if (auto w = weak.lock()) w->ScheduleCheck();
      });
  // The own key was written through the leader: a follower may not have applied it yet. The
  // first check runs after a linearizable read barrier (this node applied everything committed
  // before it, the own key included).
  node.ReadBarrier(false, [weak](const Status& s) {
    auto w = weak.lock();
    if (!w) return;
    if (!s.ok()) return w->Finish(ToGrpc(s), {});
    w->ScheduleCheck();
  });
  return wait;
}

PredecessorWait::PredecessorWait(NodeContext& node, RecipeEventFeed& feed, Target target, Done done)
    : node_(node), feed_(feed), target_(std::move(target)), done_(std::move(done)) {}

PredecessorWait::~PredecessorWait() { feed_.Unsubscribe(subscription_); }

bool PredecessorWait::Cancel() {
  Done done;
  {
    std::lock_guard lock(mu_);
    done = std::move(done_);
    done_ = nullptr;
  }
  if (!done) return false;
  feed_.Unsubscribe(subscription_);
  return true;
}

void PredecessorWait::ScheduleCheck() {
  {
    std::lock_guard lock(mu_);
    if (!done_) return;
    if (checking_) {
      recheck_ = true;  // the running check re-runs once it ends
      return;
    }
    checking_ = true;
  }
  asio::post(node_.read_pool(), [self = shared_from_this()] { self->Check(); });
}

void PredecessorWait::Check() {
  const bool clear = Evaluate();
  bool again = false;
  {
    std::lock_guard lock(mu_);
    if (clear) {
      checking_ = false;  // the final check owns the outcome now
      recheck_ = false;
    } else {
      again = recheck_;
      recheck_ = false;
      checking_ = again;
    }
  }
  if (clear) return FinalCheck();
  if (again) asio::post(node_.read_pool(), [self = shared_from_this()] { self->Check(); });
}

bool PredecessorWait::Evaluate() {
  {
    std::lock_guard lock(mu_);
    if (!done_) return false;
  }
  etcdserverpb::RangeRequest own;
  own.set_key(target_.own_key);
  Result<etcdserverpb::RangeResponse> mine = node_.store().Range(own);
  if (!mine.ok()) {
    Finish(ToGrpc(mine.status()), {});
    return false;
  }
  // A delete applied here before the own key was (this node lags the leader): not yet.
  if (mine->header().revision() < target_.own_rev.value()) return false;
  if (mine->kvs_size() == 0 || mine->kvs(0).create_revision() != target_.own_rev.value()) {
    Finish(SessionExpired(), {});
    return false;
  }
  // waitDeletes: any key under the prefix created before ours still blocks us.
  etcdserverpb::RangeRequest earlier;
  earlier.set_key(target_.prefix);
  earlier.set_range_end(recipe::PrefixEnd(target_.prefix));
  earlier.set_max_create_revision(target_.own_rev.value() - 1);
  earlier.set_keys_only(true);
  earlier.set_limit(1);
  Result<etcdserverpb::RangeResponse> blockers = node_.store().Range(earlier);
  if (!blockers.ok()) {
    Finish(ToGrpc(blockers.status()), {});
    return false;
  }
  return blockers->kvs_size() == 0;
}

// Keys created before ours never come back (create revisions only grow), but ours may have gone
// with its lease: check it once more after a linearizable read barrier, as clientv3 does.
void PredecessorWait::FinalCheck() {
  etcdserverpb::RangeRequest own;
  own.set_key(target_.own_key);
  recipe::LinearizableRange(
      node_, own,
      [self = shared_from_this()](const grpc::Status& s, const etcdserverpb::RangeResponse& r) {
        if (!s.ok()) return self->Finish(s, {});
        if (r.kvs_size() == 0 || r.kvs(0).create_revision() != self->target_.own_rev.value()) {
          return self->Finish(SessionExpired(), r.header());
        }
        self->Finish(grpc::Status::OK, r.header());
      });
}

void PredecessorWait::Finish(const grpc::Status& status,
                             const etcdserverpb::ResponseHeader& header) {
  Done done;
  {
    std::lock_guard lock(mu_);
    done = std::move(done_);
    done_ = nullptr;
  }
  if (!done) return;
  feed_.Unsubscribe(subscription_);
  done(status, header);
}

}  // namespace epoch::server
