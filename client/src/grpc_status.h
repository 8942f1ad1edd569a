// How the client reads a failed gRPC call: the epoch::Status it becomes, and what a retry loop
// may do next. etcd servers (and Epoch, which keeps etcd's codes and texts) signal most
// conditions by message string (docs/etcd-compatibility.md §3.6), so classification looks at both.
//
// Private to client/. Threading: pure functions.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>
#include <string_view>

#include "epoch/status.h"

namespace epoch::client::internal {

enum class Disposition {
  kOk,
  // The server refused before doing anything (not leader, no leader, too many requests):
  // safe to send again, even a write, after backoff / to another endpoint.
  kNotApplied,
  // Transport trouble or a server-side timeout: a read may be retried; a write that was sent
  // has an unknown outcome.
  kTransient,
  // The caller's deadline passed or the call was cancelled: stop. Unknown outcome for a write.
  kStopped,
  // A definite answer (invalid argument, not found, compacted, ...): return it as is.
  kFinal,
};

struct Classified {
  Disposition disposition;
  Status status;            // OK when disposition == kOk
  bool not_leader = false;  // the endpoint said it is not the leader: look for the leader
};

Classified Classify(const grpc::Status& status);

// The metadata key of the auth token on every call, as etcd's clients send it.
inline constexpr std::string_view kTokenMetadata = "token";

// Whether the server refused the call's token without acting on it: "invalid auth token"
// (expired, revoked, or unknown to this member) or "revision of auth store is old". A fresh
// token may succeed.
bool IsTokenRefusal(const Status& status);
// The same for the text of a watch create's cancel_reason.
bool IsTokenRefusalText(const std::string& message);

}  // namespace epoch::client::internal
