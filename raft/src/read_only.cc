#include "read_only.h"

#include <algorithm>

namespace epoch::raft {

std::uint64_t HeartbeatRounds::Start(std::int64_t now_ticks) {
  ++last_;
  sent_.emplace_back(last_, now_ticks);
  if (sent_.size() > kMaxRemembered) sent_.pop_front();
  return last_;
}

std::optional<std::int64_t> HeartbeatRounds::SentTick(std::uint64_t round) const {
  if (sent_.empty() || round < sent_.front().first || round > last_) return std::nullopt;
  // Rounds are consecutive from sent_.front().first.
  return sent_[round - sent_.front().first].second;
}

void HeartbeatRounds::ForgetBefore(std::uint64_t round) {
  while (!sent_.empty() && sent_.front().first < round) sent_.pop_front();
}

void HeartbeatRounds::Reset() {
  last_ = 0;
  sent_.clear();
}

std::vector<PendingRead> ReadOnly::Release(std::uint64_t acked_round) {
  std::vector<PendingRead> out;
  while (!pending_.empty() && pending_.front().round <= acked_round) {
    out.push_back(pending_.front());
    pending_.pop_front();
  }
  return out;
}

bool ReadOnly::HasUnsent(std::uint64_t last_sent_round) const {
  return !pending_.empty() && pending_.back().round > last_sent_round;
}

std::vector<std::pair<std::uint64_t, NodeId>> ReadOnly::TakeWaitingCommit() {
  std::vector<std::pair<std::uint64_t, NodeId>> out;
  out.swap(waiting_commit_);
  return out;
}

void ReadOnly::Clear() {
  pending_.clear();
  waiting_commit_.clear();
}

void WindowedMax::Roll(std::int64_t now_ticks) {
  if (now_ticks < window_start_ + window_) return;
  previous_ = now_ticks < window_start_ + 2 * window_ ? current_ : 0;
  current_ = 0;
  window_start_ = now_ticks - (now_ticks - window_start_) % window_;
}

void WindowedMax::Observe(std::int64_t value, std::int64_t now_ticks) {
  Roll(now_ticks);
  current_ = std::max(current_, value);
}

std::int64_t WindowedMax::Get(std::int64_t now_ticks) const {
  if (now_ticks >= window_start_ + 2 * window_) return 0;
  if (now_ticks >= window_start_ + window_) return current_;
  return std::max(current_, previous_);
}

}  // namespace epoch::raft
