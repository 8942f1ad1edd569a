#include "removal_probe.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace epoch::server {

RemovalProbe::RemovalProbe(asio::io_context& timers, asio::thread_pool& pool,
                           RemovalProbeOptions options, RemovalProbeHooks hooks)
    : timer_(timers), pool_(pool), options_(std::move(options)), hooks_(std::move(hooks)) {}

void RemovalProbe::Start() {
  asio::post(timer_.get_executor(), [this] {
    leader_seen_ = std::chrono::steady_clock::now();
    Schedule();
  });
}

void RemovalProbe::Schedule() {
  timer_.expires_after(options_.check_period);
  timer_.async_wait([this](std::error_code ec) {
    if (ec || stopped_ || removed_) return;
    Check();
    Schedule();
  });
}

void RemovalProbe::Check() {
  const auto now = std::chrono::steady_clock::now();
  if (hooks_.leader() != raft::kNoNode) {
    leader_seen_ = now;
    return;
  }
  if (now - leader_seen_ < options_.quiet || probing_.exchange(true)) return;
  asio::post(pool_, [this] {
    Probe();
    probing_ = false;
  });
}

void RemovalProbe::Probe() {
  probes_.fetch_add(1);
  raftpb::JoinRequest request;
  request.set_name(options_.name);
  request.set_member_id(options_.self.value());
  // What each peer said, logged when none says REMOVED: a member that never learns its removal
  // leaves this line as the evidence of why.
  std::string heard;
  for (const auto& [peer, address] : hooks_.peers()) {
    if (stopped_) return;
    Result<raftpb::JoinResponse> answer = hooks_.ask(peer, address, request);
    heard += fmt::format(" {:x}: {};", peer,
                         !answer.ok() ? answer.status().ToString()
                                      : raftpb::JoinResponse::Refusal_Name(answer->refusal()));
    if (!answer.ok() || answer->refusal() != raftpb::JoinResponse::REMOVED) continue;
    if (answer->cluster_id() != options_.cluster_id || answer->member_id() != request.member_id()) {
      spdlog::warn(
          "name={} node={:x} ignoring a removal notice from {:x} for cluster {:x} member "
          "{:x}",
          options_.name, options_.self, peer, answer->cluster_id(), answer->member_id());
      continue;
    }
    spdlog::critical("name={} node={:x} has had no leader for over {} ms and member {:x} says: {}",
                     options_.name, options_.self, options_.quiet.count(), peer, answer->error());
    removed_ = true;
    hooks_.on_removed();
    return;
  }
  spdlog::info("name={} node={:x} has had no leader for over {} ms; no peer says it was removed:{}",
               options_.name, options_.self, options_.quiet.count(),
               heard.empty() ? " no peer to ask" : heard);
}

}  // namespace epoch::server
