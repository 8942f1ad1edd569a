// MemberPublisher: proposes this member's client URLs (published_members.h) until the applied
// state holds them — once per start, and again only if they changed since the last publication
// (a member restarted with other --advertise-client-urls). Like etcd's publish, it keeps trying
// every `retry` while there is no leader.
//
// Threading: thread-safe; runs on the node's read pool. Stop() before the pool is joined.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "epoch/node/node_context.h"
#include "epoch/node/periodic_task.h"

namespace epoch::server {

class MemberPublisher {
 public:
  MemberPublisher(NodeContext& node, std::vector<std::string> client_urls,
                  std::chrono::milliseconds retry = std::chrono::milliseconds(200));
  ~MemberPublisher();  // calls Stop()
  MemberPublisher(const MemberPublisher&) = delete;
  MemberPublisher& operator=(const MemberPublisher&) = delete;

  void Start();
  void Stop();  // idempotent

  // Whether the applied state holds this member's current client URLs.
  [[nodiscard]] bool Published() const;

 private:
  void Attempt();

  NodeContext& node_;
  const std::vector<std::string> client_urls_;
  std::atomic<bool> proposing_{false};
  PeriodicTask attempts_;  // last: stopped before the rest is destroyed
};

}  // namespace epoch::server
