// KvStore: opening, the meta record, and the apply path (one RocksDB write batch per
// ApplyBatch, the applied index inside it). Reads are in kv_store_read.cc.
#include "epoch/state/kv_store.h"

#include <rocksdb/db.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/utilities/write_batch_with_index.h>

#include <filesystem>
#include <limits>
#include <system_error>
#include <tuple>
#include <utility>

#include "compaction.h"
#include "entry_apply.h"
#include "key_encoding.h"
#include "key_index.h"
#include "latest_cache.h"
#include "mvcc_read.h"
#include "read_state.h"
#include "revision_codec.h"
#include "store_import.h"
#include "store_reader.h"

namespace epoch::server {

namespace {

// Bumped when the key layout changes incompatibly. 1: every table in the default column
// family; 2: revision records in their own family (StoreFamilies); 3: no per-key history table
// ('i'), the KeyIndex is rebuilt from the revision records instead. An older store is upgraded
// when it is opened, and an older snapshot image is routed into the current layout (its 'i'
// keys dropped) when installed.
constexpr std::int64_t kFormatVersion = 3;
constexpr std::int64_t kFormatSingleFamily = 1;
constexpr std::int64_t kFormatIndexTable = 2;
constexpr char kHistoryFamily[] = "history";

rocksdb::WriteOptions NoWalWrite() {
  rocksdb::WriteOptions wo;
  // The Raft WAL is the durability source (docs/formats.md §3); RocksDB's own WAL stays off.
  wo.disableWAL = true;
  return wo;
}

Result<std::optional<std::int64_t>> ReadMetaValue(rocksdb::DB* db, std::string_view name) {
  std::string value;
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), MetaKey(name), &value);
  if (s.IsNotFound()) return std::optional<std::int64_t>();
  if (!s.ok()) return FromRocks(s, "read meta");
  std::int64_t v = 0;
  if (!DecodeInt64(value, &v)) return Status::Corruption("bad meta value " + std::string(name));
  return std::optional<std::int64_t>(v);
}

// Writes the meta values of `meta` that differ from `stored` (what the store already holds), or
// all of them and the format version when `stored` is null (a new store). A batch of puts only
// moves the applied index, the revision and perhaps the cluster clock: the other keys are not
// rewritten into every batch.
Status PutMeta(rocksdb::WriteBatchWithIndex* batch, const KvStore::Meta& meta,
               const KvStore::Meta* stored) {
  const std::tuple<std::string_view, std::int64_t, bool> values[] = {
      {kMetaAppliedIndex, static_cast<std::int64_t>(meta.applied.value()),
       stored == nullptr || stored->applied != meta.applied},
      {kMetaRevision, meta.revision.value(),
       stored == nullptr || stored->revision != meta.revision},
      {kMetaCompactRevision, meta.compact_revision.value(),
       stored == nullptr || stored->compact_revision != meta.compact_revision},
      {kMetaClusterTime, meta.cluster_time_ms,
       stored == nullptr || stored->cluster_time_ms != meta.cluster_time_ms},
      {kMetaFormat, kFormatVersion, stored == nullptr},
  };
  for (const auto& [name, value, changed] : values) {
    if (!changed) continue;
    EPOCH_RETURN_IF_ERROR(FromRocks(batch->Put(MetaKey(name), EncodeInt64(value)), "write meta"));
  }
  if (stored == nullptr || (stored->members != meta.members && *stored->members != *meta.members)) {
    v1::StoredMembers members;
    for (const PublishedMember& m : *meta.members) {
      v1::MemberAttributes* a = members.add_members();
      a->set_id(m.id);
      a->set_name(m.name);
      for (const std::string& url : m.client_urls) a->add_client_urls(url);
    }
    EPOCH_RETURN_IF_ERROR(
        FromRocks(batch->Put(MetaKey(kMetaMembers), members.SerializeAsString()), "write members"));
  }
  if (stored == nullptr ? meta.member_table->members_size() > 0
                        : stored->member_table != meta.member_table) {
    EPOCH_RETURN_IF_ERROR(
        FromRocks(batch->Put(MetaKey(kMetaMemberTable), meta.member_table->SerializeAsString()),
                  "write member table"));
  }
  if (meta.cluster_timing != nullptr &&
      (stored == nullptr || stored->cluster_timing != meta.cluster_timing)) {
    EPOCH_RETURN_IF_ERROR(
        FromRocks(batch->Put(MetaKey(kMetaClusterTiming), meta.cluster_timing->SerializeAsString()),
                  "write cluster timing"));
  }
  if (stored == nullptr ? meta.auth->revision != AuthState{}.revision : stored->auth != meta.auth) {
    EPOCH_RETURN_IF_ERROR(
        FromRocks(batch->Put(MetaKey(kMetaAuth), ToStoredAuth(*meta.auth).SerializeAsString()),
                  "write auth"));
  }
  if (stored != nullptr && stored->alarms == meta.alarms) return Status::Ok();
  if (meta.alarms.empty()) {
    return FromRocks(batch->Delete(MetaKey(kMetaAlarms)), "write alarms");
  }
  v1::StoredAlarms alarms;
  for (const StoreAlarm& a : meta.alarms) {
    etcdserverpb::AlarmMember* m = alarms.add_alarms();
    m->set_memberid(a.member);
    m->set_alarm(a.type);
  }
  return FromRocks(batch->Put(MetaKey(kMetaAlarms), alarms.SerializeAsString()), "write alarms");
}

