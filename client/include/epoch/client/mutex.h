// Mutex: a distributed lock that follows etcd's clientv3 `concurrency.Mutex` recipe exactly
// (docs/etcd-compatibility.md §3.9), so a Go clientv3 worker, `etcdctl lock` and an Epoch worker
// exclude each other on the same lock name — and that hands out the fencing token explicitly.
//
// Recipe, for lock name N with prefix P = N + "/" and own key K = P + hex(lease ID):
//   1. Txn{ if CREATE(K) == 0 then Put(K, "", lease), Range(P, prefix, first-create)
//           else Range(K), Range(P, prefix, first-create) }.
//   2. my_rev = header.revision (created now) or K's create_revision (the lease already queued).
//   3. The owner is the key under P with the lowest create_revision; if it is K, the lock is held.
//   4. Else wait until every key under P with create_revision < my_rev is deleted: Range(P,
//      last-create, max_create_revision = my_rev - 1), watch that key from the Range's revision
//      until a DELETE, repeat.
//   5. Range(K): if K is gone (the lease expired while waiting), fail — the Jepsen fix (etcd
//      #11456); etcd 3.4's client lacks this check.
//   Unlock = DeleteRange(K). TryLock = steps 1–3, and on failure delete K and report "locked".
//
// The fencing token is my_rev, K's create_revision: strictly increasing for successive holders of
// one lock, stable across leader changes (docs/timing-and-safety.md §9). Carry it into every
// guarded write (fencing.h). Holding the lock proves nothing by itself once the lease may have
// expired; the token checked by the resource is what makes a late write harmless.
//
// Threading: a Mutex is used by one thread at a time; different Mutex objects (even for the same
// lock name and lease) may be used concurrently. Lock() may be cancelled from another thread
// through the stop tokens.
#pragma once

#include <chrono>
#include <optional>
#include <stop_token>
#include <string>

#include "epoch/client/client.h"
#include "epoch/client/session.h"
#include "epoch/status.h"
#include "epoch/strong_int.h"

namespace epoch::client {

struct LockOptions {
  // Bound on the whole Lock() (queueing included); nullopt = wait until cancelled.
  std::optional<std::chrono::milliseconds> timeout;
  // Cancels the wait. The lease's own stop token (e.g. the Session's) is always honoured too.
  std::stop_token stop;
};

class Mutex {
 public:
  // A lock named `name` held through `lease`. `lease_stop` is requested when the lease is lost
  // (Session::stop_token()); it cancels a waiting Lock(). `client` must outlive the Mutex.
  Mutex(Client* client, LeaseId lease, std::string name, std::stop_token lease_stop = {});
  // Convenience: the session's lease and stop token.
  Mutex(Client* client, const Session& session, std::string name);

  // Blocks until the lock is held; returns the fencing token. On failure (cancelled, timed out,
  // lease lost while queued) the own queue key is removed and no lock is held.
  Result<FencingToken> Lock(const LockOptions& options = {});

  // One attempt: the token when the lock was free (or already held through this lease),
  // nullopt when someone else holds it (the own queue key is removed again).
  Result<std::optional<FencingToken>> TryLock(const CallOptions& call = {});

  // Deletes the own key. The next waiter gets the lock.
  Status Unlock(const CallOptions& call = {});

  // A Txn compare that holds while this Mutex owns the lock (clientv3 IsOwner()): use it to
  // guard writes inside the cluster itself.
  [[nodiscard]] etcdserverpb::Compare IsOwnerCompare() const;

  [[nodiscard]] const std::string& key() const { return my_key_; }
  [[nodiscard]] const std::string& prefix() const { return prefix_; }
  // The token of the current (or last) acquisition; 0 before any.
  [[nodiscard]] FencingToken token() const { return token_; }
  // Header of the response that completed the acquisition (as clientv3's Header()).
  [[nodiscard]] const etcdserverpb::ResponseHeader& header() const { return header_; }

 private:
  // Steps 1–2. On success fills my_rev_ and returns the Txn response.
  Result<etcdserverpb::TxnResponse> TryAcquire(const CallOptions& call);
  // Step 4.
  Status WaitDeletes(std::int64_t max_create_revision, const CallOptions& call);
  static bool Owns(const etcdserverpb::TxnResponse& response, std::int64_t my_rev);

  Client* const client_;
  const LeaseId lease_;
  const std::string prefix_;  // name + "/"
  const std::string my_key_;  // prefix_ + lowercase hex lease ID, as clientv3 "%x"
  const std::stop_token lease_stop_;
  std::int64_t my_rev_ = -1;  // create_revision of my_key_ while queued or holding
  FencingToken token_{0};
  etcdserverpb::ResponseHeader header_;
};

}  // namespace epoch::client
