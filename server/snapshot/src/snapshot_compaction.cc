#include "epoch/snapshot/snapshot_compaction.h"

#include <algorithm>

namespace epoch::server {

std::optional<LogIndex> CompactionTarget(const CompactionOptions& options,
                                         const CompactionInput& input) {
  if (!options.enabled || input.applied <= input.snapshot_index) return std::nullopt;
  const std::uint64_t past = input.applied - input.snapshot_index;
  const bool by_entries = past >= options.trigger_entries;
  const bool by_bytes = options.trigger_bytes > 0 && input.bytes_since >= options.trigger_bytes;
  if (!by_entries && !by_bytes) return std::nullopt;
  // Keep a tail for slightly lagging followers, but never more than half of what is eligible:
  // a byte-triggered compaction of a few huge entries must still free something.
  const std::uint64_t keep = std::min(options.keep_entries, past / 2);
  const LogIndex target = input.applied - keep;
  if (target <= input.snapshot_index) return std::nullopt;
  // The snapshot meta carries the membership as of `target`; the driver knows only the current
  // one, which equals it only if no change was applied after `target`.
  if (input.last_conf_change > target) return std::nullopt;
  return target;
}

}  // namespace epoch::server
