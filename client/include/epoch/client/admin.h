// Admin calls the Client does not wrap: Maintenance (Alarm, Defragment, MoveLeader, Snapshot), the
// Cluster membership changes, Epoch's own lease views (epoch.v1.Lease Status / ClockStatus) and
// cluster settings (epoch.v1.Settings).
// Used by epochctl; built on Client::Channel() so they share the Client's channels.
//
// Endpoint choice: calls start at the Client's preferred endpoint and move to the next one when an
// endpoint cannot be connected within dial_timeout or answers a transient failure (reads only).
// MoveLeader and ClusterTiming go to the leader found through DiscoverLeader. Membership changes
// are sent once:
// a server without them answers UNIMPLEMENTED, reported as FailedPrecondition
// "<what> is not supported by this cluster".
//
// Threading: like Client — any thread; each call is independent.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "epoch/client/client.h"
#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "epoch/v1/epoch.pb.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::client {

Result<etcdserverpb::AlarmResponse> Alarm(Client& client, const etcdserverpb::AlarmRequest& request,
                                          const CallOptions& call = {});

// Maintenance.Defragment of one member (endpoint `endpoint`): it compacts its store whole, so what
// Compact and deletions freed leaves the disk. Defragmentation is per member, as in etcd.
Result<etcdserverpb::DefragmentResponse> Defragment(Client& client, std::size_t endpoint,
                                                    const CallOptions& call = {});

// Transfers leadership to `target_member_id`; the request goes to the current leader.
Result<etcdserverpb::MoveLeaderResponse> MoveLeader(Client& client, std::uint64_t target_member_id,
                                                    const CallOptions& call = {});

Result<etcdserverpb::MemberAddResponse> MemberAdd(Client& client,
                                                  const etcdserverpb::MemberAddRequest& request,
                                                  const CallOptions& call = {});
Result<etcdserverpb::MemberRemoveResponse> MemberRemove(Client& client, std::uint64_t member_id,
                                                        const CallOptions& call = {});
// Replaces the peer URLs of `member_id` with `peer_urls` (the member keeps its id and data).
Result<etcdserverpb::MemberUpdateResponse> MemberUpdate(Client& client, std::uint64_t member_id,
                                                        const std::vector<std::string>& peer_urls,
                                                        const CallOptions& call = {});
Result<etcdserverpb::MemberPromoteResponse> MemberPromote(Client& client, std::uint64_t member_id,
                                                          const CallOptions& call = {});

// Streams Maintenance.Snapshot of the first reachable endpoint into `sink`, piece by piece.
// Returns the number of bytes received. The stream is not restarted elsewhere once a byte
// arrived (a snapshot is one member's image).
using SnapshotSink = std::function<Status(std::string_view piece)>;
Result<std::uint64_t> SaveSnapshot(Client& client, const SnapshotSink& sink,
                                   const CallOptions& call = {});

// epoch.v1.Lease.Status: deadline on the cluster clock, maximum extension, attached keys with
// their fencing tokens. An unknown lease is etcd_errors::kLeaseNotFound.
Result<v1::LeaseStatusResponse> LeaseStatus(Client& client, LeaseId lease, bool keys,
                                            const CallOptions& call = {});
Result<v1::ClockStatusResponse> ClockStatus(Client& client, const CallOptions& call = {});

// epoch.v1.Settings, the cluster-wide timing (docs/timing-and-safety.md §12). ClusterTiming asks
// the leader, whose answer lists the election timeout each voter last reported (how far a change
// has rolled out). SetClusterTiming is sent once; unset fields keep the cluster's values.
Result<v1::TimingResponse> ClusterTiming(Client& client, const CallOptions& call = {});
Result<v1::TimingResponse> SetClusterTiming(Client& client, const v1::SetTimingRequest& request,
                                            const CallOptions& call = {});

}  // namespace epoch::client
