#include "tls_client_hello.h"

#include <algorithm>
#include <cstdint>
#include <optional>

namespace epoch::server {
namespace {

constexpr std::uint8_t kHandshakeRecord = 22;
constexpr std::uint8_t kClientHello = 1;
constexpr std::uint16_t kAlpnExtension = 16;
constexpr std::size_t kRecordHeader = 5;
constexpr std::size_t kMaxRecordPayload = (1 << 14) + 2048;  // TLSCiphertext's bound

// A bounds-checked reader over a byte string; a read past the end leaves it failed.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  std::optional<std::uint32_t> Int(std::size_t width) {
    if (!Has(width)) return std::nullopt;
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < width; ++i) {
      v = (v << 8) | static_cast<std::uint8_t>(bytes_[pos_ + i]);
    }
    pos_ += width;
    return v;
  }
  // The next `n` bytes as a sub-reader's input.
  std::optional<std::string_view> Bytes(std::size_t n) {
    if (!Has(n)) return std::nullopt;
    std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  // A vector with a `width`-byte length prefix.
  std::optional<std::string_view> Vector(std::size_t width) {
    std::optional<std::uint32_t> n = Int(width);
    if (!n) return std::nullopt;
    return Bytes(*n);
  }
  [[nodiscard]] bool Empty() const { return pos_ == bytes_.size(); }

 private:
  [[nodiscard]] bool Has(std::size_t n) const { return bytes_.size() - pos_ >= n; }
  std::string_view bytes_;
  std::size_t pos_ = 0;
};

// The ALPN names of a ClientHello body (after the handshake header); nullopt when malformed.
std::optional<std::vector<std::string>> AlpnOf(std::string_view body) {
  Reader r(body);
  if (!r.Int(2) || !r.Bytes(32) || !r.Vector(1) || !r.Vector(2) || !r.Vector(1)) {
    return std::nullopt;
  }
  std::vector<std::string> alpn;
  if (r.Empty()) return alpn;  // no extensions at all
  std::optional<std::string_view> extensions = r.Vector(2);
  if (!extensions || !r.Empty()) return std::nullopt;
  Reader ext(*extensions);
  while (!ext.Empty()) {
    std::optional<std::uint32_t> type = ext.Int(2);
    std::optional<std::string_view> data = ext.Vector(2);
    if (!type || !data) return std::nullopt;
    if (*type != kAlpnExtension) continue;
    Reader list_reader(*data);
    std::optional<std::string_view> list = list_reader.Vector(2);
    if (!list || !list_reader.Empty()) return std::nullopt;
    Reader names(*list);
    while (!names.Empty()) {
      std::optional<std::string_view> name = names.Vector(1);
      if (!name || name->empty()) return std::nullopt;
      alpn.emplace_back(*name);
    }
  }
  return alpn;
}

}  // namespace

ClientHelloInfo ParseClientHello(std::string_view bytes) {
  using Verdict = ClientHelloInfo::Verdict;
  // The handshake layer's bytes, gathered from consecutive handshake records.
  std::string handshake;
  // The verdict once `handshake` holds a whole message, or shows it is no ClientHello.
  const auto decided = [&handshake]() -> std::optional<ClientHelloInfo> {
    if (handshake.empty()) return std::nullopt;
    if (static_cast<std::uint8_t>(handshake[0]) != kClientHello) {
      return ClientHelloInfo{Verdict::kNotTls, {}};
    }
    if (handshake.size() < 4) return std::nullopt;
    const auto* h = reinterpret_cast<const std::uint8_t*>(handshake.data());
    const std::size_t length = (std::size_t{h[1]} << 16) | (std::size_t{h[2]} << 8) | h[3];
    if (handshake.size() < 4 + length) return std::nullopt;
    std::optional<std::vector<std::string>> alpn =
        AlpnOf(std::string_view(handshake).substr(4, length));
    if (!alpn) return ClientHelloInfo{Verdict::kNotTls, {}};
    return ClientHelloInfo{Verdict::kHello, std::move(*alpn)};
  };
  for (std::size_t at = 0;;) {
    if (bytes.size() - at < kRecordHeader) {
      // The header so far must still look like a handshake record's.
      const std::string_view part = bytes.substr(at);
      if ((!part.empty() && static_cast<std::uint8_t>(part[0]) != kHandshakeRecord) ||
          (part.size() >= 2 && part[1] != 3)) {
        return {Verdict::kNotTls, {}};
      }
      return {Verdict::kIncomplete, {}};
    }
    const auto* rec = reinterpret_cast<const std::uint8_t*>(bytes.data() + at);
    const std::size_t length = (std::size_t{rec[3]} << 8) | rec[4];
    if (rec[0] != kHandshakeRecord || rec[1] != 3 || length == 0 || length > kMaxRecordPayload) {
      return {Verdict::kNotTls, {}};
    }
    const std::size_t present = std::min(length, bytes.size() - at - kRecordHeader);
    handshake.append(bytes.substr(at + kRecordHeader, present));
    // What arrived of a record may already hold the whole message.
    if (std::optional<ClientHelloInfo> verdict = decided()) return *std::move(verdict);
    if (present < length) return {Verdict::kIncomplete, {}};
    at += kRecordHeader + length;
  }
}

bool WantsGrpc(const ClientHelloInfo& hello) {
  if (hello.verdict != ClientHelloInfo::Verdict::kHello) return false;
  const auto offers = [&](std::string_view name) {
    return std::find(hello.alpn.begin(), hello.alpn.end(), name) != hello.alpn.end();
  };
  return offers("h2") && !offers("http/1.1");
}

}  // namespace epoch::server
