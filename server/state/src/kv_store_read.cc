// KvStore's read side: every method takes one ReadState (snapshot + its meta) and reads only
// through it, so each answer reflects exactly one applied state.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string_view>
#include <utility>

#include "compaction.h"
#include "epoch/etcd_errors.h"
#include "epoch/state/kv_store.h"
#include "key_encoding.h"
#include "key_index.h"
#include "kv_apply.h"
#include "lease_table.h"
#include "mvcc_read.h"
#include "range_query.h"
#include "read_state.h"

namespace epoch::server {

namespace {

namespace pb = etcdserverpb;

// FNV-1a, 64 bit: simple, stable across platforms and versions (the hash is compared between
// nodes and over time, so it must never depend on the library or the build).
class Fnv1a64 {
 public:
  void Add(std::string_view bytes) {
    for (unsigned char c : bytes) {
      hash_ ^= c;
      hash_ *= 0x100000001b3ULL;
    }
  }
  // Length-prefixed, so ("ab","c") and ("a","bc") differ.
  void AddField(std::string_view bytes) {
    const std::uint64_t n = bytes.size();
    Add(std::string_view(reinterpret_cast<const char*>(&n), sizeof(n)));
    Add(bytes);
  }
  [[nodiscard]] std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

// Which history records at or below `compact` a compaction to it keeps, for a snapshot that may
// still hold leftovers (compaction.h): per key, its last record at or below `compact`, if a put or
// at `compact` itself. Empty when the snapshot's compact_finished says nothing is left over.
struct KeptRecords {
  bool filter = false;
  std::vector<RevisionPair> kept;  // sorted
  [[nodiscard]] bool Hashed(RevisionPair rev, std::int64_t compact) const {
    return !filter || rev.main > compact || std::binary_search(kept.begin(), kept.end(), rev);
  }
};

Result<KeptRecords> FindKeptRecords(const StoreReader& reader, Revision compact) {
  KeptRecords out;
  Result<std::optional<std::string>> finished = reader.Get(MetaKey(kMetaCompactFinished));
  if (!finished.ok()) return finished.status();
  std::int64_t done = -1;
  if (finished->has_value() && !DecodeInt64(**finished, &done)) {
    return Status::Corruption("bad meta value compact_finished");
  }
  if (done >= compact.value()) return out;
  out.filter = true;
  std::map<std::string, std::pair<RevisionPair, bool>, std::less<>> last;  // key -> (rev, put)
  BoundedIterator it = reader.NewIterator(TableBounds(kRevisionTable));
  RevisionPair pair;
  v1::StoredEvent ev;
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    if (!ParseRevisionKey(it.key(), &pair)) return Status::Corruption("malformed revision key");
    if (pair.main > compact.value()) break;
    EPOCH_RETURN_IF_ERROR(ParseStoredEvent(it.value(), &ev));
    last[ev.kv().key()] = {pair, ev.type() == mvccpb::Event::PUT};
  }
  EPOCH_RETURN_IF_ERROR(it.status());
  for (const auto& [key, rev_put] : last) {
    if (rev_put.second || rev_put.first.main == compact.value()) out.kept.push_back(rev_put.first);
  }
  std::sort(out.kept.begin(), out.kept.end());
  return out;
}

// Adds the history records at or below `upto` to `h`, as a store whose compaction to `compact`
// is finished holds them: the hash does not depend on the compactor's progress.
Status HashHistory(const StoreReader& reader, Revision compact, std::int64_t upto, Fnv1a64* h) {
  Result<KeptRecords> kept = FindKeptRecords(reader, compact);
  if (!kept.ok()) return kept.status();
  BoundedIterator it = reader.NewIterator(TableBounds(kRevisionTable));
  RevisionPair pair;
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    if (!ParseRevisionKey(it.key(), &pair)) return Status::Corruption("malformed revision key");
    if (pair.main > upto) break;
    if (!kept->Hashed(pair, compact.value())) continue;
    h->AddField(it.key());
    h->AddField(it.value());
  }
  return it.status();
}

LeaseInfo ToLeaseInfo(const v1::StoredLease& l) {
  return LeaseInfo{LeaseId(l.id()), l.ttl_ms(), l.deadline_cluster_ms()};
}

}  // namespace

Result<pb::RangeResponse> KvStore::Range(const pb::RangeRequest& request) const {
  EPOCH_RETURN_IF_ERROR(ValidateRange(request));
  std::unique_ptr<ReadState> rs = AcquireRead();
  return ExecuteRange(rs->context(), request);
}

