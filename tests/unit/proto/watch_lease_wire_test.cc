// Wire checks for Watch, Lease, Cluster, Maintenance, Lock and Election messages against the
// field numbers in docs/etcd-compatibility.md §4. Expected bytes are written by hand.
#include <catch2/catch.hpp>

#include "etcdserverpb/rpc.pb.h"
#include "v3electionpb/v3election.pb.h"
#include "v3lockpb/v3lock.pb.h"
#include "wire_test_util.h"

namespace {

using epoch::prototest::WireHex;

TEST_CASE("WatchCreateRequest fields 1..8 inside WatchRequest.create_request=1", "[proto]") {
  etcdserverpb::WatchRequest w;
  auto* c = w.mutable_create_request();
  c->set_key("a");
  c->set_range_end("b");
  c->set_start_revision(5);
  c->set_progress_notify(true);
  c->add_filters(etcdserverpb::WatchCreateRequest::NODELETE);
  c->set_prev_kv(true);
  c->set_watch_id(7);
  c->set_fragment(true);
  // filters=5 is a packed repeated enum: 2a <len 01> <NODELETE=01>.
  CHECK(WireHex(w) ==
        "0a13"
        "0a0161"
        "120162"
        "1805"
        "2001"
        "2a0101"
        "3001"
        "3807"
        "4001");
  CHECK(etcdserverpb::WatchCreateRequest::NOPUT == 0);
}

TEST_CASE("WatchRequest cancel_request=2 and progress_request=3", "[proto]") {
  etcdserverpb::WatchRequest w;
  w.mutable_cancel_request()->set_watch_id(3);
  CHECK(WireHex(w) == "12020803");
  w.mutable_progress_request();
  CHECK(WireHex(w) == "1a00");
}

TEST_CASE("WatchResponse fields 2..7 and events=11", "[proto]") {
  etcdserverpb::WatchResponse r;
  r.set_watch_id(2);
  r.set_created(true);
  r.set_canceled(true);
  r.set_compact_revision(5);
  r.set_cancel_reason("x");
  r.set_fragment(true);
  auto* ev = r.add_events();
  ev->set_type(mvccpb::Event::DELETE);
  ev->mutable_kv()->set_key("a");
  // events: (11 << 3 | 2) = 0x5a.
  CHECK(WireHex(r) ==
        "1002"
        "1801"
        "2001"
        "2805"
        "320178"
        "3801"
        "5a07"
        "0801"
        "12030a0161");
}

TEST_CASE("LeaseGrantRequest/Response use etcd's field numbers", "[proto]") {
  etcdserverpb::LeaseGrantRequest g;
  g.set_ttl(10);
  g.set_id(255);
  CHECK(WireHex(g) ==
        "080a"
        "10ff01");

  etcdserverpb::LeaseGrantResponse r;
  r.set_id(1);
  r.set_ttl(2);
  r.set_error("e");
  CHECK(WireHex(r) ==
        "1001"
        "1802"
        "220165");
}

TEST_CASE("LeaseKeepAlive, Revoke, TimeToLive use etcd's field numbers", "[proto]") {
  etcdserverpb::LeaseKeepAliveRequest k;
  k.set_id(5);
  CHECK(WireHex(k) == "0805");
  etcdserverpb::LeaseKeepAliveResponse kr;
  kr.set_id(5);
  kr.set_ttl(9);
  CHECK(WireHex(kr) ==
        "1005"
        "1809");

  etcdserverpb::LeaseRevokeRequest rv;
  rv.set_id(3);
  CHECK(WireHex(rv) == "0803");

  etcdserverpb::LeaseTimeToLiveRequest t;
  t.set_id(1);
  t.set_keys(true);
  CHECK(WireHex(t) ==
        "0801"
        "1001");
  etcdserverpb::LeaseTimeToLiveResponse tr;
  tr.set_id(1);
  tr.set_ttl(2);
  tr.set_grantedttl(3);
  tr.add_keys("k");
  CHECK(WireHex(tr) ==
        "1001"
        "1802"
        "2003"
        "2a016b");

  etcdserverpb::LeaseLeasesResponse l;
  l.add_leases()->set_id(4);
  CHECK(WireHex(l) == "12020804");

  etcdserverpb::LeaseCheckpointRequest cp;
  auto* c = cp.add_checkpoints();
  c->set_id(1);
  c->set_remaining_ttl(2);
  CHECK(WireHex(cp) ==
        "0a04"
        "0801"
        "1002");
}

TEST_CASE("Member and MemberList use etcd's field numbers", "[proto]") {
  etcdserverpb::Member m;
  m.set_id(1);
  m.set_name("n");
  m.add_peerurls("p");
  m.add_clienturls("c");
  m.set_islearner(true);
  CHECK(WireHex(m) ==
        "0801"
        "12016e"
        "1a0170"
        "220163"
        "2801");

  etcdserverpb::MemberListRequest req;
  req.set_linearizable(true);
  CHECK(WireHex(req) == "0801");
  etcdserverpb::MemberAddRequest add;
  add.add_peerurls("p");
  add.set_islearner(true);
  CHECK(WireHex(add) ==
        "0a0170"
        "1001");
  etcdserverpb::MemberUpdateRequest up;
  up.set_id(2);
  up.add_peerurls("p");
  CHECK(WireHex(up) ==
        "0802"
        "120170");
}

TEST_CASE("StatusResponse fields 2..13", "[proto]") {
  etcdserverpb::StatusResponse s;
  s.set_version("v");
  s.set_dbsize(3);
  s.set_leader(4);
  s.set_raftindex(5);
  s.set_raftterm(6);
  s.set_raftappliedindex(7);
  s.add_errors("e");
  s.set_dbsizeinuse(9);
  s.set_islearner(true);
  CHECK(WireHex(s) ==
        "120176"
        "1803"
        "2004"
        "2805"
        "3006"
        "3807"
        "420165"
        "4809"
        "5001");

  // Later additions: storageVersion=11 (5a), dbSizeQuota=12 (60), downgradeInfo=13 (6a).
  etcdserverpb::StatusResponse later;
  later.set_storageversion("3");
  later.set_dbsizequota(1);
  later.mutable_downgradeinfo()->set_enabled(true);
  later.mutable_downgradeinfo()->set_targetversion("v");
  CHECK(WireHex(later) ==
        "5a0133"
        "6001"
        "6a05"
        "0801"
        "120176");
}

TEST_CASE("SnapshotResponse: remaining_bytes=2 blob=3", "[proto]") {
  etcdserverpb::SnapshotResponse s;
  s.set_remaining_bytes(2);
  s.set_blob("b");
  CHECK(WireHex(s) ==
        "1002"
        "1a0162");
}

TEST_CASE("Alarm, MoveLeader, HashKV use etcd's field numbers", "[proto]") {
  etcdserverpb::AlarmRequest a;
  a.set_action(etcdserverpb::AlarmRequest::ACTIVATE);
  a.set_memberid(2);
  a.set_alarm(etcdserverpb::NOSPACE);
  CHECK(WireHex(a) ==
        "0801"
        "1002"
        "1801");
  CHECK(etcdserverpb::CORRUPT == 2);

  etcdserverpb::AlarmResponse ar;
  auto* m = ar.add_alarms();
  m->set_memberid(1);
  m->set_alarm(etcdserverpb::CORRUPT);
  CHECK(WireHex(ar) ==
        "1204"
        "0801"
        "1002");

  etcdserverpb::MoveLeaderRequest ml;
  ml.set_targetid(7);
  CHECK(WireHex(ml) == "0807");

  etcdserverpb::HashKVResponse h;
  h.set_hash(1);
  h.set_compact_revision(2);
  CHECK(WireHex(h) ==
        "1001"
        "1802");
}

TEST_CASE("AuthenticateRequest/Response: name=1 password=2 / token=2", "[proto]") {
  etcdserverpb::AuthenticateRequest a;
  a.set_name("n");
  a.set_password("p");
  CHECK(WireHex(a) ==
        "0a016e"
        "120170");
  etcdserverpb::AuthenticateResponse r;
  r.set_token("t");
  CHECK(WireHex(r) == "120174");
}

TEST_CASE("v3lockpb Lock/Unlock messages", "[proto]") {
  v3lockpb::LockRequest l;
  l.set_name("n");
  l.set_lease(2);
  CHECK(WireHex(l) ==
        "0a016e"
        "1002");

  v3lockpb::LockResponse r;
  r.mutable_header()->set_revision(3);
  r.set_key("k");
  CHECK(WireHex(r) ==
        "0a021803"
        "12016b");

  v3lockpb::UnlockRequest u;
  u.set_key("k");
  CHECK(WireHex(u) == "0a016b");
}

TEST_CASE("v3electionpb messages", "[proto]") {
  v3electionpb::CampaignRequest c;
  c.set_name("n");
  c.set_lease(2);
  c.set_value("v");
  CHECK(WireHex(c) ==
        "0a016e"
        "1002"
        "1a0176");

  v3electionpb::LeaderKey k;
  k.set_name("n");
  k.set_key("k");
  k.set_rev(3);
  k.set_lease(4);
  CHECK(WireHex(k) ==
        "0a016e"
        "12016b"
        "1803"
        "2004");

  v3electionpb::CampaignResponse cr;
  cr.mutable_leader()->set_rev(1);
  CHECK(WireHex(cr) == "12021801");

  v3electionpb::LeaderResponse lr;
  lr.mutable_kv()->set_key("a");
  CHECK(WireHex(lr) == "12030a0161");

  v3electionpb::ProclaimRequest p;
  p.mutable_leader()->set_rev(1);
  p.set_value("v");
  CHECK(WireHex(p) ==
        "0a021801"
        "120176");

  v3electionpb::ResignRequest rs;
  rs.mutable_leader()->set_rev(1);
  CHECK(WireHex(rs) == "0a021801");
}

}  // namespace
