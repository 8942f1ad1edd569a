#include "epoch/etcd_errors.h"

#include <fmt/format.h>

#include <array>
#include <cstddef>

namespace epoch {
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
    e::kRootUserNotExist,
    e::kRootRoleNotExist,
    e::kUserAlreadyExist,
    e::kUserEmpty,
    e::kUserNotFound,
    e::kRoleAlreadyExist,
    e::kRoleNotFound,
    e::kRoleEmpty,
    e::kRoleNotGranted,
    e::kPermissionNotGranted,
    e::kInvalidAuthMgmt,
    e::kAuthOldRevision,
    e::kProposalDropped,
    e::kLeaderUnreachable,
    e::kOutcomeUnknown,
    e::kTxnReadTooLarge,
    e::kIdempotencyExpired,
    e::kIdempotencyTableFull,
    e::kAuthRateLimited,
};

// The table is indexed by id: an entry out of order is a compile error, not a wrong lookup.
constexpr bool InIdOrder() {
  for (std::size_t i = 0; i < kAll.size(); ++i) {
    if (static_cast<std::size_t>(kAll[i].id) != i + 1) return false;
  }
  return true;
}
static_assert(InIdOrder(), "etcd_errors: kAll must list the errors in ErrorId order");

}  // namespace

Status EtcdError::ToStatus() const {
  // "not leader" keeps Epoch's own code, which the client library's retry logic also knows.
  StatusCode code_here =
      id == ErrorId::kNotLeader ? StatusCode::kNotLeader : NearestStatusCode(code);
  return Status::FromCode(code_here, std::string(message), id);
}

Status EtcdError::ToStatus(std::string_view detail) const {
  StatusCode code_here =
      id == ErrorId::kNotLeader ? StatusCode::kNotLeader : NearestStatusCode(code);
  return Status::FromCode(code_here, fmt::format("{} ({})", message, detail), id);
}

std::span<const EtcdError> AllEtcdErrors() { return kAll; }

const EtcdError* FindEtcdError(ErrorId id) {
  auto index = static_cast<std::size_t>(id);
  if (index == 0 || index > kAll.size()) return nullptr;
  return &kAll[index - 1];
}

const EtcdError* FindEtcdError(std::string_view message) {
  for (const EtcdError& err : kAll) {
    if (err.message == message) return &err;
  }
  return nullptr;
}

Status IdentifyEtcdError(Status status) {
  if (status.ok() || status.id() != ErrorId{}) return status;
  const EtcdError* err = FindEtcdError(status.message());
  if (err == nullptr) return status;
  return Status::FromCode(status.code(), status.message(), err->id);
}

GrpcCode GrpcCodeFor(const Status& status) {
  if (status.ok()) return GrpcCode::kOk;
  if (const EtcdError* err = FindEtcdError(status.id())) return err->code;
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

}  // namespace epoch
