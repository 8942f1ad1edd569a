#include "grpc_status.h"

#include <fmt/format.h>

#include <string>
#include <string_view>

#include "epoch/etcd_errors.h"

namespace epoch::client::internal {
namespace {

std::string_view CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::OK: return "OK";
    case grpc::CANCELLED: return "CANCELLED";
    case grpc::UNKNOWN: return "UNKNOWN";
    case grpc::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::NOT_FOUND: return "NOT_FOUND";
    case grpc::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::UNAUTHENTICATED: return "UNAUTHENTICATED";
    case grpc::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::ABORTED: return "ABORTED";
    case grpc::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::INTERNAL: return "INTERNAL";
    case grpc::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::DATA_LOSS: return "DATA_LOSS";
    default: return "?";
  }
}

}  // namespace

Classified Classify(const grpc::Status& status) {
  if (status.ok()) return {Disposition::kOk, Status::Ok()};
  const std::string& msg = status.error_message();
  // etcd's errors by identity: clientv3 matches the whole message (rpctypes.ErrorDesc), as here.
  const EtcdError* known = FindEtcdError(msg);
  const ErrorId id = known != nullptr ? known->id : ErrorId{};
  const std::string text = fmt::format("{} (grpc {})", msg, CodeName(status.error_code()));
  switch (status.error_code()) {
    case grpc::FAILED_PRECONDITION:
      // etcd: ErrGRPCNotLeader — rejected before proposing.
      if (id == ErrorId::kNotLeader) {
        return {Disposition::kNotApplied, Status::FromCode(StatusCode::kNotLeader, text, id), true};
      }
      return {Disposition::kFinal, Status::FromCode(StatusCode::kFailedPrecondition, text, id)};
    case grpc::UNAVAILABLE:
      // etcd: ErrGRPCNoLeader — refused, nothing proposed.
      if (id == ErrorId::kNoLeader) {
        return {Disposition::kNotApplied, Status::FromCode(StatusCode::kUnavailable, text, id),
                true};
      }
      // "leader changed", "request timed out[, possibly due to ...]", or transport failure.
      return {Disposition::kTransient, Status::FromCode(StatusCode::kUnavailable, text, id)};
    case grpc::RESOURCE_EXHAUSTED:
      // etcd: ErrGRPCTooManyRequests — refused before proposing.
      if (id == ErrorId::kTooManyRequests) {
        return {Disposition::kNotApplied, Status::FromCode(StatusCode::kUnavailable, text, id)};
      }
      return {Disposition::kFinal, Status::FromCode(StatusCode::kFailedPrecondition, text, id)};
    case grpc::DEADLINE_EXCEEDED: return {Disposition::kStopped, Status::Timeout(text)};
    case grpc::CANCELLED: return {Disposition::kStopped, Status::Aborted("cancelled: " + text)};
    case grpc::NOT_FOUND:
      return {Disposition::kFinal, Status::FromCode(StatusCode::kNotFound, text, id)};
    case grpc::INVALID_ARGUMENT:
    case grpc::OUT_OF_RANGE:
    case grpc::ALREADY_EXISTS:
      return {Disposition::kFinal, Status::FromCode(StatusCode::kInvalidArgument, text, id)};
    case grpc::PERMISSION_DENIED:
    case grpc::UNAUTHENTICATED:
    case grpc::UNIMPLEMENTED:
      return {Disposition::kFinal, Status::FromCode(StatusCode::kFailedPrecondition, text, id)};
    case grpc::UNKNOWN:
    case grpc::INTERNAL:
    case grpc::ABORTED:
    case grpc::DATA_LOSS:
    default:
      // Nothing says whether the server acted: a read may retry, a write is ambiguous.
      return {Disposition::kTransient, Status::IOError(text)};
  }
}

bool IsTokenRefusal(const Status& status) {
  return status.Is(ErrorId::kInvalidAuthToken) || status.Is(ErrorId::kAuthOldRevision);
}

bool IsTokenRefusalText(const std::string& message) {
  const EtcdError* known = FindEtcdError(message);
  return known != nullptr &&
         (known->id == ErrorId::kInvalidAuthToken || known->id == ErrorId::kAuthOldRevision);
}

}  // namespace epoch::client::internal
