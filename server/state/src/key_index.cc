#include "key_index.h"

#include <algorithm>
#include <limits>
#include <mutex>
#include <utility>

#include "epoch/etcd_errors.h"

namespace epoch::server {

namespace {

// The last entry of `h` with main <= rev, or nullptr.
const KeyIndex::Entry* LastAtOrBelow(const KeyIndex::History& h, std::int64_t rev) {
  auto it = std::upper_bound(h.begin(), h.end(), rev,
                             [](std::int64_t r, const KeyIndex::Entry& e) { return r < e.main; });
  return it == h.begin() ? nullptr : &*std::prev(it);
}

}  // namespace

Status KeyIndex::Stage(std::string_view key, RevisionPair rev, bool put) {
  if (rev.sub < 0 || rev.sub > std::numeric_limits<std::uint32_t>::max()) {
    return Status::InvalidArgument("too many writes in one revision: sub-revision " +
                                   std::to_string(rev.sub));
  }
  staged_.push_back(
      Staged{std::string(key), Entry{rev.main, static_cast<std::uint32_t>(rev.sub), put}, false});
  return Status::Ok();
}

void KeyIndex::StageCompaction(Revision compact_to) {
  staged_.push_back(Staged{std::string(), Entry{compact_to.value(), 0, false}, true});
}

void KeyIndex::DiscardStaged() {
  staged_.clear();
  entry_mark_ = 0;
}

void KeyIndex::Publish() {
  if (staged_.empty()) return;
  std::unique_lock lock(mu_);
  for (Staged& s : staged_) {
    if (s.compaction) {
      compact_revision_ = std::max(compact_revision_, Revision(s.entry.main));
      continue;
    }
    auto it = keys_.find(s.key);
    if (it == keys_.end()) it = keys_.emplace(std::move(s.key), History()).first;
    const bool was_live = !it->second.empty() && it->second.back().put;
    it->second.push_back(s.entry);
    ++entries_;
    if (s.entry.put && !was_live) ++live_keys_;
    if (!s.entry.put && was_live) --live_keys_;
  }
  lock.unlock();
  staged_.clear();
  entry_mark_ = 0;
}

void KeyIndex::Replace(Map keys, Revision compact_revision) {
  std::size_t entries = 0;
  std::size_t live_keys = 0;
  for (const auto& [key, h] : keys) {
    entries += h.size();
    if (!h.empty() && h.back().put) ++live_keys;
  }
  std::unique_lock lock(mu_);
  keys_ = std::move(keys);
  compact_revision_ = compact_revision;
  entries_ = entries;
  live_keys_ = live_keys;
  lock.unlock();
  DiscardStaged();
}

std::size_t KeyIndex::RemovedByCompaction(const History& h, std::int64_t compact_to) {
  const Entry* last = LastAtOrBelow(h, compact_to);
  if (last == nullptr) return 0;
  const std::size_t at_or_below = static_cast<std::size_t>(last - h.data()) + 1;
  // The last one stays if it is a put (the key's value as of compact_to) or at compact_to itself
  // (etcd keeps a tombstone at the compact revision, so a watch from there sees the delete).
  const bool keep_last = last->put || last->main == compact_to;
  return keep_last ? at_or_below - 1 : at_or_below;
}

std::optional<std::string> KeyIndex::CompactSome(std::string_view from, Revision compact_to,
                                                 std::size_t max_entries,
                                                 std::vector<RevisionPair>* removed) {
  std::unique_lock lock(mu_);
  std::size_t budget = max_entries;
  std::size_t visits_left = 8 * std::max<std::size_t>(max_entries, 1);
  for (auto it = keys_.lower_bound(from); it != keys_.end();) {
    if (budget == 0 || visits_left-- == 0) return it->first;
    History& h = it->second;
    const std::size_t n = std::min(RemovedByCompaction(h, compact_to.value()), budget);
    for (std::size_t i = 0; i < n; ++i) removed->push_back(h[i].rev());
    h.erase(h.begin(), h.begin() + static_cast<std::ptrdiff_t>(n));
    entries_ -= n;
    budget -= n;
    if (h.empty()) {
      it = keys_.erase(it);  // its last entry was a tombstone below compact_to: not live
      continue;
    }
    // Part of this key's superseded entries removed: continue with it in the next call.
    if (RemovedByCompaction(h, compact_to.value()) > 0) return it->first;
    if (h.capacity() > 2 * h.size() + 8) h.shrink_to_fit();
    ++it;
  }
  return std::nullopt;
}

Status KeyIndex::LiveAt(const KeyRange& range, Revision rev,
                        const std::function<bool(const std::string&, RevisionPair)>& visit) const {
  std::shared_lock lock(mu_);
  if (rev < compact_revision_) return etcd_errors::kCompacted.ToStatus();
  // Keys ascend from the range's start: the first one outside it ends the range.
  for (auto it = keys_.lower_bound(range.key); it != keys_.end() && range.Contains(it->first);
       ++it) {
    const Entry* e = LastAtOrBelow(it->second, rev.value());
    if (e != nullptr && e->put && !visit(it->first, e->rev())) break;
  }
  return Status::Ok();
}

std::optional<KeyIndex::Entry> KeyIndex::LastAt(std::string_view key, Revision rev) const {
  std::shared_lock lock(mu_);
  auto it = keys_.find(key);
  if (it == keys_.end()) return std::nullopt;
  const History& h = it->second;
  const Entry* e = LastAtOrBelow(h, rev.value());
  if (e == nullptr) return std::nullopt;
  if (rev < compact_revision_) {
    // Below the compact revision the compaction keeps only the key's last entry at or below it,
    // and only a put (e.main <= rev < compact revision): anything else is a leftover the
    // compactor has not removed yet, and is answered as if it were gone.
    if (e != LastAtOrBelow(h, compact_revision_.value()) || !e->put) return std::nullopt;
  }
  return *e;
}

Revision KeyIndex::compact_revision() const {
  std::shared_lock lock(mu_);
  return compact_revision_;
}

KeyIndex::Stats KeyIndex::stats() const {
  std::shared_lock lock(mu_);
  return Stats{keys_.size(), entries_, live_keys_};
}

}  // namespace epoch::server