// The published members recorded in `db` (none when the key is absent).
Result<std::shared_ptr<const PublishedMembers>> LoadMembers(rocksdb::DB* db) {
  auto out = std::make_shared<PublishedMembers>();
  std::string value;
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), MetaKey(kMetaMembers), &value);
  if (s.IsNotFound()) return std::shared_ptr<const PublishedMembers>(std::move(out));
  if (!s.ok()) return FromRocks(s, "read members");
  v1::StoredMembers stored;
  if (!stored.ParseFromString(value)) return Status::Corruption("undecodable members record");
  for (const v1::MemberAttributes& a : stored.members()) {
    out->push_back(
        PublishedMember{a.id(), a.name(), {a.client_urls().begin(), a.client_urls().end()}});
  }
  return std::shared_ptr<const PublishedMembers>(std::move(out));
}

// The member table recorded in `db` (empty when the key is absent).
Result<MemberTablePtr> LoadMemberTable(rocksdb::DB* db) {
  auto table = std::make_shared<v1::StoredMemberTable>();
  std::string value;
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), MetaKey(kMetaMemberTable), &value);
  if (s.IsNotFound()) return MemberTablePtr(std::move(table));
  if (!s.ok()) return FromRocks(s, "read member table");
  if (!table->ParseFromString(value)) return Status::Corruption("undecodable member table record");
  return MemberTablePtr(std::move(table));
}

// The cluster timing recorded in `db` (null when the key is absent).
Result<ClusterTimingPtr> LoadClusterTiming(rocksdb::DB* db) {
  std::string value;
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), MetaKey(kMetaClusterTiming), &value);
  if (s.IsNotFound()) return ClusterTimingPtr();
  if (!s.ok()) return FromRocks(s, "read cluster timing");
  auto timing = std::make_shared<v1::StoredClusterTiming>();
  if (!timing->ParseFromString(value)) return Status::Corruption("undecodable cluster timing");
  return ClusterTimingPtr(std::move(timing));
}

// The auth state recorded in `db` (auth off, no users, when the key is absent).
Result<AuthStatePtr> LoadAuth(rocksdb::DB* db) {
  std::string value;
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), MetaKey(kMetaAuth), &value);
  if (s.IsNotFound()) return AuthStatePtr(std::make_shared<const AuthState>());
  if (!s.ok()) return FromRocks(s, "read auth");
  v1::StoredAuth stored;
  if (!stored.ParseFromString(value)) return Status::Corruption("undecodable auth record");
  return AuthStatePtr(std::make_shared<const AuthState>(FromStoredAuth(stored)));
}

// The alarms recorded in `db` (none when the key is absent: a store from before alarms).
Result<std::vector<StoreAlarm>> LoadAlarms(rocksdb::DB* db) {
  std::string value;
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), MetaKey(kMetaAlarms), &value);
  if (s.IsNotFound()) return std::vector<StoreAlarm>();
  if (!s.ok()) return FromRocks(s, "read alarms");
  v1::StoredAlarms stored;
  if (!stored.ParseFromString(value)) return Status::Corruption("undecodable alarms record");
  std::vector<StoreAlarm> out;
  for (const etcdserverpb::AlarmMember& m : stored.alarms()) {
    out.push_back(StoreAlarm{m.memberid(), m.alarm()});
  }
  return out;
}

