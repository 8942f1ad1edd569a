// The membership wiring of one node: the member table seeded from --initial-cluster, the
// leader's check of a membership change (the driver's member_change hook), and the peer
// transport and frame gate following the applied configuration.
//
// Threading: PeerMembership::Start runs once on the starting thread before the driver starts;
// Apply then runs on the driver's strand (MessageSender::OnMembership); MarkRemoved and Dialled
// on any thread. All take mu_.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "epoch/node/node_config.h"
#include "epoch/peer/peer_frame_gate.h"
#include "epoch/peer/peer_transport.h"
#include "epoch/raft/node.h"
#include "epoch/state/kv_store.h"
#include "epoch/state/member_table.h"

namespace epoch::server {

// The member table of the initial cluster: every --initial-cluster member as a voter.
MemberTablePtr InitialMemberTableOf(const NodeConfig& config);

// The voters and learners the table holds (the configuration it mirrors).
raft::ConfState ConfStateOf(const v1::StoredMemberTable& table);

// The peers a member hears from and answers, given the applied configuration `conf` and the
// member table: the configuration's members and the table's live members, less the members the
// table records as removed. The configuration lags the table on a member that installed a
// snapshot whose image is newer than its index (SnapshotManager): it replays the entries in
// between, conf changes included, from a leader its configuration may not hold yet. The table's
// live members are in `learners` unless the configuration has them as voters.
raft::ConfState PeersOf(const raft::ConfState& conf, const v1::StoredMemberTable& table);

// The leader's plan for a member change (PlanMemberChange) against the applied table, with the
// members that have published their attributes counted as started.
Result<raft::ConfChange> PlanChange(const NodeConfig& config, const KvStore& store,
                                    const v1::InternalRequest& request,
                                    const raft::NodeStatus& leader);

class PeerMembership {
 public:
  // `on_removed` runs once: on the driver's strand when the member table marks this member
  // removed, or on the thread calling MarkRemoved.
  PeerMembership(const NodeConfig& config, const KvStore& store, PeerTransport& transport,
                 PeerFrameGate& gate, std::function<void()> on_removed)
      : config_(config),
        store_(store),
        transport_(transport),
        gate_(gate),
        on_removed_(std::move(on_removed)) {}

  // After the transport started: dials the initial members at their --initial-cluster (or
  // --peer-dial-override) addresses, then applies the configuration the store's table holds
  // (none yet for a member that joined and waits for its snapshot).
  void Start();
  // The applied configuration is `conf`: the gate admits exactly PeersOf(conf, table); the
  // transport dials each of them at its first peer URL from the member table (the initial
  // members at their dial address unless an update moved them) and drops members that left.
  void Apply(const raft::ConfState& conf);
  // This member learnt from a peer that the cluster removed it (RemovalProbe): `on_removed`
  // runs, as when it applies its removal. Any thread.
  void MarkRemoved();
  // The peers dialled and the address each is dialled at. Any thread.
  [[nodiscard]] std::vector<std::pair<NodeId, HostPort>> Dialled() const;

 private:
  void Dial(NodeId id, const HostPort& address);
  void MarkRemovedLocked();  // mu_ held

  const NodeConfig& config_;
  const KvStore& store_;
  PeerTransport& transport_;
  PeerFrameGate& gate_;
  const std::function<void()> on_removed_;
  mutable std::mutex mu_;
  bool removed_ = false;                // guarded by mu_
  std::map<NodeId, HostPort> dialled_;  // guarded by mu_: the address each peer is dialled at
};

}  // namespace epoch::server
