// AuthFailureLimiter: brute-force protection of Authenticate, beyond etcd. Each user name and each
// client address (the host of gRPC's peer string, without the port) has a token bucket of failed
// attempts (NodeConfig::auth_failure_limits): `burst` tokens, one more every `refill`. An attempt
// takes a token from both buckets before its password is checked (so concurrent guesses count);
// a success gives them back. A failure that leaves a bucket empty blocks its key for `refill`;
// each failure after that blocks it again for twice as long, at most `backoff_max`, until a
// success (for the user's key) or a quiet period of `backoff_max` after the last block forgets
// the blocks. A refused attempt costs no password check and extends nothing.
//
// Memory is bounded: at most kMaxKeys keys per kind; idle keys (full bucket, not blocked) are
// dropped when the table is full, and a new key is not tracked while it stays full (the other
// kind's bucket still limits that attempt).
//
// Threading: thread-safe (one mutex, short holds). Time is passed in, so tests drive it.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "epoch/node/node_config.h"

namespace epoch::server {

// "ipv4:127.0.0.1:5000" -> "ipv4:127.0.0.1"; "ipv6:[::1]:5000" -> "ipv6:[::1]"; anything without
// a port is kept whole.
[[nodiscard]] std::string PeerHost(std::string_view grpc_peer);

class AuthFailureLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kMaxKeys = 10'000;

  explicit AuthFailureLimiter(const AuthFailureLimits& limits) : limits_(limits) {}

  // Whether an attempt by `user` from `host` may check its password at `now`; if so it has taken
  // a token from both buckets, and Finish must follow.
  [[nodiscard]] bool Admit(std::string_view user, std::string_view host, Clock::time_point now);
  // The admitted attempt's outcome: a success returns the tokens and clears the user's blocks; a
  // failure may block the keys whose bucket it emptied.
  void Finish(std::string_view user, std::string_view host, bool failed, Clock::time_point now);

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point refilled;
    Clock::time_point blocked_until;
    int blocks = 0;  // blocks since the last success or quiet period
  };
  using Table = std::unordered_map<std::string, Bucket>;

  // The bucket of `key` refilled to `now`; nullptr when the table is full of active keys.
  Bucket* Find(Table& table, std::string_view key, Clock::time_point now);
  void Refill(Bucket& b, Clock::time_point now) const;
  void AfterFailure(Bucket& b, Clock::time_point now) const;

  const AuthFailureLimits limits_;
  std::mutex mu_;
  Table users_;  // guarded by mu_
  Table hosts_;  // guarded by mu_
};

}  // namespace epoch::server
