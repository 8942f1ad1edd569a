// Wire checks for etcdserverpb KV messages against the field numbers in
// docs/etcd-compatibility.md §4. Each expected hex string is written by hand from the
// reference, field by field: a wrong field number or wire type changes a tag byte.
#include <catch2/catch.hpp>

#include "etcdserverpb/rpc.pb.h"
#include "wire_test_util.h"

namespace {

using epoch::prototest::WireHex;
using etcdserverpb::Compare;

TEST_CASE("ResponseHeader: cluster_id=1 member_id=2 revision=3 raft_term=4", "[proto]") {
  etcdserverpb::ResponseHeader h;
  h.set_cluster_id(1);
  h.set_member_id(2);
  h.set_revision(3);
  h.set_raft_term(4);
  CHECK(WireHex(h) ==
        "08011002180320"
        "04");
}

TEST_CASE("RangeRequest uses etcd's field numbers 1..13", "[proto]") {
  etcdserverpb::RangeRequest r;
  r.set_key("a");
  r.set_range_end("b");
  r.set_limit(3);
  r.set_revision(4);
  r.set_sort_order(etcdserverpb::RangeRequest::DESCEND);
  r.set_sort_target(etcdserverpb::RangeRequest::MOD);
  r.set_serializable(true);
  r.set_keys_only(true);
  r.set_count_only(true);
  r.set_min_mod_revision(10);
  r.set_max_mod_revision(11);
  r.set_min_create_revision(12);
  r.set_max_create_revision(13);
  // key 0a, range_end 12, limit 18, revision 20, sort_order 28 (DESCEND=2), sort_target 30
  // (MOD=3), serializable 38, keys_only 40, count_only 48, min_mod 50, max_mod 58, min_create 60,
  // max_create 68.
  CHECK(WireHex(r) ==
        "0a0161"
        "120162"
        "1803"
        "2004"
        "2802"
        "3003"
        "3801"
        "4001"
        "4801"
        "500a"
        "580b"
        "600c"
        "680d");
}

TEST_CASE("RangeRequest enum values match etcd", "[proto]") {
  CHECK(etcdserverpb::RangeRequest::NONE == 0);
  CHECK(etcdserverpb::RangeRequest::ASCEND == 1);
  CHECK(etcdserverpb::RangeRequest::DESCEND == 2);
  CHECK(etcdserverpb::RangeRequest::KEY == 0);
  CHECK(etcdserverpb::RangeRequest::VERSION == 1);
  CHECK(etcdserverpb::RangeRequest::CREATE == 2);
  CHECK(etcdserverpb::RangeRequest::MOD == 3);
  CHECK(etcdserverpb::RangeRequest::VALUE == 4);
}

TEST_CASE("RangeResponse: header=1 kvs=2 more=3 count=4", "[proto]") {
  etcdserverpb::RangeResponse r;
  r.add_kvs()->set_key("a");
  r.set_more(true);
  r.set_count(4);
  CHECK(WireHex(r) ==
        "12030a0161"
        "1801"
        "2004");
}

TEST_CASE("PutRequest/PutResponse use etcd's field numbers", "[proto]") {
  etcdserverpb::PutRequest p;
  p.set_key("k");
  p.set_value("v");
  p.set_lease(7);
  p.set_prev_kv(true);
  p.set_ignore_value(true);
  p.set_ignore_lease(true);
  CHECK(WireHex(p) ==
        "0a016b"
        "120176"
        "1807"
        "2001"
        "2801"
        "3001");

  etcdserverpb::PutResponse resp;
  resp.mutable_header()->set_revision(2);
  resp.mutable_prev_kv()->set_key("a");
  CHECK(WireHex(resp) ==
        "0a021802"
        "12030a0161");
}

TEST_CASE("DeleteRangeRequest/Response use etcd's field numbers", "[proto]") {
  etcdserverpb::DeleteRangeRequest d;
  d.set_key("a");
  d.set_range_end("b");
  d.set_prev_kv(true);
  CHECK(WireHex(d) ==
        "0a0161"
        "120162"
        "1801");

  etcdserverpb::DeleteRangeResponse r;
  r.set_deleted(1);
  r.add_prev_kvs()->set_key("a");
  CHECK(WireHex(r) ==
        "1001"
        "1a030a0161");
}

TEST_CASE("Compare: result=1 target=2 key=3, range_end=64 is a two-byte tag", "[proto]") {
  Compare c;
  c.set_result(Compare::NOT_EQUAL);
  c.set_target(Compare::MOD);
  c.set_key("k");
  c.set_mod_revision(5);
  c.set_range_end("z");
  // range_end: (64 << 3 | 2) = 514 = varint 82 04.
  CHECK(WireHex(c) ==
        "0803"
        "1002"
        "1a016b"
        "3005"
        "8204017a");
}

TEST_CASE("Compare target_union members: version=4 create=5 mod=6 value=7 lease=8", "[proto]") {
  Compare c;
  c.set_version(1);
  CHECK(WireHex(c) == "2001");
  c.set_create_revision(1);
  CHECK(WireHex(c) == "2801");
  c.set_mod_revision(1);
  CHECK(WireHex(c) == "3001");
  c.set_value("v");
  CHECK(WireHex(c) == "3a0176");
  c.set_lease(1);
  CHECK(WireHex(c) == "4001");
}

TEST_CASE("Compare enum values match etcd", "[proto]") {
  CHECK(Compare::EQUAL == 0);
  CHECK(Compare::GREATER == 1);
  CHECK(Compare::LESS == 2);
  CHECK(Compare::NOT_EQUAL == 3);
  CHECK(Compare::VERSION == 0);
  CHECK(Compare::CREATE == 1);
  CHECK(Compare::MOD == 2);
  CHECK(Compare::VALUE == 3);
  CHECK(Compare::LEASE == 4);
}

TEST_CASE("TxnRequest: compare=1 success=2 failure=3 and RequestOp oneof 1..4", "[proto]") {
  etcdserverpb::TxnRequest t;
  t.add_compare()->set_key("a");
  t.add_success()->mutable_request_put()->set_key("b");
  t.add_failure()->mutable_request_range()->set_key("c");
  CHECK(WireHex(t) ==
        "0a031a0161"
        "120512030a0162"
        "1a050a030a0163");

  etcdserverpb::RequestOp op;
  op.mutable_request_delete_range()->set_key("d");
  CHECK(WireHex(op) == "1a030a0164");
  op.mutable_request_txn()->add_compare()->set_key("e");
  CHECK(WireHex(op) == "22050a031a0165");
}

TEST_CASE("TxnResponse: header=1 succeeded=2 responses=3, ResponseOp oneof 1..4", "[proto]") {
  etcdserverpb::TxnResponse t;
  t.set_succeeded(true);
  t.add_responses()->mutable_response_put();
  t.add_responses()->mutable_response_range()->set_count(1);
  CHECK(WireHex(t) ==
        "1001"
        "1a021200"
        "1a040a022001");

  etcdserverpb::ResponseOp op;
  op.mutable_response_delete_range()->set_deleted(1);
  CHECK(WireHex(op) == "1a021001");
  op.mutable_response_txn()->set_succeeded(true);
  CHECK(WireHex(op) == "22021001");
}

TEST_CASE("CompactionRequest: revision=1 physical=2", "[proto]") {
  etcdserverpb::CompactionRequest c;
  c.set_revision(5);
  c.set_physical(true);
  CHECK(WireHex(c) ==
        "0805"
        "1001");
}

}  // namespace
