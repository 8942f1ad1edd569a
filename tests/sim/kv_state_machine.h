// The simulator's replicated state machine: a small KV map with the exact semantics of
// lincheck::KvModel (put / get with etcd-style per-key version / cas / delete), applied from
// committed Raft entries. Commands travel in entry data, encoded by EncodeCommand.
//
// Who uses it: SimNode (one per node incarnation; rebuilt by replaying the log after a crash).
//
// Threading: single-threaded, owned by its SimNode.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "epoch/lincheck/kv_model.h"

namespace epoch::sim {

struct KvCommand {
  std::uint64_t request_id = 0;  // unique per client operation (0 for internal probes)
  lincheck::KvInput input;
};

[[nodiscard]] std::string EncodeCommand(const KvCommand& command);
// std::nullopt for data that is not a command (e.g. the empty no-op entry).
[[nodiscard]] std::optional<KvCommand> DecodeCommand(std::string_view data);

class KvStateMachine {
 public:
  // Applies a write (put, cas, delete) and returns what the client is told.
  lincheck::KvOutput Apply(const lincheck::KvInput& input);
  // Reads the current value (and version) of `key`.
  [[nodiscard]] lincheck::KvOutput Get(const std::string& key) const;
  // Order-independent digest of the whole map (equal states give equal digests).
  [[nodiscard]] std::uint64_t Digest() const;

 private:
  std::map<std::string, lincheck::KvState> data_;  // only existing keys
};

}  // namespace epoch::sim
