// Maintenance.Snapshot (etcdctl snapshot save): streams the archive of a fresh checkpoint of the
// state machine as SnapshotResponse{remaining_bytes, blob} messages. The archive ends with the
// SHA-256 trailer etcdctl checks (server/SNAPSHOT.md §1).
//
// Who calls it: MaintenanceService::Snapshot. Threading: a gRPC callback reactor; the checkpoint
// is taken on the driver's strand, each message's bytes are read on the thread that completed
// the previous write (gRPC's callback threads or the read pool), never on the strand.
#pragma once

#include <grpcpp/grpcpp.h>

#include "epoch/node/node_context.h"
#include "epoch/rpc/async_rpc.h"
#include "epoch/snapshot/snapshot_manager.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::server {

// Starts the stream; the reactor deletes itself when the RPC is done.
rpc::WriteReactor<etcdserverpb::SnapshotResponse>* StartSnapshotStream(NodeContext& node,
                                                                       SnapshotManager& snapshots,
                                                                       std::size_t message_bytes);

}  // namespace epoch::server
