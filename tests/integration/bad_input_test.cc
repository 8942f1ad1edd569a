// Bad input against a real cluster: each request gets etcd's error (code and message), nothing is
// written, and the node keeps serving. Then bytes that are not the peer protocol, and a
// well-formed hello from another cluster, on a node's peer port: the node drops the connection,
// says why in its log, and keeps serving.
#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "epoch/byte_coding.h"
#include "epoch/etcd_errors.h"
#include "raftpb/raft.pb.h"
#include "support.h"

namespace epoch::integration {
namespace {

std::int64_t CurrentRevision(TestCluster& cluster) {
  return MustRange(cluster, 0, "any").header().revision();
}

grpc::Status Txn(TestCluster& cluster, int i, const etcdserverpb::TxnRequest& request) {
  auto kv = etcdserverpb::KV::NewStub(cluster.Channel(i));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  etcdserverpb::TxnResponse response;
  return kv->Txn(&ctx, request, &response);
}

void CheckError(const grpc::Status& s, grpc::StatusCode code, const std::string& message) {
  INFO("got code " << s.error_code() << ": " << s.error_message());
  CHECK(s.error_code() == code);
  CHECK(s.error_message() == message);
}

// `reads` reads of every key under "bulk/", then a put of "abused".
etcdserverpb::TxnRequest ReadsAndPut(int reads) {
  etcdserverpb::TxnRequest txn;
  for (int i = 0; i < reads; ++i) {
    auto* range = txn.add_success()->mutable_request_range();
    range->set_key("bulk/");
    range->set_range_end(PrefixEnd("bulk/"));
  }
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key("abused");
  put->set_value("x");
  return txn;
}

TEST_CASE("a write txn that reads past --max-txn-read-keys fails whole; the leader stays",
          "[integration][bad_input]") {
  auto cluster = StartCluster(3, {"--tick-ms", "10", "--heartbeat-ticks", "5",
                                  "--election-timeout-ticks", "15", "--max-txn-read-keys", "5000"});
  // 10,240 keys, 128 per txn.
  for (int batch = 0; batch < 80; ++batch) {
    etcdserverpb::TxnRequest load;
    for (int k = 0; k < 128; ++k) {
      auto* put = load.add_success()->mutable_request_put();
      put->set_key(fmt::format("bulk/{:05}", batch * 128 + k));
      put->set_value("v");
    }
    REQUIRE(Txn(*cluster, 0, load).ok());
  }
  Result<int> leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const std::int64_t revision = CurrentRevision(*cluster);
  // Each member judges the txn on its own applied state: every one has applied the keys.
  for (int node = 0; node < 3; ++node) {
    REQUIRE(Eventually([&] {
      return cluster->Metric(node, "epoch_kv_revision").value_or(0) >=
             static_cast<double>(revision);
    }));
  }

  // 127 full-range reads (1.3 million key visits on the Raft thread, unbounded) and a put.
  const etcdserverpb::TxnRequest abusive = ReadsAndPut(127);
  const etcdserverpb::PutRequest* put = &abusive.success(127).request_put();
  for (int node = 0; node < 3; ++node) {
    CheckError(Txn(*cluster, node, abusive), grpc::StatusCode::INVALID_ARGUMENT,
               std::string(epoch::etcd_errors::kTxnReadTooLarge.message));
  }
  CHECK(CurrentRevision(*cluster) == revision);
  CHECK(MustRange(*cluster, 0, "abused").kvs_size() == 0);
  // Each member refused the txn it was sent before proposing it: no member applied one.
  double early = 0;
  for (int node = 0; node < 3; ++node) {
    early += cluster->Metric(node, R"(epoch_txn_read_limit_refused_total{stage="precheck"})")
                 .value_or(0);
    CHECK(cluster->Metric(node, R"(epoch_txn_read_limit_refused_total{stage="apply"})") == 0);
  }
  CHECK(early == 3);
  // A compare over a range reads every key in it: it counts against the same bound (here the
  // txn's only read), refused before the log as well.
  etcdserverpb::TxnRequest compared;
  auto* cmp = compared.add_compare();
  cmp->set_key("bulk/");
  cmp->set_range_end(PrefixEnd("bulk/"));
  cmp->set_target(etcdserverpb::Compare::CREATE);
  cmp->set_result(etcdserverpb::Compare::GREATER);
  *compared.add_success()->mutable_request_put() = *put;
  CheckError(Txn(*cluster, *leader, compared), grpc::StatusCode::INVALID_ARGUMENT,
             std::string(epoch::etcd_errors::kTxnReadTooLarge.message));
  CHECK(cluster->Metric(*leader, R"(epoch_txn_read_limit_refused_total{stage="precheck"})") == 2);
  CHECK(cluster->Metric(*leader, R"(epoch_txn_read_limit_refused_total{stage="apply"})") == 0);
  CHECK(CurrentRevision(*cluster) == revision);

  // Within the bound the same shape of txn applies.
  etcdserverpb::TxnRequest fine;
  auto* small = fine.add_success()->mutable_request_range();
  small->set_key("bulk/00");  // 1,000 keys
  small->set_range_end("bulk/01");
  *fine.add_success()->mutable_request_put() = *put;
  CHECK(Txn(*cluster, 1, fine).ok());
  Result<int> after = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(after.ok());
  CHECK(*after == *leader);
  RequireServing(*cluster, 2, "after-abuse");
}

TEST_CASE("a client whose txns keep reading too much is refused without the count",
          "[integration][bad_input]") {
  auto cluster = StartCluster(3, {"--max-txn-read-keys", "10", "--txn-read-refusal-burst", "2",
                                  "--txn-read-refusal-refill-ms", "600000"});
  etcdserverpb::TxnRequest load;
  for (int k = 0; k < 20; ++k) {
    auto* put = load.add_success()->mutable_request_put();
    put->set_key(fmt::format("bulk/{:02}", k));
    put->set_value("v");
  }
  REQUIRE(Txn(*cluster, 0, load).ok());
  REQUIRE(Eventually([&] {
    return cluster->Metric(1, "epoch_kv_revision").value_or(0) >=
           static_cast<double>(CurrentRevision(*cluster));
  }));
  const etcdserverpb::TxnRequest abusive = ReadsAndPut(1);
  const etcdserverpb::PutRequest* put = &abusive.success(1).request_put();
  // The burst: counted and refused for their reads.
  for (int i = 0; i < 2; ++i) {
    CheckError(Txn(*cluster, 1, abusive), grpc::StatusCode::INVALID_ARGUMENT,
               std::string(epoch::etcd_errors::kTxnReadTooLarge.message));
  }
  // Past it: refused at once, not counted again.
  CheckError(Txn(*cluster, 1, abusive), grpc::StatusCode::RESOURCE_EXHAUSTED,
             std::string(epoch::etcd_errors::kTooManyRequests.message));
  CHECK(cluster->Metric(1, R"(epoch_txn_read_limit_refused_total{stage="precheck"})") == 2);
  CHECK(cluster->Metric(1, "epoch_txn_read_limit_throttled_total") == 1);
  // Txns that need no count still pass, and other members judge the client on their own.
  etcdserverpb::TxnRequest cas;
  auto* cmp = cas.add_compare();
  cmp->set_key("bulk/00");
  cmp->set_target(etcdserverpb::Compare::VERSION);
  cmp->set_result(etcdserverpb::Compare::EQUAL);
  cmp->set_version(1);
  *cas.add_success()->mutable_request_put() = *put;
  CHECK(Txn(*cluster, 1, cas).ok());
  CheckError(Txn(*cluster, 2, abusive), grpc::StatusCode::INVALID_ARGUMENT,
             std::string(epoch::etcd_errors::kTxnReadTooLarge.message));
}

TEST_CASE("oversized requests get 'request is too large' and write nothing",
          "[integration][bad_input]") {
  auto cluster = StartCluster();
  std::int64_t revision = CurrentRevision(*cluster);

  // 1.6 MiB through etcdctl (value on stdin: too long for an argument): over --max-request-bytes.
  std::string big(1600 * 1024, 'a');
  EtcdctlFails(*cluster, {"put", "big"}, std::string(epoch::etcd_errors::kRequestTooLarge.message),
               big);
  // A txn whose puts add up to more than the limit.
  etcdserverpb::TxnRequest txn;
  for (int i = 0; i < 2; ++i) {
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(fmt::format("big{}", i));
    put->set_value(std::string(800 * 1024, 'b'));
  }
  CheckError(Txn(*cluster, 1, txn), grpc::StatusCode::INVALID_ARGUMENT,
             std::string(epoch::etcd_errors::kRequestTooLarge.message));
  // 3 MiB is over gRPC's receive limit: refused before it is even parsed.
  auto kv = etcdserverpb::KV::NewStub(cluster->Channel(2));
  grpc::Status huge = Put(*kv, "huge", std::string(3 << 20, 'c'));
  CHECK(huge.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(CurrentRevision(*cluster) == revision);
  CHECK(MustRange(*cluster, 0, "big").kvs_size() == 0);

  // Just under the limit is accepted (so the limit is where etcd puts it, not lower).
  std::string fits(1400 * 1024, 'd');
  CHECK(EtcdctlOk(*cluster, {"put", "fits"}, fits) == "OK\n");
  auto got = MustRange(*cluster, 1, "fits");
  REQUIRE(got.kvs_size() == 1);
  CHECK(got.kvs(0).value() == fits);
  for (int i = 0; i < cluster->size(); ++i) RequireServing(*cluster, i, "probe/oversized");
}

TEST_CASE("the request size and txn op limits follow epochd's flags", "[integration][bad_input]") {
  auto cluster = StartCluster(3, {"--max-request-bytes", "65536", "--max-txn-ops", "4"});
  const std::int64_t revision = CurrentRevision(*cluster);
  auto kv = etcdserverpb::KV::NewStub(cluster->Channel(1));
  CheckError(Put(*kv, "big", std::string(70 * 1024, 'a')), grpc::StatusCode::INVALID_ARGUMENT,
             std::string(epoch::etcd_errors::kRequestTooLarge.message));
  etcdserverpb::TxnRequest txn;
  for (int i = 0; i < 5; ++i) {
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(fmt::format("op{}", i));
  }
  CheckError(Txn(*cluster, 0, txn), grpc::StatusCode::INVALID_ARGUMENT,
             std::string(epoch::etcd_errors::kTooManyOps.message));
  CHECK(CurrentRevision(*cluster) == revision);

  CHECK(Put(*kv, "fits", std::string(60 * 1024, 'b')).ok());
  txn.mutable_success()->RemoveLast();
  CHECK(Txn(*cluster, 2, txn).ok());
  CHECK(MustRange(*cluster, 0, "op3").kvs_size() == 1);
}

TEST_CASE("inverted ranges, bad sort options, duplicate txn keys, too many ops, unknown lease",
          "[integration][bad_input]") {
  auto cluster = StartCluster();
  EtcdctlOk(*cluster, {"put", "foo", "1"});
  EtcdctlOk(*cluster, {"put", "zeta", "2"});
  std::int64_t revision = CurrentRevision(*cluster);
  REQUIRE(revision == 3);

  // Inverted range (end < key): empty, not an error — as etcd does.
  CHECK(EtcdctlOk(*cluster, {"get", "zeta", "foo"}).empty());
  CHECK(EtcdctlOk(*cluster, {"del", "zeta", "foo"}) == "0\n");
  CHECK(CurrentRevision(*cluster) == revision);
  CHECK(MustRange(*cluster, 1, "zeta", "foo").count() == 0);

  // Sort order/target values outside the enums (etcdctl cannot send them; a stub can).
  auto kv = etcdserverpb::KV::NewStub(cluster->Channel(0));
  etcdserverpb::RangeRequest range;
  range.set_key("foo");
  range.set_sort_target(static_cast<etcdserverpb::RangeRequest::SortTarget>(99));
  etcdserverpb::RangeResponse response;
  CheckError(Range(*kv, range, &response), grpc::StatusCode::INVALID_ARGUMENT,
             std::string(epoch::etcd_errors::kInvalidSortOption.message));
  range.set_sort_target(etcdserverpb::RangeRequest::KEY);
  range.set_sort_order(static_cast<etcdserverpb::RangeRequest::SortOrder>(-3));
  CheckError(Range(*kv, range, &response), grpc::StatusCode::INVALID_ARGUMENT,
             std::string(epoch::etcd_errors::kInvalidSortOption.message));
  range.set_sort_order(etcdserverpb::RangeRequest::NONE);
  range.set_key("");
  CheckError(Range(*kv, range, &response), grpc::StatusCode::INVALID_ARGUMENT,
             std::string(epoch::etcd_errors::kEmptyKey.message));

  // The same key twice in one branch.
  EtcdctlFails(*cluster, {"txn", "-i"}, std::string(epoch::etcd_errors::kDuplicateKey.message),
               "\nput t/d 1\nput t/d 2\n\n\n");
  etcdserverpb::TxnRequest overlap;  // a put inside a deleted range
  overlap.add_success()->mutable_request_delete_range()->set_key("a");
  overlap.mutable_success(0)->mutable_request_delete_range()->set_range_end("c");
  overlap.add_success()->mutable_request_put()->set_key("b");
  CheckError(Txn(*cluster, 2, overlap), grpc::StatusCode::INVALID_ARGUMENT,
             std::string(epoch::etcd_errors::kDuplicateKey.message));
  etcdserverpb::TxnRequest many;
  for (int i = 0; i < 129; ++i) {
    many.add_success()->mutable_request_put()->set_key(fmt::format("m{}", i));
  }
  CheckError(Txn(*cluster, 1, many), grpc::StatusCode::INVALID_ARGUMENT,
             std::string(epoch::etcd_errors::kTooManyOps.message));

  // A lease that does not exist.
  EtcdctlFails(*cluster, {"put", "leased", "v", "--lease=1234abcd"},
               std::string(epoch::etcd_errors::kLeaseNotFound.message));
  CHECK(MustRange(*cluster, 0, "leased").kvs_size() == 0);
  CHECK(CurrentRevision(*cluster) == revision);
  for (int i = 0; i < cluster->size(); ++i) RequireServing(*cluster, i, "probe/bad");
}

std::string BigEndian(std::uint64_t v, int bytes) {
  std::string out;
  PutBigEndian(&out, v, bytes);
  return out;
}

// A peer frame: 4-byte big-endian length, then the payload (epoch/peer/peer_transport.h).
std::string Framed(const std::string& payload) { return BigEndian(payload.size(), 4) + payload; }

// The transport's hello payload: magic, cluster id, sender id (server/peer/src/peer_transport.cc).
std::string Hello(std::uint64_t cluster_id, std::uint64_t sender) {
  return Framed("EPOCHP1\n" + BigEndian(cluster_id, 8) + BigEndian(sender, 8));
}

// A RequestVote at a term far ahead: if it were accepted, the node's term would jump.
std::string VoteFrame(std::uint64_t from, std::uint64_t to) {
  epoch::raftpb::Frame frame;
  auto* m = frame.mutable_message();
  m->set_type(epoch::raftpb::REQUEST_VOTE);
  m->set_from(from);
  m->set_to(to);
  m->set_term(1000);
  m->set_log_term(1000);
  m->set_index(1000000);
  return Framed(frame.SerializeAsString());
}

// Waits (bounded) for `text` to appear in node i's log.
bool WaitLog(const TestCluster& cluster, int i, const std::string& text) {
  return Eventually(
      [&] { return ReadFileIfExists(cluster.node(i).log_path).find(text) != std::string::npos; },
      std::chrono::seconds(5), std::chrono::milliseconds(10));
}

TEST_CASE("garbage on the peer port is dropped and the node keeps serving",
          "[integration][bad_input][peer]") {
  auto cluster = StartCluster();
  const int target = 0;
  std::uint16_t port = cluster->node(target).peer_port;
  auto linger = std::chrono::seconds(3);

  // A length prefix over the frame limit, before any hello: refused as "not a hello" before a
  // byte of the body is allocated.
  Result<bool> huge = test::SendRaw(port, std::string(64, '\xff'), linger);
  REQUIRE(huge.ok());
  CHECK(*huge);  // the node closed the connection
  CHECK(WaitLog(*cluster, target, "is not a hello"));
  RequireServing(*cluster, target, "probe/peer");

  // A well-sized first frame that is not a hello.
  Result<bool> not_hello = test::SendRaw(port, Framed(std::string(24, 'x')), linger);
  REQUIRE(not_hello.ok());
  CHECK(*not_hello);
  CHECK(WaitLog(*cluster, target, "did not start with a hello"));
  RequireServing(*cluster, target, "probe/peer");

  // Seeded random bytes (the first byte keeps the length prefix over the limit).
  std::string noise(4096, '\0');
  std::uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (char& c : noise) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x & 0xff);
  }
  noise[0] = '\x7f';
  Result<bool> random = test::SendRaw(port, noise, linger);
  REQUIRE(random.ok());
  CHECK(*random);

