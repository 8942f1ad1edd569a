#include "epoch/stream_slots.h"

#include <utility>

namespace epoch {

std::string StreamSlots::AddressOf(std::string_view peer) {
  if (peer.starts_with("unix:")) return std::string(peer);
  const std::size_t colon = peer.find(':');
  std::string_view rest = colon == std::string_view::npos ? peer : peer.substr(colon + 1);
  if (rest.starts_with('[')) {  // ipv6:[::1]:5000
    const std::size_t close = rest.find(']');
    return std::string(close == std::string_view::npos ? rest : rest.substr(0, close + 1));
  }
  const std::size_t port = rest.rfind(':');
  return std::string(port == std::string_view::npos ? rest : rest.substr(0, port));
}

std::unique_ptr<StreamSlots::Slot> StreamSlots::Acquire(std::string_view peer, Refusal* why) {
  return AcquireFor(AddressOf(peer), why);
}

std::unique_ptr<StreamSlots::Slot> StreamSlots::AcquireFor(std::string address, Refusal* why) {
  std::lock_guard lock(mu_);
  if (open_ >= total_max_) {
    ++refused_total_;
    *why = Refusal::kTotal;
    return nullptr;
  }
  std::size_t& mine = by_addr_[address];
  if (mine >= per_address_max_) {
    if (mine == 0) by_addr_.erase(address);
    ++refused_per_address_;
    *why = Refusal::kPerAddress;
    return nullptr;
  }
  ++mine;
  ++open_;
  *why = Refusal::kNone;
  return std::make_unique<Slot>(this, std::move(address));
}

void StreamSlots::Release(const std::string& address) {
  std::lock_guard lock(mu_);
  --open_;
  auto it = by_addr_.find(address);
  if (it != by_addr_.end() && --it->second == 0) by_addr_.erase(it);
}

std::size_t StreamSlots::open() const {
  std::lock_guard lock(mu_);
  return open_;
}

std::uint64_t StreamSlots::refused(Refusal why) const {
  std::lock_guard lock(mu_);
  switch (why) {
    case Refusal::kPerAddress: return refused_per_address_;
    case Refusal::kTotal: return refused_total_;
    case Refusal::kNone: break;
  }
  return 0;
}

void StreamSlots::RenderMetrics(MetricsText& m, const std::string& name,
                                const std::string& what) const {
  std::lock_guard lock(mu_);
  m.Gauge(name, what + " open on this member.", static_cast<double>(open_));
  const std::pair<const char*, std::uint64_t> refused[] = {{"per_address", refused_per_address_},
                                                           {"total", refused_total_}};
  m.LabeledCounter(name + "_refused_total",
                   what + " refused at open (per remote address or member-wide limit).", "reason",
                   refused);
}

}  // namespace epoch
