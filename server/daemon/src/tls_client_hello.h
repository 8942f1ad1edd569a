// What a TLS client asks for before the handshake: the ALPN protocols its ClientHello offers,
// read from bytes peeked off the socket (nothing is decrypted; a ClientHello is sent in the
// clear). ClientPortMux uses it to route an https:// client-port connection without terminating
// its TLS: a client that offers HTTP/2 and not HTTP/1.1 (every gRPC client) goes to gRPC, any
// other TLS client (curl, Python, Patroni, browsers) to the HTTP/1.1 side.
//
// Hostile input: every length is checked against the bytes present; a ClientHello that spans
// records is reassembled up to kMaxClientHelloBytes; anything malformed is kNotTls.
//
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace epoch::server {

// The most bytes of a connection's start that are peeked to find its whole ClientHello: a
// record's largest payload (16 KiB) with its header, and a second record's header. Real
// ClientHellos are under 2 KiB.
inline constexpr std::size_t kMaxClientHelloBytes = 16 * 1024 + 10;

struct ClientHelloInfo {
  enum class Verdict {
    kIncomplete,  // a TLS handshake so far; more bytes are needed
    kHello,       // a whole ClientHello: alpn holds what it offers (empty: no ALPN extension)
    kNotTls,      // not a TLS ClientHello, or malformed
  };
  Verdict verdict = Verdict::kIncomplete;
  std::vector<std::string> alpn;
};

[[nodiscard]] ClientHelloInfo ParseClientHello(std::string_view bytes);

// gRPC's side: a ClientHello whose ALPN offers "h2" and not "http/1.1".
[[nodiscard]] bool WantsGrpc(const ClientHelloInfo& hello);

}  // namespace epoch::server
