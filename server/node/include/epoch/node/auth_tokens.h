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
// A token ends in ".<index>", the log index of its Authenticate entry (as etcd's). A client may
// authenticate on one member and call another before that one has applied the entry; rather than
// refuse the token there, WaitIssued waits (bounded in time and in callers) until this member has
// applied up to that index.
//
// Threading: OnApplied runs on the Raft strand; Lookup and WaitIssued on any thread (one mutex,
// short holds; WaitIssued blocks its caller up to its bound).
#pragma once

#include <chrono>
#include <condition_variable>
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

  // WaitIssued's bounds: how many callers wait at once, and how far past this member's applied
  // index a token's index may be and still be waited for (further is no recent token).
  static constexpr int kMaxWaiters = 8;
  static constexpr std::uint64_t kMaxIndexAhead = 10'000;

  // The log index a token names after its last '.'; nullopt when it names none.
  [[nodiscard]] static std::optional<LogIndex> IssuedIndex(std::string_view token);

  // Applied-entry hook for the entry at `index`: records the tokens of applied Authenticate
  // entries and drops the tokens an auth change ends (auth disabled, a user deleted or given a
  // new password).
  void OnApplied(LogIndex index, const ApplyResult& result);
  // This member's state covers the log up to `index` without OnApplied having seen each entry
  // (at start, or after installing a snapshot).
  void OnAppliedUpTo(LogIndex index);
  // The user `token` names at cluster time `now_cluster_ms`; nullopt when unknown or expired. A
  // valid token is renewed: it expires no sooner than `now_cluster_ms` + the renew TTL.
  [[nodiscard]] std::optional<std::string> Lookup(std::string_view token,
                                                  std::int64_t now_cluster_ms);
  // For a token Lookup did not find: if `token` names an index this member has not applied yet,
  // waits until it has (or until `deadline`). True when the index is applied (now, or already:
  // perhaps since the caller's Lookup), so a second Lookup is meaningful; false when the token
  // names no index, an index too far ahead, the deadline passed, or kMaxWaiters callers already
  // wait (the last two counted).
  bool WaitIssued(std::string_view token, std::chrono::steady_clock::time_point deadline);

  struct WaitCounts {
    std::uint64_t applied = 0;    // waited, and the index was applied
    std::uint64_t timed_out = 0;  // waited until the deadline
    std::uint64_t busy = 0;       // not waited: kMaxWaiters already waiting
    int waiting = 0;              // callers waiting now
  };
  [[nodiscard]] WaitCounts wait_counts() const;
  [[nodiscard]] std::size_t size() const;

 private:
  struct Entry {
    std::string user;
    std::int64_t expires_cluster_ms = 0;
  };
  const std::int64_t renew_ttl_ms_;
  mutable std::mutex mu_;
  std::condition_variable applied_cv_;
  std::unordered_map<std::string, Entry> tokens_;
  LogIndex last_applied_{0};  // the last entry OnApplied saw
  int waiters_ = 0;
  WaitCounts waits_;
};

}  // namespace epoch::server
