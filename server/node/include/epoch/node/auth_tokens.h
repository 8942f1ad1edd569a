// AuthTokens: the simple tokens of the Auth service (etcd's `--auth-token simple`) known to this
// member. A token is 32 random bytes (RAND_bytes, hex) chosen by the member that checked the
// password; it becomes valid on every member when its Authenticate entry is applied, so a token
// survives a leader change. It expires on the replicated cluster clock `--auth-token-ttl` after it
// was issued or last used on this member: each use here renews it for another TTL, as etcd's
// simple-token TTL keeper does (a client then authenticates again, as etcd's clients do on
// "invalid auth token").
// Kept in memory, as etcd keeps simple tokens: a restarted member, or one that installed a
// snapshot, knows only the tokens applied since.
//
// Threading: OnApplied runs on the Raft strand; Lookup on any thread (one mutex, short holds).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "epoch/state/kv_store.h"

namespace epoch::server {

class AuthTokens {
 public:
  // `renew_ttl_ms`: how long a token stays valid after its last use (--auth-token-ttl).
  explicit AuthTokens(std::int64_t renew_ttl_ms) : renew_ttl_ms_(renew_ttl_ms) {}

  // Tokens held at most; past it the one closest to expiry is dropped (a client that lost its
  // token authenticates again). Expired tokens are dropped when their user's tokens are, or
  // when auth is disabled, or to make room.
  static constexpr std::size_t kMaxTokens = 100'000;

  // A fresh random token (hex); empty if the random generator failed.
  static std::string NewToken();

  // Applied-entry hook: records the tokens of applied Authenticate entries and drops the tokens
  // an auth change ends (auth disabled, a user deleted or given a new password).
  void OnApplied(const ApplyResult& result);
  // The user `token` names at cluster time `now_cluster_ms`; nullopt when unknown or expired. A
  // valid token is renewed: it expires no sooner than `now_cluster_ms` + the renew TTL.
  [[nodiscard]] std::optional<std::string> Lookup(std::string_view token,
                                                  std::int64_t now_cluster_ms);
  [[nodiscard]] std::size_t size() const;

 private:
  struct Entry {
    std::string user;
    std::int64_t expires_cluster_ms = 0;
  };
  const std::int64_t renew_ttl_ms_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> tokens_;
};

}  // namespace epoch::server
