// The etcd v3 error vocabulary, the one table of it in the repository: every error a layer can
// pass up has an identity (ErrorId) carried in its epoch::Status; etcd's exact message and gRPC
// code come from this table at the API edge (server/rpc/ grpc_util.h) and when a client turns a
// gRPC status back into an error (client/). Messages and codes are etcd's
// (etcdserver/api/v3rpc/rpctypes/error.go, v3.4, plus the 3.5 sort-option error): clientv3 matches
// errors by message string (rpctypes.ErrorDesc), so these texts never change. docs/
// etcd-compatibility.md lists them.
//
// The layers compare identities (status.Is(ErrorId::kNotLeader)), never message text. A check in
// the default test run (tests/layers/check_error_strings.sh) fails when an etcd message string
// appears anywhere else in the code.
//
// This header does not depend on gRPC: GrpcCode mirrors grpc::StatusCode's numeric values.
//
// Thread-safety: constants and pure functions only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "epoch/status.h"

namespace epoch {

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

// Every identified error. kNone (0) is a Status without one. The etcd errors come first, in the
// table's order; Epoch's own follow (they never reach a client under their own name).
enum class ErrorId : std::uint16_t {
  kNone = 0,
  kEmptyKey,
  kKeyNotFound,
  kValueProvided,
  kLeaseProvided,
  kTooManyOps,
  kDuplicateKey,
  kInvalidSortOption,
  kRequestTooLarge,
  kCompacted,
  kFutureRev,
  kNoSpace,
  kLeaseNotFound,
  kLeaseExist,
  kLeaseTtlTooLarge,
  kMemberExist,
  kPeerUrlExist,
  kMemberNotEnoughStarted,
  kMemberBadUrls,
  kMemberNotFound,
  kMemberNotLearner,
  kLearnerNotReady,
  kTooManyLearners,
  kNoLeader,
  kNotLeader,
  kLeaderChanged,
  kNotCapable,
  kStopped,
  kTimeout,
  kTimeoutDueToLeaderFail,
  kTimeoutDueToConnectionLost,
  kTooManyRequests,
  kUnhealthy,
  kCorrupt,
  kNotSupportedForLearner,
  kBadLeaderTransferee,
  kPermissionDenied,
  kAuthNotEnabled,
  kAuthFailed,
  kInvalidAuthToken,
  kRootUserNotExist,
  kRootRoleNotExist,
  kUserAlreadyExist,
  kUserEmpty,
  kUserNotFound,
  kRoleAlreadyExist,
  kRoleNotFound,
  kRoleEmpty,
  kRoleNotGranted,
  kPermissionNotGranted,
  kInvalidAuthMgmt,
  kAuthOldRevision,
  // Epoch's own.
  kProposalDropped,       // the Raft core refused a proposal (no leader yet, transfer in progress)
  kLeaderUnreachable,     // the leader's endpoint is not connected: the request was NOT sent
  kOutcomeUnknown,        // client: a write reached a server and may or may not have been applied
  kTxnReadTooLarge,       // a write txn's reads visit more keys than its entry allows
  kIdempotencyExpired,    // a session key at or below its client's expired watermark
  kIdempotencyTableFull,  // the idempotency table is at its records or bytes bound
  kAuthRateLimited,       // Authenticate refused unchecked: too many failed attempts
};

struct EtcdError {
  ErrorId id;
  GrpcCode code;
  std::string_view message;

