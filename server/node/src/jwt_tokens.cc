#include "epoch/node/jwt_tokens.h"

#include <fmt/format.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "epoch/etcd_errors.h"

namespace epoch::server {
namespace {

constexpr std::size_t kEs256Half = 32;  // bytes of r and of s in a JWS ES256 signature
constexpr double kMaxDurationMs = 366.0 * 24 * 3'600'000;  // a token TTL longer is a typo

Status Invalid() { return etcd_errors::kInvalidAuthToken.ToStatus(); }

// RFC 7515 base64url: OpenSSL's base64 with '-' '_' for '+' '/' and no padding.
std::string Base64Url(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  while (!out.empty() && out.back() == '=') out.pop_back();
  std::replace(out.begin(), out.end(), '+', '-');
  std::replace(out.begin(), out.end(), '/', '_');
  return out;
}

std::optional<std::string> FromBase64Url(std::string_view text) {
  if (text.size() % 4 == 1) return std::nullopt;
  std::string b64(text);
  for (char& c : b64) {
    if (c == '-') {
      c = '+';
    } else if (c == '_') {
      c = '/';
    } else if (c == '+' || c == '/' || c == '=') {
      return std::nullopt;  // the standard alphabet's own characters are not base64url
    }
  }
  const std::size_t pad = (4 - b64.size() % 4) % 4;
  b64.append(pad, '=');
  std::string out(3 * b64.size() / 4, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(b64.data()),
                                static_cast<int>(b64.size()));
  if (n < 0 || static_cast<std::size_t>(n) < pad) return std::nullopt;
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

// A JSON string literal of `s` (quotes, backslashes and control characters escaped).
std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

Result<google::protobuf::Struct> ParseJsonObject(std::string_view json) {
  google::protobuf::Struct object;
  if (!google::protobuf::util::JsonStringToMessage(std::string(json), &object).ok()) {
    return Invalid();
  }
  return object;
}

Result<std::string> ReadKeyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(fmt::format("cannot read key file {}", path));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Go's time.ParseDuration for the units a TTL uses: a sequence of <number><h|m|s|ms>, positive
// and at most a year.
Result<std::chrono::seconds> ParseGoDuration(std::string_view text) {
  double total_ms = 0;
  std::size_t at = 0;
  if (text.empty()) return Status::InvalidArgument("empty duration");
  while (at < text.size()) {
    std::size_t digits = at;
    while (digits < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
      ++digits;
    }
    double number = 0;
    const auto [end, err] = std::from_chars(text.data() + at, text.data() + digits, number);
    if (digits == at || err != std::errc() || end != text.data() + digits) {
      return Status::InvalidArgument(fmt::format("bad duration {}", text));
    }
    std::size_t unit_end = digits;
    while (unit_end < text.size() && std::isalpha(static_cast<unsigned char>(text[unit_end]))) {
      ++unit_end;
    }
    const std::string_view unit = text.substr(digits, unit_end - digits);
    double scale = 0;
    if (unit == "h") scale = 3'600'000;
    if (unit == "m") scale = 60'000;
    if (unit == "s") scale = 1'000;
    if (unit == "ms") scale = 1;
    if (scale == 0) return Status::InvalidArgument(fmt::format("bad duration {}", text));
    total_ms += number * scale;
    at = unit_end;
  }
  if (!(total_ms > 0)) {
    return Status::InvalidArgument(fmt::format("duration {} is not positive", text));
  }
  if (total_ms > kMaxDurationMs) {
    return Status::InvalidArgument(fmt::format("duration {} is longer than a year", text));
  }
  return std::chrono::seconds(static_cast<std::int64_t>(std::ceil(total_ms / 1000)));
}

EVP_PKEY* ReadPem(const std::string& pem, bool is_private) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return nullptr;
  EVP_PKEY* key = is_private ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr)
                             : PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return key;
}

// ES256's DER signature to the JWS r||s form and back.
std::optional<std::string> DerToRaw(std::string_view der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  ECDSA_SIG* sig = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size()));
  if (sig == nullptr) return std::nullopt;
  const BIGNUM* r = nullptr;
  const BIGNUM* s = nullptr;
  ECDSA_SIG_get0(sig, &r, &s);
  std::string raw(2 * kEs256Half, '\0');
  auto* out = reinterpret_cast<unsigned char*>(raw.data());
  const bool ok = BN_bn2binpad(r, out, kEs256Half) == kEs256Half &&
                  BN_bn2binpad(s, out + kEs256Half, kEs256Half) == kEs256Half;
  ECDSA_SIG_free(sig);
  if (!ok) return std::nullopt;
  return raw;
}

