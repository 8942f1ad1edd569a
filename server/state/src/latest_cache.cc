#include "latest_cache.h"

namespace epoch::server {

LatestCache::LatestCache(std::size_t max_keys, std::size_t max_key_bytes)
    : max_keys_(max_keys), max_key_bytes_(max_key_bytes) {
  entries_.reserve(max_keys_);  // never rehashed on the applier's thread
}

LatestCache::~LatestCache() = default;

const LatestCache::Entry* LatestCache::Find(std::string_view key) const {
  auto it = entries_.find(key);
  if (it == entries_.end() || !Live(it->second)) return nullptr;
  return &it->second.entry;
}

void LatestCache::Put(std::string_view key, const Entry& entry) {
  entry_wrote_ = true;
  if (auto it = entries_.find(key); it != entries_.end()) {
    Node& node = it->second;
    if (!Live(node)) ++live_;
    node.entry = entry;
    node.generation = generation_;
    Unlink(&*it);
    LinkNewest(&*it);
    return;
  }
  for (int i = 0; i < kMaxEvictionsPerPut && !Fits(key.size()) && oldest_ != nullptr; ++i) {
    Remove(entries_.find(std::string_view(oldest_->first)));
  }
  if (!Fits(key.size())) return;  // left out: absent keys read the table
  auto it = entries_.emplace(std::string(key), Node{entry, generation_}).first;
  key_bytes_ += key.size();
  ++live_;
  LinkNewest(&*it);
}

void LatestCache::Erase(std::string_view key) {
  entry_wrote_ = true;
  if (auto it = entries_.find(key); it != entries_.end()) Remove(it);
}

void LatestCache::Clear() {
  ++generation_;
  live_ = 0;
  entry_wrote_ = false;
}

void LatestCache::Unlink(Item* item) {
  Node& node = item->second;
  (node.older != nullptr ? node.older->second.newer : oldest_) = node.newer;
  (node.newer != nullptr ? node.newer->second.older : newest_) = node.older;
  node.older = nullptr;
  node.newer = nullptr;
}

void LatestCache::LinkNewest(Item* item) {
  item->second.older = newest_;
  (newest_ != nullptr ? newest_->second.newer : oldest_) = item;
  newest_ = item;
}

void LatestCache::Remove(Map::iterator it) {
  if (Live(it->second)) --live_;
  key_bytes_ -= it->first.size();
  Unlink(&*it);
  entries_.erase(it);
}

}  // namespace epoch::server
