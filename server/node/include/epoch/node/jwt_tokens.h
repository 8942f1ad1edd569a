// JwtTokens: etcd's `--auth-token jwt,...` tokens (etcd 3.4 auth/jwt.go): a JWS in compact form
// whose claims are {"exp": unix seconds, "revision": auth revision, "username": name}, signed by
// the member that checked the password and verified by any member holding the public key (or the
// shared secret for HS256). Nothing is replicated: a token is valid on every member configured
// with the same keys until its exp. Signing and verifying use OpenSSL EVP only; base64url is
// OpenSSL's base64 with the URL alphabet and no padding.
//
//   RS256  RSASSA-PKCS1-v1_5 with SHA-256    (pub-key, priv-key: RSA PEM)
//   PS256  RSASSA-PSS with SHA-256, salt 32  (pub-key, priv-key: RSA PEM)
//   ES256  ECDSA P-256 with SHA-256, r||s    (pub-key, priv-key: EC PEM)
//   HS256  HMAC-SHA-256                      (priv-key: the secret's bytes)
//
// A token carries the auth revision it was issued at; the permission checks always read the
// current auth state, so a token issued before a permission change is checked against the
// change (epoch/node/auth_gate.h).
//
// Threading: immutable after Create; Sign and Verify are safe from any thread.
#pragma once

#include <openssl/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "epoch/status.h"

namespace epoch::server {

// What `--auth-token jwt,pub-key=PATH,priv-key=PATH,sign-method=ALG,ttl=DURATION` names, with
// the key files read.
struct JwtOptions {
  std::string sign_method;   // RS256, PS256, ES256 or HS256
  std::string pub_key_pem;   // empty: this member verifies with the private key's public half
  std::string priv_key_pem;  // empty: this member only verifies (Authenticate is refused)
  std::chrono::seconds ttl{300};
};

// Parses the flag's value after "jwt," ("pub-key=...,priv-key=...,sign-method=...,ttl=5m"),
// reading the key files. ttl takes Go's durations (300s, 5m, 1h30m).
Result<JwtOptions> ParseJwtOptions(std::string_view spec);

struct JwtClaims {
  std::string username;
  std::uint64_t revision = 0;
  std::int64_t exp_unix_s = 0;
};

class JwtTokens {
 public:
  static Result<std::unique_ptr<JwtTokens>> Create(const JwtOptions& options);
  ~JwtTokens();
  JwtTokens(const JwtTokens&) = delete;
  JwtTokens& operator=(const JwtTokens&) = delete;

  // A token for `username` at auth `revision`, expiring ttl after `now_unix_s`.
  Result<std::string> Sign(std::string_view username, std::uint64_t revision,
                           std::int64_t now_unix_s) const;
  // The claims of `token` if its header names this member's method, its signature verifies and
  // it has not expired at `now_unix_s`; etcd's "invalid auth token" otherwise.
  Result<JwtClaims> Verify(std::string_view token, std::int64_t now_unix_s) const;

  [[nodiscard]] std::chrono::seconds ttl() const { return ttl_; }

 private:
  enum class Method { kRs256, kPs256, kEs256, kHs256 };
  JwtTokens(Method method, std::chrono::seconds ttl) : method_(method), ttl_(ttl) {}

  Result<std::string> Signature(std::string_view signing_input) const;
  [[nodiscard]] bool SignatureMatches(std::string_view signing_input,
                                      std::string_view signature) const;

  const Method method_;
  const std::chrono::seconds ttl_;
  EVP_PKEY* public_key_ = nullptr;   // RS/PS/ES; owned
  EVP_PKEY* private_key_ = nullptr;  // RS/PS/ES; owned, may be null
  std::string secret_;               // HS256
};

}  // namespace epoch::server
