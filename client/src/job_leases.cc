// EpochJobLeases: the Jobs service's RPCs behind the runner's JobLeases (see job_leases.h).
#include "epoch/client/job_leases.h"

#include <fmt/format.h>

#include "admin_call.h"
#include "epoch/client/errors.h"
#include "epoch/v1/epoch.grpc.pb.h"

namespace epoch::client {
namespace {

constexpr bool kRetrySafe = true;  // repeated by the same holder, the server answers the same

}  // namespace

EpochJobLeases::EpochJobLeases(Client* client, JobLeasesOptions options)
    : client_(client), options_(std::move(options)) {}

CallOptions EpochJobLeases::Call(const WorkerSession& session) const {
  return CallOptions{options_.call_timeout, session.stop_token()};
}

Result<std::optional<JobLease>> EpochJobLeases::TryAcquire(const JobSpec& job,
                                                           const WorkerSession& session) {
  v1::JobAcquireRequest request;
  request.set_prefix(options_.keys.prefix);
  request.set_job(job.id);
  request.set_lease(session.lease().value());
  request.set_holder(options_.holder);
  request.set_max_epochs(static_cast<std::uint32_t>(options_.max_epoch_changes));
  v1::JobAcquireResponse response;
  Status status = internal::CallAdmin(
      *client_, "Jobs.Acquire", kRetrySafe, Call(session),
      [&](std::shared_ptr<grpc::Channel> channel, grpc::ClientContext* context) {
        return v1::Jobs::NewStub(std::move(channel))->Acquire(context, request, &response);
      });
  if (!status.ok()) return status.Annotate("acquire job " + job.id);
  const FencingToken token(response.fencing_token());
  const auto epoch = static_cast<std::int64_t>(response.epoch_count());
  if (response.dead_lettered())
    return std::optional<JobLease>(JobLease{job.id, token, epoch, true, nullptr});
  if (!response.acquired()) return std::optional<JobLease>();
  return std::optional<JobLease>(JobLease{job.id, token, epoch, false, nullptr});
}

Status EpochJobLeases::CallRelease(const JobLease& lease, bool completed, const CallOptions& call,
                                   bool* released) {
  v1::JobReleaseRequest request;
  request.set_prefix(options_.keys.prefix);
  request.set_job(lease.job_id);
  request.set_fencing_token(lease.token.value());
  request.set_completed(completed);
  v1::JobReleaseResponse response;
  Status status = internal::CallAdmin(
      *client_, "Jobs.Release", !kRetrySafe, call,
      [&](std::shared_ptr<grpc::Channel> channel, grpc::ClientContext* context) {
        return v1::Jobs::NewStub(std::move(channel))->Release(context, request, &response);
      });
  *released = response.released();
  return status;
}

Result<v1::JobStatusResponse> EpochJobLeases::JobStatus(const std::string& job_id,
                                                        const CallOptions& call) {
  v1::JobStatusRequest request;
  request.set_prefix(options_.keys.prefix);
  request.set_job(job_id);
  v1::JobStatusResponse response;
  Status status = internal::CallAdmin(
      *client_, "Jobs.Status", kRetrySafe, call,
      [&](std::shared_ptr<grpc::Channel> channel, grpc::ClientContext* context) {
        return v1::Jobs::NewStub(std::move(channel))->Status(context, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

Status EpochJobLeases::Complete(const JobLease& lease, const WorkerSession& session) {
  const CallOptions call = Call(session);
  bool released = false;
  Status status = CallRelease(lease, true, call, &released);
  if (status.ok() && released) return Status::Ok();
  if (!status.ok() && !IsOutcomeUnknown(status)) return status;
  // Not released, or not known: find out where the job is.
  Result<v1::JobStatusResponse> job = JobStatus(lease.job_id, call);
  if (!job.ok()) return status.ok() ? job.status() : status;
  if (!status.ok()) {  // completed under this token, or not
    if (job->completed() && !job->exists() && job->fencing_token() == lease.token.value()) {
      return Status::Ok();
    }
    return status;
  }
  // Not the holder any more. Out of the queue already (a later holder completed it): done.
  if (!job->exists()) return Status::Ok();
  return Status::Aborted("lost the lock of job " + lease.job_id + " before completing it");
}

Status EpochJobLeases::Release(const JobLease& lease, const WorkerSession& session) {
  bool released = false;
  return CallRelease(lease, false, Call(session), &released);
}

}  // namespace epoch::client
