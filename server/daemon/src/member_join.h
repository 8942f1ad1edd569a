// How a member finds its place in the cluster at start (etcd's --initial-cluster-state):
//
// - `new`, empty data directory: before bootstrapping, the member asks the peers in
//   --initial-cluster (the join handshake, peer_join.h) whether the cluster already knows it as a
//   started member; if one says so, it refuses to start ("member ... has already been
//   bootstrapped": its data directory was wiped, and bootstrapping afresh would forget its vote
//   and the entries it acknowledged). Peers that do not answer (a cluster starting for the first
//   time) do not stop it.
// - `existing`, empty data directory: the member joins a running cluster it was added to
//   (etcdctl member add). It asks the peers in --initial-cluster for the cluster ID, its member
//   ID (the member added with its peer URLs) and the member table, records the two IDs in
//   <data-dir>/member, and starts with an empty log: the leader sends it a snapshot.
// - a data directory with <data-dir>/member: a member that joined, restarting: the IDs come from
//   that file, whatever the flags say.
//
// Threading: called once on the starting thread, before the node is built.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "epoch/node/node_config.h"
#include "epoch/state/kv_store.h"
#include "raftpb/raft.pb.h"

namespace epoch::server {

// <data-dir>/member: "cluster_id <hex>\nmember_id <hex>\n", written once when a member joins.
struct JoinedIdentity {
  std::uint64_t cluster_id = 0;
  NodeId member_id;
};
[[nodiscard]] Result<std::optional<JoinedIdentity>> ReadJoinedIdentity(const std::string& data_dir);
[[nodiscard]] Status WriteJoinedIdentity(const std::string& data_dir, const JoinedIdentity& id);
// This member's peer URL: its --initial-cluster entry, else its peer listener.
[[nodiscard]] std::string OwnPeerUrl(const NodeConfig& config);
// <data-dir>/<name> holding `text`, durably: written to a temporary file, synced, renamed over
// the old one, the directory synced.
[[nodiscard]] Status WriteDataDirFile(const std::string& data_dir, const std::string& name,
                                      std::string_view text);

// Decides and prepares as described above; `fresh` is whether the data directory holds no log.
[[nodiscard]] Status PrepareMembership(NodeConfig* config, bool fresh);

// The answer of a running member to a join request: the live member whose peer URLs the request
// names and the live members, refused when there is none or it has already started.
[[nodiscard]] raftpb::JoinResponse AnswerJoin(const NodeConfig& config, const KvStore& store,
                                              const raftpb::JoinRequest& request);

}  // namespace epoch::server
