// The store's on-disk layout: revision records in their own column family and no per-key history
// table (format 3: the KeyIndex is in memory), and the ways older layouts still arrive — a data
// directory written by an older epochd, or a snapshot image sent by one — and end up in format 3
// with the same state. Format 2 had the per-key history table ('i' esc(key) rev -> 'p'/'t') in
// the default family; format 1 also had the revision records there.
#include <rocksdb/db.h>

#include <catch2/catch.hpp>

#include "epoch/v1/internal.pb.h"
#include "key_encoding.h"
#include "revision_codec.h"
#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)

// A store directory opened with plain RocksDB, to look at (and rewrite) its layout.
class RawStore {
 public:
  explicit RawStore(const std::string& dir) {
    std::vector<std::string> names;
    REQUIRE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir, &names).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (const std::string& n : names) descriptors.emplace_back(n, rocksdb::ColumnFamilyOptions());
    rocksdb::DB* raw = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(rocksdb::DBOptions(), dir, descriptors, &handles_, &raw);
    INFO(s.ToString());
    REQUIRE(s.ok());
    db_.reset(raw);
  }
  ~RawStore() {
    for (auto* h : handles_) (void)db_->DestroyColumnFamilyHandle(h);
    (void)db_->Close();
  }
  RawStore(const RawStore&) = delete;
  RawStore& operator=(const RawStore&) = delete;

  rocksdb::ColumnFamilyHandle* Family(const std::string& name) {
    for (auto* h : handles_) {
      if (h->GetName() == name) return h;
    }
    return nullptr;
  }

  // Keys of `family` in table `table`.
  std::vector<std::string> TableKeys(rocksdb::ColumnFamilyHandle* family, char table) {
    std::vector<std::string> out;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), family));
    for (it->Seek(std::string(1, table)); it->Valid() && it->key()[0] == table; it->Next()) {
      out.push_back(it->key().ToString());
    }
    REQUIRE(it->status().ok());
    return out;
  }

  std::int64_t Format() {
    std::string value;
    REQUIRE(db_->Get(rocksdb::ReadOptions(), MetaKey(kMetaFormat), &value).ok());
    std::int64_t v = 0;
    REQUIRE(DecodeInt64(value, &v));
    return v;
  }

  void SetFormat(std::int64_t version) {
    REQUIRE(db_->Put(rocksdb::WriteOptions(), MetaKey(kMetaFormat), EncodeInt64(version)).ok());
  }

  // Rewrites the store as a format-2 epochd left it: a per-key history entry for every revision
  // record, in the default family.
  void DowngradeToIndexTable() {
    rocksdb::ColumnFamilyHandle* history = Family("history");
    REQUIRE(history != nullptr);
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), history));
    rocksdb::WriteBatch batch;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      RevisionPair pair;
      REQUIRE(ParseRevisionKey(it->key().ToString(), &pair));
      v1::StoredEvent ev;
      REQUIRE(ev.ParseFromString(it->value().ToString()));
      const char marker = ev.type() == mvccpb::Event::PUT ? kIndexPut : kIndexTombstone;
      REQUIRE(batch.Put(IndexKey(ev.kv().key(), pair), std::string(1, marker)).ok());
    }
    REQUIRE(it->status().ok());
    it.reset();
    REQUIRE(db_->Write(rocksdb::WriteOptions(), &batch).ok());
    SetFormat(2);
  }

  // Rewrites the store as a format-1 epochd left it: the per-key history table, the history
  // family's records in the default family, no history family.
  void DowngradeToSingleFamily() {
    DowngradeToIndexTable();
    rocksdb::ColumnFamilyHandle* history = Family("history");
    REQUIRE(history != nullptr);
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), history));
    rocksdb::WriteBatch batch;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      REQUIRE(batch.Put(it->key(), it->value()).ok());
    }
    REQUIRE(it->status().ok());
    it.reset();
    REQUIRE(db_->Write(rocksdb::WriteOptions(), &batch).ok());
    REQUIRE(db_->DropColumnFamily(history).ok());
    SetFormat(1);
  }

 private:
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

v1::InternalRequest PutCmd(int i) {
  v1::InternalRequest req;
  *req.mutable_put() = PutReq("k" + std::to_string(i % 5), "v" + std::to_string(i));
  req.set_cluster_time_ms(1);
  return req;
}

// What a store holds, as readers see it.
struct Fingerprint {
  std::uint64_t state = 0;
  std::uint32_t kv_hash = 0;
  std::vector<std::string> events;  // from revision 8, with prev_kv
  std::string old_value;            // "k3" at revision 9

  static Fingerprint Of(KvStore& s) {
    Fingerprint f;
    auto state = s.StateHash();
    REQUIRE(state.ok());
    f.state = *state;
    auto kv = s.HashKV(Revision(0));
    REQUIRE(kv.ok());
    f.kv_hash = kv->hash;
    auto events = s.ReadEvents(Revision(8), 100, /*with_prev_kv=*/true);
    REQUIRE(events.ok());
    for (const auto& e : events->events) f.events.push_back(e.SerializeAsString());
    pb::RangeRequest at = RangeReq("k3");
    at.set_revision(9);
    auto old = s.Range(at);
    REQUIRE(old.ok());
    REQUIRE(old->kvs_size() == 1);
    f.old_value = old->kvs(0).value();
    return f;
  }
  bool operator==(const Fingerprint&) const = default;
};

