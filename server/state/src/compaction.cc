#include "compaction.h"

#include <vector>

#include "key_encoding.h"

namespace epoch::server {

Result<CompactionStats> CompactHistory(KeyIndex* index, const StoreFamilies& families,
                                       rocksdb::WriteBatchWithIndex* batch, Revision compact_to) {
  const std::vector<RevisionPair> remove = index->CompactionPlan(compact_to);
  for (const RevisionPair& rev : remove) {
    EPOCH_RETURN_IF_ERROR(FromRocks(batch->Delete(families.history, RevisionKey(rev)), "compact"));
  }
  index->StageCompaction(compact_to);
  return CompactionStats{static_cast<std::int64_t>(remove.size())};
}

}  // namespace epoch::server
