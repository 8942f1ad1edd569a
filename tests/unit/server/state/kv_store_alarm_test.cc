// Alarms in the state machine: a NOSPACE alarm is replicated state (raised and cleared by log
// entries), caps the store — puts, txns with a put anywhere, lease grants refused with etcd's
// "database space exceeded"; reads, deletes, compactions, revokes go on — and survives a restart
// and a snapshot install.
#include <catch2/catch.hpp>

#include "epoch/etcd_errors.h"
#include "epoch/state/alarms.h"
#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)

const std::string kNoSpace(epoch::etcd_errors::kNoSpace.message);

ApplyResult ChangeAlarm(TestStore& s, pb::AlarmRequest::AlarmAction action, std::uint64_t member,
                        pb::AlarmType type = pb::NOSPACE) {
  v1::InternalRequest req;
  req.mutable_alarm()->set_action(action);
  req.mutable_alarm()->set_memberid(member);
  req.mutable_alarm()->set_alarm(type);
  return s.Apply(req);
}

pb::TxnRequest TxnWithNestedPut() {
  pb::TxnRequest inner;
  *inner.add_success()->mutable_request_put() = PutReq("nested", "v");
  pb::TxnRequest outer;
  *outer.add_compare() = Cmp("k", pb::Compare::VERSION, pb::Compare::GREATER);
  outer.add_success()->mutable_request_delete_range()->set_key("k");
  *outer.add_failure()->mutable_request_txn() = inner;
  return outer;
}

