// LockService: v3lockpb.Lock, etcd's server-side lock (etcdserver/api/v3lock/lock.go), i.e. the
// clientv3 concurrency Mutex recipe run inside the server on the caller's lease:
//
//   Lock{name, lease}: own key K = name + "/" + hex(lease).
//     1. Txn{ CREATE(K) == 0 ? Put(K, "", lease) + first-create Range(prefix)
//                            : Range(K) + first-create Range(prefix) } through the log;
//        own revision = the txn's revision, or K's create_revision if K already existed.
//     2. If K is the first-created key under the prefix: acquired. Otherwise wait until every key
//        under the prefix with a smaller create_revision is deleted (PredecessorWait: woken by
//        applied DELETE events, never a poll), then check K again after a linearizable read.
//     Answer {header, key = K}. The fencing token is K's create_revision: strictly increasing for
//     successive holders of the lock, surviving leader changes. It is also sent as trailing
//     metadata `epoch-fencing-token` (decimal), so a client need not read K back.
//   Unlock{key}: DeleteRange(key) through the log; {header}. No error if the key is gone.
//
// Errors as etcd's: an unknown lease fails the Put with etcd_errors::kLeaseNotFound
// (NOT_FOUND). If K disappears while waiting (its lease expired or was revoked) the call fails
// at once with "session expired" (UNKNOWN) — etcd only notices once its predecessors are gone.
// A client cancel (or deadline) ends the wait and deletes K, as clientv3's Mutex does. Lease 0
// grants a 60 s lease nobody keeps alive (etcd's NewSession default), as etcd does.
//
// Threading: async_rpc.h reactors; no handler thread is held while waiting. Work continues on
// the driver strand, the read pool and gRPC client threads.
#pragma once

#include "epoch/api/recipe_wait.h"
#include "epoch/etcd_errors.h"
#include "epoch/node/node_context.h"
#include "epoch/rpc/async_rpc.h"
#include "v3lockpb/v3lock.grpc.pb.h"

namespace epoch::server {

class LockService final : public v3lockpb::Lock::AsyncService {
 public:
  // Registers every method of the service with `server` (before it starts).
  void Register(rpc::Server& server);

  LockService(NodeContext& node, RecipeEventFeed& feed) : node_(node), feed_(feed) {}

  rpc::UnaryReactor* Lock(rpc::CallContext* ctx, const v3lockpb::LockRequest* request,
                          v3lockpb::LockResponse* response);
  rpc::UnaryReactor* Unlock(rpc::CallContext* ctx, const v3lockpb::UnlockRequest* request,
                            v3lockpb::UnlockResponse* response);

 private:
  NodeContext& node_;
  RecipeEventFeed& feed_;
};

}  // namespace epoch::server
