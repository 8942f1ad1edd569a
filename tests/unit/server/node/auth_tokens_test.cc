// Simple tokens: recorded when their Authenticate entry is applied, renewed by each use for
// another --auth-token-ttl (etcd's simple-token TTL keeper), expired when unused that long, and
// dropped with their user's sessions.
#include "epoch/node/auth_tokens.h"

#include <catch2/catch.hpp>

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
  tokens.OnApplied(Issued("t1", "w", 1000));
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
  tokens.OnApplied(Issued("t1", "w", 5000));
  CHECK(tokens.Lookup("t1", 10));
  CHECK(tokens.Lookup("t1", 4999));  // still the issued expiry, not 10 + 100
  CHECK(!tokens.Lookup("t1", 5099 + 1));
}

TEST_CASE("auth tokens: a user's tokens end with a password change", "[node][auth]") {
  AuthTokens tokens(/*renew_ttl_ms=*/500);
  tokens.OnApplied(Issued("t1", "w", 1000));
  tokens.OnApplied(Issued("t2", "x", 1000));
  ApplyResult changed;
  changed.response.mutable_auth()->set_drop_tokens_of("w");
  tokens.OnApplied(changed);
  CHECK(!tokens.Lookup("t1", 10));
  CHECK(tokens.Lookup("t2", 10));
  CHECK(tokens.size() == 1);
}

}  // namespace
}  // namespace epoch::server
