#include "gateway_support.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <catch2/catch.hpp>
#include <map>

#include "epoch/test_support/eventually.h"
#include "epoch/test_support/files.h"

namespace epoch::integration {
namespace {

using google::protobuf::Value;

Value Parse(const std::string& json) {
  Value value;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &value);
  INFO("json: " << json << " " << status.ToString());
  REQUIRE(status.ok());
  return value;
}

// The value as JSON with object keys sorted, so equal documents print equal.
std::string Canonical(const Value& v) {
  switch (v.kind_case()) {
    case Value::kStructValue: {
      std::map<std::string, std::string> fields;
      for (const auto& [k, f] : v.struct_value().fields()) fields[k] = Canonical(f);
      std::string out = "{";
      for (const auto& [k, s] : fields) out += "\"" + k + "\":" + s + ",";
      return out + "}";
    }
    case Value::kListValue: {
      std::string out = "[";
      for (const Value& e : v.list_value().values()) out += Canonical(e) + ",";
      return out + "]";
    }
    default: {
      std::string out;
      (void)google::protobuf::util::MessageToJsonString(v, &out);
      return out;
    }
  }
}

std::string Shape(const Value& v) {
  switch (v.kind_case()) {
    case Value::kStructValue: {
      std::map<std::string, std::string> fields;
      for (const auto& [k, f] : v.struct_value().fields()) fields[k] = Shape(f);
      std::string out = "{";
      for (const auto& [k, s] : fields) out += k + ":" + s + ",";
      return out + "}";
    }
    case Value::kListValue: {
      std::string out = "[";
      for (const Value& e : v.list_value().values()) out += Shape(e) + ",";
      return out + "]";
    }
    case Value::kStringValue: return "s";
    case Value::kNumberValue: return "n";
    case Value::kBoolValue: return "b";
    default: return "null";
  }
}

}  // namespace

HttpResult Curl(std::uint16_t port, const std::string& method, const std::string& path,
                const std::string& body, const std::vector<std::string>& headers) {
  std::vector<std::string> argv = {kCurlPath,
                                   "-s",
                                   "-S",
                                   "-X",
                                   method,
                                   "-o",
                                   "-",
                                   "-w",
                                   "\n%{http_code}",
                                   fmt::format("http://127.0.0.1:{}{}", port, path)};
  // A large body goes through a file: the argument list has a size limit.
  test_support::TempDir dir("epoch-gateway-body");
  if (body.size() > (64 << 10)) {
    test_support::WriteFile(dir.path() + "/body", body);
    argv.push_back("--data-binary");
    argv.push_back("@" + dir.path() + "/body");
  } else if (!body.empty()) {
    argv.push_back("--data-binary");
    argv.push_back(body);
  }
  for (const std::string& h : headers) {
    argv.push_back("-H");
    argv.push_back(h);
  }
  const test::CommandResult r = test::RunCommand(argv, {}, std::chrono::seconds(20));
  INFO(r.Describe());
  REQUIRE(r.exit_code == 0);
  const std::size_t nl = r.out.rfind('\n');
  REQUIRE(nl != std::string::npos);
  return HttpResult{std::stoi(r.out.substr(nl + 1)), r.out.substr(0, nl)};
}

std::string PostOk(std::uint16_t port, const std::string& path, const std::string& body,
                   const std::vector<std::string>& headers) {
  const HttpResult r = Curl(port, "POST", path, body, headers);
  INFO(path << " " << body << " -> " << r.code << " " << r.body);
  REQUIRE(r.code == 200);
  return r.body;
}

CurlStream::CurlStream(std::uint16_t port, const std::string& path, const std::string& body,
                       const std::string& log_path)
    : log_path_(log_path) {
  Result<test::ChildProcess> child =
      test::ChildProcess::Spawn({kCurlPath, "-s", "-N", "-X", "POST", "--data-binary", body,
                                 fmt::format("http://127.0.0.1:{}{}", port, path)},
                                log_path_);
  INFO(child.status().ToString());
  REQUIRE(child.ok());
  process_ = std::move(*child);
}

std::string CurlStream::Output() const { return test_support::ReadFileIfExists(log_path_); }

bool CurlStream::WaitFor(const std::string& text) const {
  return test_support::Eventually([&] { return Output().find(text) != std::string::npos; },
                                  std::chrono::seconds(10));
}

RealEtcd::RealEtcd() {
  Result<test::PortBlock> ports = test::PortBlock::Reserve();
  REQUIRE(ports.ok());
  ports_ = std::move(*ports);
  const std::string client = fmt::format("http://127.0.0.1:{}", ports_.port(0));
  const std::string peer = fmt::format("http://127.0.0.1:{}", ports_.port(1));
  Result<test::ChildProcess> child = test::ChildProcess::Spawn(
      {kEtcdPath, "--name", "etcd", "--data-dir", dir_.path() + "/data", "--listen-client-urls",
       client, "--advertise-client-urls", client, "--listen-peer-urls", peer,
       "--initial-advertise-peer-urls", peer, "--initial-cluster", "etcd=" + peer},
      dir_.path() + "/etcd.log");
  REQUIRE(child.ok());
  process_ = std::move(*child);
  const bool up = test_support::Eventually(
      [&] {
        Result<test::HttpResponse> r =
            test::HttpGet(ports_.port(0), "/health", std::chrono::seconds(1));
        return r.ok() && r->code == 200 && r->body.find("true") != std::string::npos;
      },
      std::chrono::seconds(20));
  INFO(test_support::ReadFileIfExists(dir_.path() + "/etcd.log"));
  REQUIRE(up);
}

std::string JsonShape(const std::string& json) { return Shape(Parse(json)); }

std::string JsonField(const std::string& json, const std::string& path) {
  Value v = Parse(json);
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot - start);
    if (v.kind_case() != Value::kStructValue) return {};
    const auto& fields = v.struct_value().fields();
    const auto it = fields.find(key);
    if (it == fields.end()) return {};
    Value next = it->second;
    v = std::move(next);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return Canonical(v);
}

std::string Base64(const std::string& text) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < text.size(); i += 3) {
    const auto n = (static_cast<unsigned char>(text[i]) << 16) |
                   (static_cast<unsigned char>(text[i + 1]) << 8) |
                   static_cast<unsigned char>(text[i + 2]);
    out += {kAlphabet[(n >> 18) & 63], kAlphabet[(n >> 12) & 63], kAlphabet[(n >> 6) & 63],
            kAlphabet[n & 63]};
  }
  if (i + 1 == text.size()) {
    const auto n = static_cast<unsigned char>(text[i]) << 16;
    out += {kAlphabet[(n >> 18) & 63], kAlphabet[(n >> 12) & 63], '=', '='};
  } else if (i + 2 == text.size()) {
    const auto n = (static_cast<unsigned char>(text[i]) << 16) |
                   (static_cast<unsigned char>(text[i + 1]) << 8);
    out += {kAlphabet[(n >> 18) & 63], kAlphabet[(n >> 12) & 63], kAlphabet[(n >> 6) & 63], '='};
  }
  return out;
}

}  // namespace epoch::integration