std::optional<std::string> RawToDer(std::string_view raw) {
  if (raw.size() != 2 * kEs256Half) return std::nullopt;
  const auto* in = reinterpret_cast<const unsigned char*>(raw.data());
  ECDSA_SIG* sig = ECDSA_SIG_new();
  BIGNUM* r = BN_bin2bn(in, kEs256Half, nullptr);
  BIGNUM* s = BN_bin2bn(in + kEs256Half, kEs256Half, nullptr);
  if (sig == nullptr || r == nullptr || s == nullptr || ECDSA_SIG_set0(sig, r, s) != 1) {
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(sig);
    return std::nullopt;
  }
  unsigned char* der = nullptr;
  const int n = i2d_ECDSA_SIG(sig, &der);
  ECDSA_SIG_free(sig);
  if (n <= 0) return std::nullopt;
  std::string out(reinterpret_cast<const char*>(der), static_cast<std::size_t>(n));
  OPENSSL_free(der);
  return out;
}

// Sets PSS padding with a salt as long as the digest (RFC 7518 §3.5) on a sign/verify context.
bool UsePss(EVP_PKEY_CTX* ctx) {
  return EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PSS_PADDING) > 0 &&
         EVP_PKEY_CTX_set_rsa_pss_saltlen(ctx, RSA_PSS_SALTLEN_DIGEST) > 0;
}

}  // namespace

Result<JwtOptions> ParseJwtOptions(std::string_view spec) {
  JwtOptions options;
  std::string pub_path;
  std::string priv_path;
  while (!spec.empty()) {
    const std::size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument(fmt::format("jwt option {} is not name=value", item));
    }
    const std::string_view name = item.substr(0, eq);
    const std::string value(item.substr(eq + 1));
    if (name == "pub-key") {
      pub_path = value;
    } else if (name == "priv-key") {
      priv_path = value;
    } else if (name == "sign-method") {
      options.sign_method = value;
    } else if (name == "ttl") {
      Result<std::chrono::seconds> ttl = ParseGoDuration(value);
      if (!ttl.ok()) return ttl.status();
      options.ttl = *ttl;
    } else {
      return Status::InvalidArgument(fmt::format("unknown jwt option {}", name));
    }
  }
  if (options.sign_method.empty()) return Status::InvalidArgument("jwt needs sign-method");
  if (pub_path.empty() && priv_path.empty()) {
    return Status::InvalidArgument("jwt needs pub-key or priv-key");
  }
  if (!pub_path.empty()) {
    Result<std::string> pem = ReadKeyFile(pub_path);
    if (!pem.ok()) return pem.status();
    options.pub_key_pem = std::move(*pem);
  }
  if (!priv_path.empty()) {
    Result<std::string> pem = ReadKeyFile(priv_path);
    if (!pem.ok()) return pem.status();
    options.priv_key_pem = std::move(*pem);
  }
  return options;
}

Result<std::unique_ptr<JwtTokens>> JwtTokens::Create(const JwtOptions& options) {
  Method method;
  int key_type = EVP_PKEY_RSA;
  if (options.sign_method == "RS256") {
    method = Method::kRs256;
  } else if (options.sign_method == "PS256") {
    method = Method::kPs256;
  } else if (options.sign_method == "ES256") {
    method = Method::kEs256;
    key_type = EVP_PKEY_EC;
  } else if (options.sign_method == "HS256") {
    method = Method::kHs256;
  } else {
    return Status::InvalidArgument(fmt::format(
        "jwt sign-method {} is not one of RS256, PS256, ES256, HS256", options.sign_method));
  }
  std::unique_ptr<JwtTokens> tokens(new JwtTokens(method, options.ttl));
  if (method == Method::kHs256) {
    if (options.priv_key_pem.empty()) return Status::InvalidArgument("HS256 needs priv-key");
    tokens->secret_ = options.priv_key_pem;
    return tokens;
  }
  if (!options.priv_key_pem.empty()) {
    tokens->private_key_ = ReadPem(options.priv_key_pem, true);
    if (tokens->private_key_ == nullptr) return Status::InvalidArgument("unreadable priv-key");
  }
  if (!options.pub_key_pem.empty()) {
    tokens->public_key_ = ReadPem(options.pub_key_pem, false);
    if (tokens->public_key_ == nullptr) return Status::InvalidArgument("unreadable pub-key");
  } else {
    EVP_PKEY_up_ref(tokens->private_key_);  // the private key verifies too
    tokens->public_key_ = tokens->private_key_;
  }
  for (EVP_PKEY* key : {tokens->public_key_, tokens->private_key_}) {
    if (key != nullptr && EVP_PKEY_get_base_id(key) != key_type) {
      return Status::InvalidArgument(
          fmt::format("jwt key type does not fit sign-method {}", options.sign_method));
    }
  }
  return tokens;
}

JwtTokens::~JwtTokens() {
  EVP_PKEY_free(public_key_);
  EVP_PKEY_free(private_key_);
}

