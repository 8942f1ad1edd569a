// Maintenance.Snapshot (etcdctl snapshot save): streams the archive of a fresh checkpoint of the
// state machine as SnapshotResponse{remaining_bytes, blob} messages. The archive ends with the
// SHA-256 trailer etcdctl checks (server/SNAPSHOT.md §1).
//
// Messages of `message_bytes`; a message the client leaves unread for
// SnapshotOptions::archive_write_timeout (--snapshot-send-timeout-ms) cancels the call, counted in
// epoch_snapshot_streams_cut_total.
//
// Who calls it: MaintenanceService::Snapshot. Threading: a gRPC reactor; the checkpoint is taken
// on the snapshot manager's I/O thread, each message's bytes are read on the read pool, the
// write deadline's timer runs on the read pool; never on the driver's strand.
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
                                                                       rpc::CallContext* ctx,
                                                                       std::size_t message_bytes);

}  // namespace epoch::server
