// KvStateMachine: the StateMachine the driver applies to in production — decodes each committed
// entry's v1::InternalRequest and applies runs of them to the KvStore in one RocksDB write batch.
// Entries without a request (the leader's no-op, conf changes) only advance the applied index. A
// storage failure is fail-stop (the process exits: a replica that cannot apply must not answer).
//
// Threading: the driver's strand only. The applied hooks (Watch, Lock/Election waiters, ...) run
// there too, in the order they were added, and must not block. Add every hook before the driver
// starts: the list is not guarded.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "epoch/replication/state_machine.h"
#include "epoch/state/kv_store.h"

namespace epoch::server {

class KvStateMachine final : public StateMachine {
 public:
  using AppliedHook = std::function<void(LogIndex, const ApplyResult&)>;

  explicit KvStateMachine(KvStore& store) : store_(store) {}
  // Called after each applied entry (one call per entry, in log order) with its result.
  void AddAppliedHook(AppliedHook hook) { on_applied_.push_back(std::move(hook)); }

  [[nodiscard]] LogIndex AppliedIndex() const override { return store_.AppliedIndex(); }
  [[nodiscard]] std::vector<ApplyOutcome> Apply(std::span<const raft::Entry> entries) override;

 private:
  void ApplyRun(std::span<const raft::Entry> entries, std::size_t begin, std::size_t end,
                std::vector<ApplyOutcome>* out);

  KvStore& store_;
  std::vector<AppliedHook> on_applied_;
};

}  // namespace epoch::server