// The memtable keeps an insert hint per prefix of these keys, so appends skip most of the skip
// list search: revision records ('r', one prefix: they arrive in increasing order) and the meta
// keys ('m', each its own prefix: the same few keys are rewritten by every batch). Per-user-key
// tables stay out of the domain (a hint costs ~250 bytes of memtable per prefix).
class AppendHintPrefix final : public rocksdb::SliceTransform {
 public:
  [[nodiscard]] const char* Name() const override { return "epoch.AppendHintPrefix"; }
  [[nodiscard]] rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return key[0] == kRevisionTable ? rocksdb::Slice(key.data(), 1) : key;
  }
  [[nodiscard]] bool InDomain(const rocksdb::Slice& key) const override {
    return !key.empty() && (key[0] == kRevisionTable || key[0] == kMetaTable);
  }
};

// The store's format version, nullopt for a store that has never been written.
Result<std::optional<std::int64_t>> LoadFormat(rocksdb::DB* db) {
  Result<std::optional<std::int64_t>> format = ReadMetaValue(db, kMetaFormat);
  if (!format.ok()) return format.status();
  if (format->has_value() && **format != kFormatVersion && **format != kFormatSingleFamily &&
      **format != kFormatIndexTable) {
    return Status::Corruption("unsupported store format version " + std::to_string(**format) +
                              " (this epochd reads versions 1 to 3)");
  }
  return format;
}

// Loads the meta record, or returns nullopt for a store that has never been written.
Result<std::optional<KvStore::Meta>> LoadMeta(rocksdb::DB* db) {
  Result<std::optional<std::int64_t>> format = LoadFormat(db);
  if (!format.ok()) return format.status();
  if (!format->has_value()) return std::optional<KvStore::Meta>();
  const std::string_view names[] = {kMetaAppliedIndex, kMetaRevision, kMetaCompactRevision,
                                    kMetaClusterTime};
  std::int64_t values[4] = {};
  for (int i = 0; i < 4; ++i) {
    Result<std::optional<std::int64_t>> v = ReadMetaValue(db, names[i]);
    if (!v.ok()) return v.status();
    if (!v->has_value()) return Status::Corruption("missing meta " + std::string(names[i]));
    values[i] = **v;
  }
  KvStore::Meta meta;
  meta.applied = LogIndex(static_cast<std::uint64_t>(values[0]));
  meta.revision = Revision(values[1]);
  meta.compact_revision = Revision(values[2]);
  meta.cluster_time_ms = values[3];
  Result<std::vector<StoreAlarm>> alarms = LoadAlarms(db);
  if (!alarms.ok()) return alarms.status();
  meta.alarms = std::move(*alarms);
  Result<std::shared_ptr<const PublishedMembers>> members = LoadMembers(db);
  if (!members.ok()) return members.status();
  meta.members = std::move(*members);
  Result<MemberTablePtr> member_table = LoadMemberTable(db);
  if (!member_table.ok()) return member_table.status();
  meta.member_table = std::move(*member_table);
  Result<ClusterTimingPtr> timing = LoadClusterTiming(db);
  if (!timing.ok()) return timing.status();
  meta.cluster_timing = std::move(*timing);
  Result<AuthStatePtr> auth = LoadAuth(db);
  if (!auth.ok()) return auth.status();
  meta.auth = std::move(*auth);
  return std::optional<KvStore::Meta>(meta);
}

// A checkpoint directory opened read-only with all its families (a format-1 image has only the
// default one).
struct OpenedImage {
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  OpenedImage() = default;
  OpenedImage(const OpenedImage&) = delete;
  OpenedImage& operator=(const OpenedImage&) = delete;
  ~OpenedImage() {
    for (rocksdb::ColumnFamilyHandle* h : handles) (void)db->DestroyColumnFamilyHandle(h);
  }
};

Result<std::unique_ptr<OpenedImage>> OpenImage(const std::string& dir) {
  std::vector<std::string> names;
  EPOCH_RETURN_IF_ERROR(
      FromRocks(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir, &names),
                "open checkpoint " + dir));
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names)
    descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  EPOCH_RETURN_IF_ERROR(FromRocks(
      rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), dir, descriptors, &handles, &raw),
      "open checkpoint " + dir));
  auto image = std::make_unique<OpenedImage>();
  image->db.reset(raw);
  image->handles = std::move(handles);
  return image;
}

