// Client error vocabulary beyond epoch::Status codes.
//
// OutcomeUnknown: a non-idempotent call (Put, DeleteRange, Txn, Compact, LeaseGrant) reached a
// server and then failed in a way that does not say whether it was applied — the connection
// broke, the deadline passed, the call was cancelled, or the server answered "request timed out"
// or "leader changed". The client never retries such a call (a retry could apply it twice); the
// caller must find out (read back, or compare revisions) before doing anything that assumes
// either outcome. It is a Status with code kAborted whose message starts with
// kOutcomeUnknownPrefix; IsOutcomeUnknown() is the only supported test. (common/status.h has no
// dedicated code yet; when it gains one, only these two functions change.)
//
// Threading: pure functions.
#pragma once

#include <string_view>

#include "epoch/status.h"

namespace epoch::client {

inline constexpr std::string_view kOutcomeUnknownPrefix = "outcome unknown: ";

inline Status OutcomeUnknown(const Status& cause) {
  return Status::Aborted(std::string(kOutcomeUnknownPrefix) + cause.ToString());
}

inline bool IsOutcomeUnknown(const Status& status) {
  return status.code() == StatusCode::kAborted &&
         std::string_view(status.message()).starts_with(kOutcomeUnknownPrefix);
}

}  // namespace epoch::client
