// epoch.v1.Idempotent against real processes: client-library writers whose leader is SIGKILLed
// mid-write retry under the same key and every write is applied exactly once (each key is
// written once, so a second apply would show as version 2); a repeated key is answered with the
// first answer across a leader change and a full restart of a cluster whose log was compacted
// (the table lives in the store the snapshots carry), and from a member that caught up by a
// snapshot install once it leads; a repeat after the key's window gets the clear
// FAILED_PRECONDITION, not a second apply.
#include <fmt/format.h>

#include <atomic>
#include <map>
#include <thread>

#include "epoch/client/client.h"
#include "epoch/client/errors.h"
#include "epoch/etcd_errors.h"
#include "epoch/v1/epoch.grpc.pb.h"
#include "support.h"

namespace epoch::integration {
namespace {

namespace pb = etcdserverpb;
using std::chrono::seconds;

// One client-library writer: puts i<id>/<seq> once each, recording what the client answered.
class KeyedWriter {
 public:
  KeyedWriter(const TestCluster& cluster, int id, std::atomic<bool>& stop) : id_(id), stop_(stop) {
    client::ClientOptions options;
    for (int i = 0; i < cluster.size(); ++i) {
      options.endpoints.push_back(cluster.node(i).client_address());
    }
    options.call_timeout = std::chrono::milliseconds(8000);
    auto made = client::Client::Create(std::move(options));
    if (made.ok()) client_ = std::move(*made);
    thread_ = std::thread([this] { Run(); });
  }
  ~KeyedWriter() { Join(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

  [[nodiscard]] std::size_t acked() const { return acked_.load(); }
  [[nodiscard]] bool created() const { return client_ != nullptr; }
  // After Join().
  [[nodiscard]] const std::map<std::string, std::int64_t>& acks() const { return acks_; }
  [[nodiscard]] const std::map<std::string, int>& errors() const { return errors_; }
  [[nodiscard]] int unknown() const { return unknown_; }
  [[nodiscard]] std::uint64_t replayed() const { return client_ ? client_->replayed_writes() : 0; }
  [[nodiscard]] bool keyed() const { return client_ && client_->idempotent_writes(); }

 private:
  static constexpr int kMaxWrites = 5000;  // bounds the loop whatever happens

  void Run() {
    if (!client_) return;
    for (int seq = 0; seq < kMaxWrites && !stop_.load(); ++seq) {
      const std::string key = fmt::format("i{}/{:05}", id_, seq);
      Result<pb::PutResponse> r = client_->Put(key, fmt::format("v{}", seq));
      if (r.ok()) {
        acks_[key] = r->header().revision();
        acked_.fetch_add(1);
      } else {
        if (client::IsOutcomeUnknown(r.status())) ++unknown_;
        ++errors_[r.status().ToString()];
      }
    }
  }

  const int id_;
  std::atomic<bool>& stop_;
  std::unique_ptr<client::Client> client_;
  std::map<std::string, std::int64_t> acks_;
  std::map<std::string, int> errors_;
  int unknown_ = 0;
  std::atomic<std::size_t> acked_{0};
  std::thread thread_;
};

std::size_t TotalAcked(const std::vector<std::unique_ptr<KeyedWriter>>& writers) {
  std::size_t total = 0;
  for (const auto& w : writers) total += w->acked();
  return total;
}

// One keyed put through the Idempotent stub of node i.
grpc::Status KeyedPut(TestCluster& cluster, int i, const std::string& client_id,
                      std::uint64_t sequence, std::int64_t ttl_ms, const std::string& key,
                      const std::string& value, v1::IdempotentPutResponse* response) {
  auto stub = v1::Idempotent::NewStub(cluster.Channel(i));
  v1::IdempotentPutRequest request;
  request.mutable_idempotency()->set_client_id(client_id);
  request.mutable_idempotency()->set_sequence(sequence);
  request.mutable_idempotency()->set_ttl_ms(ttl_ms);
  request.mutable_request()->set_key(key);
  request.mutable_request()->set_value(value);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(5));
  return stub->Put(&context, request, response);
}

// The same keyed put, retried while the cluster has no leader or the attempt timed out;
// REQUIREs an answer.
v1::IdempotentPutResponse MustKeyedPut(TestCluster& cluster, int i, const std::string& client_id,
                                       std::uint64_t sequence, std::int64_t ttl_ms,
                                       const std::string& key, const std::string& value) {
  v1::IdempotentPutResponse response;
  grpc::Status last;
  const bool answered = Eventually(
      [&] {
        last = KeyedPut(cluster, i, client_id, sequence, ttl_ms, key, value, &response);
        // Sent again under the same key: safe whatever the first attempt did.
        return last.error_code() != grpc::StatusCode::UNAVAILABLE &&
               last.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED;
      },
      seconds(15), kProcessPoll);
  INFO(last.error_message());
  REQUIRE(answered);
  REQUIRE(last.ok());
  return response;
}

TEST_CASE("keyed writers survive a leader SIGKILL and every write applies exactly once",
          "[integration][idempotent]") {
  auto cluster = StartCluster();
  Result<int> old_leader = cluster->WaitForLeader(seconds(10));
  REQUIRE(old_leader.ok());

  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<KeyedWriter>> writers;
  for (int i = 0; i < 4; ++i) writers.push_back(std::make_unique<KeyedWriter>(*cluster, i, stop));
  auto stop_writers = [&] {
    stop = true;
    for (auto& w : writers) w->Join();
  };
  for (const auto& w : writers) REQUIRE(w->created());

  const bool warmed = Eventually([&] { return TotalAcked(writers) >= 200; }, seconds(30),
                                 std::chrono::milliseconds(5));
  if (!warmed) stop_writers();
  REQUIRE(warmed);
  const std::size_t before_kill = TotalAcked(writers);
  cluster->Kill(*old_leader);
  Result<int> new_leader = cluster->WaitForLeader(seconds(15), *old_leader);
  const bool resumed =
      new_leader.ok() && Eventually([&] { return TotalAcked(writers) >= before_kill + 200; },
                                    seconds(30), std::chrono::milliseconds(5));
  stop_writers();
  REQUIRE(new_leader.ok());
  REQUIRE(resumed);

  int unknown = 0;
  std::uint64_t replayed = 0;
  for (const auto& w : writers) {
    CHECK(w->keyed());  // Epoch serves the service: no fallback to KV
    unknown += w->unknown();
    replayed += w->replayed();
    for (const auto& [message, count] : w->errors()) {
      fmt::print("  keyed writer failed {}x: {}\n", count, message);
    }
  }
  fmt::print(
      "idempotent failover: {} puts acknowledged ({} before the kill), {} replayed, "
      "{} outcome unknown\n",
      TotalAcked(writers), before_kill, replayed, unknown);

  // The history: each key was sent under one idempotency key, so it must have been applied
  // once (version 1, at the acknowledged revision), whatever the retries.
  pb::RangeResponse dump = MustRange(*cluster, *new_leader, "i", PrefixEnd("i"));
  std::map<std::string, const mvccpb::KeyValue*> by_key;
  std::size_t applied_twice = 0;
  for (const auto& kv : dump.kvs()) {
    by_key[kv.key()] = &kv;
    if (kv.version() != 1) {
      ++applied_twice;
      UNSCOPED_INFO(kv.key() << " has version " << kv.version());
    }
  }
  CHECK(applied_twice == 0);
  std::size_t missing = 0;
  for (const auto& w : writers) {
    for (const auto& [key, revision] : w->acks()) {
      auto it = by_key.find(key);
      if (it == by_key.end() || it->second->mod_revision() != revision) ++missing;
    }
  }
  CHECK(missing == 0);
  // A write the client gave up on (deadline) may have applied, once at most: checked above.
  CHECK(static_cast<std::size_t>(dump.kvs_size()) >= TotalAcked(writers));
}

TEST_CASE(
    "a keyed repeat replays across a leader change and a restart; after its window it is "
    "refused",
    "[integration][idempotent]") {
  // A small --snapshot-count: the log is compacted, so the restart below starts from the store
  // (the snapshot's contents) rather than from a log holding the keyed entries.
  std::vector<std::string> flags = test::ClusterOptions{}.extra_flags;
  flags.insert(flags.end(), {"--snapshot-count", "20", "--snapshot-catchup-entries", "5"});
  auto cluster = StartCluster(3, std::move(flags));
  Result<int> leader = cluster->WaitForLeader(seconds(10));
  REQUIRE(leader.ok());
  const std::string client_id = "integration-client-1";

  v1::IdempotentPutResponse first =
      MustKeyedPut(*cluster, *leader, client_id, 1, 120'000, "once/x", "1");
  CHECK_FALSE(first.replayed());
  const std::int64_t revision = first.response().header().revision();
  v1::IdempotentPutResponse short_lived =
      MustKeyedPut(*cluster, *leader, client_id, 2, 1000, "once/y", "1");
  CHECK_FALSE(short_lived.replayed());

  // The same key through a follower (forwarded to the leader): the first answer.
  const int follower = (*leader + 1) % cluster->size();
  v1::IdempotentPutResponse again =
      MustKeyedPut(*cluster, follower, client_id, 1, 120'000, "once/x", "different value, ignored");
  CHECK(again.replayed());
  CHECK(again.response().header().revision() == revision);

  // Enough other writes for a few log compactions.
  auto kv = pb::KV::NewStub(cluster->Channel(*leader));
  for (int i = 0; i < 60; ++i) REQUIRE(Put(*kv, fmt::format("filler/{}", i), "f").ok());

  // A leader change.
  cluster->Kill(*leader);
  Result<int> next = cluster->WaitForLeader(seconds(15), *leader);
  REQUIRE(next.ok());
  v1::IdempotentPutResponse after_kill =
      MustKeyedPut(*cluster, *next, client_id, 1, 120'000, "once/x", "1");
  CHECK(after_kill.replayed());
  CHECK(after_kill.response().header().revision() == revision);

  // A full restart.
  REQUIRE(cluster->StartNode(*leader).ok());
  REQUIRE(cluster->WaitHealthy(seconds(30)).ok());
  for (int i = 0; i < cluster->size(); ++i) {
    epoch::Status stopped = cluster->Stop(i);
    INFO(stopped.ToString());
    CHECK(stopped.ok());
  }
  for (int i = 0; i < cluster->size(); ++i) REQUIRE(cluster->StartNode(i).ok());
  Result<int> restarted = cluster->WaitHealthy(seconds(30));
  REQUIRE(restarted.ok());
  v1::IdempotentPutResponse after_restart =
      MustKeyedPut(*cluster, *restarted, client_id, 1, 120'000, "once/x", "1");
  CHECK(after_restart.replayed());
  CHECK(after_restart.response().header().revision() == revision);
  CHECK(MustRange(*cluster, *restarted, "once/x").kvs(0).version() == 1);

  // Sequence 2 was remembered for 1 s: long gone. Its repeat is refused, not applied.
  v1::IdempotentPutResponse late;
  grpc::Status refused;
  const bool answered = Eventually(
      [&] {
        refused = KeyedPut(*cluster, *restarted, client_id, 2, 1000, "once/y", "2", &late);
        return refused.error_code() != grpc::StatusCode::UNAVAILABLE;
      },
      seconds(15), kProcessPoll);
  REQUIRE(answered);
  CHECK(refused.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(refused.error_message() == etcd_errors::kIdempotencyExpired.message);
  pb::RangeResponse y = MustRange(*cluster, *restarted, "once/y");
  REQUIRE(y.kvs_size() == 1);
  CHECK(y.kvs(0).version() == 1);
  CHECK(y.kvs(0).value() == "1");

  // A new sequence of the same client applies.
  v1::IdempotentPutResponse fresh =
      MustKeyedPut(*cluster, *restarted, client_id, 3, 1000, "once/y", "3");
  CHECK_FALSE(fresh.replayed());
  CHECK(MustRange(*cluster, *restarted, "once/y").kvs(0).version() == 2);
}

TEST_CASE("a member that caught up by snapshot install replays a key once it leads",
          "[integration][idempotent]") {
  std::vector<std::string> flags = test::ClusterOptions{}.extra_flags;
  flags.insert(flags.end(), {"--snapshot-count", "20", "--snapshot-catchup-entries", "5"});
  auto cluster = StartCluster(3, std::move(flags));
  Result<int> leader = cluster->WaitForLeader(seconds(10));
  REQUIRE(leader.ok());
  const int behind = (*leader + 1) % cluster->size();
  REQUIRE(cluster->Stop(behind).ok());

  const std::string client_id = "integration-client-2";
  v1::IdempotentPutResponse first =
      MustKeyedPut(*cluster, *leader, client_id, 1, 120'000, "snap/x", "1");
  CHECK_FALSE(first.replayed());
  // The log moves past what the stopped member has: it can only catch up by snapshot.
  auto kv = pb::KV::NewStub(cluster->Channel(*leader));
  for (int i = 0; i < 60; ++i) REQUIRE(Put(*kv, fmt::format("filler/{}", i), "f").ok());

  REQUIRE(cluster->StartNode(behind).ok());
  REQUIRE(cluster->WaitHealthy(seconds(30)).ok());
  CHECK(Eventually(
      [&] { return cluster->Metric(behind, "epoch_snapshots_installed_total").value_or(0) >= 1; },
      seconds(10), kProcessPoll));
  EtcdctlOk(*cluster, {"move-leader", Hex(cluster->node(behind).member_id)});
  Result<int> moved = cluster->WaitForLeader(seconds(10));
  REQUIRE(moved.ok());
  REQUIRE(*moved == behind);
  // Answered by the member whose table came with the snapshot.
  v1::IdempotentPutResponse again =
      MustKeyedPut(*cluster, behind, client_id, 1, 120'000, "snap/x", "1");
  CHECK(again.replayed());
  CHECK(again.response().header().revision() == first.response().header().revision());
  CHECK(again.response().header().member_id() == cluster->node(behind).member_id);
  CHECK(MustRange(*cluster, behind, "snap/x").kvs(0).version() == 1);
}

TEST_CASE("malformed idempotency keys and read-only txns are refused",
          "[integration][idempotent]") {
  auto cluster = StartCluster(1);
  REQUIRE(cluster->WaitForLeader(seconds(10)).ok());
  auto stub = v1::Idempotent::NewStub(cluster->Channel(0));
  auto put = [&](const v1::IdempotencyKey& key) {
    v1::IdempotentPutRequest request;
    *request.mutable_idempotency() = key;
    request.mutable_request()->set_key("k");
    request.mutable_request()->set_value("v");
    v1::IdempotentPutResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(5));
    return stub->Put(&context, request, &response);
  };
  v1::IdempotencyKey none;
  CHECK(put(none).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  v1::IdempotencyKey both;
  both.set_key("free");
  both.set_client_id("c");
  both.set_sequence(1);
  CHECK(put(both).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  v1::IdempotencyKey no_sequence;
  no_sequence.set_client_id("c");
  CHECK(put(no_sequence).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  v1::IdempotencyKey long_id;
  long_id.set_client_id(std::string(65, 'c'));
  long_id.set_sequence(1);
  CHECK(put(long_id).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  v1::IdempotencyKey long_key;
  long_key.set_key(std::string(257, 'k'));
  CHECK(put(long_key).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(MustRange(*cluster, 0, "k").kvs_size() == 0);

  v1::IdempotentTxnRequest txn;
  txn.mutable_idempotency()->set_client_id("c");
  txn.mutable_idempotency()->set_sequence(1);
  txn.mutable_request()->add_success()->mutable_request_range()->set_key("k");
  v1::IdempotentTxnResponse txn_response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(5));
  const grpc::Status read_only = stub->Txn(&context, txn, &txn_response);
  CHECK(read_only.error_code() == grpc::StatusCode::INVALID_ARGUMENT);

  // Free-form keys work too.
  v1::IdempotencyKey free_form;
  free_form.set_key("job-7/stage-1");
  CHECK(put(free_form).ok());
  CHECK(put(free_form).ok());
  CHECK(MustRange(*cluster, 0, "k").kvs(0).version() == 1);
  // And /metrics counts the outcomes.
  Result<test::HttpResponse> metrics = cluster->Http(0, "/metrics");
  REQUIRE(metrics.ok());
  CHECK(metrics->body.find("epoch_idempotent_requests_total{outcome=\"replayed\"} 1") !=
        std::string::npos);
  CHECK(metrics->body.find("epoch_idempotent_requests_total{outcome=\"refused\"} 6") !=
        std::string::npos);
}

}  // namespace
}  // namespace epoch::integration