Result<pb::TxnResponse> KvStore::ReadOnlyTxn(const pb::TxnRequest& request) const {
  EPOCH_RETURN_IF_ERROR(ValidateTxn(request, options_.limits));
  if (!IsReadOnlyTxn(request)) {
    return Status::InvalidArgument("txn with writes must go through the log");
  }
  std::unique_ptr<ReadState> rs = AcquireRead();
  KvApplier applier(rs->context(), nullptr);
  return applier.Txn(request);
}

Status KvStore::PrecheckTxnReads(const pb::TxnRequest& request, TxnReadBound bound) const {
  std::unique_ptr<ReadState> rs = AcquireRead();
  Status s = server::PrecheckTxnReads(rs->context(), request, bound);
  if (s.Is(ErrorId::kTxnReadTooLarge)) txn_reads_refused_early_.fetch_add(1);
  return s;
}

Result<EventBatch> KvStore::ReadEvents(Revision start, std::size_t max_events,
                                       bool with_prev_kv) const {
  std::unique_ptr<ReadState> rs = AcquireRead();
  const Meta& meta = rs->meta();
  if (start < meta.compact_revision) return etcd_errors::kCompacted.ToStatus();
  if (start < Revision(1)) start = Revision(1);

  EventBatch out;
  out.current = meta.revision;
  out.next = meta.revision.Next();
  BoundedIterator it = rs->reader().NewIterator(TableBounds(kRevisionTable));
  RevisionPair pair;
  for (it.Seek(RevisionKey({start.value(), 0})); it.Valid(); it.Next()) {
    if (!ParseRevisionKey(it.key(), &pair)) return Status::Corruption("malformed revision key");
    const Revision rev(pair.main);
    // Stop between revisions only: a revision's events are never split across batches.
    if (out.events.size() >= max_events && (out.revisions.empty() || rev != out.revisions.back())) {
      out.next = rev;
      break;
    }
    v1::StoredEvent record;
    EPOCH_RETURN_IF_ERROR(ParseStoredEvent(it.value(), &record));
    mvccpb::Event& ev = out.events.emplace_back();
    ev.set_type(record.type());
    *ev.mutable_kv() = std::move(*record.mutable_kv());
    out.revisions.push_back(rev);
    if (with_prev_kv) {
      Result<std::optional<mvccpb::KeyValue>> prev =
          ReadKeyAt(rs->reader(), ev.kv().key(), Revision(pair.main - 1));
      if (!prev.ok()) return prev.status();
      if (prev->has_value()) *ev.mutable_prev_kv() = std::move(**prev);
    }
  }
  EPOCH_RETURN_IF_ERROR(it.status());
  return out;
}

Result<KvHash> KvStore::HashKV(Revision revision) const {
  std::unique_ptr<ReadState> rs = AcquireRead();
  const Meta& meta = rs->meta();
  Result<Revision> rev =
      ResolveReadRevision(revision.value(), meta.revision, meta.compact_revision);
  if (!rev.ok()) return rev.status();
  Fnv1a64 h;
  EPOCH_RETURN_IF_ERROR(HashHistory(rs->reader(), meta.compact_revision, rev->value(), &h));
  const std::uint64_t v = h.value();
  return KvHash{static_cast<std::uint32_t>(v ^ (v >> 32)), meta.compact_revision, *rev};
}

Result<std::uint64_t> KvStore::StateHash() const {
  std::unique_ptr<ReadState> rs = AcquireRead();
  // Not replicated: the applied index, and how far this member's compactor got.
  const std::string applied_key = MetaKey(kMetaAppliedIndex);
  const std::string finished_key = MetaKey(kMetaCompactFinished);
  Fnv1a64 h;
  // In key order across both families (the tables before 'r', the history, the tables after
  // it), so the hash does not depend on which family holds which table.
  const StoredBounds history = TableBounds(kRevisionTable);
  const auto hash_range = [&](const StoredBounds& bounds) {
    BoundedIterator it = rs->reader().NewIterator(bounds);
    for (it.SeekToFirst(); it.Valid(); it.Next()) {
      if (it.key() == applied_key || it.key() == finished_key) continue;
      h.AddField(it.key());
      h.AddField(it.value());
    }
    return it.status();
  };
  EPOCH_RETURN_IF_ERROR(hash_range(StoredBounds{"", history.lower}));
  EPOCH_RETURN_IF_ERROR(HashHistory(rs->reader(), rs->meta().compact_revision,
                                    std::numeric_limits<std::int64_t>::max(), &h));
  EPOCH_RETURN_IF_ERROR(hash_range(StoredBounds{history.upper, ""}));
  return h.value();
}

