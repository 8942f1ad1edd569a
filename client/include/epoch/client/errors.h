// Client error vocabulary beyond epoch::Status codes.
//
// OutcomeUnknown: a non-idempotent call (Put, DeleteRange, Txn, Compact, LeaseGrant) reached a
// server and then failed in a way that does not say whether it was applied — the connection
// broke, the deadline passed, the call was cancelled, or the server answered "request timed out"
// or "leader changed". Without a server-side idempotency key the client never retries such a
// call (a retry could apply it twice); with one (epoch.v1.Idempotent, client.h) it retries until
// the deadline, and OutcomeUnknown means the deadline or a stop cut that short, or the server's
// record of the key expired. The caller must find out (read back, or compare revisions) before
// doing anything that assumes either outcome. It is a Status with code kAborted and identity ErrorId::kOutcomeUnknown whose
// message starts with kOutcomeUnknownPrefix; IsOutcomeUnknown() is the only supported test.
//
// Threading: pure functions.
#pragma once

#include <string_view>

#include "epoch/etcd_errors.h"
#include "epoch/status.h"

namespace epoch::client {

inline constexpr std::string_view kOutcomeUnknownPrefix = "outcome unknown: ";

inline Status OutcomeUnknown(const Status& cause) {
  return Status::FromCode(StatusCode::kAborted,
                          std::string(kOutcomeUnknownPrefix) + cause.ToString(),
                          ErrorId::kOutcomeUnknown);
}

inline bool IsOutcomeUnknown(const Status& status) { return status.Is(ErrorId::kOutcomeUnknown); }

}  // namespace epoch::client