TEST_CASE("a NOSPACE alarm caps the store until it is deactivated", "[server][alarm]") {
  TempDir dir;
  TestStore s(dir.path());
  REQUIRE(s.Put("k", "v1").status.ok());
  REQUIRE(s.GrantLease(5, 10'000).status.ok());

  ApplyResult on = ChangeAlarm(s, pb::AlarmRequest::ACTIVATE, 42);
  REQUIRE(on.status.ok());
  REQUIRE(on.response.alarm().alarms_size() == 1);
  CHECK(on.response.alarm().alarms(0).memberid() == 42);
  CHECK(s->Alarms() == std::vector<StoreAlarm>{{42, pb::NOSPACE}});
  // Raised again (another request from the same member): no change, nothing listed.
  CHECK(ChangeAlarm(s, pb::AlarmRequest::ACTIVATE, 42).response.alarm().alarms_size() == 0);

  const Revision before = s->CurrentRevision();
  CHECK(s.Put("k", "v2").status.message() == kNoSpace);
  CHECK(s.Txn(TxnWithNestedPut()).status.message() == kNoSpace);
  CHECK(s.GrantLease(6, 10'000).status.message() == kNoSpace);
  CHECK(s->CurrentRevision() == before);
  CHECK(s.Get("k").kvs(0).value() == "v1");

  // What frees space, and reads, go on.
  pb::TxnRequest read_and_delete;
  *read_and_delete.add_compare() = Cmp("k", pb::Compare::VERSION, pb::Compare::GREATER);
  read_and_delete.add_success()->mutable_request_range()->set_key("k");
  read_and_delete.add_success()->mutable_request_delete_range()->set_key("k");
  CHECK(s.Txn(read_and_delete).status.ok());
  CHECK(s.Compact(s->CurrentRevision().value()).status.ok());
  CHECK(s.RevokeLease(5).status.ok());
  CHECK(s.Delete("absent").status.ok());

  ApplyResult off = ChangeAlarm(s, pb::AlarmRequest::DEACTIVATE, 42);
  REQUIRE(off.status.ok());
  CHECK(off.response.alarm().alarms_size() == 1);
  CHECK(s->Alarms().empty());
  CHECK(s.Put("k", "v3").status.ok());
  CHECK(s.GrantLease(6, 10'000).status.ok());
}

TEST_CASE("the store stays capped while any member's NOSPACE alarm is active", "[server][alarm]") {
  TempDir dir;
  TestStore s(dir.path());
  REQUIRE(ChangeAlarm(s, pb::AlarmRequest::ACTIVATE, 2).status.ok());
  REQUIRE(ChangeAlarm(s, pb::AlarmRequest::ACTIVATE, 1).status.ok());
  CHECK(s->Alarms() == std::vector<StoreAlarm>{{1, pb::NOSPACE}, {2, pb::NOSPACE}});
  REQUIRE(ChangeAlarm(s, pb::AlarmRequest::DEACTIVATE, 1).status.ok());
  CHECK(s.Put("k", "v").status.message() == kNoSpace);
  // Deactivating what is not active changes nothing.
  CHECK(ChangeAlarm(s, pb::AlarmRequest::DEACTIVATE, 1).response.alarm().alarms_size() == 0);
  REQUIRE(ChangeAlarm(s, pb::AlarmRequest::DEACTIVATE, 2).status.ok());
  CHECK(s.Put("k", "v").status.ok());
}

TEST_CASE("alarm changes that cannot be applied are refused deterministically", "[server][alarm]") {
  TempDir dir;
  TestStore s(dir.path());
  CHECK(ChangeAlarm(s, pb::AlarmRequest::ACTIVATE, 0).status.message() ==
        "epoch: an alarm needs a member ID");
  CHECK(ChangeAlarm(s, pb::AlarmRequest::ACTIVATE, 1, pb::CORRUPT).status.message() ==
        "epoch: only a NOSPACE alarm can be activated (got CORRUPT)");
  CHECK(ChangeAlarm(s, pb::AlarmRequest::ACTIVATE, 1, pb::NONE).status.code() ==
        StatusCode::kInvalidArgument);
  CHECK(ChangeAlarm(s, pb::AlarmRequest::DEACTIVATE, 1, pb::NONE).status.message() ==
        "epoch: say which alarm type to deactivate");
  CHECK(ChangeAlarm(s, pb::AlarmRequest::GET, 1).status.code() == StatusCode::kInvalidArgument);
  CHECK(s->Alarms().empty());
  CHECK(s.Put("k", "v").status.ok());
}

TEST_CASE("alarms survive a restart and travel in snapshot images", "[server][alarm]") {
  TempDir dir;
  TestStore s(dir.Sub("a"));
  REQUIRE(s.Put("k", "v").status.ok());
  REQUIRE(ChangeAlarm(s, pb::AlarmRequest::ACTIVATE, 7).status.ok());
  Result<std::uint64_t> hash = s->StateHash();
  REQUIRE(hash.ok());

  s.Reopen();
  CHECK(s->Alarms() == std::vector<StoreAlarm>{{7, pb::NOSPACE}});
  CHECK(s.Put("k", "v2").status.message() == kNoSpace);

  auto at = s->CreateCheckpoint(dir.Sub("image"));
  REQUIRE(at.ok());
  TestStore follower(dir.Sub("b"));
  REQUIRE(follower->ReplaceWithCheckpoint(dir.Sub("image")).ok());
  CHECK(follower->Alarms() == std::vector<StoreAlarm>{{7, pb::NOSPACE}});
  Result<std::uint64_t> follower_hash = follower->StateHash();
  REQUIRE(follower_hash.ok());
  CHECK(*follower_hash == *hash);

  // Cleared, the record is gone after a restart too.
  REQUIRE(ChangeAlarm(s, pb::AlarmRequest::DEACTIVATE, 7).status.ok());
  s.Reopen();
  CHECK(s->Alarms().empty());
  CHECK(s.Put("k", "v3").status.ok());
}

TEST_CASE("a request refused for space is not remembered by its idempotency key",
          "[server][alarm]") {
  TempDir dir;
  TestStore s(dir.path());
  REQUIRE(ChangeAlarm(s, pb::AlarmRequest::ACTIVATE, 3).status.ok());
  v1::InternalRequest put;
  *put.mutable_put() = PutReq("k", "v");
  put.set_idempotency_key("job-1");
  CHECK(s.Apply(put).status.message() == kNoSpace);
  REQUIRE(ChangeAlarm(s, pb::AlarmRequest::DEACTIVATE, 3).status.ok());
  // The retry applies (it was not applied before); a second retry is then a replay.
  ApplyResult retry = s.Apply(put);
  REQUIRE(retry.status.ok());
  CHECK_FALSE(retry.response.replayed());
  CHECK(s.Apply(put).response.replayed());
  CHECK(s.Get("k").kvs(0).version() == 1);
}

TEST_CASE("space cost counts what a request adds", "[server][alarm]") {
  v1::InternalRequest put;
  *put.mutable_put() = PutReq("key", std::string(1000, 'x'));
  CHECK(SpaceCost(put) > 1000);
  v1::InternalRequest txn;
  *txn.mutable_txn() = TxnWithNestedPut();
  CHECK(SpaceCost(txn) > 0);
  v1::InternalRequest del;
  del.mutable_delete_range()->set_key("k");
  CHECK(SpaceCost(del) == 0);
  v1::InternalRequest grant;
  grant.mutable_lease_grant()->set_id(1);
  CHECK(SpaceCost(grant) > 0);
  CHECK(AlarmText({9, pb::NOSPACE}) == "memberID:9 alarm:NOSPACE");
}

}  // namespace
}  // namespace epoch::server
