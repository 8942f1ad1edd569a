#include "compaction.h"

#include <string>
#include <vector>

#include "key_encoding.h"

namespace epoch::server {

namespace {

struct HistoryEntry {
  std::string index_key;
  RevisionPair rev;
  bool is_put = false;
};

// Decides, for one key's entries at or below `compact_to` (ascending), which to remove.
void PlanKey(const std::vector<HistoryEntry>& entries, std::int64_t compact_to,
             std::vector<const HistoryEntry*>* remove, CompactionStats* stats) {
  if (entries.empty()) return;
  const HistoryEntry& last = entries.back();
  const bool keep_last = last.is_put || last.rev.main == compact_to;
  const std::size_t keep_from = keep_last ? entries.size() - 1 : entries.size();
  for (std::size_t i = 0; i < keep_from; ++i) remove->push_back(&entries[i]);
  stats->entries_removed += static_cast<std::int64_t>(keep_from);
  stats->entries_kept += static_cast<std::int64_t>(entries.size() - keep_from);
}

}  // namespace

Result<CompactionStats> CompactHistory(const StoreReader& reader,
                                       rocksdb::WriteBatchWithIndex* batch, Revision compact_to) {
  CompactionStats stats;
  // Plan first (the batch must not change under the iterator), then delete.
  std::vector<std::vector<HistoryEntry>> per_key;
  {
    BoundedIterator it = reader.NewIterator(TableBounds(kIndexTable));
    std::string user_key;
    std::string current_key;
    bool have_key = false;
    RevisionPair rev;
    for (it.SeekToFirst(); it.Valid(); it.Next()) {
      if (!ParseIndexKey(it.key(), &user_key, &rev)) {
        return Status::Corruption("malformed index key during compaction");
      }
      if (!have_key || user_key != current_key) {
        per_key.emplace_back();
        current_key = user_key;
        have_key = true;
      }
      if (rev.main > compact_to.value()) continue;
      const bool is_put = !it.value().empty() && it.value()[0] == kIndexPut;
      per_key.back().push_back(HistoryEntry{std::string(it.key()), rev, is_put});
    }
    EPOCH_RETURN_IF_ERROR(it.status());
  }
  std::vector<const HistoryEntry*> remove;
  for (const std::vector<HistoryEntry>& entries : per_key) {
    PlanKey(entries, compact_to.value(), &remove, &stats);
  }
  for (const HistoryEntry* e : remove) {
    EPOCH_RETURN_IF_ERROR(FromRocks(batch->Delete(e->index_key), "compact"));
    EPOCH_RETURN_IF_ERROR(
        FromRocks(batch->Delete(reader.families().history, RevisionKey(e->rev)), "compact"));
  }
  return stats;
}

}  // namespace epoch::server
