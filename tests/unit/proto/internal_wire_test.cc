// Epoch's own messages: the Raft log command (epoch.v1.InternalRequest) and the peer protocol
// (epoch.raftpb). Their field numbers are ours, but they are on disk (WAL) and on the wire between
// versions of epochd, so they are pinned too.
#include <catch2/catch.hpp>

#include "epoch/v1/epoch.pb.h"
#include "epoch/v1/internal.pb.h"
#include "raftpb/raft.pb.h"
#include "wire_test_util.h"

namespace {

using epoch::prototest::WireHex;

TEST_CASE("InternalRequest: header fields 1..4, oneof put=10 txn=12", "[proto]") {
  epoch::v1::InternalRequest r;
  r.set_request_id(1);
  r.set_idempotency_key("i");
  r.set_idempotency_ttl_ms(3);
  r.set_cluster_time_ms(4);
  r.mutable_put()->set_key("k");
  CHECK(WireHex(r) ==
        "0801"
        "120169"
        "1803"
        "2004"
        "52030a016b");

  r.mutable_txn()->add_compare()->set_key("a");
  CHECK(WireHex(r).substr(18) ==
        "6205"
        "0a031a0161");

  epoch::v1::InternalRequest parsed;
  REQUIRE(parsed.ParseFromString(r.SerializeAsString()));
  CHECK(parsed.request_case() == epoch::v1::InternalRequest::kTxn);
  CHECK(parsed.cluster_time_ms() == 4);
}

TEST_CASE("InternalRequest: idempotency session fields 6..9; IdempotencyKey 1..4", "[proto]") {
  epoch::v1::InternalRequest r;
  r.set_idempotency_client_id("c");
  r.set_idempotency_sequence(7);
  r.set_idempotency_records_max(8);
  r.set_idempotency_bytes_max(9);
  CHECK(WireHex(r) ==
        "320163"
        "3807"
        "4008"
        "4809");
  epoch::v1::IdempotencyKey key;
  key.set_key("k");
  key.set_ttl_ms(2);
  key.set_client_id("c");
  key.set_sequence(4);
  CHECK(WireHex(key) ==
        "0a016b"
        "1002"
        "1a0163"
        "2004");
}

TEST_CASE("InternalRequest lease commands round-trip", "[proto]") {
  epoch::v1::InternalRequest r;
  r.mutable_lease_grant()->set_id(9);
  r.mutable_lease_grant()->set_ttl_ms(1500);
  epoch::v1::InternalRequest back;
  REQUIRE(back.ParseFromString(r.SerializeAsString()));
  CHECK(back.lease_grant().ttl_ms() == 1500);

  r.mutable_lease_checkpoint()->add_ids(1);
  r.mutable_lease_checkpoint()->add_ids(2);
  REQUIRE(back.ParseFromString(r.SerializeAsString()));
  CHECK(back.request_case() == epoch::v1::InternalRequest::kLeaseCheckpoint);
  CHECK(back.lease_checkpoint().ids_size() == 2);
}

TEST_CASE("raftpb.Message pins its field numbers", "[proto]") {
  epoch::raftpb::Message m;
  m.set_type(epoch::raftpb::APPEND_ENTRIES);
  m.set_from(2);
  m.set_to(3);
  m.set_term(4);
  m.set_log_term(5);
  m.set_index(6);
  auto* e = m.add_entries();
  e->set_term(4);
  e->set_index(7);
  e->set_data("d");
  m.set_commit(8);
  m.set_reject(true);
  m.set_reject_hint(10);
  m.set_conflict_term(11);
  m.set_conflict_index(12);
  m.set_context("c");
  CHECK(WireHex(m) ==
        "0801"
        "1002"
        "1803"
        "2004"
        "2805"
        "3006"
        "3a07"
        "0804"
        "1007"
        "220164"
        "4008"
        "4801"
        "500a"
        "580b"
        "600c"
        "6a0163");
}

TEST_CASE("raftpb.Frame carries hello, message or rejection", "[proto]") {
  epoch::raftpb::Frame f;
  f.mutable_hello()->set_cluster_id(7);
  f.mutable_hello()->set_protocol_version(1);
  CHECK(WireHex(f) ==
        "0a04"
        "0807"
        "2001");

  f.mutable_message()->set_type(epoch::raftpb::TIMEOUT_NOW);
  epoch::raftpb::Frame back;
  REQUIRE(back.ParseFromString(f.SerializeAsString()));
  CHECK(back.body_case() == epoch::raftpb::Frame::kMessage);
  CHECK(back.message().type() == epoch::raftpb::TIMEOUT_NOW);

  f.mutable_rejection()->set_reason("cluster id mismatch");
  REQUIRE(back.ParseFromString(f.SerializeAsString()));
  CHECK(back.rejection().reason() == "cluster id mismatch");
}

TEST_CASE("raftpb.SnapshotChunk round-trips", "[proto]") {
  epoch::raftpb::SnapshotChunk c;
  c.mutable_meta()->set_index(100);
  c.mutable_meta()->set_term(3);
  c.mutable_meta()->mutable_conf()->add_voters(1);
  c.mutable_meta()->mutable_conf()->add_learners(4);
  c.set_file("000012.sst");
  c.set_offset(4096);
  c.set_data(std::string(10, 'x'));
  c.set_last(true);
  epoch::raftpb::SnapshotChunk back;
  REQUIRE(back.ParseFromString(c.SerializeAsString()));
  CHECK(back.meta().index() == 100);
  CHECK(back.meta().conf().learners(0) == 4);
  CHECK(back.offset() == 4096);
  CHECK(back.last());
}

}  // namespace
