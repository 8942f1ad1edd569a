// Helpers of the gateway integration tests (gateway_*_test.cc): HTTP requests with curl, a
// streaming curl in the background, a real etcd 3.4 (Debian's /usr/bin/etcd) on loopback to
// compare answers with, and the "shape" of a JSON document (its keys and value types, not its
// values) to compare Epoch's answers with etcd's.
//
// Threading: the test's thread only (Catch2 assertions inside).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "epoch/test_support/loopback.h"
#include "epoch/test_support/process.h"
#include "epoch/test_support/temp_dir.h"

namespace epoch::integration {

inline constexpr const char* kCurlPath = "/usr/bin/curl";
inline constexpr const char* kEtcdPath = "/usr/bin/etcd";

struct HttpResult {
  int code = 0;
  std::string body;
};

// curl -X <method> http://127.0.0.1:<port><path> with `body` and `headers` ("Name: value");
// REQUIREs that curl ran.
HttpResult Curl(std::uint16_t port, const std::string& method, const std::string& path,
                const std::string& body = {}, const std::vector<std::string>& headers = {});
// POST with a JSON body; REQUIREs 200 and returns the body.
std::string PostOk(std::uint16_t port, const std::string& path, const std::string& body,
                   const std::vector<std::string>& headers = {});

// A streaming POST (watch, keep-alive) whose answer lands in a file as it arrives.
class CurlStream {
 public:
  CurlStream(std::uint16_t port, const std::string& path, const std::string& body,
             const std::string& log_path);
  ~CurlStream() { process_.KillAndReap(); }
  [[nodiscard]] std::string Output() const;
  // Waits up to 10 s until the output contains `text`.
  [[nodiscard]] bool WaitFor(const std::string& text) const;

 private:
  std::string log_path_;
  test::ChildProcess process_;
};

// One etcd 3.4 member on loopback, in a temporary directory, serving its gateway.
class RealEtcd {
 public:
  RealEtcd();  // REQUIREs that it starts and answers /version within 20 s
  ~RealEtcd() { process_.KillAndReap(); }
  [[nodiscard]] std::uint16_t client_port() const { return ports_.port(0); }

 private:
  test_support::TempDir dir_{"epoch-gateway-etcd"};
  test::PortBlock ports_;
  test::ChildProcess process_;
};

// The JSON document's shape: objects as {key:shape,...} with sorted keys, arrays as [shape of
// each element], strings "s", numbers "n", booleans "b". REQUIREs that it parses.
std::string JsonShape(const std::string& json);
// The value at a dotted path of object keys ("header.revision"), as its JSON text; empty when
// absent.
std::string JsonField(const std::string& json, const std::string& path);

// base64 of `text`.
std::string Base64(const std::string& text);

}  // namespace epoch::integration
