#include "epoch/client/fencing.h"

#include <fmt/format.h>

#include <cassert>

namespace epoch::client {

std::string StaleFencingToken::ToString() const {
  const char* why = reason == Reason::kNewerToken ? "a newer holder committed"
                                                  : "stage not after the committed one";
  return fmt::format(
      "stale fencing token for job '{}': attempted (token {}, stage {}), row holds (token {}, "
      "stage {}): {}",
      job_id, attempted_token, attempted_stage, current_token, current_stage, why);
}

FencedWriteResult FencedWriteResult::Error(Status status) {
  assert(!status.ok());
  return FencedWriteResult(std::move(status));
}

const StaleFencingToken& FencedWriteResult::stale_token() const {
  assert(stale());
  return std::get<StaleFencingToken>(outcome_);
}

const Status& FencedWriteResult::status() const {
  assert(error());
  return std::get<Status>(outcome_);
}

std::string FencedWriteResult::ToString() const {
  if (applied()) return "applied";
  if (stale()) return stale_token().ToString();
  return status().ToString();
}

StaleFencingToken ClassifyRejection(const StageWrite& write, FencingToken current_token,
                                    std::int64_t current_stage) {
  StaleFencingToken stale;
  stale.job_id = write.job_id;
  stale.attempted_token = write.token;
  stale.attempted_stage = write.stage;
  stale.current_token = current_token;
  stale.current_stage = current_stage;
  stale.reason = current_token > write.token ? StaleFencingToken::Reason::kNewerToken
                                             : StaleFencingToken::Reason::kStageNotAdvanced;
  return stale;
}

}  // namespace epoch::client
