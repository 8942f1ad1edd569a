// JWT tokens (`--auth-token jwt,...`): every sign method round-trips its claims; a token expires at
// its exp; a token whose header, claims or signature was altered, that another key signed, that
// names another method ("none" included) or that is not a JWS at all is etcd's "invalid auth
// token"; a verify-only member cannot sign; the flag's value parses as etcd's, and bad values are
// errors, never exceptions.
#include "epoch/node/jwt_tokens.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "epoch/etcd_errors.h"

namespace epoch::server {
namespace {

constexpr std::int64_t kNow = 1'800'000'000;

struct PemPair {
  std::string priv;
  std::string pub;
};

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string text(data, static_cast<std::size_t>(n));
  BIO_free(bio);
  return text;
}

// A fresh key pair as PEM text, made with OpenSSL ("RSA" with 2048 bits, or "EC" on P-256).
PemPair NewKeys(bool ec) {
  EVP_PKEY* key = ec ? EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256")
                     : EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<std::size_t>(2048));
  REQUIRE(key != nullptr);
  BIO* priv = BIO_new(BIO_s_mem());
  BIO* pub = BIO_new(BIO_s_mem());
  REQUIRE(PEM_write_bio_PrivateKey(priv, key, nullptr, nullptr, 0, nullptr, nullptr) == 1);
  REQUIRE(PEM_write_bio_PUBKEY(pub, key) == 1);
  EVP_PKEY_free(key);
  return {BioText(priv), BioText(pub)};
}

std::unique_ptr<JwtTokens> Tokens(const std::string& method, const std::string& priv,
                                  const std::string& pub = "") {
  Result<std::unique_ptr<JwtTokens>> tokens =
      JwtTokens::Create(JwtOptions{method, pub, priv, std::chrono::seconds(300)});
  REQUIRE(tokens.ok());
  return std::move(*tokens);
}

bool Invalid(const Result<JwtClaims>& r) {
  return !r.ok() && r.status().Is(ErrorId::kInvalidAuthToken);
}

// The token with one of its three dot-separated parts replaced.
std::string WithPart(const std::string& token, int part, const std::string& text) {
  const std::size_t dot1 = token.find('.');
  const std::size_t dot2 = token.find('.', dot1 + 1);
  std::string parts[3] = {token.substr(0, dot1), token.substr(dot1 + 1, dot2 - dot1 - 1),
                          token.substr(dot2 + 1)};
  parts[part] = text;
  return parts[0] + "." + parts[1] + "." + parts[2];
}

std::string Part(const std::string& token, int part) {
  const std::size_t dot1 = token.find('.');
  const std::size_t dot2 = token.find('.', dot1 + 1);
  if (part == 0) return token.substr(0, dot1);
  if (part == 1) return token.substr(dot1 + 1, dot2 - dot1 - 1);
  return token.substr(dot2 + 1);
}

TEST_CASE("jwt: every sign method round-trips its claims until exp", "[node][auth][jwt]") {
  const PemPair rsa = NewKeys(false);
  const PemPair ec = NewKeys(true);
  struct Case {
    const char* method;
    std::string priv;
    std::string pub;
  };
  for (const Case& c : {Case{"RS256", rsa.priv, rsa.pub}, Case{"PS256", rsa.priv, rsa.pub},
                        Case{"ES256", ec.priv, ec.pub}, Case{"HS256", "a shared secret", ""}}) {
    INFO(c.method);
    auto tokens = Tokens(c.method, c.priv, c.pub);
    Result<std::string> token = tokens->Sign("alice \"q\"", 42, kNow);
    REQUIRE(token.ok());
    Result<JwtClaims> claims = tokens->Verify(*token, kNow + 299);
    REQUIRE(claims.ok());
    CHECK(claims->username == "alice \"q\"");
    CHECK(claims->revision == 42);
    CHECK(claims->exp_unix_s == kNow + 300);
    CHECK(Invalid(tokens->Verify(*token, kNow + 300)));  // expired at exp
    // The header names the method, as etcd's clients and jwt.io expect.
    CHECK(Part(*token, 0).find('=') == std::string::npos);
  }
}

TEST_CASE("jwt: a member with only the public key verifies but cannot sign", "[node][auth][jwt]") {
  const PemPair rsa = NewKeys(false);
  auto signer = Tokens("RS256", rsa.priv);
  auto verifier = Tokens("RS256", "", rsa.pub);
  Result<std::string> token = signer->Sign("bob", 7, kNow);
  REQUIRE(token.ok());
  CHECK(verifier->Verify(*token, kNow).ok());
  CHECK_FALSE(verifier->Sign("bob", 7, kNow).ok());
}

