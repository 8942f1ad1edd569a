// One Jobs.Acquire call from the moment it is authorized: a linearizable read of the lock's owner
// (held by another: answered without a write), LockTxn, then CountTxn (retried from its failure
// branch when the epoch key moved), then the answer. The protocol and why it is safe:
// epoch/api/jobs_service.h.
//
// Threading: each step runs in the completion of the previous write (driver strand, read pool or
// a gRPC client thread); nothing blocks. The RecipeCall decides who deletes the own lock key when
// the call ends without handing it over.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "epoch/api/jobs_service.h"
#include "epoch/api/recipe_wait.h"
#include "job_layout.h"
#include "recipe_call.h"

namespace epoch::server {

class JobAcquisition : public std::enable_shared_from_this<JobAcquisition> {
 public:
  struct Params {
    jobs::QueueKeys keys;
    std::int64_t lease = 0;
    std::string holder;
    std::int64_t max_epoch_changes = 0;
    recipe::AuthStamp stamp;
  };

  // Starts the acquisition; the call is finished by it.
  static void Start(NodeContext& node, JobsMetrics& metrics, std::shared_ptr<RecipeCall> call,
                    v1::JobAcquireResponse* response, Params params);

 private:
  JobAcquisition(NodeContext& node, JobsMetrics& metrics, std::shared_ptr<RecipeCall> call,
                 v1::JobAcquireResponse* response, Params params);

  void ReadFirst();
  void Lock();
  void OnLocked(const grpc::Status& s, const etcdserverpb::TxnResponse& txn);
  // `job` and `epoch` are the Range answers of the job and epoch keys (the epoch may be empty).
  void Count(std::int64_t token, const etcdserverpb::RangeResponse& job,
             const etcdserverpb::RangeResponse& epoch, int attempt);
  void OnCounted(const grpc::Status& s, const etcdserverpb::TxnResponse& txn,
                 const jobs::Count& count, int attempt);

  // Answers; `fill` sets the outcome fields (header and key are set here).
  void Answer(const etcdserverpb::ResponseHeader& header,
              const std::function<void(v1::JobAcquireResponse*)>& fill, bool holds_lock);
  // Ends with an error and gives the lock back (the caller does not learn it holds it).
  void Fail(const grpc::Status& s);

  NodeContext& node_;
  JobsMetrics& metrics_;
  const std::shared_ptr<RecipeCall> call_;
  v1::JobAcquireResponse* const response_;  // only touched by the path that finishes the call
  const Params params_;
  const std::string own_key_;
  // The header of the latest write's answer (each step runs after the previous one).
  etcdserverpb::ResponseHeader header_;
};

}  // namespace epoch::server
