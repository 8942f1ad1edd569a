// Helpers shared by the integration test files: start a cluster of the epochd under test, run
// etcdctl expecting success or a given error, parse etcdctl's JSON and simple outputs, and call
// the KV service through a gRPC stub for what etcdctl 3.4 cannot send (count_only, filters,
// invalid enum values, lease on put without a lease). Waiting (Eventually, kProcessPoll) and file
// reads come from tests/support.
//
// Threading: the Catch2 assertions inside these helpers must run on the test's thread; the
// stub helpers that return a grpc::Status (no assertions) may run on any thread.
#pragma once

#include <google/protobuf/util/json_util.h>

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "epoch/test_support/eventually.h"
#include "epoch/test_support/files.h"
#include "epoch/test_support/test_cluster.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::integration {

using test::CommandResult;
using test::TestCluster;
using test_support::Eventually;
using test_support::kProcessPoll;
using test_support::ReadFile;
using test_support::ReadFileIfExists;
using test_support::WriteFile;

// Destroys a cluster, keeping its data and logs (and printing where) if any assertion of the
// current test case failed.
struct KeepFilesOnFailure {
  void operator()(TestCluster* cluster) const;
};
using ClusterPtr = std::unique_ptr<TestCluster, KeepFilesOnFailure>;

// A healthy cluster of `nodes` epochd processes (REQUIREd).
ClusterPtr StartCluster(int nodes = 3);
// The same with epochd flags in place of the fast-test Raft timing (ClusterOptions::extra_flags).
ClusterPtr StartCluster(int nodes, std::vector<std::string> extra_flags);

// Runs etcdctl and REQUIREs exit code 0; returns stdout.
std::string EtcdctlOk(const TestCluster& cluster, const std::vector<std::string>& args,
                      std::string_view stdin_data = {},
                      std::optional<std::string> endpoints = std::nullopt);
// Runs etcdctl and REQUIREs a non-zero exit with `error` in its stderr.
void EtcdctlFails(const TestCluster& cluster, const std::vector<std::string>& args,
                  std::string_view error, std::string_view stdin_data = {},
                  std::optional<std::string> endpoints = std::nullopt);

// Non-empty lines of `text`.
std::vector<std::string> Lines(const std::string& text);
// Comma-separated fields of one line, trimmed.
std::vector<std::string> Fields(const std::string& line);

// etcdctl -w json output (Go's encoding of the response struct: snake_case names, base64 bytes)
// parsed into the protobuf message; REQUIREs that it parses.
template <typename Message>
Message ParseJson(const std::string& json) {
  Message message;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto status = google::protobuf::util::JsonStringToMessage(json, &message, options);
  INFO("json: " << json);
  REQUIRE(status.ok());
  return message;
}

// Stub calls with a deadline; no assertions, so writer threads may use them.
grpc::Status Put(etcdserverpb::KV::Stub& kv, const std::string& key, const std::string& value,
                 etcdserverpb::PutResponse* response = nullptr,
                 std::chrono::milliseconds timeout = std::chrono::seconds(5));
grpc::Status Range(etcdserverpb::KV::Stub& kv, const etcdserverpb::RangeRequest& request,
                   etcdserverpb::RangeResponse* response,
                   std::chrono::milliseconds timeout = std::chrono::seconds(5));

// Linearizable range over [key, range_end) through node i; REQUIREs success. UNAVAILABLE (no
// leader) is retried for up to 10 s.
etcdserverpb::RangeResponse MustRange(TestCluster& cluster, int i, const std::string& key,
                                      const std::string& range_end = {});

// The end of the prefix range starting at `prefix` (etcd's GetPrefixRangeEnd).
std::string PrefixEnd(std::string prefix);

// Member ID as etcdctl prints and parses it (%x).
std::string Hex(std::uint64_t id);

// The member ID in etcdctl's "Member <id> <verb> cluster <cid>" (CHECKs that `verb` is there).
std::string MemberIdIn(const std::string& out, std::string_view verb);
// `member list` through `endpoints` (default: every node), rows by member ID: status, name, peer
// URLs, client URLs, is learner.
std::map<std::string, std::vector<std::string>> MemberRows(
    const TestCluster& cluster, std::optional<std::string> endpoints = std::nullopt);
// Waits (REQUIREs, 10 s) until `member list` shows the cluster's members all started: until each
// has published itself, --strict-reconfig-check refuses a change that needs a started quorum.
void AwaitAllStarted(const TestCluster& cluster);
// The value of `NAME="value"` in etcdctl member add's output.
std::string EnvValue(const std::string& out, const std::string& name);

// REQUIREs that every started node is still alive and that a put and a linearizable get through
// node i both work (the "node keeps serving" check after bad input).
void RequireServing(TestCluster& cluster, int i, const std::string& probe_key);

}  // namespace epoch::integration
