// Election: etcd's clientv3 `concurrency.Election` recipe over KV + Watch
// (docs/etcd-compatibility.md §3.9), so `etcdctl elect` and an Epoch client campaign for the same
// election. For election name N the prefix is P = N + "/" and a candidate's key is
// P + hex(lease ID):
//
//   Campaign(value): Txn{ if CREATE(K) == 0 then Put(K, value, lease) else Range(K) };
//     rev = header.revision (created) or K's create_revision; a different stored value is
//     replaced (Proclaim); then wait until every key under P created before rev is deleted.
//     The leader is the key under P with the lowest create_revision.
//   Proclaim(value): Txn{ if CREATE(K) == rev then Put(K, value, lease) }.
//   Resign: Txn{ if CREATE(K) == rev then DeleteRange(K) }.
//   Leader: Range(P, prefix, sort by create ascending, limit 1).
//
// The leader's create_revision (`rev()`) is a fencing token like a lock's.
//
// Threading: one thread per Election object; Campaign may be cancelled from another thread
// through the stop tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <stop_token>
#include <string>

#include "epoch/client/client.h"
#include "epoch/status.h"
#include "epoch/strong_int.h"

namespace epoch::client {

class Election {
 public:
  // `lease_stop` (Session::stop_token()) cancels a waiting Campaign when the lease is lost.
  Election(Client* client, LeaseId lease, std::string name, std::stop_token lease_stop = {});

  // Blocks until this candidate leads (or `call` is cancelled / times out, or the lease is lost:
  // then its key is removed and an error returned). The returned value is the leader key's
  // create_revision.
  Result<std::int64_t> Campaign(const std::string& value, const CallOptions& call = {});
  // Changes the value while leading. FailedPrecondition when this candidate no longer leads.
  Status Proclaim(const std::string& value, const CallOptions& call = {});
  // Gives up leadership (deletes the own key if it is still the one created by Campaign).
  Status Resign(const CallOptions& call = {});

  // The current leader's key/value, nullopt when nobody campaigns. Also the header revision.
  struct LeaderInfo {
    std::optional<mvccpb::KeyValue> kv;
    std::int64_t revision = 0;
  };
  Result<LeaderInfo> Leader(const CallOptions& call = {});

  [[nodiscard]] const std::string& key() const { return my_key_; }
  [[nodiscard]] std::int64_t rev() const { return my_rev_; }

 private:
  Status WaitDeletes(std::int64_t max_create_revision, const CallOptions& call);

  Client* const client_;
  const LeaseId lease_;
  const std::string prefix_;
  const std::string my_key_;
  const std::stop_token lease_stop_;
  std::int64_t my_rev_ = -1;
};

}  // namespace epoch::client