TEST_CASE("jwt: altered, foreign or malformed tokens are invalid", "[node][auth][jwt]") {
  const PemPair rsa = NewKeys(false);
  const PemPair other = NewKeys(false);
  auto tokens = Tokens("RS256", rsa.priv, rsa.pub);
  const std::string token = *tokens->Sign("carol", 3, kNow);
  REQUIRE(tokens->Verify(token, kNow).ok());

  // Claims re-encoded for another user (or a later exp) keep the old signature: refused.
  auto other_user = Tokens("RS256", rsa.priv, rsa.pub)->Sign("root", 3, kNow);
  CHECK(Invalid(tokens->Verify(WithPart(token, 1, Part(*other_user, 1)), kNow)));
  // A signature with one character changed.
  std::string sig = Part(token, 2);
  sig[sig.size() / 2] = sig[sig.size() / 2] == 'A' ? 'B' : 'A';
  CHECK(Invalid(tokens->Verify(WithPart(token, 2, sig), kNow)));
  // Signed by another key of the same kind.
  auto foreign = Tokens("RS256", other.priv, other.pub);
  CHECK(Invalid(tokens->Verify(*foreign->Sign("carol", 3, kNow), kNow)));
  // A header naming "none" with an empty signature, and an HS256 token whose secret is this
  // member's public key (the classic algorithm confusion): the token never picks the method.
  CHECK(Invalid(tokens->Verify(
      WithPart(WithPart(token, 0, "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0"), 2, ""), kNow)));
  auto confused = Tokens("HS256", rsa.pub);
  CHECK(Invalid(tokens->Verify(*confused->Sign("root", 3, kNow), kNow)));
  // Not a JWS: wrong number of parts, characters outside base64url, a header that is not JSON,
  // empty, huge.
  for (const std::string& bad :
       {std::string(), std::string("."), std::string(".."), std::string("..."), token + ".x",
        Part(token, 0) + "." + Part(token, 1), WithPart(token, 0, "e+J/"),
        WithPart(token, 0, "bm90IGpzb24"), WithPart(token, 1, "A"), std::string(1 << 16, 'a'),
        std::string("\0.\0.\0", 5)}) {
    CHECK(Invalid(tokens->Verify(bad, kNow)));
  }
}

TEST_CASE("jwt: the flag's value parses as etcd's and bad values are errors",
          "[node][auth][jwt]") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("jwt_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const PemPair ec = NewKeys(true);
  const std::string priv = (dir / "priv.pem").string();
  const std::string pub = (dir / "pub.pem").string();
  std::ofstream(priv) << ec.priv;
  std::ofstream(pub) << ec.pub;

  Result<JwtOptions> options =
      ParseJwtOptions("pub-key=" + pub + ",priv-key=" + priv + ",sign-method=ES256,ttl=1h30m");
  REQUIRE(options.ok());
  CHECK(options->sign_method == "ES256");
  CHECK(options->ttl == std::chrono::seconds(5400));
  CHECK(options->priv_key_pem == ec.priv);
  CHECK(JwtTokens::Create(*options).ok());
  CHECK(ParseJwtOptions("priv-key=" + priv + ",sign-method=ES256,ttl=1500ms")->ttl ==
        std::chrono::seconds(2));

  for (const std::string& bad :
       {"priv-key=" + priv,                                       // no sign-method
        std::string("sign-method=RS256"),                         // no key
        "priv-key=" + priv + ",sign-method=ES256,color=blue",     // unknown option
        "priv-key=" + priv + ",sign-method",                      // not name=value
        "priv-key=" + (dir / "missing.pem").string() + ",sign-method=ES256",
        "priv-key=" + priv + ",sign-method=ES256,ttl=",           // durations: empty,
        "priv-key=" + priv + ",sign-method=ES256,ttl=.",          // no digits,
        "priv-key=" + priv + ",sign-method=ES256,ttl=5d",         // unknown unit,
        "priv-key=" + priv + ",sign-method=ES256,ttl=0s",         // not positive,
        "priv-key=" + priv + ",sign-method=ES256,ttl=" + std::string(400, '9') + "h"}) {  // huge
    INFO(bad);
    CHECK_FALSE(ParseJwtOptions(bad).ok());
  }
  // A method the key does not fit, an unknown method, a PEM that is not a key.
  CHECK_FALSE(JwtTokens::Create(JwtOptions{"RS256", "", ec.priv, std::chrono::seconds(1)}).ok());
  CHECK_FALSE(JwtTokens::Create(JwtOptions{"none", "", ec.priv, std::chrono::seconds(1)}).ok());
  CHECK_FALSE(JwtTokens::Create(JwtOptions{"ES256", "", "junk", std::chrono::seconds(1)}).ok());
  CHECK_FALSE(JwtTokens::Create(JwtOptions{"HS256", "", "", std::chrono::seconds(1)}).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace epoch::server
