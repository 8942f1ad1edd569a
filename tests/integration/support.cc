// Catch2 v2 listeners need the external interfaces, declared by the first include of catch.hpp.
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include "support.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <sstream>
#include <thread>

namespace epoch::integration {
namespace {

// Whether an assertion of the running test case failed (CHECKs do not unwind, so the cluster's
// own "destroyed during unwinding" rule does not see them).
std::atomic<bool> g_test_failed{false};

class FailureListener : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    g_test_failed = false;
    TestEventListenerBase::testCaseStarting(info);
  }
  bool assertionEnded(const Catch::AssertionStats& stats) override {
    if (!stats.assertionResult.isOk()) g_test_failed = true;
    return TestEventListenerBase::assertionEnded(stats);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(FailureListener)

void KeepFilesOnFailure::operator()(TestCluster* cluster) const {
  if (g_test_failed) cluster->KeepFiles();
  delete cluster;
}

ClusterPtr StartCluster(int nodes) {
  return StartCluster(nodes, test::ClusterOptions{}.extra_flags);
}

ClusterPtr StartCluster(int nodes, std::vector<std::string> extra_flags) {
  test::ClusterOptions options;
  options.epochd_path = EPOCHD_PATH;
  options.nodes = nodes;
  options.extra_flags = std::move(extra_flags);
  auto cluster = TestCluster::Start(options);
  INFO("starting a " << nodes << "-node cluster: " << cluster.status().ToString());
  REQUIRE(cluster.ok());
  return ClusterPtr(cluster->release());
}

std::string EtcdctlOk(const TestCluster& cluster, const std::vector<std::string>& args,
                      std::string_view stdin_data, std::optional<std::string> endpoints) {
  CommandResult r = cluster.Etcdctl(args, stdin_data, std::move(endpoints));
  INFO("etcdctl " << fmt::format("{}", fmt::join(args, " ")) << ": " << r.Describe());
  REQUIRE(r.exit_code == 0);
  return r.out;
}

void EtcdctlFails(const TestCluster& cluster, const std::vector<std::string>& args,
                  std::string_view error, std::string_view stdin_data,
                  std::optional<std::string> endpoints) {
  CommandResult r = cluster.Etcdctl(args, stdin_data, std::move(endpoints));
  INFO("etcdctl " << fmt::format("{}", fmt::join(args, " ")) << ": " << r.Describe());
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code != 0);
  // etcdctl prints "Error: <server message>" as its last line.
  CHECK(r.err.find(fmt::format("Error: {}", error)) != std::string::npos);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::vector<std::string> Fields(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  std::string field;
  while (std::getline(in, field, ',')) {
    std::size_t b = field.find_first_not_of(' ');
    std::size_t e = field.find_last_not_of(' ');
    out.push_back(b == std::string::npos ? "" : field.substr(b, e - b + 1));
  }
  return out;
}

grpc::Status Put(etcdserverpb::KV::Stub& kv, const std::string& key, const std::string& value,
                 etcdserverpb::PutResponse* response, std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  etcdserverpb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  etcdserverpb::PutResponse ignored;
  return kv.Put(&ctx, request, response ? response : &ignored);
}

grpc::Status Range(etcdserverpb::KV::Stub& kv, const etcdserverpb::RangeRequest& request,
                   etcdserverpb::RangeResponse* response, std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  return kv.Range(&ctx, request, response);
}

etcdserverpb::RangeResponse MustRange(TestCluster& cluster, int i, const std::string& key,
                                      const std::string& range_end) {
  auto kv = etcdserverpb::KV::NewStub(cluster.Channel(i));
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  request.set_range_end(range_end);
  etcdserverpb::RangeResponse response;
  // A read is safe to repeat: UNAVAILABLE (no leader, leader changed) during an election that a
  // stalled machine set off is retried for a while, as clientv3 retries it, instead of failing
  // a test that is not about failover.
  grpc::Status s;
  Eventually(
      [&] {
        response.Clear();
        s = Range(*kv, request, &response);
        return s.error_code() != grpc::StatusCode::UNAVAILABLE;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(50));
  INFO("Range [" << key << ", " << range_end << ") on " << cluster.node(i).name << ": "
                 << s.error_message());
  REQUIRE(s.ok());
  return response;
}

std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    auto last = static_cast<unsigned char>(prefix.back());
    if (last < 0xff) {
      prefix.back() = static_cast<char>(last + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

std::string Hex(std::uint64_t id) { return fmt::format("{:x}", id); }

std::string MemberIdIn(const std::string& out, std::string_view verb) {
  std::vector<std::string> words;
  std::string word;
  std::istringstream in(out);
  while (in >> word) words.push_back(word);
  INFO(out);
  REQUIRE(words.size() >= 3);
  REQUIRE(words[0] == "Member");
  CHECK(out.find(verb) != std::string::npos);
  return words[1];
}

std::map<std::string, std::vector<std::string>> MemberRows(const TestCluster& cluster,
                                                           std::optional<std::string> endpoints) {
  std::map<std::string, std::vector<std::string>> rows;
  for (const std::string& line :
       Lines(EtcdctlOk(cluster, {"member", "list"}, {}, std::move(endpoints)))) {
    std::vector<std::string> f = Fields(line);
    INFO(line);
    REQUIRE(f.size() == 6);
    rows[f[0]] = {f.begin() + 1, f.end()};
  }
  return rows;
}

void AwaitAllStarted(const TestCluster& cluster) {
  REQUIRE(Eventually([&] {
    const auto rows = MemberRows(cluster);
    return rows.size() == static_cast<std::size_t>(cluster.size()) &&
           std::all_of(rows.begin(), rows.end(),
                       [](const auto& row) { return row.second.at(0) == "started"; });
  }));
}

std::string EnvValue(const std::string& out, const std::string& name) {
  const std::string key = name + "=\"";
  const std::size_t at = out.find(key);
  INFO(out);
  REQUIRE(at != std::string::npos);
  const std::size_t begin = at + key.size();
  return out.substr(begin, out.find('"', begin) - begin);
}

void RequireServing(TestCluster& cluster, int i, const std::string& probe_key) {
  epoch::Status alive = cluster.CheckAlive();
  INFO(alive.ToString());
  REQUIRE(alive.ok());
  static std::atomic<int> probe{0};
  std::string value = fmt::format("probe-{}", probe.fetch_add(1));
  auto kv = etcdserverpb::KV::NewStub(cluster.Channel(i));
  grpc::Status put = Put(*kv, probe_key, value);
  INFO("probe put on " << cluster.node(i).name << ": " << put.error_message());
  REQUIRE(put.ok());
  etcdserverpb::RangeResponse got = MustRange(cluster, i, probe_key);
  REQUIRE(got.kvs_size() == 1);
  CHECK(got.kvs(0).value() == value);
}

}  // namespace epoch::integration
