// The Jobs service's transactions (server/api/src/job_layout.*) applied by a real KvStateMachine:
// the lock txn takes a free job and refuses a held or unqueued one; the count txn counts once per
// holder, is refused to a holder that lost its key, and dead-letters past the limit in the same
// revision; the release txn releases only for the current token. The epoch record round-trips.
#include "job_layout.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <span>

#include "epoch/api/recipe_wait.h"
#include "epoch/replication/kv_state_machine.h"
#include "snapshot_test_util.h"

namespace epoch::server {
namespace {

namespace pb = etcdserverpb;
using snapshot_testing::TempDir;

class Machine {
 public:
  Machine() : store_(Open(dir_)), machine_(*store_) {}

  v1::InternalResponse Apply(v1::InternalRequest request) {
    request.set_request_id(++index_);
    const raft::Entry entry{Term(2), LogIndex(index_), raft::EntryType::kNormal,
                            request.SerializeAsString()};
    std::vector<ApplyOutcome> out = machine_.Apply(std::span(&entry, 1));
    REQUIRE(out.size() == 1);
    REQUIRE(out[0].status.ok());
    return out[0].response;
  }
  pb::TxnResponse Txn(pb::TxnRequest txn) {
    v1::InternalRequest r;
    *r.mutable_txn() = std::move(txn);
    return Apply(std::move(r)).txn();
  }
  std::int64_t Grant(std::int64_t id) {
    v1::InternalRequest r;
    r.mutable_lease_grant()->set_id(id);
    r.mutable_lease_grant()->set_ttl_ms(60'000);
    return Apply(std::move(r)).lease_grant().id();
  }
  void Revoke(std::int64_t id) {
    v1::InternalRequest r;
    r.mutable_lease_revoke()->set_id(id);
    Apply(std::move(r));
  }
  void Put(const std::string& key, const std::string& value) {
    v1::InternalRequest r;
    r.mutable_put()->set_key(key);
    r.mutable_put()->set_value(value);
    Apply(std::move(r));
  }
  std::optional<mvccpb::KeyValue> Get(const std::string& key) {
    pb::RangeRequest r;
    r.set_key(key);
    Result<pb::RangeResponse> got = store_->Range(r);
    REQUIRE(got.ok());
    if (got->kvs_size() == 0) return std::nullopt;
    return got->kvs(0);
  }

 private:
  static std::unique_ptr<KvStore> Open(TempDir& dir) {
    auto store = KvStore::Open(dir.Sub("kv"), KvStoreOptions{});
    REQUIRE(store.ok());
    return std::move(*store);
  }
  TempDir dir_;
  std::unique_ptr<KvStore> store_;
  KvStateMachine machine_;
  std::uint64_t index_ = 1;
};

jobs::Count CountFor(const pb::TxnResponse& locked, const std::string& own_key,
                     std::int64_t max_changes) {
  jobs::Count count;
  count.own_key = own_key;
  count.token = locked.header().revision();
  const auto& job = locked.responses(1).response_range();
  const auto& epoch = locked.responses(2).response_range();
  jobs::EpochRecord record;
  if (epoch.kvs_size() > 0) {
    record = *jobs::ParseEpochRecord(epoch.kvs(0).value());
    count.epoch_mod = epoch.kvs(0).mod_revision();
  }
  count.next = {record.epoch + 1, count.token};
  count.dead_letter = jobs::DeadLetters(count.next.epoch, max_changes);
  count.job_value = job.kvs(0).value();
  return count;
}

TEST_CASE("Job keys and epoch records", "[api][jobs]") {
  auto keys = jobs::KeysFor("", "j1");
  REQUIRE(keys.ok());
  CHECK(keys->Job() == "epoch-jobs/jobs/j1");
  CHECK(keys->LockPrefix() == "epoch-jobs/lock/j1/");
  CHECK(keys->Epoch() == "epoch-jobs/epoch/j1");
  CHECK(keys->DlqJob() == "epoch-jobs/dlq/j1");
  CHECK(keys->DoneJob() == "epoch-jobs/done/j1");
  CHECK(jobs::KeysFor("q/", "").status().code() == StatusCode::kInvalidArgument);
  CHECK(jobs::KeysFor("q/", "a/b").status().code() == StatusCode::kInvalidArgument);

  auto record = jobs::ParseEpochRecord(jobs::EncodeEpochRecord({3, 812}));
  REQUIRE(record.ok());
  CHECK(record->epoch == 3);
  CHECK(record->token == 812);
  CHECK(jobs::EncodeEpochRecord({3, 812}) == "epoch=3 token=812");
  CHECK(!jobs::ParseEpochRecord("epoch=3").ok());
  CHECK(!jobs::ParseEpochRecord("epoch=-1 token=2").ok());
  CHECK(!jobs::ParseEpochRecord("epoch=1 token=2x").ok());
  CHECK(!jobs::DeadLetters(4, 3));
  CHECK(jobs::DeadLetters(5, 3));
}

TEST_CASE("The job txns lock, count, refuse a second holder and release by token", "[api][jobs]") {
  Machine m;
  const jobs::QueueKeys keys = *jobs::KeysFor("q/", "j1");
  const std::int64_t a = m.Grant(0x1a);
  const std::int64_t b = m.Grant(0x2b);
  const std::string key_a = recipe::KeyFor(keys.LockPrefix(), a);
  const std::string key_b = recipe::KeyFor(keys.LockPrefix(), b);

  // Not queued: nothing is written.
  pb::TxnResponse absent = m.Txn(jobs::LockTxn(keys, key_a, a, "w-a"));
  CHECK_FALSE(absent.succeeded());
  CHECK(absent.responses(1).response_range().kvs_size() == 0);
  CHECK_FALSE(m.Get(key_a).has_value());

  m.Put(keys.Job(), "stages=x\npayload");
  pb::TxnResponse locked = m.Txn(jobs::LockTxn(keys, key_a, a, "w-a"));
  REQUIRE(locked.succeeded());
  const std::int64_t token_a = locked.header().revision();
  CHECK(m.Get(key_a)->create_revision() == token_a);
  CHECK(m.Get(key_a)->value() == "w-a");

  // Held: B's lock txn fails and names A as the first-created key; B's key is not created.
  pb::TxnResponse busy = m.Txn(jobs::LockTxn(keys, key_b, b, "w-b"));
  CHECK_FALSE(busy.succeeded());
  REQUIRE(busy.responses(0).response_range().kvs_size() == 1);
  CHECK(busy.responses(0).response_range().kvs(0).key() == key_a);
  CHECK_FALSE(m.Get(key_b).has_value());

  const jobs::Count count_a = CountFor(locked, key_a, 3);
  REQUIRE(m.Txn(jobs::CountTxn(keys, count_a)).succeeded());
  CHECK(m.Get(keys.Epoch())->value() == fmt::format("epoch=1 token={}", token_a));
  // The same count again fails its MOD compare: counted once.
  CHECK_FALSE(m.Txn(jobs::CountTxn(keys, count_a)).succeeded());

  // Another token cannot release; the holder's can.
  CHECK_FALSE(m.Txn(jobs::ReleaseTxn(keys, key_a, token_a + 1, false, "")).succeeded());
  REQUIRE(m.Txn(jobs::ReleaseTxn(keys, key_a, token_a, false, "")).succeeded());
  CHECK_FALSE(m.Get(key_a).has_value());
  CHECK(m.Get(keys.Job()).has_value());

  // B takes it with a larger token, counted as the second holder; completing moves it to done/.
  pb::TxnResponse locked_b = m.Txn(jobs::LockTxn(keys, key_b, b, "w-b"));
  REQUIRE(locked_b.succeeded());
  const jobs::Count count_b = CountFor(locked_b, key_b, 3);
  CHECK(count_b.token > token_a);
  CHECK(count_b.next.epoch == 2);
  REQUIRE(m.Txn(jobs::CountTxn(keys, count_b)).succeeded());
  const std::string done = jobs::EncodeEpochRecord(count_b.next);
  REQUIRE(m.Txn(jobs::ReleaseTxn(keys, key_b, count_b.token, true, done)).succeeded());
  CHECK_FALSE(m.Get(keys.Job()).has_value());
  CHECK(m.Get(keys.DoneJob())->value() == done);
  CHECK_FALSE(m.Get(key_b).has_value());
}

TEST_CASE("A holder whose lease ended is not counted; the limit dead-letters in one txn",
          "[api][jobs]") {
  Machine m;
  const jobs::QueueKeys keys = *jobs::KeysFor("q/", "poison");
  m.Put(keys.Job(), "stages=x\npoison");
  const std::int64_t max_changes = 1;

  const std::int64_t lost = m.Grant(0x10);
  const std::string lost_key = recipe::KeyFor(keys.LockPrefix(), lost);
  pb::TxnResponse locked_lost = m.Txn(jobs::LockTxn(keys, lost_key, lost, "lost"));
  REQUIRE(locked_lost.succeeded());
  m.Revoke(lost);  // its lock key goes with the lease
  CHECK_FALSE(
      m.Txn(jobs::CountTxn(keys, CountFor(locked_lost, lost_key, max_changes))).succeeded());
  CHECK_FALSE(m.Get(keys.Epoch()).has_value());

  std::int64_t holders = 0;
  for (std::int64_t id = 0x20;; ++id) {
    const std::int64_t lease = m.Grant(id);
    const std::string own = recipe::KeyFor(keys.LockPrefix(), lease);
    pb::TxnResponse locked = m.Txn(jobs::LockTxn(keys, own, lease, "w"));
    REQUIRE(locked.succeeded());
    const jobs::Count count = CountFor(locked, own, max_changes);
    pb::TxnResponse counted = m.Txn(jobs::CountTxn(keys, count));
    REQUIRE(counted.succeeded());
    ++holders;
    if (count.dead_letter) {
      // One revision: the record, the dead letter, the job gone and the lock released.
      CHECK(m.Get(keys.DlqJob())->value() == "stages=x\npoison");
      CHECK(m.Get(keys.DlqJob())->mod_revision() == counted.header().revision());
      CHECK(m.Get(keys.Epoch())->mod_revision() == counted.header().revision());
      CHECK_FALSE(m.Get(keys.Job()).has_value());
      CHECK_FALSE(m.Get(own).has_value());
      break;
    }
    m.Revoke(lease);
    REQUIRE(holders < 10);
  }
  CHECK(holders == max_changes + 2);
}

}  // namespace
}  // namespace epoch::server
