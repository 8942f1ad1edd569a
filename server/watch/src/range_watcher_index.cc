#include "epoch/watch/range_watcher_index.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "epoch/watch/watch_session.h"

namespace epoch::server {
namespace {

// End order: a from-key range ends after every bounded one.
bool EndLess(const RangeWatcherIndex::Group& a, const RangeWatcherIndex::Group& b) {
  if (a.from_key) return false;
  if (b.from_key) return true;
  return a.end < b.end;
}

// Node order: by start, then by end.
bool RangeLess(const RangeWatcherIndex::Group& a, const RangeWatcherIndex::Group& b) {
  if (a.start != b.start) return a.start < b.start;
  return EndLess(a, b);
}

bool SameRange(const RangeWatcherIndex::Group& a, const RangeWatcherIndex::Group& b) {
  return !RangeLess(a, b) && !RangeLess(b, a);
}

RangeWatcherIndex::Group RangeOf(const WatchSpec& spec) {
  RangeWatcherIndex::Group g;
  g.start = spec.key;
  g.from_key = spec.from_key;
  if (!spec.from_key) g.end = spec.range_end;
  return g;
}

std::uint64_t SplitMix64(std::uint64_t* state) {
  std::uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

RangeWatcherIndex::~RangeWatcherIndex() = default;

void RangeWatcherIndex::Update(Node* n) {
  n->max_end = &n->group;
  for (const Node* child : {n->left.get(), n->right.get()}) {
    if (child != nullptr && EndLess(*n->max_end, *child->max_end)) n->max_end = child->max_end;
  }
}

std::unique_ptr<RangeWatcherIndex::Node> RangeWatcherIndex::Merge(std::unique_ptr<Node> a,
                                                                  std::unique_ptr<Node> b) {
  if (a == nullptr) return b;
  if (b == nullptr) return a;
  if (a->priority >= b->priority) {
    a->right = Merge(std::move(a->right), std::move(b));
    Update(a.get());
    return a;
  }
  b->left = Merge(std::move(a), std::move(b->left));
  Update(b.get());
  return b;
}

void RangeWatcherIndex::Split(std::unique_ptr<Node> t, const Group& pivot,
                              std::unique_ptr<Node>* less, std::unique_ptr<Node>* more) {
  if (t == nullptr) {
    less->reset();
    more->reset();
    return;
  }
  if (RangeLess(t->group, pivot)) {
    Split(std::move(t->right), pivot, &t->right, more);
    Update(t.get());
    *less = std::move(t);
  } else {
    Split(std::move(t->left), pivot, less, &t->left);
    Update(t.get());
    *more = std::move(t);
  }
}

void RangeWatcherIndex::Insert(std::unique_ptr<Node>* slot, std::unique_ptr<Node> node) {
  Node* at = slot->get();
  if (at == nullptr) {
    Update(node.get());
    *slot = std::move(node);
    return;
  }
  if (node->priority > at->priority) {
    Split(std::move(*slot), node->group, &node->left, &node->right);
    Update(node.get());
    *slot = std::move(node);
    return;
  }
  // Chosen before the call: `node` is moved from when the parameter is built.
  std::unique_ptr<Node>* child = RangeLess(node->group, at->group) ? &at->left : &at->right;
  Insert(child, std::move(node));
  Update(at);
}

void RangeWatcherIndex::Erase(std::unique_ptr<Node>* slot, const Group& range) {
  Node* at = slot->get();
  assert(at != nullptr);
  if (SameRange(at->group, range)) {
    *slot = Merge(std::move(at->left), std::move(at->right));
    return;
  }
  Erase(RangeLess(range, at->group) ? &at->left : &at->right, range);
  Update(at);
}

RangeWatcherIndex::Group* RangeWatcherIndex::Find(const Group& range) const {
  Node* n = root_.get();
  while (n != nullptr) {
    if (RangeLess(range, n->group)) {
      n = n->left.get();
    } else if (RangeLess(n->group, range)) {
      n = n->right.get();
    } else {
      return &n->group;
    }
  }
  return nullptr;
}

void RangeWatcherIndex::Add(const std::shared_ptr<Watcher>& watcher) {
  Group range = RangeOf(watcher->spec);
  Group* group = Find(range);
  if (group == nullptr) {
    auto node = std::make_unique<Node>();
    node->group = std::move(range);
    node->priority = SplitMix64(&priority_state_);
    group = &node->group;  // nodes never move: the pointer outlives the insert
    Insert(&root_, std::move(node));
    ++ranges_;
  }
  group->watchers.push_back(watcher);
  if (!watcher->spec.no_put) ++group->puts_wanted;
  if (!watcher->spec.no_delete) ++group->deletes_wanted;
  ++watchers_;
}

bool RangeWatcherIndex::Remove(const std::shared_ptr<Watcher>& watcher) {
  const Group range = RangeOf(watcher->spec);
  Group* group = Find(range);
  if (group == nullptr) return false;
  auto& list = group->watchers;
  auto it = std::find(list.begin(), list.end(), watcher);
  if (it == list.end()) return false;
  std::swap(*it, list.back());
  list.pop_back();
  if (!watcher->spec.no_put) --group->puts_wanted;
  if (!watcher->spec.no_delete) --group->deletes_wanted;
  --watchers_;
  if (list.empty()) {
    Erase(&root_, range);
    --ranges_;
  }
  return true;
}

bool RangeWatcherIndex::AnyWants(const mvccpb::Event& event) const {
  bool wanted = false;
  ForEachGroupCovering(event.kv().key(), [&](const Group& g) {
    wanted = g.AnyWants(event.type());
    return !wanted;
  });
  return wanted;
}

}  // namespace epoch::server
