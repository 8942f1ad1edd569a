#include "client.h"

#include <fmt/format.h>

namespace epoch::sim {

using lincheck::KvInput;
using lincheck::KvOpKind;
using lincheck::KvOutput;

SimClient::SimClient(int index, const std::vector<int>* members, int keys, std::int64_t timeout_us,
                     Prng rng)
    : index_(index),
      members_(members),
      keys_(keys),
      timeout_us_(timeout_us),
      rng_(rng),
      target_(RandomNode()) {}

int SimClient::RandomNode() { return (*members_)[rng_.Below(members_->size())]; }

KvInput SimClient::NextInput() {
  std::string key = fmt::format("k{}", rng_.Below(static_cast<std::uint64_t>(keys_)));
  std::string value = fmt::format("c{}-{}", index_, ++writes_);
  std::uint64_t dice = rng_.Below(100);
  if (dice < 30) return KvInput::Put(key, value);
  if (dice < 75) return KvInput::Get(key);
  if (dice < 95) {
    auto it = last_seen_.find(key);
    std::optional<std::string> expected;
    if (it != last_seen_.end() && !rng_.Chance(0.2)) expected = it->second;
    return KvInput::Cas(key, expected, value);
  }
  return KvInput::Delete(key);
}

std::pair<ClientRequest, int> SimClient::Begin(std::uint64_t request_id, std::int64_t now) {
  ClientRequest request;
  request.request_id = request_id;
  request.client = index_;
  request.input = NextInput();
  request.serializable = request.input.kind == KvOpKind::kGet && rng_.Chance(0.15);
  outstanding_ = Outstanding{request, now};
  return {request, target_};
}

void SimClient::Record(const Outstanding& op, std::int64_t return_time, const KvOutput& out) {
  lincheck::KvModel::Op record;
  record.client_id = static_cast<std::uint64_t>(index_);
  record.call_time = op.call_time;
  record.return_time = return_time;
  record.input = op.request.input;
  record.output = out;
  history_.push_back(std::move(record));
  request_ids_.push_back(op.request.request_id);
}

bool SimClient::OnResponse(const ClientResponse& response, std::int64_t now) {
  if (!outstanding_ || outstanding_->request.request_id != response.request_id) return false;
  Outstanding op = std::move(*outstanding_);
  outstanding_.reset();
  const KvInput& in = op.request.input;
  switch (response.status) {
    case ClientResponse::Status::kNotLeader:
      ++stats_.failed;
      target_ = response.leader_hint.IsZero() ? RandomNode()
                                              : static_cast<int>(response.leader_hint.value() - 1);
      return true;
    case ClientResponse::Status::kFailed:
      ++stats_.failed;
      if (rng_.Chance(0.5)) target_ = RandomNode();
      return true;
    case ClientResponse::Status::kOk: break;
  }
  ++stats_.ok;
  if (op.request.serializable) {
    ++stats_.serializable;  // may be stale by design: not checked
    return true;
  }
  switch (in.kind) {
    case KvOpKind::kGet:
      last_seen_[in.key] =
          response.output.found ? std::optional<std::string>(response.output.value) : std::nullopt;
      break;
    case KvOpKind::kPut: last_seen_[in.key] = in.value; break;
    case KvOpKind::kCas:
      if (response.output.ok.value_or(false)) last_seen_[in.key] = in.value;
      break;
    case KvOpKind::kDelete: last_seen_[in.key] = std::nullopt; break;
  }
  Record(op, now, response.output);
  return true;
}

void SimClient::OnTimeout(std::uint64_t request_id, std::int64_t now) {
  (void)now;
  if (!outstanding_ || outstanding_->request.request_id != request_id) return;
  Outstanding op = std::move(*outstanding_);
  outstanding_.reset();
  target_ = RandomNode();
  if (op.request.input.kind == KvOpKind::kGet) {
    ++stats_.failed;  // a read with no answer had no effect: nothing to check
    return;
  }
  ++stats_.unknown;
  Record(op, lincheck::kNeverReturned, KvOutput::None());
}

void SimClient::Finish() {
  if (outstanding_) OnTimeout(outstanding_->request.request_id, 0);
}

}  // namespace epoch::sim