// Every key's revisions, from the revision records ('r') of `families` of `db` (the history
// family of a store; every family of a snapshot image, whose format may be older).
Result<KeyIndex::Map> ScanRevisionRecords(
    rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& families) {
  KeyIndex::Map keys;
  const StoredBounds records = TableBounds(kRevisionTable);
  RevisionPair pair;
  v1::StoredEvent ev;
  for (rocksdb::ColumnFamilyHandle* family : families) {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), family));
    for (it->Seek(records.lower); it->Valid() && it->key().compare(records.upper) < 0; it->Next()) {
      const std::string_view key(it->key().data(), it->key().size());
      if (!ParseRevisionKey(key, &pair)) return Status::Corruption("malformed revision key");
      if (pair.sub > std::numeric_limits<std::uint32_t>::max()) {
        return Status::Corruption("sub-revision out of range: " + std::to_string(pair.sub));
      }
      EPOCH_RETURN_IF_ERROR(
          ParseStoredEvent(std::string_view(it->value().data(), it->value().size()), &ev));
      // Revision order: each key's entries arrive ascending.
      keys[ev.kv().key()].push_back(KeyIndex::Entry{pair.main, static_cast<std::uint32_t>(pair.sub),
                                                    ev.type() == mvccpb::Event::PUT});
    }
    EPOCH_RETURN_IF_ERROR(FromRocks(it->status(), "read history"));
  }
  return keys;
}

}  // namespace

Result<std::unique_ptr<KvStore>> KvStore::Open(const std::string& dir, KvStoreOptions options) {
  rocksdb::Options opts;
  opts.create_if_missing = true;
  opts.create_missing_column_families = true;
  // RocksDB's WAL is off, so each family's memtable is durable only when flushed: the families
  // must flush together, or a crash could keep one family's writes of an applied index and lose
  // the other's.
  opts.atomic_flush = true;
  // No compression at any level. Metadata is small and hot: compressing every flushed memtable
  // (snappy by default) cost ~1 % of a put's server CPU for little space. A compressed bottommost
  // level cost more: a file can move down the levels without being rewritten only if its
  // compression matches the target level's, so every flushed history file (append-only keys,
  // never overlapping) would be rewritten just to snappy it, ~2 % of a put (bench/kv/PROFILE.md).
  // etcd's bbolt does not compress either.
  opts.compression = rocksdb::kNoCompression;
  opts.bottommost_compression = rocksdb::kNoCompression;
  opts.avoid_flush_during_shutdown = options.skip_flush_on_close;
  // One writer (the applier): no concurrent memtable inserts, which also lets the insert hints
  // below work (RocksDB ignores them for concurrent writes).
  opts.allow_concurrent_memtable_write = false;
  opts.memtable_insert_with_hint_prefix_extractor = std::make_shared<AppendHintPrefix>();
  const rocksdb::ColumnFamilyOptions family_opts(opts);
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, family_opts}, {kHistoryFamily, family_opts}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(opts, dir, families, &handles, &raw);
  if (!s.ok()) return FromRocks(s, "open " + dir);
  std::unique_ptr<rocksdb::DB> db(raw);
  // From here on the store owns the handles (its destructor releases them and closes the DB).
  Result<std::optional<std::int64_t>> format = LoadFormat(db.get());
  Result<std::optional<Meta>> loaded = format.ok() ? LoadMeta(db.get()) : format.status();
  std::unique_ptr<KvStore> store(
      new KvStore(std::move(db), std::move(handles), std::move(options), Meta{}));
  if (!loaded.ok()) return loaded.status().Annotate("open " + dir);
  if (!loaded->has_value()) {
    // A new store: revision 1, nothing compacted, nothing applied. Written like any batch (no
    // WAL): if it is lost in a crash the store is simply new again.
    rocksdb::WriteBatchWithIndex batch;
    EPOCH_RETURN_IF_ERROR(PutMeta(&batch, store->meta_, nullptr));
    EPOCH_RETURN_IF_ERROR(
        FromRocks(store->db_->Write(NoWalWrite(), batch.GetWriteBatch()), "init"));
    store->compactor_->Start();
    return store;
  }
  store->meta_ = **loaded;
  if (**format == kFormatSingleFamily) {
    EPOCH_RETURN_IF_ERROR(store->MigrateSingleFamily().Annotate("migrate " + dir));
  }
  if (**format != kFormatVersion) {
    EPOCH_RETURN_IF_ERROR(store->DropIndexTable().Annotate("upgrade " + dir));
  }
  EPOCH_RETURN_IF_ERROR(store->RebuildIndex().Annotate("open " + dir));
  // A compaction whose records were not all removed before the store closed resumes.
  Result<std::optional<std::int64_t>> finished =
      ReadMetaValue(store->db_.get(), kMetaCompactFinished);
  if (!finished.ok()) return finished.status().Annotate("open " + dir);
  store->compactor_->Reset(Revision(finished->value_or(-1)), store->meta_.compact_revision);
  store->compactor_->Start();
  return store;
}

