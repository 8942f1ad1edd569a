// Jobs as stored in Epoch, and the vocabulary the job runner shares with its collaborators.
//
// A job is a key under `<prefix>jobs/<id>` whose value starts with one line naming its stages:
//
//   stages=reserve,charge,ship\n<free payload bytes>
//
// The whole value is the job's payload: it is hashed, with the job ID and the stage number, into
// the stage's idempotency key. client/README.md ("Jobs: key layout") documents every key.
//
// Threading: values and pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/status.h"
#include "epoch/strong_int.h"

namespace epoch::client {

class Mutex;

struct JobSpec {
  std::string id;
  std::string payload;              // the stored value, verbatim
  std::vector<std::string> stages;  // stage names in order; stage numbers are 1-based
};

// Parses a stored job value. InvalidArgument when the first line is not `stages=a[,b...]`, a
// stage name is empty, or there are more than kMaxStages stages.
inline constexpr std::size_t kMaxStages = 64;
Result<JobSpec> ParseJob(std::string id, std::string_view value);
// The value ParseJob accepts: "stages=" + names joined by ',' + "\n" + body.
std::string EncodeJob(const std::vector<std::string>& stages, std::string_view body);

// The idempotency key of one stage: 16 hex digits of FNV-1a 64 over id, payload and stage number
// (NUL-separated). The same job and stage always give the same key, on every worker.
std::string IdempotencyKey(const JobSpec& job, std::int64_t stage);

// The Epoch keys of a job queue rooted at `prefix` (e.g. "epoch-jobs/").
struct JobKeys {
  std::string prefix;

  [[nodiscard]] std::string Jobs() const { return prefix + "jobs/"; }
  [[nodiscard]] std::string Job(std::string_view id) const { return Jobs() + std::string(id); }
  // The Mutex name; its queue keys are LockName(id) + "/" + hex(lease).
  [[nodiscard]] std::string LockName(std::string_view id) const {
    return prefix + "lock/" + std::string(id);
  }
  [[nodiscard]] std::string Epochs() const { return prefix + "epoch/"; }
  [[nodiscard]] std::string Epoch(std::string_view id) const { return Epochs() + std::string(id); }
  [[nodiscard]] std::string Dlq() const { return prefix + "dlq/"; }
  [[nodiscard]] std::string DlqJob(std::string_view id) const { return Dlq() + std::string(id); }
  [[nodiscard]] std::string Done() const { return prefix + "done/"; }
  [[nodiscard]] std::string DoneJob(std::string_view id) const { return Done() + std::string(id); }
};

// The value of an epoch key: "epoch=<holders so far> token=<token of the latest holder>".
struct EpochRecord {
  std::int64_t epoch = 0;  // 1 = the first holder; epoch changes = epoch - 1
  FencingToken token{0};
};
std::string EncodeEpochRecord(const EpochRecord& record);
Result<EpochRecord> ParseEpochRecord(std::string_view value);

// A job held by this worker.
struct JobLease {
  std::string job_id;
  FencingToken token{0};        // the lock key's create_revision
  std::int64_t epoch = 0;       // holders of this job so far, this one included
  bool dead_lettered = false;   // this acquisition moved the job to the dead-letter prefix
  std::shared_ptr<Mutex> lock;  // the lock behind the lease (null in tests with fakes)
};

// What the runner needs from a worker's Session (session.h). SessionRef adapts a real one;
// tests use fakes.
class WorkerSession {
 public:
  virtual ~WorkerSession() = default;
  [[nodiscard]] virtual LeaseId lease() const = 0;
  // Healthy: may start new work (a new stage).
  [[nodiscard]] virtual bool CanTakeNewWork() const = 0;
  // Requested when the session is lost: every call bound to it is cancelled.
  [[nodiscard]] virtual std::stop_token stop_token() const = 0;
};

}  // namespace epoch::client