Result<std::string> JwtTokens::Signature(std::string_view input) const {
  if (method_ == Method::kHs256) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
    unsigned int n = 0;
    if (HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
             reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac.data(),
             &n) == nullptr) {
      return Status::Unavailable("jwt: HMAC failed");
    }
    return std::string(reinterpret_cast<const char*>(mac.data()), n);
  }
  if (private_key_ == nullptr) {
    return Status::FailedPrecondition("jwt: this member has no priv-key to sign tokens with");
  }
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  EVP_PKEY_CTX* pctx = nullptr;
  std::string sig;
  std::size_t n = 0;
  bool ok = md != nullptr &&
            EVP_DigestSignInit(md, &pctx, EVP_sha256(), nullptr, private_key_) == 1 &&
            (method_ != Method::kPs256 || UsePss(pctx)) &&
            EVP_DigestSign(md, nullptr, &n, reinterpret_cast<const unsigned char*>(input.data()),
                           input.size()) == 1;
  if (ok) {
    sig.resize(n);
    ok = EVP_DigestSign(md, reinterpret_cast<unsigned char*>(sig.data()), &n,
                        reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1;
    sig.resize(n);
  }
  EVP_MD_CTX_free(md);
  if (!ok) return Status::Unavailable("jwt: signing failed");
  if (method_ != Method::kEs256) return sig;
  std::optional<std::string> raw = DerToRaw(sig);
  if (!raw) return Status::Unavailable("jwt: undecodable ECDSA signature");
  return *raw;
}

bool JwtTokens::SignatureMatches(std::string_view input, std::string_view signature) const {
  if (method_ == Method::kHs256) {
    Result<std::string> expected = Signature(input);
    return expected.ok() && expected->size() == signature.size() &&
           CRYPTO_memcmp(expected->data(), signature.data(), signature.size()) == 0;
  }
  std::string der(signature);
  if (method_ == Method::kEs256) {
    std::optional<std::string> converted = RawToDer(signature);
    if (!converted) return false;
    der = std::move(*converted);
  }
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  EVP_PKEY_CTX* pctx = nullptr;
  const bool ok =
      md != nullptr && EVP_DigestVerifyInit(md, &pctx, EVP_sha256(), nullptr, public_key_) == 1 &&
      (method_ != Method::kPs256 || UsePss(pctx)) &&
      EVP_DigestVerify(md, reinterpret_cast<const unsigned char*>(der.data()), der.size(),
                       reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1;
  EVP_MD_CTX_free(md);
  return ok;
}

Result<std::string> JwtTokens::Sign(std::string_view username, std::uint64_t revision,
                                    std::int64_t now_unix_s) const {
  static constexpr std::array<std::string_view, 4> kNames = {"RS256", "PS256", "ES256", "HS256"};
  const std::string header =
      fmt::format(R"({{"alg":"{}","typ":"JWT"}})", kNames[static_cast<std::size_t>(method_)]);
  // Go's encoding/json of etcd's jwt.MapClaims: keys sorted.
  const std::string claims = fmt::format(R"({{"exp":{},"revision":{},"username":{}}})",
                                         now_unix_s + ttl_.count(), revision, JsonString(username));
  std::string input = Base64Url(header) + "." + Base64Url(claims);
  Result<std::string> sig = Signature(input);
  if (!sig.ok()) return sig.status();
  return input + "." + Base64Url(*sig);
}

Result<JwtClaims> JwtTokens::Verify(std::string_view token, std::int64_t now_unix_s) const {
  const std::size_t dot1 = token.find('.');
  const std::size_t dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos) {
    return Invalid();
  }
  std::optional<std::string> header = FromBase64Url(token.substr(0, dot1));
  std::optional<std::string> claims = FromBase64Url(token.substr(dot1 + 1, dot2 - dot1 - 1));
  std::optional<std::string> sig = FromBase64Url(token.substr(dot2 + 1));
  if (!header || !claims || !sig) return Invalid();
  Result<google::protobuf::Struct> h = ParseJsonObject(*header);
  if (!h.ok()) return h.status();
  static constexpr std::array<std::string_view, 4> kNames = {"RS256", "PS256", "ES256", "HS256"};
  auto alg = h->fields().find("alg");
  // The header must name this member's method: a token never chooses how it is verified.
  if (alg == h->fields().end() ||
      alg->second.string_value() != kNames[static_cast<std::size_t>(method_)]) {
    return Invalid();
  }
  if (!SignatureMatches(token.substr(0, dot2), *sig)) return Invalid();
  Result<google::protobuf::Struct> c = ParseJsonObject(*claims);
  if (!c.ok()) return c.status();
  const auto& fields = c->fields();
  auto user = fields.find("username");
  auto rev = fields.find("revision");
  auto exp = fields.find("exp");
  if (user == fields.end() || rev == fields.end() || exp == fields.end() ||
      !user->second.has_string_value() || !rev->second.has_number_value() ||
      !exp->second.has_number_value()) {
    return Invalid();
  }
  JwtClaims out{user->second.string_value(), static_cast<std::uint64_t>(rev->second.number_value()),
                static_cast<std::int64_t>(exp->second.number_value())};
  if (out.username.empty() || out.exp_unix_s <= now_unix_s) return Invalid();
  return out;
}

}  // namespace epoch::server