Result<std::unique_ptr<KvStore>> KvStore::OpenFromCheckpoint(const std::string& checkpoint_dir,
                                                             const std::string& dir,
                                                             KvStoreOptions options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) return Status::IOError("remove " + dir + ": " + ec.message());
  fs::copy(checkpoint_dir, dir, fs::copy_options::recursive, ec);
  if (ec) return Status::IOError("copy " + checkpoint_dir + " to " + dir + ": " + ec.message());
  return Open(dir, std::move(options));
}

KvStore::KvStore(std::unique_ptr<rocksdb::DB> db, std::vector<rocksdb::ColumnFamilyHandle*> handles,
                 KvStoreOptions options, Meta meta)
    : db_(std::move(db)),
      handles_(std::move(handles)),
      options_(std::move(options)),
      meta_(meta),
      latest_cache_(std::make_unique<LatestCache>()),
      index_(std::make_unique<KeyIndex>()),
      compaction_metrics_(std::make_unique<CompactionMetrics>()),
      compactor_(std::make_unique<Compactor>(
          db_.get(), families(), index_.get(),
          CompactorOptions{options_.compaction_batch_entries,
                           std::chrono::milliseconds(options_.compaction_batch_interval_ms),
                           options_.background_compaction},
          compaction_metrics_.get())) {}

KvStore::~KvStore() {
  compactor_->Stop();  // its batches write to the database
  for (rocksdb::ColumnFamilyHandle* h : handles_) (void)db_->DestroyColumnFamilyHandle(h);
  // Close() flushes memtables first unless skip_flush_on_close (avoid_flush_during_shutdown).
  rocksdb::Status s = db_->Close();
  (void)s;  // nothing useful to do on failure at shutdown: the Raft WAL replays what is missing
}

Status KvStore::WriteBatchAndPublish(rocksdb::WriteBatchWithIndex* batch, const Meta& meta) {
  // meta_ is what the store holds: only this thread writes it (readers copy it under mu_).
  EPOCH_RETURN_IF_ERROR(PutMeta(batch, meta, &meta_));
  std::lock_guard<std::mutex> lock(mu_);
  const auto start = std::chrono::steady_clock::now();
  EPOCH_RETURN_IF_ERROR(FromRocks(db_->Write(NoWalWrite(), batch->GetWriteBatch()), "apply"));
  commit_latency_.Observe(std::chrono::steady_clock::now() - start);
  index_->Publish();  // before meta_: a reader at the new revision finds its entries
  const bool compacted = meta.compact_revision != meta_.compact_revision;
  meta_ = meta;
  // The batch holding the compact revision is written: the compactor may remove what it
  // supersedes (compaction.h).
  if (compacted) compactor_->Schedule(meta.compact_revision);
  return Status::Ok();
}

Result<std::vector<ApplyResult>> KvStore::ApplyBatch(std::span<const ApplyInput> inputs) {
  Result<std::vector<ApplyResult>> results = ApplyBatchOrFail(inputs);
  // The cache describes the batch, which was not written: forget it (the node stops anyway).
  if (!results.ok()) {
    latest_cache_->Clear();
    index_->DiscardStaged();
  }
  return results;
}

