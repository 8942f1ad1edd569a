// The server side of etcd's `concurrency` recipes (docs/etcd-compatibility.md §3.9), shared by the
// Lock and Election services:
//
//   RecipeEventFeed  — applied events by key prefix. KvStateMachine's applied hook publishes every
//                      applied entry's events here (driver strand); a subscriber of a prefix gets
//                      the events under it, in revision order. After a snapshot install (the store
//                      jumped without events) Resync() tells every subscriber to re-read.
//   PredecessorWait  — etcd's `waitDeletes(prefix, own_rev - 1)`: completes once no key under the
//                      prefix has a create_revision below the caller's own key, woken by DELETE
//                      events (never a poll, never a sleep). It fails with "session expired" as
//                      soon as the caller's own key is gone (its lease expired or was revoked), and
//                      before answering it checks the own key again after a linearizable read
//                      barrier (the Jepsen fix, etcd #11456/#11408).
//   RecipeOps        — the writes and reads of the recipes through NodeContext (Txn, DeleteRange,
//                      first-create Range, lease 0 → a 60 s lease as etcd's NewSession does).
//
// Why no wake-up is lost: a waiter subscribes before it reads the store. A delete applied before
// the read is visible to the read; one applied after it is published after the subscription.
//
// Threading: Publish/Resync on the driver strand only (they call listeners there; listeners must
// not block). Everything else is thread-safe; completions run on a read-pool thread, the driver
// strand or a gRPC client thread and must not block.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "epoch/etcd_errors.h"
#include "epoch/node/node_context.h"
#include "etcdserverpb/rpc.pb.h"
#include "mvccpb/kv.pb.h"

namespace epoch::server {

// clientv3/concurrency's plain Go errors: gRPC turns them into code UNKNOWN with this text.
inline constexpr std::string_view kSessionExpiredMessage = "session expired";
inline grpc::Status SessionExpired() {
  return grpc::Status(grpc::StatusCode::UNKNOWN, std::string(kSessionExpiredMessage));
}
// What a recipe call answers when its client cancels (Go's context.Canceled).
inline grpc::Status ContextCanceled() {
  return grpc::Status(grpc::StatusCode::CANCELLED, "context canceled");
}
// Trailing metadata carrying the fencing token (decimal create_revision of the owner key) on Lock
// and Campaign responses.
inline constexpr const char* kFencingTokenMetadata = "epoch-fencing-token";

class RecipeEventFeed {
 public:
  // `revision` = the applied entry's revision; `events` = those under the subscribed prefix
  // (never empty). `resync` = true (no events) after the store jumped: re-read it.
  using Listener =
      std::function<void(Revision revision, const std::vector<mvccpb::Event>& events, bool resync)>;

  // The listener may still be called once by a Publish already running when Unsubscribe returns.
  std::uint64_t Subscribe(std::string prefix, Listener listener);
  void Unsubscribe(std::uint64_t id);

  // --- driver strand ---
  void Publish(Revision revision, const std::vector<mvccpb::Event>& events);
  void Resync();

  [[nodiscard]] std::size_t subscribers() const;

