#include "latest_cache.h"

namespace epoch::server {

const LatestCache::Entry* LatestCache::Find(std::string_view key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

void LatestCache::Put(std::string_view key, const Entry& entry) {
  entry_wrote_ = true;
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    it->second = entry;
    return;
  }
  if (entries_.size() >= max_keys_ || key_bytes_ + key.size() > max_key_bytes_) {
    // Full: start over rather than track recency on the apply path. Dropping entries is always
    // safe (a miss reads the latest table).
    entries_.clear();
    key_bytes_ = 0;
  }
  entries_.emplace(std::string(key), entry);
  key_bytes_ += key.size();
}

void LatestCache::Erase(std::string_view key) {
  entry_wrote_ = true;
  Drop(key);
}

void LatestCache::Clear() {
  entries_.clear();
  key_bytes_ = 0;
  entry_wrote_ = false;
}

void LatestCache::Drop(std::string_view key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  key_bytes_ -= it->first.size();
  entries_.erase(it);
}

}  // namespace epoch::server