Result<std::vector<ApplyResult>> KvStore::ApplyBatchOrFail(std::span<const ApplyInput> inputs) {
  rocksdb::WriteBatchWithIndex batch(rocksdb::BytewiseComparator(), 0, /*overwrite_key=*/true);
  StoreReader reader(db_.get(), families(), nullptr, &batch, index_.get());
  IdempotencyExpiryHint hint{idempotency_earliest_expiry_ms_};
  const bool prev_values = !options_.lazy_prev_values || prev_value_readers_.load() > 0;
  const EntryContext ctx{&reader,      &batch,     &options_, &hint, latest_cache_.get(),
                         index_.get(), prev_values};
  Meta meta = meta_;  // only this thread writes meta_, so reading it unlocked is race-free
  std::vector<ApplyResult> results;
  results.reserve(inputs.size());
  for (const ApplyInput& in : inputs) {
    if (in.index <= meta.applied) {
      return Status::FailedPrecondition("apply of index " + std::to_string(in.index.value()) +
                                        " at or below applied index " +
                                        std::to_string(meta.applied.value()));
    }
    if (ReadsHistory(*in.request) && batch.GetWriteBatch()->Count() > 0) {
      // History is written past the batch's index (WriteTxn): an entry that reads it applies on
      // a database holding every earlier entry. Each write is a whole applied state.
      EPOCH_RETURN_IF_ERROR(WriteBatchAndPublish(&batch, meta));
      batch.Clear();
    }
    // The cluster clock never runs backwards, whatever the proposing leader's clock says.
    meta.cluster_time_ms = std::max(meta.cluster_time_ms, in.request->cluster_time_ms());
    meta.applied = in.index;  // the entry's own index while it applies
    Result<ApplyResult> r = ApplyEntry(ctx, &meta, *in.request);
    if (!r.ok()) return r.status().Annotate("apply index " + std::to_string(in.index.value()));
    if (r->status.Is(ErrorId::kTxnReadTooLarge)) txn_reads_refused_.fetch_add(1);
    results.push_back(std::move(*r));
  }
  EPOCH_RETURN_IF_ERROR(WriteBatchAndPublish(&batch, meta));
  idempotency_earliest_expiry_ms_ = hint.earliest_ms;  // only once the batch is the state
  return results;
}

Result<ApplyResult> KvStore::Apply(LogIndex index, const v1::InternalRequest& request) {
  const ApplyInput input{index, &request};
  Result<std::vector<ApplyResult>> r = ApplyBatch(std::span<const ApplyInput>(&input, 1));
  if (!r.ok()) return r.status();
  return std::move(r->front());
}

Status KvStore::ApplyEmpty(LogIndex index) {
  Meta meta = meta_;
  if (index <= meta.applied) {
    return Status::FailedPrecondition("apply of index " + std::to_string(index.value()) +
                                      " at or below applied index");
  }
  meta.applied = index;
  rocksdb::WriteBatchWithIndex batch;
  return WriteBatchAndPublish(&batch, meta);
}

Result<LogIndex> KvStore::Flush() {
  // Any thread: under mu_, every batch up to `applied` is already in the memtables we flush.
  LogIndex applied;
  {
    std::lock_guard<std::mutex> lock(mu_);
    applied = meta_.applied;
  }
  rocksdb::FlushOptions fo;
  fo.wait = true;
  EPOCH_RETURN_IF_ERROR(FromRocks(db_->Flush(fo, handles_), "flush"));  // atomic: atomic_flush
  return applied;
}

Result<KvStore::ImageMeta> KvStore::CreateCheckpoint(const std::string& dir) {
  rocksdb::Checkpoint* raw = nullptr;
  EPOCH_RETURN_IF_ERROR(FromRocks(rocksdb::Checkpoint::Create(db_.get(), &raw), "checkpoint"));
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // log_size_for_flush = 0: always flush first, so the checkpoint holds every applied write even
  // though RocksDB's WAL is off. The flush switches both families' memtables at once
  // (atomic_flush), between two write batches, and every batch carries its meta record: the image
  // is the state after one ApplyBatch. Which one is read from the image, since applies go on
  // while the checkpoint is taken.
  EPOCH_RETURN_IF_ERROR(FromRocks(checkpoint->CreateCheckpoint(dir, 0), "checkpoint " + dir));
  Result<std::unique_ptr<OpenedImage>> opened = OpenImage(dir);
  if (!opened.ok()) return opened.status();
  Result<std::optional<Meta>> loaded = LoadMeta((*opened)->db.get());
  if (!loaded.ok()) return loaded.status().Annotate("checkpoint " + dir);
  const Meta meta = loaded->value_or(Meta{});  // a store never written: the empty state
  return ImageMeta{meta.applied, meta.revision};
}