 private:
  struct Subscription {
    std::string prefix;
    std::shared_ptr<const Listener> listener;
  };
  mutable std::mutex mu_;
  std::map<std::uint64_t, Subscription> subscriptions_;  // guarded by mu_
  std::uint64_t next_id_ = 1;                            // guarded by mu_
};

// Builders and calls of the recipes' requests (clientv3 concurrency/{mutex,election,key}.go).
namespace recipe {

// etcd's GetPrefixRangeEnd.
std::string PrefixEnd(std::string prefix);
// `name + "/"`, and the caller's key under it: prefix + lower-case hex lease ID.
std::string KeyFor(const std::string& prefix, std::int64_t lease);
// Range(prefix, WithFirstCreate()): the oldest key under the prefix.
etcdserverpb::RangeRequest FirstCreate(const std::string& prefix);
// Txn{ CREATE(key) == 0 ? Put(key, value, lease) [+ first-create Range] : Range(key) [+ ...] }.
etcdserverpb::TxnRequest CreateIfAbsent(const std::string& key, const std::string& value,
                                        std::int64_t lease, const std::string* owner_prefix);
// Txn{ CREATE(key) == rev ? ops }: Proclaim (Put) and Resign (DeleteRange).
etcdserverpb::TxnRequest IfCreated(const std::string& key, std::int64_t rev,
                                   etcdserverpb::RequestOp op);

// Writes through the log (this node proposes or forwards to the leader), bounded by `deadline`
// and by kRecipeWriteTimeout. `done` gets a gRPC status (etcd's code and message).
inline constexpr std::chrono::seconds kRecipeWriteTimeout{10};
// The caller a write was authorized for (AuthGate::Authorize's stamp): apply checks the write
// again for this user when the auth state changed since. Empty: the server's own write.
struct AuthStamp {
  std::string user;
  std::uint64_t revision = 0;
};
using TxnDone = std::function<void(const grpc::Status&, const etcdserverpb::TxnResponse&)>;
void Txn(NodeContext& node, etcdserverpb::TxnRequest txn,
         std::chrono::system_clock::time_point deadline, TxnDone done, const AuthStamp& stamp = {});
using DeleteDone =
    std::function<void(const grpc::Status&, const etcdserverpb::DeleteRangeResponse&)>;
void Delete(NodeContext& node, const std::string& key,
            std::chrono::system_clock::time_point deadline, DeleteDone done);
// etcd's NewSession(WithLease(lease)): lease != 0 is used as is (a missing lease fails later,
// on the Put, with etcd_errors::kLeaseNotFound); lease 0 grants a 60 s lease that
// nobody keeps alive (the server orphans the session), as etcd's v3lock/v3election do.
using LeaseDone = std::function<void(const grpc::Status&, std::int64_t lease)>;
void ResolveLease(NodeContext& node, std::int64_t lease,
                  std::chrono::system_clock::time_point deadline, LeaseDone done);
// Linearizable Range after a read barrier, on a read-pool thread.
using RangeDone = std::function<void(const grpc::Status&, const etcdserverpb::RangeResponse&)>;
void LinearizableRange(NodeContext& node, etcdserverpb::RangeRequest request, RangeDone done);

}  // namespace recipe

class PredecessorWait : public std::enable_shared_from_this<PredecessorWait> {
 public:
  // `header` is the response header of the final check (revision = the store's at that read).
  using Done = std::function<void(const grpc::Status&, const etcdserverpb::ResponseHeader&)>;

  struct Target {
    std::string prefix;   // name + "/"
    std::string own_key;  // prefix + hex(lease)
    Revision own_rev;     // the own key's create_revision (the fencing token)
  };

  // Subscribes, then checks once this node has applied the own key (after a read barrier).
  // `done` runs exactly once unless Cancel() wins.
  static std::shared_ptr<PredecessorWait> Start(NodeContext& node, RecipeEventFeed& feed,
                                                Target target, Done done);
  ~PredecessorWait();

  // True if the wait ended here and `done` will never run; false if `done` ran or is running.
  bool Cancel();

 private:
  PredecessorWait(NodeContext& node, RecipeEventFeed& feed, Target target, Done done);
  void ScheduleCheck();
  void Check();
  // Returns true when nothing earlier is left (then the final linearizable check runs).
  bool Evaluate();
  void FinalCheck();
  void Finish(const grpc::Status& status, const etcdserverpb::ResponseHeader& header);

  NodeContext& node_;
  RecipeEventFeed& feed_;
  const Target target_;
  std::uint64_t subscription_ = 0;

  std::mutex mu_;
  Done done_;              // guarded by mu_; emptied when the wait ends
  bool checking_ = false;  // a Check is scheduled or running; guarded by mu_
  bool recheck_ = false;   // an event arrived during a Check; guarded by mu_
};

}  // namespace epoch::server
