// KvStore: opening, the meta record, and the apply path (one RocksDB write batch per
// ApplyBatch, the applied index inside it). Reads are in kv_store_read.cc.
#include "epoch/server/kv_store.h"

#include <rocksdb/db.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/utilities/write_batch_with_index.h>

#include <filesystem>
#include <system_error>
#include <tuple>
#include <utility>

#include "entry_apply.h"
#include "key_encoding.h"
#include "read_state.h"
#include "revision_codec.h"
#include "store_reader.h"

namespace epoch::server {

namespace {

// Bumped when the key layout changes incompatibly.
constexpr std::int64_t kFormatVersion = 1;

rocksdb::WriteOptions NoWalWrite() {
  rocksdb::WriteOptions wo;
  // The Raft WAL is the durability source (DESIGN.md §6); RocksDB's own WAL stays off.
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
  return Status::Ok();
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

// Loads the meta record, or returns nullopt for a store that has never been written.
Result<std::optional<KvStore::Meta>> LoadMeta(rocksdb::DB* db) {
  Result<std::optional<std::int64_t>> format = ReadMetaValue(db, kMetaFormat);
  if (!format.ok()) return format.status();
  if (!format->has_value()) return std::optional<KvStore::Meta>();
  if (**format != kFormatVersion) {
    return Status::Corruption("unsupported store format version " + std::to_string(**format));
  }
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
  return std::optional<KvStore::Meta>(meta);
}

}  // namespace

Result<std::unique_ptr<KvStore>> KvStore::Open(const std::string& dir, KvStoreOptions options) {
  rocksdb::Options opts;
  opts.create_if_missing = true;
  // Metadata is small and hot: compressing every flushed memtable (snappy by default) cost ~1 % of
  // a put's server CPU for little space. Only the bottommost level, which holds the bulk of a
  // large store, stays compressed.
  opts.compression = rocksdb::kNoCompression;
  opts.bottommost_compression = rocksdb::kSnappyCompression;
  opts.avoid_flush_during_shutdown = options.skip_flush_on_close;
  // One writer (the applier): no concurrent memtable inserts, which also lets the insert hints
  // below work (RocksDB ignores them for concurrent writes).
  opts.allow_concurrent_memtable_write = false;
  opts.memtable_insert_with_hint_prefix_extractor = std::make_shared<AppendHintPrefix>();
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(opts, dir, &raw);
  if (!s.ok()) return FromRocks(s, "open " + dir);
  std::unique_ptr<rocksdb::DB> db(raw);

  Result<std::optional<Meta>> loaded = LoadMeta(db.get());
  if (!loaded.ok()) return loaded.status().Annotate("open " + dir);
  Meta meta = loaded->value_or(Meta{});
  if (!loaded->has_value()) {
    // A new store: revision 1, nothing compacted, nothing applied. Written like any batch (no
    // WAL): if it is lost in a crash the store is simply new again.
    rocksdb::WriteBatchWithIndex batch;
    EPOCH_RETURN_IF_ERROR(PutMeta(&batch, meta, nullptr));
    EPOCH_RETURN_IF_ERROR(FromRocks(db->Write(NoWalWrite(), batch.GetWriteBatch()), "init"));
  }
  return std::unique_ptr<KvStore>(new KvStore(std::move(db), std::move(options), meta));
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

KvStore::KvStore(std::unique_ptr<rocksdb::DB> db, KvStoreOptions options, Meta meta)
    : db_(std::move(db)), options_(std::move(options)), meta_(meta) {}

KvStore::~KvStore() {
  // Close() flushes memtables first unless skip_flush_on_close (avoid_flush_during_shutdown).
  rocksdb::Status s = db_->Close();
  (void)s;  // nothing useful to do on failure at shutdown: the Raft WAL replays what is missing
}

Status KvStore::WriteBatchAndPublish(rocksdb::WriteBatchWithIndex* batch, const Meta& meta) {
  // meta_ is what the store holds: only this thread writes it (readers copy it under mu_).
  EPOCH_RETURN_IF_ERROR(PutMeta(batch, meta, &meta_));
  std::lock_guard<std::mutex> lock(mu_);
  EPOCH_RETURN_IF_ERROR(FromRocks(db_->Write(NoWalWrite(), batch->GetWriteBatch()), "apply"));
  meta_ = meta;
  return Status::Ok();
}

Result<std::vector<ApplyResult>> KvStore::ApplyBatch(std::span<const ApplyInput> inputs) {
  rocksdb::WriteBatchWithIndex batch(rocksdb::BytewiseComparator(), 0, /*overwrite_key=*/true);
  StoreReader reader(db_.get(), nullptr, &batch);
  IdempotencyExpiryHint hint{idempotency_earliest_expiry_ms_};
  const EntryContext ctx{&reader, &batch, &options_, &hint};
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
    Result<ApplyResult> r = ApplyEntry(ctx, &meta, *in.request);
    if (!r.ok()) return r.status().Annotate("apply index " + std::to_string(in.index.value()));
    meta.applied = in.index;
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
  EPOCH_RETURN_IF_ERROR(FromRocks(db_->Flush(fo), "flush"));
  return applied;
}

Result<LogIndex> KvStore::CreateCheckpoint(const std::string& dir) {
  const LogIndex applied = meta_.applied;
  rocksdb::Checkpoint* raw = nullptr;
  EPOCH_RETURN_IF_ERROR(FromRocks(rocksdb::Checkpoint::Create(db_.get(), &raw), "checkpoint"));
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // log_size_for_flush = 0: always flush first, so the checkpoint holds every applied write even
  // though RocksDB's WAL is off.
  EPOCH_RETURN_IF_ERROR(FromRocks(checkpoint->CreateCheckpoint(dir, 0), "checkpoint " + dir));
  return applied;
}

Status KvStore::ReplaceWithCheckpoint(const std::string& checkpoint_dir) {
  rocksdb::DB* raw = nullptr;
  EPOCH_RETURN_IF_ERROR(
      FromRocks(rocksdb::DB::OpenForReadOnly(rocksdb::Options(), checkpoint_dir, &raw),
                "open checkpoint " + checkpoint_dir));
  std::unique_ptr<rocksdb::DB> image(raw);
  Result<std::optional<Meta>> loaded = LoadMeta(image.get());
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
  // One external SST file: a range deletion of the whole key space (every key of the layout
  // starts with a lowercase letter, below 0xff) and every key of the image, streamed to disk.
  // An ingested file gets one sequence number for all its entries, and a range deletion covers
  // only older sequence numbers: the file deletes the old state and brings the new one in one
  // atomic, durable step (a MANIFEST edit) without holding the image in memory.
  const std::string sst = checkpoint_dir + ".ingest.sst";
  {
    rocksdb::SstFileWriter writer(rocksdb::EnvOptions(), db_->GetOptions());
    EPOCH_RETURN_IF_ERROR(FromRocks(writer.Open(sst), "create " + sst));
    EPOCH_RETURN_IF_ERROR(
        FromRocks(writer.DeleteRange(std::string(), std::string(1, '\xff')), "write " + sst));
    std::unique_ptr<rocksdb::Iterator> it(image->NewIterator(rocksdb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      EPOCH_RETURN_IF_ERROR(FromRocks(writer.Put(it->key(), it->value()), "write " + sst));
    }
    EPOCH_RETURN_IF_ERROR(FromRocks(it->status(), "read checkpoint " + checkpoint_dir));
    EPOCH_RETURN_IF_ERROR(FromRocks(writer.Finish(), "finish " + sst));
  }
  rocksdb::IngestExternalFileOptions ingest;
  ingest.move_files = true;  // a hard link: same file system as the store
  Status ingested;
  {
    // Under mu_: a reader pairs its RocksDB snapshot with meta_, so it sees the old state with
    // the old meta or the new state with the new meta.
    std::lock_guard<std::mutex> lock(mu_);
    ingested = FromRocks(db_->IngestExternalFile({sst}, ingest), "ingest " + sst);
    if (ingested.ok()) meta_ = meta;
  }
  idempotency_earliest_expiry_ms_ = INT64_MIN;  // the image's records are unknown: scan once
  std::error_code ec;
  std::filesystem::remove(sst, ec);
  return ingested;
}

std::unique_ptr<KvStore::ReadState> KvStore::AcquireRead() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::make_unique<ReadState>(db_.get(), meta_);
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

std::int64_t KvStore::ClusterTimeMs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return meta_.cluster_time_ms;
}

}  // namespace epoch::server