  // A truncated first frame of a size neither a hello nor a join request has (over
  // peer_join.h's kMaxJoinFrameBytes, 64 KiB):
  // closed at once, not waited for.
  Result<bool> truncated = test::SendRaw(port, BigEndian((64 << 10) + 1, 4) + "short", linger);
  REQUIRE(truncated.ok());
  CHECK(*truncated);

  // A valid hello followed by a frame that is not a protobuf message: the frame is dropped and
  // logged, the link stays up.
  std::uint64_t cluster_id = cluster->NodeStatus(target).value().header().cluster_id();
  std::uint64_t peer = cluster->node(1).member_id;
  Result<bool> bad_frame =
      test::SendRaw(port, Hello(cluster_id, peer) + Framed(std::string(40, '\xff')),
                    std::chrono::milliseconds(300));
  REQUIRE(bad_frame.ok());
  CHECK_FALSE(*bad_frame);
  CHECK(WaitLog(*cluster, target, "dropping a frame from"));

  // After a valid hello: a length prefix over the limit closes the connection; a truncated
  // frame is waited for (a member's link may be slow) until the sender hangs up.
  Result<bool> huge_after_hello =
      test::SendRaw(port, Hello(cluster_id, peer) + std::string(64, '\xff'), linger);
  REQUIRE(huge_after_hello.ok());
  CHECK(*huge_after_hello);
  CHECK(WaitLog(*cluster, target, "exceeds the limit"));
  Result<bool> truncated_after_hello = test::SendRaw(
      port, Hello(cluster_id, peer) + BigEndian(1000, 4) + "short", std::chrono::milliseconds(200));
  REQUIRE(truncated_after_hello.ok());
  CHECK_FALSE(*truncated_after_hello);
  for (int i = 0; i < cluster->size(); ++i) RequireServing(*cluster, i, "probe/peer");
  Result<int> leader = cluster->WaitHealthy(std::chrono::seconds(10));
  CHECK(leader.ok());
}

TEST_CASE("a peer from another cluster is refused before any of its messages is read",
          "[integration][bad_input][peer]") {
  auto cluster = StartCluster();
  const int target = 1;
  auto status = cluster->NodeStatus(target);
  REQUIRE(status.ok());
  std::uint64_t cluster_id = status->header().cluster_id();
  std::uint64_t term = status->raftterm();
  std::uint64_t foreign = cluster_id ^ 0x5a5a5a5a5a5a5a5aULL;
  std::uint64_t self = cluster->node(target).member_id;
  std::uint64_t sender = cluster->node(0).member_id;  // an ID this node knows, other cluster

  Result<bool> closed =
      test::SendRaw(cluster->node(target).peer_port,
                    Hello(foreign, sender) + VoteFrame(sender, self), std::chrono::seconds(3));
  REQUIRE(closed.ok());
  CHECK(*closed);
  CHECK(WaitLog(*cluster, target, fmt::format("rejecting peer from cluster {:x}", foreign)));
  // The vote at term 1000 was never read: the term did not move.
  auto after = cluster->NodeStatus(target);
  REQUIRE(after.ok());
  CHECK(after->raftterm() == term);
  CHECK(after->raftterm() < 1000);

  // Control: the same hello with this cluster's id is accepted (the link stays open).
  Result<bool> ours = test::SendRaw(cluster->node(target).peer_port, Hello(cluster_id, sender),
                                    std::chrono::milliseconds(300));
  REQUIRE(ours.ok());
  CHECK_FALSE(*ours);
  for (int i = 0; i < cluster->size(); ++i) RequireServing(*cluster, i, "probe/foreign");
}

TEST_CASE("frames from a sender that is not a member are harmless",
          "[integration][bad_input][peer]") {
  auto cluster = StartCluster();
  Result<int> leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  auto status = cluster->NodeStatus(*leader);
  REQUIRE(status.ok());
  std::uint64_t cluster_id = status->header().cluster_id();
  std::uint64_t term = status->raftterm();
  const std::uint64_t stranger = 42;
  for (int i = 0; i < cluster->size(); ++i) {
    std::uint64_t self = cluster->node(i).member_id;
    Result<bool> sent = test::SendRaw(cluster->node(i).peer_port,
                                      Hello(cluster_id, stranger) + VoteFrame(stranger, self),
                                      std::chrono::milliseconds(300));
    REQUIRE(sent.ok());
  }
  for (int i = 0; i < cluster->size(); ++i) RequireServing(*cluster, i, "probe/stranger");
  Result<int> after = cluster->WaitHealthy(std::chrono::seconds(10));
  INFO(after.status().ToString());
  REQUIRE(after.ok());
  auto now = cluster->NodeStatus(*after);
  REQUIRE(now.ok());
  UNSCOPED_INFO("term before " << term << ", after " << now->raftterm());
  CHECK(now->raftterm() < 1000);
}

}  // namespace
}  // namespace epoch::integration
