// The etcd v3 error vocabulary: exact messages and gRPC codes of
// etcd-io/etcd:etcdserver/api/v3rpc/rpctypes/error.go (v3.4, plus the 3.5 sort-option error),
// listed in shared/reference/etcd-v3-wire.md §2c item 8. Clients (clientv3's rpctypes.ErrorDesc)
// match errors by message string, so these texts must never change.
//
// Who uses it: the state machine returns these messages inside epoch::Status; the gRPC layer maps
// a Status back to (gRPC code, message) with GrpcCodeFor(). This header does not depend on gRPC:
// GrpcCode mirrors grpc::StatusCode's numeric values.
//
// Thread-safety: constants and pure functions only.
#pragma once

#include <span>
#include <string_view>

#include "epoch/status.h"

namespace epoch::server {

// Numeric values are grpc::StatusCode's (and google.rpc.Code's).
enum class GrpcCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

struct EtcdError {
  GrpcCode code;
  std::string_view message;

  // The epoch::Status carrying this error (message verbatim, nearest StatusCode).
  [[nodiscard]] Status ToStatus() const;
};

namespace etcd_errors {
// KV request validation.
inline constexpr EtcdError kEmptyKey{GrpcCode::kInvalidArgument, "etcdserver: key is not provided"};
inline constexpr EtcdError kKeyNotFound{GrpcCode::kInvalidArgument, "etcdserver: key not found"};
inline constexpr EtcdError kValueProvided{GrpcCode::kInvalidArgument,
                                          "etcdserver: value is provided"};
inline constexpr EtcdError kLeaseProvided{GrpcCode::kInvalidArgument,
                                          "etcdserver: lease is provided"};
inline constexpr EtcdError kTooManyOps{GrpcCode::kInvalidArgument,
                                       "etcdserver: too many operations in txn request"};
inline constexpr EtcdError kDuplicateKey{GrpcCode::kInvalidArgument,
                                         "etcdserver: duplicate key given in txn request"};
inline constexpr EtcdError kInvalidSortOption{GrpcCode::kInvalidArgument,
                                              "etcdserver: invalid sort option"};
inline constexpr EtcdError kRequestTooLarge{GrpcCode::kInvalidArgument,
                                            "etcdserver: request is too large"};
// MVCC.
inline constexpr EtcdError kCompacted{GrpcCode::kOutOfRange,
                                      "etcdserver: mvcc: required revision has been compacted"};
inline constexpr EtcdError kFutureRev{GrpcCode::kOutOfRange,
                                      "etcdserver: mvcc: required revision is a future revision"};
inline constexpr EtcdError kNoSpace{GrpcCode::kResourceExhausted,
                                    "etcdserver: mvcc: database space exceeded"};
// Leases.
inline constexpr EtcdError kLeaseNotFound{GrpcCode::kNotFound,
                                          "etcdserver: requested lease not found"};
inline constexpr EtcdError kLeaseExist{GrpcCode::kFailedPrecondition,
                                       "etcdserver: lease already exists"};
inline constexpr EtcdError kLeaseTtlTooLarge{GrpcCode::kOutOfRange,
                                             "etcdserver: too large lease TTL"};
// Cluster membership.
inline constexpr EtcdError kMemberExist{GrpcCode::kFailedPrecondition,
                                        "etcdserver: member ID already exist"};
inline constexpr EtcdError kPeerUrlExist{GrpcCode::kFailedPrecondition,
                                         "etcdserver: Peer URLs already exists"};
inline constexpr EtcdError kMemberNotEnoughStarted{
    GrpcCode::kFailedPrecondition,
    "etcdserver: re-configuration failed due to not enough started members"};
inline constexpr EtcdError kMemberBadUrls{GrpcCode::kInvalidArgument,
                                          "etcdserver: given member URLs are invalid"};
inline constexpr EtcdError kMemberNotFound{GrpcCode::kNotFound, "etcdserver: member not found"};
inline constexpr EtcdError kMemberNotLearner{GrpcCode::kFailedPrecondition,
                                             "etcdserver: can only promote a learner member"};
inline constexpr EtcdError kLearnerNotReady{
    GrpcCode::kFailedPrecondition,
    "etcdserver: can only promote a learner member which is in sync with leader"};
inline constexpr EtcdError kTooManyLearners{GrpcCode::kFailedPrecondition,
                                            "etcdserver: too many learner members in cluster"};
// Leadership and availability.
inline constexpr EtcdError kNoLeader{GrpcCode::kUnavailable, "etcdserver: no leader"};
inline constexpr EtcdError kNotLeader{GrpcCode::kFailedPrecondition, "etcdserver: not leader"};
inline constexpr EtcdError kLeaderChanged{GrpcCode::kUnavailable, "etcdserver: leader changed"};
inline constexpr EtcdError kNotCapable{GrpcCode::kUnavailable, "etcdserver: not capable"};
inline constexpr EtcdError kStopped{GrpcCode::kUnavailable, "etcdserver: server stopped"};
inline constexpr EtcdError kTimeout{GrpcCode::kUnavailable, "etcdserver: request timed out"};
inline constexpr EtcdError kTimeoutDueToLeaderFail{
    GrpcCode::kUnavailable,
    "etcdserver: request timed out, possibly due to previous leader failure"};
inline constexpr EtcdError kTimeoutDueToConnectionLost{
    GrpcCode::kUnavailable, "etcdserver: request timed out, possibly due to connection lost"};
inline constexpr EtcdError kTooManyRequests{GrpcCode::kResourceExhausted,
                                            "etcdserver: too many requests"};
inline constexpr EtcdError kUnhealthy{GrpcCode::kUnavailable, "etcdserver: unhealthy cluster"};
inline constexpr EtcdError kCorrupt{GrpcCode::kDataLoss, "etcdserver: corrupt cluster"};
inline constexpr EtcdError kNotSupportedForLearner{GrpcCode::kUnavailable,
                                                   "etcdserver: rpc not supported for learner"};
inline constexpr EtcdError kBadLeaderTransferee{GrpcCode::kFailedPrecondition,
                                                "etcdserver: bad leader transferee"};
// Auth.
inline constexpr EtcdError kPermissionDenied{GrpcCode::kPermissionDenied,
                                             "etcdserver: permission denied"};
inline constexpr EtcdError kAuthNotEnabled{GrpcCode::kFailedPrecondition,
                                           "etcdserver: authentication is not enabled"};
inline constexpr EtcdError kAuthFailed{
    GrpcCode::kInvalidArgument, "etcdserver: authentication failed, invalid user ID or password"};
inline constexpr EtcdError kInvalidAuthToken{GrpcCode::kUnauthenticated,
                                             "etcdserver: invalid auth token"};
}  // namespace etcd_errors

// Every error above, for lookups and tests.
std::span<const EtcdError> AllEtcdErrors();

// The etcd error whose message is exactly `message`, or nullptr.
const EtcdError* FindEtcdError(std::string_view message);

// The gRPC code to answer with for `status`: the etcd error's own code when the message is one of
// etcd's, otherwise the nearest code for status.code() (kOk for an OK status).
GrpcCode GrpcCodeFor(const Status& status);

}  // namespace epoch::server