Status KvStore::ReplaceWithCheckpoint(const std::string& checkpoint_dir) {
  Result<std::unique_ptr<OpenedImage>> opened = OpenImage(checkpoint_dir);
  if (!opened.ok()) return opened.status();
  rocksdb::DB* image = (*opened)->db.get();
  const std::vector<rocksdb::ColumnFamilyHandle*>& image_handles = (*opened)->handles;
  Result<std::optional<Meta>> loaded = LoadMeta(image);
  if (!loaded.ok()) return loaded.status().Annotate("checkpoint " + checkpoint_dir);
  if (!loaded->has_value()) {
    return Status::Corruption("checkpoint " + checkpoint_dir + " holds no store meta record");
  }
  const Meta meta = **loaded;
  if (meta.applied < meta_.applied) {
    return Status::FailedPrecondition(
        "snapshot image at applied index " + std::to_string(meta.applied.value()) +
        " is older than the store (applied " + std::to_string(meta_.applied.value()) + ")");
  }
  // The image may be in the middle of a physical compaction: its leftovers come along, and the
  // pass resumes from its compact_finished (compaction.h).
  Result<std::optional<std::int64_t>> finished = ReadMetaValue(image, kMetaCompactFinished);
  if (!finished.ok()) return finished.status().Annotate("checkpoint " + checkpoint_dir);
  // The image's index, built before the lock: readers of this member do not wait for the scan.
  Result<KeyIndex::Map> index = ScanRevisionRecords(image, image_handles);
  if (!index.ok()) return index.status().Annotate("checkpoint " + checkpoint_dir);
  // Both families replaced whole by the image's keys, streamed to disk (store_import.h).
  FamilyImport import(db_.get(), families(), checkpoint_dir + ".ingest");
  EPOCH_RETURN_IF_ERROR(import.Open(StoredBounds{}, StoredBounds{}));
  const std::string format_key = MetaKey(kMetaFormat);
  const std::string format_value = EncodeInt64(kFormatVersion);  // the layout it lands in
  for (rocksdb::ColumnFamilyHandle* family : image_handles) {
    std::unique_ptr<rocksdb::Iterator> it(image->NewIterator(rocksdb::ReadOptions(), family));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      // An older image's per-key history: the index is rebuilt from the revision records.
      if (it->key().starts_with(rocksdb::Slice(&kIndexTable, 1))) continue;
      const bool is_format = it->key() == rocksdb::Slice(format_key);
      EPOCH_RETURN_IF_ERROR(import.Add(it->key(), is_format ? format_value : it->value()));
    }
    EPOCH_RETURN_IF_ERROR(FromRocks(it->status(), "read checkpoint " + checkpoint_dir));
  }
  // No compaction batch in flight: one computed on the old index must not land on the new state
  // or move the new compact_finished.
  std::unique_lock<std::mutex> paused = compactor_->Pause();
  // Under mu_: a reader pairs its RocksDB snapshot with meta_, so it sees the old state with the
  // old meta or the new state with the new meta.
  std::lock_guard<std::mutex> lock(mu_);
  latest_cache_->Clear();  // whatever happens next, the latest table is not what it described
  EPOCH_RETURN_IF_ERROR(import.Ingest());
  meta_ = meta;
  idempotency_earliest_expiry_ms_ = INT64_MIN;  // the image's records are unknown: scan once
  // Still under mu_: no reader acquires the new state before its index is there. A reader of
  // the old state (compact revision at most the image's) sees the new index: the same history,
  // Raft's log being one, or "compacted" below the image's compact revision.
  index_->Replace(std::move(*index), meta.compact_revision);
  compactor_->Reset(Revision(finished->value_or(-1)), meta.compact_revision);
  return Status::Ok();
}

Status KvStore::MigrateSingleFamily() {
  FamilyImport import(db_.get(), families(), db_->GetName() + "/migrate");
  EPOCH_RETURN_IF_ERROR(import.Open(TableBounds(kRevisionTable), TableBounds(kRevisionTable)));
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), handles_[0]));
  const StoredBounds history = TableBounds(kRevisionTable);
  for (it->Seek(history.lower); it->Valid() && it->key().compare(history.upper) < 0; it->Next()) {
    EPOCH_RETURN_IF_ERROR(import.Add(it->key(), it->value()));
  }
  EPOCH_RETURN_IF_ERROR(FromRocks(it->status(), "read history"));
  it.reset();
  // Ingested files are durable. The format record is written by DropIndexTable, next: a crash in
  // between migrates again, and finds no history left in the default family.
  if (import.history_keys() > 0) EPOCH_RETURN_IF_ERROR(import.Ingest());
  return Status::Ok();
}

