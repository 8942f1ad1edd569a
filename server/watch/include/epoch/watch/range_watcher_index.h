// RangeWatcherIndex: WatchHub's range and from-key watchers, found by key in time proportional to
// the distinct ranges that contain the key (plus the tree's depth), not to the number of range
// watchers. The approach is etcd's (mvcc/watcher_group.go keeps range watchers in pkg/adt's
// interval tree); the code is ours.
//
//   - Watchers with the same range (key, range_end, from_key) share one Group: 10k clients on one
//     prefix are one range to test, and the group's filter counts say at once whether any of them
//     takes a PUT or a DELETE.
//   - Groups are the nodes of a treap ordered by (start, end) and augmented with the group of the
//     largest end in each subtree (a from-key range ends at +inf, as etcd's "\0" end). A lookup
//     skips every subtree whose largest end is <= the key, and everything right of a node whose
//     start is > the key.
//
// Invariants: no Group is empty; no two nodes hold the same range; a node's priority is >= its
// children's (heap); keys of the left subtree < node < right subtree; `max_end` is the group of
// the largest end in the node's subtree.
//
// Threading: none of its own; WatchHub uses it under the hub lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mvccpb/kv.pb.h"

namespace epoch::server {

struct Watcher;

class RangeWatcherIndex {
 public:
  // The watchers of one range, in the order they were added (a removal moves the last one into
  // the gap; delivery order across watchers is not part of the contract).
  struct Group {
    std::string start;
    std::string end;  // exclusive; unused when from_key
    bool from_key = false;
    std::vector<std::shared_ptr<Watcher>> watchers;
    std::size_t puts_wanted = 0;     // watchers without the NOPUT filter
    std::size_t deletes_wanted = 0;  // watchers without the NODELETE filter

    [[nodiscard]] bool Covers(std::string_view key) const {
      return std::string_view(start) <= key && EndsAfter(key);
    }
    [[nodiscard]] bool EndsAfter(std::string_view key) const {
      return from_key || key < std::string_view(end);
    }
    [[nodiscard]] bool AnyWants(mvccpb::Event::EventType type) const {
      return type == mvccpb::Event::PUT ? puts_wanted != 0 : deletes_wanted != 0;
    }
  };

  RangeWatcherIndex() = default;
  ~RangeWatcherIndex();
  RangeWatcherIndex(const RangeWatcherIndex&) = delete;
  RangeWatcherIndex& operator=(const RangeWatcherIndex&) = delete;

  // `watcher` must not be a single-key watcher, nor already in the index.
  void Add(const std::shared_ptr<Watcher>& watcher);
  // True if `watcher` was in the index.
  bool Remove(const std::shared_ptr<Watcher>& watcher);

  [[nodiscard]] std::size_t watchers() const { return watchers_; }
  [[nodiscard]] std::size_t ranges() const { return ranges_; }

  // Calls fn(group) for each group whose range covers `key`, in range order, until fn returns
  // false. Returns false if fn stopped it.
  template <typename Fn>
  bool ForEachGroupCovering(std::string_view key, Fn&& fn) const {
    return Covering(root_.get(), key, fn);
  }
  // Whether some watcher takes `event` (its range covers the key and no filter drops its type).
  [[nodiscard]] bool AnyWants(const mvccpb::Event& event) const;
  // Calls fn(watcher) for every watcher.
  template <typename Fn>
  void ForEachWatcher(Fn&& fn) const {
    auto each_group = [&](const Group& g) {
      for (const auto& w : g.watchers) fn(w);
    };
    ForEachNode(root_.get(), each_group);
  }

 private:
  struct Node {
    Group group;
    std::uint64_t priority = 0;
    std::unique_ptr<Node> left;
    std::unique_ptr<Node> right;
    const Group* max_end = nullptr;  // the group of the largest end in this subtree
  };

  template <typename Fn>
  static bool Covering(const Node* n, std::string_view key, Fn& fn) {
    // Iterates down the right spine so only left subtrees recurse (depth stays the tree's).
    while (n != nullptr && n->max_end->EndsAfter(key)) {
      if (!Covering(n->left.get(), key, fn)) return false;
      if (key < std::string_view(n->group.start)) return true;  // n and its right start later
      if (n->group.EndsAfter(key) && !fn(n->group)) return false;
      n = n->right.get();
    }
    return true;
  }
  template <typename Fn>
  static void ForEachNode(const Node* n, Fn& fn) {
    for (; n != nullptr; n = n->right.get()) {
      ForEachNode(n->left.get(), fn);
      fn(n->group);
    }
  }

  static void Update(Node* n);
  static std::unique_ptr<Node> Merge(std::unique_ptr<Node> a, std::unique_ptr<Node> b);
  // Moves the nodes ordered before `pivot` into *less and the others into *more (the pivot's
  // range is not in `t`).
  static void Split(std::unique_ptr<Node> t, const Group& pivot, std::unique_ptr<Node>* less,
                    std::unique_ptr<Node>* more);
  static void Insert(std::unique_ptr<Node>* slot, std::unique_ptr<Node> node);
  // Removes the node of `range` below *slot (it must be there).
  static void Erase(std::unique_ptr<Node>* slot, const Group& range);
  Group* Find(const Group& range) const;

  std::unique_ptr<Node> root_;
  std::size_t watchers_ = 0;
  std::size_t ranges_ = 0;
  std::uint64_t priority_state_ = 0;  // splitmix64: treap priorities, the same on every run
};

}  // namespace epoch::server
