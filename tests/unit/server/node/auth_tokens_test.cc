// Simple tokens: recorded when their Authenticate entry is applied, renewed by each use for
// another --auth-token-ttl (etcd's simple-token TTL keeper), expired when unused that long, and
// dropped with their user's sessions.
#include "epoch/node/auth_tokens.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

namespace epoch::server {
namespace {

ApplyResult Issued(const std::string& token, const std::string& user, std::int64_t expires_ms) {
  ApplyResult r;
  v1::AuthResult* auth = r.response.mutable_auth();
  auth->set_token(token);
  auth->set_user(user);
  auth->set_expires_cluster_ms(expires_ms);
  return r;
}

TEST_CASE("auth tokens: each use renews a token for another TTL", "[node][auth]") {
  AuthTokens tokens(/*renew_ttl_ms=*/500);
  tokens.OnApplied(LogIndex(1), Issued("t1", "w", 1000));
  CHECK(!tokens.Lookup("nope", 0));
  // Used at 900: valid until 1400, past its first expiry.
  CHECK(tokens.Lookup("t1", 900) == std::optional<std::string>("w"));
  CHECK(tokens.Lookup("t1", 1300) == std::optional<std::string>("w"));  // renewed to 1800
  CHECK(tokens.Lookup("t1", 1799) == std::optional<std::string>("w"));  // renewed to 2299
  // Unused for a whole TTL: gone.
  CHECK(!tokens.Lookup("t1", 2299));
}

TEST_CASE("auth tokens: a use never shortens a token's life", "[node][auth]") {
  AuthTokens tokens(/*renew_ttl_ms=*/100);
  tokens.OnApplied(LogIndex(1), Issued("t1", "w", 5000));
  CHECK(tokens.Lookup("t1", 10));
  CHECK(tokens.Lookup("t1", 4999));  // still the issued expiry, not 10 + 100
  CHECK(!tokens.Lookup("t1", 5099 + 1));
}

TEST_CASE("auth tokens: a user's tokens end with a password change", "[node][auth]") {
  AuthTokens tokens(/*renew_ttl_ms=*/500);
  tokens.OnApplied(LogIndex(1), Issued("t1", "w", 1000));
  tokens.OnApplied(LogIndex(1), Issued("t2", "x", 1000));
  ApplyResult changed;
  changed.response.mutable_auth()->set_drop_tokens_of("w");
  tokens.OnApplied(LogIndex(2), changed);
  CHECK(!tokens.Lookup("t1", 10));
  CHECK(tokens.Lookup("t2", 10));
  CHECK(tokens.size() == 1);
}

TEST_CASE("auth tokens: the index a token names", "[node][auth]") {
  CHECK(AuthTokens::IssuedIndex("ab12.42") == std::optional<LogIndex>(LogIndex(42)));
  CHECK(AuthTokens::IssuedIndex("a.b.7") == std::optional<LogIndex>(LogIndex(7)));
  CHECK(!AuthTokens::IssuedIndex("ab12"));
  CHECK(!AuthTokens::IssuedIndex("ab12."));
  CHECK(!AuthTokens::IssuedIndex("ab12.4x"));
  CHECK(!AuthTokens::IssuedIndex("ab12.-4"));
  CHECK(!AuthTokens::IssuedIndex("ab12.99999999999999999999999"));
}

using Clock = std::chrono::steady_clock;

TEST_CASE("auth tokens: a token from an entry not applied here yet is waited for", "[node][auth]") {
  AuthTokens tokens(/*renew_ttl_ms=*/500);
  tokens.OnAppliedUpTo(LogIndex(10));
  CHECK(!tokens.Lookup("t.12", 0));
  std::thread raft([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    tokens.OnApplied(LogIndex(11), ApplyResult{});
    tokens.OnApplied(LogIndex(12), Issued("t.12", "w", 1000));
  });
  const bool applied = tokens.WaitIssued("t.12", Clock::now() + std::chrono::seconds(30));
  raft.join();
  CHECK(applied);
  CHECK(tokens.Lookup("t.12", 0) == std::optional<std::string>("w"));
  CHECK(tokens.wait_counts().applied == 1);
}

TEST_CASE("auth tokens: no wait for a token that names no index, an applied one or one far ahead",
          "[node][auth]") {
  AuthTokens tokens(/*renew_ttl_ms=*/500);
  tokens.OnAppliedUpTo(LogIndex(100));
  const auto far = Clock::now() + std::chrono::seconds(30);
  CHECK(!tokens.WaitIssued("t", far));
  // Applied already: worth a second Lookup, no wait.
  CHECK(tokens.WaitIssued("t.99", far));
  CHECK(tokens.WaitIssued("t.100", far));
  CHECK(!tokens.WaitIssued("t." + std::to_string(100 + AuthTokens::kMaxIndexAhead + 1), far));
  const AuthTokens::WaitCounts counts = tokens.wait_counts();
  CHECK(counts.applied + counts.timed_out + counts.busy == 0);
}

TEST_CASE("auth tokens: a wait ends at its deadline; callers past the cap do not wait",
          "[node][auth]") {
  AuthTokens tokens(/*renew_ttl_ms=*/500);
  tokens.OnAppliedUpTo(LogIndex(1));
  // A forged token naming the next index: it waits until its deadline, then is refused.
  CHECK(!tokens.WaitIssued("forged.2", Clock::now() + std::chrono::milliseconds(20)));
  CHECK(tokens.wait_counts().timed_out == 1);

  // kMaxWaiters callers wait for an index that is never applied; one more is turned away.
  std::vector<std::thread> waiting;
  const auto until = Clock::now() + std::chrono::seconds(30);
  for (int i = 0; i < AuthTokens::kMaxWaiters; ++i) {
    waiting.emplace_back([&] { (void)tokens.WaitIssued("forged.3", until); });
  }
  bool all_waiting = false;
  for (int attempt = 0; attempt < 3000 && !all_waiting; ++attempt) {
    all_waiting = tokens.wait_counts().waiting == AuthTokens::kMaxWaiters;
    if (!all_waiting) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(all_waiting);
  const bool turned_away = !tokens.WaitIssued("forged.3", until);
  CHECK(turned_away);
  CHECK(tokens.wait_counts().busy == 1);
  // Applying the index releases every waiter.
  tokens.OnApplied(LogIndex(3), ApplyResult{});
  for (std::thread& t : waiting) t.join();
  CHECK(tokens.wait_counts().applied == AuthTokens::kMaxWaiters);
}

}  // namespace
}  // namespace epoch::server
