#include "epoch/server/etcd_errors.h"

#include <array>

#include "status_util.h"

namespace epoch::server {

namespace {

StatusCode NearestStatusCode(GrpcCode code) {
  switch (code) {
    case GrpcCode::kOk: return StatusCode::kOk;
    case GrpcCode::kNotFound: return StatusCode::kNotFound;
    case GrpcCode::kFailedPrecondition: return StatusCode::kFailedPrecondition;
    case GrpcCode::kUnavailable:
    case GrpcCode::kResourceExhausted: return StatusCode::kUnavailable;
    case GrpcCode::kDeadlineExceeded: return StatusCode::kTimeout;
    case GrpcCode::kAborted:
    case GrpcCode::kCancelled: return StatusCode::kAborted;
    case GrpcCode::kDataLoss: return StatusCode::kCorruption;
    case GrpcCode::kPermissionDenied:
    case GrpcCode::kUnauthenticated: return StatusCode::kFailedPrecondition;
    default: return StatusCode::kInvalidArgument;
  }
}

namespace e = etcd_errors;
constexpr std::array kAll = {
    e::kEmptyKey,
    e::kKeyNotFound,
    e::kValueProvided,
    e::kLeaseProvided,
    e::kTooManyOps,
    e::kDuplicateKey,
    e::kInvalidSortOption,
    e::kRequestTooLarge,
    e::kCompacted,
    e::kFutureRev,
    e::kNoSpace,
    e::kLeaseNotFound,
    e::kLeaseExist,
    e::kLeaseTtlTooLarge,
    e::kMemberExist,
    e::kPeerUrlExist,
    e::kMemberNotEnoughStarted,
    e::kMemberBadUrls,
    e::kMemberNotFound,
    e::kMemberNotLearner,
    e::kLearnerNotReady,
    e::kTooManyLearners,
    e::kNoLeader,
    e::kNotLeader,
    e::kLeaderChanged,
    e::kNotCapable,
    e::kStopped,
    e::kTimeout,
    e::kTimeoutDueToLeaderFail,
    e::kTimeoutDueToConnectionLost,
    e::kTooManyRequests,
    e::kUnhealthy,
    e::kCorrupt,
    e::kNotSupportedForLearner,
    e::kBadLeaderTransferee,
    e::kPermissionDenied,
    e::kAuthNotEnabled,
    e::kAuthFailed,
    e::kInvalidAuthToken,
};

}  // namespace

Status MakeStatus(StatusCode code, std::string msg) {
  switch (code) {
    case StatusCode::kOk: return Status::Ok();
    case StatusCode::kNotFound: return Status::NotFound(std::move(msg));
    case StatusCode::kCorruption: return Status::Corruption(std::move(msg));
    case StatusCode::kIOError: return Status::IOError(std::move(msg));
    case StatusCode::kInvalidArgument: return Status::InvalidArgument(std::move(msg));
    case StatusCode::kNotLeader: return Status::NotLeader(std::move(msg));
    case StatusCode::kUnavailable: return Status::Unavailable(std::move(msg));
    case StatusCode::kTimeout: return Status::Timeout(std::move(msg));
    case StatusCode::kAborted: return Status::Aborted(std::move(msg));
    case StatusCode::kFailedPrecondition: return Status::FailedPrecondition(std::move(msg));
  }
  return Status::InvalidArgument(std::move(msg));
}

Status EtcdError::ToStatus() const {
  // "not leader" keeps Epoch's own code so callers can test for it without string matching.
  if (message == etcd_errors::kNotLeader.message) return Status::NotLeader(std::string(message));
  return MakeStatus(NearestStatusCode(code), std::string(message));
}

std::span<const EtcdError> AllEtcdErrors() { return kAll; }

const EtcdError* FindEtcdError(std::string_view message) {
  for (const EtcdError& err : kAll) {
    if (err.message == message) return &err;
  }
  return nullptr;
}

GrpcCode GrpcCodeFor(const Status& status) {
  if (status.ok()) return GrpcCode::kOk;
  if (const EtcdError* err = FindEtcdError(status.message())) return err->code;
  switch (status.code()) {
    case StatusCode::kOk: return GrpcCode::kOk;
    case StatusCode::kNotFound: return GrpcCode::kNotFound;
    case StatusCode::kCorruption: return GrpcCode::kDataLoss;
    case StatusCode::kIOError: return GrpcCode::kInternal;
    case StatusCode::kInvalidArgument: return GrpcCode::kInvalidArgument;
    case StatusCode::kNotLeader: return GrpcCode::kFailedPrecondition;
    case StatusCode::kUnavailable: return GrpcCode::kUnavailable;
    case StatusCode::kTimeout: return GrpcCode::kDeadlineExceeded;
    case StatusCode::kAborted: return GrpcCode::kAborted;
    case StatusCode::kFailedPrecondition: return GrpcCode::kFailedPrecondition;
  }
  return GrpcCode::kUnknown;
}

}  // namespace epoch::server
