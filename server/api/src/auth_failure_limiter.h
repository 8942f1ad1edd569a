// AuthFailureLimiter: brute-force protection of Authenticate, beyond etcd. Each user name and each
// client address (the host of gRPC's peer string, without the port) has a bucket of failed
// attempts (epoch/failure_buckets.h; NodeConfig::auth_failure_limits). An attempt takes a token
// from both buckets before its password is checked (so concurrent guesses count); a success gives
// them back and forgives the user's blocks. A failure that empties a bucket blocks its key, for
// twice as long each time up to the cap.
//
// Threading: thread-safe (one mutex, short holds). Time is passed in, so tests drive it.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>

#include "epoch/failure_buckets.h"

namespace epoch::server {

// "ipv4:127.0.0.1:5000" -> "ipv4:127.0.0.1"; "ipv6:[::1]:5000" -> "ipv6:[::1]"; anything without
// a port is kept whole.
[[nodiscard]] std::string PeerHost(std::string_view grpc_peer);

class AuthFailureLimiter {
 public:
  using Clock = FailureBuckets::Clock;

  explicit AuthFailureLimiter(const FailureLimits& limits) : users_(limits), hosts_(limits) {}

  // Whether an attempt by `user` from `host` may check its password at `now`; if so it has taken
  // a token from both buckets, and Finish must follow.
  [[nodiscard]] bool Admit(std::string_view user, std::string_view host, Clock::time_point now);
  // The admitted attempt's outcome: a success returns the tokens and clears the user's blocks; a
  // failure may block the keys whose bucket it emptied.
  void Finish(std::string_view user, std::string_view host, bool failed, Clock::time_point now);

 private:
  std::mutex mu_;
  FailureBuckets users_;  // guarded by mu_
  FailureBuckets hosts_;  // guarded by mu_
};

}  // namespace epoch::server