Status KvStore::DropIndexTable() {
  // One batch (RocksDB's WAL is off, so it is durable only once flushed): a crash before the
  // flush leaves the old format, and the next open drops the table again.
  rocksdb::WriteBatch batch;
  const StoredBounds index = TableBounds(kIndexTable);
  EPOCH_RETURN_IF_ERROR(
      FromRocks(batch.DeleteRange(handles_[0], index.lower, index.upper), "drop index table"));
  EPOCH_RETURN_IF_ERROR(FromRocks(
      batch.Put(handles_[0], MetaKey(kMetaFormat), EncodeInt64(kFormatVersion)), "write format"));
  EPOCH_RETURN_IF_ERROR(FromRocks(db_->Write(NoWalWrite(), &batch), "drop index table"));
  return Flush().status();
}

Status KvStore::RebuildIndex() {
  Result<KeyIndex::Map> keys = ScanRevisionRecords(db_.get(), {handles_[1]});
  if (!keys.ok()) return keys.status();
  index_->Replace(std::move(*keys), meta_.compact_revision);
  return Status::Ok();
}

StoreFamilies KvStore::families() const { return StoreFamilies{handles_[0], handles_[1]}; }

std::unique_ptr<KvStore::ReadState> KvStore::AcquireRead() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::make_unique<ReadState>(db_.get(), families(), index_.get(), meta_);
}

LogIndex KvStore::AppliedIndex() const {
  std::lock_guard<std::mutex> lock(mu_);
  return meta_.applied;
}

Revision KvStore::CurrentRevision() const {
  std::lock_guard<std::mutex> lock(mu_);
  return meta_.revision;
}

Revision KvStore::CompactRevision() const {
  std::lock_guard<std::mutex> lock(mu_);
  return meta_.compact_revision;
}

Revision KvStore::CompactFinishedRevision() const { return compactor_->finished(); }

void KvStore::WhenCompacted(Revision rev, std::function<void(const Status&)> done) {
  compactor_->WhenFinished(rev, std::move(done));
}

void KvStore::StopCompactor() { compactor_->Stop(); }

Result<bool> KvStore::RunCompactionBatch() { return compactor_->RunBatch(); }

std::vector<StoreAlarm> KvStore::Alarms() const {
  std::lock_guard<std::mutex> lock(mu_);
  return meta_.alarms;
}

std::shared_ptr<const PublishedMembers> KvStore::Members() const {
  std::lock_guard<std::mutex> lock(mu_);
  return meta_.members;
}

MemberTablePtr KvStore::MemberTable() const {
  std::lock_guard<std::mutex> lock(mu_);
  return meta_.member_table;
}

ClusterTimingPtr KvStore::ClusterTiming() const {
  std::lock_guard<std::mutex> lock(mu_);
  return meta_.cluster_timing;
}

Status KvStore::SeedMemberTable(MemberTablePtr table) {
  if (meta_.member_table->members_size() > 0) return Status::Ok();
  return ReplaceMemberTable(std::move(table));
}

Status KvStore::ReplaceMemberTable(MemberTablePtr table) {
  Meta meta = meta_;
  meta.member_table = std::move(table);
  rocksdb::WriteBatchWithIndex batch;
  return WriteBatchAndPublish(&batch, meta);
}

AuthStatePtr KvStore::Auth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return meta_.auth;
}

Status KvStore::Defragment() {
  EPOCH_RETURN_IF_ERROR(Flush().status());
  rocksdb::CompactRangeOptions options;
  // Rewrite the last level too: that is where deleted history sits behind its tombstones.
  options.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForceOptimized;
  for (rocksdb::ColumnFamilyHandle* family : handles_) {
    EPOCH_RETURN_IF_ERROR(FromRocks(db_->CompactRange(options, family, nullptr, nullptr),
                                    "defragment " + family->GetName()));
  }
  return Status::Ok();
}

std::int64_t KvStore::ClusterTimeMs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return meta_.cluster_time_ms;
}

}  // namespace epoch::server