Result<std::optional<LeaseInfo>> KvStore::GetLease(LeaseId id) const {
  std::unique_ptr<ReadState> rs = AcquireRead();
  Result<std::optional<v1::StoredLease>> l = ReadLease(rs->reader(), id);
  if (!l.ok()) return l.status();
  if (!l->has_value()) return std::optional<LeaseInfo>();
  return std::optional<LeaseInfo>(ToLeaseInfo(**l));
}

Result<std::vector<LeaseInfo>> KvStore::Leases() const {
  std::unique_ptr<ReadState> rs = AcquireRead();
  Result<std::vector<v1::StoredLease>> all = ReadAllLeases(rs->reader());
  if (!all.ok()) return all.status();
  std::vector<LeaseInfo> out;
  for (const v1::StoredLease& l : *all) out.push_back(ToLeaseInfo(l));
  return out;
}

Result<std::vector<std::string>> KvStore::LeaseKeys(LeaseId id) const {
  std::unique_ptr<ReadState> rs = AcquireRead();
  return ReadLeaseKeys(rs->reader(), id);
}

Result<std::vector<LeaseId>> KvStore::ExpiredLeases(std::int64_t now_cluster_ms,
                                                    std::size_t max_count) const {
  Result<std::vector<LeaseInfo>> all = Leases();
  if (!all.ok()) return all.status();
  std::vector<LeaseId> out;
  for (const LeaseInfo& l : *all) {
    if (out.size() >= max_count) break;
    if (l.deadline_cluster_ms <= now_cluster_ms) out.push_back(l.id);
  }
  return out;
}

std::int64_t KvStore::ApproximateSizeBytes() const {
  std::uint64_t sst = 0;
  std::uint64_t mem = 0;
  db_->GetAggregatedIntProperty("rocksdb.total-sst-files-size", &sst);
  db_->GetAggregatedIntProperty("rocksdb.cur-size-all-mem-tables", &mem);
  return static_cast<std::int64_t>(sst + mem);
}

std::int64_t KvStore::ApproximateLiveBytes() const {
  std::uint64_t live = 0;
  std::uint64_t mem = 0;
  db_->GetAggregatedIntProperty("rocksdb.estimate-live-data-size", &live);
  db_->GetAggregatedIntProperty("rocksdb.cur-size-all-mem-tables", &mem);
  return static_cast<std::int64_t>(live + mem);
}

KvStore::IndexSize KvStore::IndexSizeNow() const {
  const KeyIndex::Stats s = index_->stats();
  return IndexSize{s.keys, s.entries, s.live_keys};
}

void KvStore::RenderMetrics(MetricsText& m) const {
  m.Gauge("epoch_kv_revision", "Current store revision.", CurrentRevision().value());
  m.Gauge("epoch_alarms_active", "Active alarms in the cluster (NOSPACE caps the store).",
          Alarms().size());
  const IndexSize index = IndexSizeNow();
  m.Gauge("epoch_kv_index_keys", "Keys in the in-memory per-key history (live or not compacted).",
          index.keys);
  m.Gauge("epoch_kv_index_revisions",
          "Revisions in the in-memory per-key history (compacted ones until the compactor "
          "removes them).",
          index.revisions);
  m.Gauge("epoch_kv_compact_revision", "The compact revision: reads below it fail as compacted.",
          CompactRevision().value());
  m.Gauge("epoch_kv_compact_finished_revision",
          "Every history record that compacting to this revision removes is gone from this "
          "member's store (the background compactor's progress).",
          CompactFinishedRevision().value());
  const std::pair<std::string_view, std::uint64_t> refused[] = {
      {"precheck", txn_reads_refused_early_.load()}, {"apply", txn_reads_refused_.load()}};
  m.LabeledCounter("epoch_txn_read_limit_refused_total",
                   "Txns with writes refused for reading past --max-txn-read-keys: before they "
                   "were proposed (stage=precheck) or applied as failed (stage=apply).",
                   "stage", refused);
}

}  // namespace epoch::server
