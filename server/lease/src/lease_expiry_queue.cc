#include "epoch/lease/lease_expiry_queue.h"

namespace epoch::server {

void LeaseExpiryQueue::Schedule(LeaseId id, std::int64_t deadline_ms) {
  auto it = by_id_.find(id.value());
  if (it != by_id_.end() && it->second <= deadline_ms) return;
  Move(id, deadline_ms);
}

void LeaseExpiryQueue::Move(LeaseId id, std::int64_t deadline_ms) {
  auto [it, inserted] = by_id_.try_emplace(id.value(), deadline_ms);
  if (!inserted) {
    by_deadline_.erase({it->second, id});
    it->second = deadline_ms;
  }
  by_deadline_.emplace(deadline_ms, id);
}

LeaseExpiryQueue::Due LeaseExpiryQueue::CollectExpired(std::int64_t now_ms, std::size_t max,
                                                       const Lookup& lookup) {
  Due due;
  std::vector<std::pair<LeaseId, std::optional<std::int64_t>>> moves;  // nullopt: gone
  for (auto it = by_deadline_.begin(); it != by_deadline_.end() && it->first <= now_ms; ++it) {
    if (due.expired.size() >= max) {
      due.more = true;
      break;
    }
    const LeaseId id = it->second;
    Result<std::optional<std::int64_t>> stored = lookup(id);
    ++due.visited;
    if (!stored.ok()) {
      due.status = stored.status();
      break;
    }
    if (!stored->has_value()) {
      moves.emplace_back(id, std::nullopt);
    } else if (**stored > now_ms) {
      moves.emplace_back(id, **stored);  // renewed since its entry was made
    } else {
      due.expired.push_back(id);
    }
  }
  for (const auto& [id, deadline] : moves) {
    if (deadline) {
      Move(id, *deadline);
    } else {
      auto it = by_id_.find(id.value());
      by_deadline_.erase({it->second, id});
      by_id_.erase(it);
    }
  }
  return due;
}

void LeaseExpiryQueue::Clear() {
  by_deadline_.clear();
  by_id_.clear();
}

std::optional<std::int64_t> LeaseExpiryQueue::Earliest() const {
  if (by_deadline_.empty()) return std::nullopt;
  return by_deadline_.begin()->first;
}

}  // namespace epoch::server