// A store with 30 puts and a compaction at revision 6 (so history has holes).
Fingerprint Populate(const std::string& dir) {
  TestStore s(dir);
  for (int i = 1; i <= 30; ++i) s.Apply(PutCmd(i));
  REQUIRE(s.Compact(6).status.ok());
  return Fingerprint::Of(*s);
}

TEST_CASE("revision records live in the history column family, every other table in the default",
          "[server][format]") {
  TempDir dir;
  Populate(dir.path());
  RawStore raw(dir.path());
  REQUIRE(raw.Family("history") != nullptr);
  CHECK(raw.TableKeys(raw.Family("history"), kRevisionTable).size() >= 25);
  CHECK(raw.TableKeys(raw.Family("default"), kRevisionTable).empty());
  CHECK(raw.TableKeys(raw.Family("default"), kIndexTable).empty());
  CHECK(raw.TableKeys(raw.Family("history"), kIndexTable).empty());
  CHECK(raw.Format() == 3);
}

TEST_CASE("a format-2 store drops its per-key history table when opened and keeps its state",
          "[server][format]") {
  TempDir dir;
  const Fingerprint before = Populate(dir.path());
  {
    RawStore raw(dir.path());
    raw.DowngradeToIndexTable();
    REQUIRE(raw.TableKeys(raw.Family("default"), kIndexTable).size() >= 25);
  }
  {
    std::unique_ptr<KvStore> s = OpenOrDie(dir.path());
    CHECK(Fingerprint::Of(*s) == before);
  }
  RawStore raw(dir.path());
  CHECK(raw.Format() == 3);
  CHECK(raw.TableKeys(raw.Family("default"), kIndexTable).empty());
}

TEST_CASE("a format-1 store is migrated when opened and keeps its state", "[server][format]") {
  TempDir dir;
  const Fingerprint before = Populate(dir.path());
  {
    RawStore raw(dir.path());
    raw.DowngradeToSingleFamily();
  }
  {
    std::unique_ptr<KvStore> s = OpenOrDie(dir.path());
    CHECK(Fingerprint::Of(*s) == before);
    CHECK(s->AppliedIndex() == LogIndex(31));
  }
  RawStore raw(dir.path());
  CHECK(raw.Format() == 3);
  CHECK(raw.TableKeys(raw.Family("default"), kRevisionTable).empty());
  CHECK(raw.TableKeys(raw.Family("default"), kIndexTable).empty());
  CHECK(raw.TableKeys(raw.Family("history"), kRevisionTable).size() >= 25);
}

TEST_CASE("a migration cut short after moving the history completes on the next open",
          "[server][format]") {
  // The states a crash leaves between the ingest and the durable format record: format 1 or 2
  // recorded, the history already moved and the per-key table already dropped.
  const std::int64_t format = GENERATE(1, 2);
  TempDir dir;
  const Fingerprint before = Populate(dir.path());
  {
    RawStore raw(dir.path());
    raw.SetFormat(format);
  }
  {
    std::unique_ptr<KvStore> s = OpenOrDie(dir.path());
    CHECK(Fingerprint::Of(*s) == before);
  }
  RawStore raw(dir.path());
  CHECK(raw.Format() == 3);
}

TEST_CASE("a format-1 snapshot image installs into both families", "[server][format][snapshot]") {
  TempDir dir;
  const Fingerprint image = Populate(dir.Sub("image"));
  {
    RawStore raw(dir.Sub("image"));
    raw.DowngradeToSingleFamily();
  }
  {
    TestStore follower(dir.Sub("follower"));
    for (int i = 1; i <= 3; ++i) follower.Apply(PutCmd(100 + i));
    REQUIRE(follower->ReplaceWithCheckpoint(dir.Sub("image")).ok());
    CHECK(Fingerprint::Of(*follower) == image);
    follower.Reopen();  // the install is durable
    CHECK(Fingerprint::Of(*follower) == image);
  }
  RawStore raw(dir.Sub("follower"));
  CHECK(raw.Format() == 3);  // recorded in the layout it landed in
  CHECK(raw.TableKeys(raw.Family("default"), kRevisionTable).empty());
  CHECK(raw.TableKeys(raw.Family("default"), kIndexTable).empty());
}

TEST_CASE("a format-2 snapshot image installs without its per-key history table",
          "[server][format][snapshot]") {
  TempDir dir;
  const Fingerprint image = Populate(dir.Sub("image"));
  {
    RawStore raw(dir.Sub("image"));
    raw.DowngradeToIndexTable();
  }
  {
    TestStore follower(dir.Sub("follower"));
    for (int i = 1; i <= 3; ++i) follower.Apply(PutCmd(100 + i));
    REQUIRE(follower->ReplaceWithCheckpoint(dir.Sub("image")).ok());
    CHECK(Fingerprint::Of(*follower) == image);
    follower.Reopen();
    CHECK(Fingerprint::Of(*follower) == image);
  }
  RawStore raw(dir.Sub("follower"));
  CHECK(raw.Format() == 3);
  CHECK(raw.TableKeys(raw.Family("default"), kIndexTable).empty());
}

TEST_CASE("a store of an unknown format is refused with its version", "[server][format]") {
  TempDir dir;
  Populate(dir.path());
  {
    RawStore raw(dir.path());
    raw.SetFormat(7);
  }
  Result<std::unique_ptr<KvStore>> s = KvStore::Open(dir.path(), {});
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.status().message(), Catch::Contains("unsupported store format version 7"));
}

}  // namespace
}  // namespace epoch::server
