// StateMachine: what the Raft driver applies committed entries to.
//
// Who implements it: the KV state machine over RocksDB (KvStateMachine, kv_state_machine.h) in
// production, small fakes in driver tests. Who calls it: RaftDriver, on its own thread, with
// committed entries in log order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "epoch/raft/types.h"
#include "epoch/status.h"
#include "epoch/v1/internal.pb.h"

namespace epoch::server {

// The result of applying one entry, matched to a waiting proposal by request_id (0 for entries
// that carry no client request: the leader's no-op, conf changes).
struct ApplyOutcome {
  LogIndex index;
  std::uint64_t request_id = 0;
  Status status;  // a deterministic apply-time error (the same on every replica)
  v1::InternalResponse response;
};

class StateMachine {
 public:
  virtual ~StateMachine() = default;
  // The last applied log index, durable with the state it describes. Any thread (the driver's
  // lease fast path reads it off the strand).
  [[nodiscard]] virtual LogIndex AppliedIndex() const = 0;
  // Applies `entries` (contiguous, starting at AppliedIndex() + 1): kNormal entries carry a
  // serialized v1::InternalRequest or nothing (a no-op); kConfChange entries only advance the
  // applied index here (the core applies membership). Returns one outcome per entry.
  [[nodiscard]] virtual std::vector<ApplyOutcome> Apply(std::span<const raft::Entry> entries) = 0;
};

}  // namespace epoch::server
