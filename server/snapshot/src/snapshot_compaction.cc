#include "epoch/snapshot/snapshot_compaction.h"

#include <algorithm>

namespace epoch::server {

std::optional<LogIndex> CompactionTarget(const CompactionOptions& options,
                                         const CompactionInput& input) {
  if (!options.enabled || input.applied <= input.snapshot_index) return std::nullopt;
  const std::uint64_t past = input.applied - input.snapshot_index;
  // The tail kept for lagging followers counts toward `past`: with a small trigger a compaction
  // is due only once the full tail and half a trigger's worth of entries follow the snapshot.
  // (Keeping just half of a small trigger's entries starves a member catching up under load: each
  // snapshot it installs is older than the log's first entry by the time it asks for the rest.)
  const bool by_entries =
      past >= options.trigger_entries && past >= options.keep_entries + options.trigger_entries / 2;
  const bool by_bytes = options.trigger_bytes > 0 && input.bytes_since >= options.trigger_bytes;
  if (!by_entries && !by_bytes) return std::nullopt;
  // A byte-triggered compaction of a few huge entries must still free something: it keeps at
  // most half of what is eligible.
  const std::uint64_t keep =
      by_entries ? options.keep_entries : std::min(options.keep_entries, past / 2);
  const LogIndex target = input.applied - keep;
  if (target <= input.snapshot_index) return std::nullopt;
  // The snapshot meta carries the membership as of `target`; the driver knows only the current
  // one, which equals it only if no change was applied after `target`.
  if (input.last_conf_change > target) return std::nullopt;
  return target;
}

}  // namespace epoch::server
