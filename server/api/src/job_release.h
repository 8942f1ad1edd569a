// One Jobs.Release call: read the lock's owner and the epoch record (linearizable), then
// ReleaseTxn guarded on the owner key's create_revision being the caller's token (job_layout.h).
// A completing release whose job key is gone (removed by hand) still releases the lock.
//
// Threading: each step runs in the completion of the previous read or write; nothing blocks.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "epoch/api/jobs_service.h"
#include "epoch/api/recipe_wait.h"
#include "job_layout.h"

namespace epoch::server {

class JobRelease : public std::enable_shared_from_this<JobRelease> {
 public:
  struct Params {
    jobs::QueueKeys keys;
    std::int64_t token = 0;
    bool completed = false;
    recipe::AuthStamp stamp;
  };

  static void Start(NodeContext& node, JobsMetrics& metrics, rpc::UnaryReactor* reactor,
                    std::chrono::system_clock::time_point deadline,
                    v1::JobReleaseResponse* response, Params params);

 private:
  JobRelease(NodeContext& node, JobsMetrics& metrics, rpc::UnaryReactor* reactor,
             std::chrono::system_clock::time_point deadline, v1::JobReleaseResponse* response,
             Params params)
      : node_(node),
        metrics_(metrics),
        reactor_(reactor),
        deadline_(deadline),
        response_(response),
        params_(std::move(params)) {}

  void ReadOwner();
  void Write(const std::string& owner_key, bool completed, const std::string& done_value);
  void Answer(const etcdserverpb::ResponseHeader& header, bool released, bool completed);

  NodeContext& node_;
  JobsMetrics& metrics_;
  rpc::UnaryReactor* const reactor_;
  const std::chrono::system_clock::time_point deadline_;
  v1::JobReleaseResponse* const response_;
  const Params params_;
};

}  // namespace epoch::server
