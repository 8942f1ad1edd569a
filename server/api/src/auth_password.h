// Password hashes of the Auth service: PBKDF2-HMAC-SHA256 (OpenSSL) with a random 16-byte salt,
// stored as "$pbkdf2-sha256$<iterations>$<salt hex>$<hash hex>". `--bcrypt-cost` c (etcd's flag,
// 4..31, default 10) sets 2^(c+7) iterations, so one more unit doubles the work as bcrypt's does.
// Comparison is constant-time (CRYPTO_memcmp).
//
// Slow on purpose (tens of milliseconds): called on the read pool, never on a gRPC or the Raft
// thread. Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "epoch/status.h"

namespace epoch::server {

inline constexpr int kMinBcryptCost = 4;
inline constexpr int kMaxBcryptCost = 31;
inline constexpr int kDefaultBcryptCost = 10;

// A new salted hash of `password`. `cost` is clamped to the iterations PBKDF2 takes (at most
// 2^30).
Result<std::string> HashPassword(std::string_view password, int cost);
// Whether `password` matches `stored` (a HashPassword result). False for an undecodable hash.
[[nodiscard]] bool VerifyPassword(std::string_view password, std::string_view stored);

}  // namespace epoch::server
