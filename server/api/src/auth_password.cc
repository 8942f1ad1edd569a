#include "auth_password.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <vector>

namespace epoch::server {
namespace {

constexpr std::string_view kScheme = "$pbkdf2-sha256$";
constexpr std::size_t kSaltBytes = 16;
constexpr std::size_t kHashBytes = 32;
constexpr long kMaxIterations = 1L << 30;

std::string Hex(const unsigned char* data, std::size_t n) {
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) out += fmt::format("{:02x}", data[i]);
  return out;
}

bool Unhex(std::string_view hex, std::vector<unsigned char>* out) {
  if (hex.size() % 2 != 0) return false;
  out->clear();
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(hex.data() + i, hex.data() + i + 2, value, 16);
    if (ec != std::errc() || end != hex.data() + i + 2) return false;
    out->push_back(static_cast<unsigned char>(value));
  }
  return true;
}

bool Derive(std::string_view password, const unsigned char* salt, std::size_t salt_len,
            long iterations, unsigned char* out) {
  return PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()), salt,
                           static_cast<int>(salt_len), static_cast<int>(iterations), EVP_sha256(),
                           static_cast<int>(kHashBytes), out) == 1;
}

}  // namespace

Result<std::string> HashPassword(std::string_view password, int cost) {
  const int shift = std::clamp(cost, kMinBcryptCost, kMaxBcryptCost) + 7;
  const long iterations = std::min(1L << std::min(shift, 30), kMaxIterations);
  std::array<unsigned char, kSaltBytes> salt{};
  if (RAND_bytes(salt.data(), static_cast<int>(salt.size())) != 1) {
    return Status::Unavailable("epoch: no random bytes for a password salt");
  }
  std::array<unsigned char, kHashBytes> hash{};
  if (!Derive(password, salt.data(), salt.size(), iterations, hash.data())) {
    return Status::Unavailable("epoch: PBKDF2 failed");
  }
  return fmt::format("{}{}${}${}", kScheme, iterations, Hex(salt.data(), salt.size()),
                     Hex(hash.data(), hash.size()));
}

bool VerifyPassword(std::string_view password, std::string_view stored) {
  if (!stored.starts_with(kScheme)) return false;
  stored.remove_prefix(kScheme.size());
  const std::size_t d1 = stored.find('$');
  if (d1 == std::string_view::npos) return false;
  const std::size_t d2 = stored.find('$', d1 + 1);
  if (d2 == std::string_view::npos) return false;
  long iterations = 0;
  auto [end, ec] = std::from_chars(stored.data(), stored.data() + d1, iterations);
  if (ec != std::errc() || end != stored.data() + d1 || iterations < 1 ||
      iterations > kMaxIterations) {
    return false;
  }
  std::vector<unsigned char> salt;
  std::vector<unsigned char> expected;
  if (!Unhex(stored.substr(d1 + 1, d2 - d1 - 1), &salt) ||
      !Unhex(stored.substr(d2 + 1), &expected) || expected.size() != kHashBytes) {
    return false;
  }
  std::array<unsigned char, kHashBytes> hash{};
  if (!Derive(password, salt.data(), salt.size(), iterations, hash.data())) return false;
  return CRYPTO_memcmp(hash.data(), expected.data(), kHashBytes) == 0;
}

}  // namespace epoch::server
