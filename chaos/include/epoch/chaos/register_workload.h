// RegisterWorkload: clients doing put / get / cas / delete with unique values over many keys,
// recorded as a history for the linearizability checker (tests/lincheck, KvModel) and, with the
// revisions the server returned (header revision; each read kv's create/mod revision and
// version), for the revision checker (tests/lincheck, CheckRevisions). A share of the operations
// are multi-key txns, range deletes and range reads over a few group keys, which only the
// revision checker sees.
//
// Keys are "<prefix>g<generation>-k<index>": `keys` keys per generation, a new generation every
// `key_generation`; group keys are "<prefix>g<generation>-m<0..3>".
//
// Each client thread has its own epoch::client::Client whose preferred endpoint differs (writes
// and linearizable reads reach followers too, which forward them). Linearizable reads are served
// by the leader lease or by ReadIndex, whichever the leader picks (the per-node counters
// epoch_reads_lease_total / epoch_reads_read_index_total say how many of each). Serializable
// reads are recorded apart and checked only for never returning a value nobody wrote.
//
// Outcomes: a write that returns OK is recorded with its return time; a write that fails in any
// way is recorded as never returned (it may or may not have happened). A read that fails is
// dropped (it had no effect).
//
// Threading: Start/Stop/Check from one thread; the client threads run between Start and Stop.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "epoch/lincheck/kv_model.h"
#include "epoch/lincheck/revision_checker.h"
#include "epoch/status.h"

namespace epoch::chaos {

using KvOp = lincheck::Operation<lincheck::KvInput, lincheck::KvOutput>;
using lincheck::RevOp;

struct RegisterOptions {
  std::vector<std::string> endpoints;
  int clients = 4;
  int keys = 16;
  std::string prefix = "/reg/";
  std::chrono::milliseconds op_timeout{1000};
  std::chrono::milliseconds pace{4};                 // pause between one client's operations
  std::chrono::milliseconds pace_after_failure{50};  // ... and after one that failed
  // Keys are rotated: every `key_generation` the clients move to fresh keys, so one key's history
  // (one partition of the linearizability search) stays short however long the round runs. A
  // long partition with many unknown-outcome writes makes the search exponential.
  std::chrono::milliseconds key_generation{2000};
  std::uint64_t seed = 1;
  // Share of operations (percent) on the generation's group keys "<prefix>g<generation>-m0..3":
  // a txn putting two of them, a DeleteRange of the group, a Range of the group. Only the
  // revision checker sees these (the KvModel is per key).
  int group_percent = 10;
};

struct RegisterReport {
  std::uint64_t ok = 0;         // operations with a known outcome
  std::uint64_t unknown = 0;    // writes recorded as never returned (group writes not counted)
  std::uint64_t read_fail = 0;  // failed reads (dropped)
  std::uint64_t serializable = 0;
  lincheck::CheckResult lin;           // verdict of the linearizability check
  lincheck::RevisionCheckResult rev;   // the revision check (serializable reads included)
  std::string serializable_violation;  // empty when every serializable read was plausible
};

class RegisterWorkload {
 public:
  explicit RegisterWorkload(RegisterOptions options) : options_(std::move(options)) {}
  ~RegisterWorkload() { Stop(); }

  void Start();
  void Stop();
  // Operations completed with a known outcome so far (any thread).
  [[nodiscard]] std::uint64_t completed() const { return completed_.load(); }
  // Writes (put, cas, delete) acknowledged so far (any thread).
  [[nodiscard]] std::uint64_t completed_writes() const { return completed_writes_.load(); }
  // Checks the recorded history (after Stop): linearizability (a spent budget is a failure,
  // verdict kUnknown), revisions, and serializable reads.
  [[nodiscard]] RegisterReport Check(std::chrono::milliseconds budget) const;
  // The history, one operation per line, for a failing iteration's evidence.
  [[nodiscard]] std::string Dump() const;

 private:
  struct Recorded {
    std::vector<KvOp> ops;
    std::vector<KvOp> serializable_reads;
    std::vector<RevOp> rev_ops;  // every operation of ops and serializable_reads, with revisions
    std::vector<std::string> written;                    // every value this client tried to write
    std::map<std::size_t, std::string> unknown_reasons;  // index in rev_ops -> the client's error
    std::uint64_t unknown = 0;
    std::uint64_t read_fail = 0;
  };
  void RunClient(int index, Recorded* out);

  RegisterOptions options_;
  std::atomic<bool> stop_{false};
  std::int64_t start_ns_ = 0;  // generation 0 starts here
  std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::uint64_t> completed_writes_{0};
  std::vector<Recorded> recorded_;
  std::vector<std::thread> threads_;
};

// CLOCK_MONOTONIC nanoseconds: the history's time axis.
[[nodiscard]] std::int64_t MonotonicNs();

}  // namespace epoch::chaos
