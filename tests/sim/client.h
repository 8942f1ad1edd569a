// SimClient: one sequential client of the simulated cluster. It issues put / get / cas / delete
// on a few keys with values unique per write, chooses the node it believes is the leader
// (following NotLeader hints, picking at random when lost), and records every operation for the
// linearizability checker: call time at send, return time at receipt, kNeverReturned when it
// timed out (the write may or may not have happened). Operations that definitely had no effect
// (NotLeader, refused proposals, reads that found no leader) are left out of the history.
// Serializable reads are counted but not recorded: they may be stale by design.
//
// Who uses it: Simulation (wakes it, routes its requests and the responses).
//
// Threading: single-threaded.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "epoch/lincheck/kv_model.h"
#include "prng.h"
#include "sim_node.h"

namespace epoch::sim {

struct ClientStats {
  std::uint64_t ok = 0;
  std::uint64_t unknown = 0;
  std::uint64_t failed = 0;
  std::uint64_t serializable = 0;
};

class SimClient {
 public:
  // `members`: node indices worth sending to (kept up to date by the simulation).
  SimClient(int index, const std::vector<int>* members, int keys, std::int64_t timeout_us,
            Prng rng);

  // Starts the next operation: the request and the node index to send it to.
  std::pair<ClientRequest, int> Begin(std::uint64_t request_id, std::int64_t now);
  // A response arrived; true if it completed the outstanding operation.
  bool OnResponse(const ClientResponse& response, std::int64_t now);
  // The outstanding operation `request_id` timed out (ignored if it already completed).
  void OnTimeout(std::uint64_t request_id, std::int64_t now);
  // End of run: an operation still outstanding is recorded as never returned.
  void Finish();

  [[nodiscard]] bool busy() const { return outstanding_.has_value(); }
  [[nodiscard]] std::int64_t timeout_us() const { return timeout_us_; }
  [[nodiscard]] std::int64_t ThinkTime() { return rng_.Range(0, 20000); }
  [[nodiscard]] const std::vector<lincheck::KvModel::Op>& history() const { return history_; }
  // request_ids()[i] is the request id of history()[i].
  [[nodiscard]] const std::vector<std::uint64_t>& request_ids() const { return request_ids_; }
  [[nodiscard]] const ClientStats& stats() const { return stats_; }

 private:
  struct Outstanding {
    ClientRequest request;
    std::int64_t call_time;
  };
  lincheck::KvInput NextInput();
  [[nodiscard]] int RandomNode();
  void Record(const Outstanding& op, std::int64_t return_time, const lincheck::KvOutput& out);

  int index_;
  const std::vector<int>* members_;
  int keys_;
  std::int64_t timeout_us_;
  Prng rng_;
  int target_;  // node index believed to be the leader
  std::uint64_t writes_ = 0;
  std::map<std::string, std::optional<std::string>> last_seen_;  // key -> last value observed
  std::optional<Outstanding> outstanding_;
  std::vector<lincheck::KvModel::Op> history_;
  std::vector<std::uint64_t> request_ids_;
  ClientStats stats_;
};

}  // namespace epoch::sim