  // The epoch::Status carrying this error: its identity, the nearest StatusCode, and the message
  // (with ": detail" or " (detail)" appended when given, for logs and the client).
  [[nodiscard]] Status ToStatus() const;
  [[nodiscard]] Status ToStatus(std::string_view detail) const;
};

namespace etcd_errors {
// The prefix of every etcd server error message.
inline constexpr std::string_view kMessagePrefix = "etcdserver: ";

// KV request validation.
inline constexpr EtcdError kEmptyKey{ErrorId::kEmptyKey, GrpcCode::kInvalidArgument,
                                     "etcdserver: key is not provided"};
inline constexpr EtcdError kKeyNotFound{ErrorId::kKeyNotFound, GrpcCode::kInvalidArgument,
                                        "etcdserver: key not found"};
inline constexpr EtcdError kValueProvided{ErrorId::kValueProvided, GrpcCode::kInvalidArgument,
                                          "etcdserver: value is provided"};
inline constexpr EtcdError kLeaseProvided{ErrorId::kLeaseProvided, GrpcCode::kInvalidArgument,
                                          "etcdserver: lease is provided"};
inline constexpr EtcdError kTooManyOps{ErrorId::kTooManyOps, GrpcCode::kInvalidArgument,
                                       "etcdserver: too many operations in txn request"};
inline constexpr EtcdError kDuplicateKey{ErrorId::kDuplicateKey, GrpcCode::kInvalidArgument,
                                         "etcdserver: duplicate key given in txn request"};
inline constexpr EtcdError kInvalidSortOption{
    ErrorId::kInvalidSortOption, GrpcCode::kInvalidArgument, "etcdserver: invalid sort option"};
inline constexpr EtcdError kRequestTooLarge{ErrorId::kRequestTooLarge, GrpcCode::kInvalidArgument,
                                            "etcdserver: request is too large"};
// MVCC.
inline constexpr EtcdError kCompacted{ErrorId::kCompacted, GrpcCode::kOutOfRange,
                                      "etcdserver: mvcc: required revision has been compacted"};
inline constexpr EtcdError kFutureRev{ErrorId::kFutureRev, GrpcCode::kOutOfRange,
                                      "etcdserver: mvcc: required revision is a future revision"};
inline constexpr EtcdError kNoSpace{ErrorId::kNoSpace, GrpcCode::kResourceExhausted,
                                    "etcdserver: mvcc: database space exceeded"};
// Leases.
inline constexpr EtcdError kLeaseNotFound{ErrorId::kLeaseNotFound, GrpcCode::kNotFound,
                                          "etcdserver: requested lease not found"};
inline constexpr EtcdError kLeaseExist{ErrorId::kLeaseExist, GrpcCode::kFailedPrecondition,
                                       "etcdserver: lease already exists"};
inline constexpr EtcdError kLeaseTtlTooLarge{ErrorId::kLeaseTtlTooLarge, GrpcCode::kOutOfRange,
                                             "etcdserver: too large lease TTL"};
// Cluster membership.
inline constexpr EtcdError kMemberExist{ErrorId::kMemberExist, GrpcCode::kFailedPrecondition,
                                        "etcdserver: member ID already exist"};
inline constexpr EtcdError kPeerUrlExist{ErrorId::kPeerUrlExist, GrpcCode::kFailedPrecondition,
                                         "etcdserver: Peer URLs already exists"};
inline constexpr EtcdError kMemberNotEnoughStarted{
    ErrorId::kMemberNotEnoughStarted, GrpcCode::kFailedPrecondition,
    "etcdserver: re-configuration failed due to not enough started members"};
inline constexpr EtcdError kMemberBadUrls{ErrorId::kMemberBadUrls, GrpcCode::kInvalidArgument,
                                          "etcdserver: given member URLs are invalid"};
inline constexpr EtcdError kMemberNotFound{ErrorId::kMemberNotFound, GrpcCode::kNotFound,
                                           "etcdserver: member not found"};
inline constexpr EtcdError kMemberNotLearner{ErrorId::kMemberNotLearner,
                                             GrpcCode::kFailedPrecondition,
                                             "etcdserver: can only promote a learner member"};
inline constexpr EtcdError kLearnerNotReady{
    ErrorId::kLearnerNotReady, GrpcCode::kFailedPrecondition,
    "etcdserver: can only promote a learner member which is in sync with leader"};
inline constexpr EtcdError kTooManyLearners{ErrorId::kTooManyLearners,
                                            GrpcCode::kFailedPrecondition,
                                            "etcdserver: too many learner members in cluster"};
// Leadership and availability.
inline constexpr EtcdError kNoLeader{ErrorId::kNoLeader, GrpcCode::kUnavailable,
                                     "etcdserver: no leader"};
inline constexpr EtcdError kNotLeader{ErrorId::kNotLeader, GrpcCode::kFailedPrecondition,
                                      "etcdserver: not leader"};
inline constexpr EtcdError kLeaderChanged{ErrorId::kLeaderChanged, GrpcCode::kUnavailable,
                                          "etcdserver: leader changed"};
inline constexpr EtcdError kNotCapable{ErrorId::kNotCapable, GrpcCode::kUnavailable,
                                       "etcdserver: not capable"};
inline constexpr EtcdError kStopped{ErrorId::kStopped, GrpcCode::kUnavailable,
                                    "etcdserver: server stopped"};
inline constexpr EtcdError kTimeout{ErrorId::kTimeout, GrpcCode::kUnavailable,
                                    "etcdserver: request timed out"};
inline constexpr EtcdError kTimeoutDueToLeaderFail{
    ErrorId::kTimeoutDueToLeaderFail, GrpcCode::kUnavailable,
    "etcdserver: request timed out, possibly due to previous leader failure"};
inline constexpr EtcdError kTimeoutDueToConnectionLost{
    ErrorId::kTimeoutDueToConnectionLost, GrpcCode::kUnavailable,
    "etcdserver: request timed out, possibly due to connection lost"};
inline constexpr EtcdError kTooManyRequests{ErrorId::kTooManyRequests, GrpcCode::kResourceExhausted,
                                            "etcdserver: too many requests"};
inline constexpr EtcdError kUnhealthy{ErrorId::kUnhealthy, GrpcCode::kUnavailable,
                                      "etcdserver: unhealthy cluster"};
inline constexpr EtcdError kCorrupt{ErrorId::kCorrupt, GrpcCode::kDataLoss,
                                    "etcdserver: corrupt cluster"};
inline constexpr EtcdError kNotSupportedForLearner{ErrorId::kNotSupportedForLearner,
                                                   GrpcCode::kUnavailable,
                                                   "etcdserver: rpc not supported for learner"};
inline constexpr EtcdError kBadLeaderTransferee{ErrorId::kBadLeaderTransferee,
                                                GrpcCode::kFailedPrecondition,
                                                "etcdserver: bad leader transferee"};
// Auth.
inline constexpr EtcdError kPermissionDenied{
    ErrorId::kPermissionDenied, GrpcCode::kPermissionDenied, "etcdserver: permission denied"};
inline constexpr EtcdError kAuthNotEnabled{ErrorId::kAuthNotEnabled, GrpcCode::kFailedPrecondition,
                                           "etcdserver: authentication is not enabled"};
inline constexpr EtcdError kAuthFailed{
    ErrorId::kAuthFailed, GrpcCode::kInvalidArgument,
    "etcdserver: authentication failed, invalid user ID or password"};
inline constexpr EtcdError kInvalidAuthToken{ErrorId::kInvalidAuthToken, GrpcCode::kUnauthenticated,
                                             "etcdserver: invalid auth token"};
inline constexpr EtcdError kRootUserNotExist{ErrorId::kRootUserNotExist,
                                             GrpcCode::kFailedPrecondition,
                                             "etcdserver: root user does not exist"};
inline constexpr EtcdError kRootRoleNotExist{ErrorId::kRootRoleNotExist,
                                             GrpcCode::kFailedPrecondition,
                                             "etcdserver: root user does not have root role"};
inline constexpr EtcdError kUserAlreadyExist{ErrorId::kUserAlreadyExist,
                                             GrpcCode::kFailedPrecondition,
                                             "etcdserver: user name already exists"};
inline constexpr EtcdError kUserEmpty{ErrorId::kUserEmpty, GrpcCode::kInvalidArgument,
                                      "etcdserver: user name is empty"};
inline constexpr EtcdError kUserNotFound{ErrorId::kUserNotFound, GrpcCode::kFailedPrecondition,
                                         "etcdserver: user name not found"};
inline constexpr EtcdError kRoleAlreadyExist{ErrorId::kRoleAlreadyExist,
                                             GrpcCode::kFailedPrecondition,
                                             "etcdserver: role name already exists"};
inline constexpr EtcdError kRoleNotFound{ErrorId::kRoleNotFound, GrpcCode::kFailedPrecondition,
                                         "etcdserver: role name not found"};
inline constexpr EtcdError kRoleEmpty{ErrorId::kRoleEmpty, GrpcCode::kInvalidArgument,
                                      "etcdserver: role name is empty"};
inline constexpr EtcdError kRoleNotGranted{ErrorId::kRoleNotGranted, GrpcCode::kFailedPrecondition,
                                           "etcdserver: role is not granted to the user"};
inline constexpr EtcdError kPermissionNotGranted{
    ErrorId::kPermissionNotGranted, GrpcCode::kFailedPrecondition,
    "etcdserver: permission is not granted to the role"};
inline constexpr EtcdError kInvalidAuthMgmt{ErrorId::kInvalidAuthMgmt, GrpcCode::kInvalidArgument,
                                            "etcdserver: invalid auth management"};
inline constexpr EtcdError kAuthOldRevision{ErrorId::kAuthOldRevision, GrpcCode::kInvalidArgument,
                                            "etcdserver: revision of auth store is old"};
// Epoch's own.
inline constexpr EtcdError kProposalDropped{ErrorId::kProposalDropped, GrpcCode::kUnavailable,
                                            "etcdserver: proposal dropped"};
inline constexpr EtcdError kLeaderUnreachable{ErrorId::kLeaderUnreachable, GrpcCode::kUnavailable,
                                              "epoch: leader unreachable, request not sent"};
inline constexpr EtcdError kOutcomeUnknown{ErrorId::kOutcomeUnknown, GrpcCode::kUnknown,
                                           "outcome unknown"};
inline constexpr EtcdError kTxnReadTooLarge{
    ErrorId::kTxnReadTooLarge, GrpcCode::kInvalidArgument,
    "epoch: a transaction with writes may read at most --max-txn-read-keys keys"};
// epoch.v1.Idempotent: the key's record expired, so whether the first attempt applied is not
// known; the request was not applied now.
inline constexpr EtcdError kIdempotencyExpired{ErrorId::kIdempotencyExpired,
                                               GrpcCode::kFailedPrecondition,
                                               "epoch: idempotency key expired; outcome unknown"};
inline constexpr EtcdError kIdempotencyTableFull{
    ErrorId::kIdempotencyTableFull, GrpcCode::kResourceExhausted,
    "epoch: idempotency table full (--idempotency-max-records / --idempotency-max-bytes); "
    "request not applied"};
// Authenticate refused without checking the password (auth_failure_limiter.h): RESOURCE_EXHAUSTED,
// the code etcd's clients do not retry at once; etcd has no such limit, so the message is Epoch's.
inline constexpr EtcdError kAuthRateLimited{ErrorId::kAuthRateLimited, GrpcCode::kResourceExhausted,
                                            "epoch: too many failed authentication attempts"};
}  // namespace etcd_errors

// Every error above, in ErrorId order (index = ErrorId - 1), for lookups and tests.
std::span<const EtcdError> AllEtcdErrors();

// The table entry of `id`, or nullptr for kNone.
const EtcdError* FindEtcdError(ErrorId id);
// The etcd error whose message is exactly `message`, or nullptr. Only where text arrives from
// outside (a gRPC status from another process, a stored record): the layers compare ids.
const EtcdError* FindEtcdError(std::string_view message);

// `status` with its identity recovered from its message when it has none (a gRPC status from
// another process, a stored record). Unchanged when the message is not one of the table's.
[[nodiscard]] Status IdentifyEtcdError(Status status);

// The gRPC code to answer with for `status`: the table's code when it has an identity, otherwise
// the nearest code for status.code() (kOk for an OK status).
GrpcCode GrpcCodeFor(const Status& status);

}  // namespace epoch
