#include "epoch/node/cluster_timing_keeper.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <vector>

namespace epoch::server {

namespace {

// One setting that differs: its flag, the recorded value and this member's.
std::string Differs(std::string_view flag, const std::string& recorded, const std::string& mine) {
  return fmt::format("{} {} (the cluster's is {})", flag, mine, recorded);
}

std::string Ms(std::int64_t ms) { return fmt::format("{} ms", ms); }

}  // namespace

v1::TimingSettings TimingSettingsOf(const NodeConfig& config) {
  v1::TimingSettings t;
  const std::int64_t tick = config.tick.count();
  t.set_tick_ms(tick);
  t.set_heartbeat_ms(config.raft.heartbeat_ticks * tick);
  t.set_election_timeout_ms(config.raft.election_timeout_min_ticks * tick);
  t.set_max_clock_drift(config.raft.max_clock_drift);
  return t;
}

raft::Timing RaftTimingOf(const NodeConfig& config, const v1::TimingSettings& settings) {
  raft::Timing t;
  const std::int64_t tick = std::max<std::int64_t>(1, settings.tick_ms());
  t.heartbeat_ticks = settings.heartbeat_ms() / tick;
  t.election_timeout_min_ticks = settings.election_timeout_ms() / tick;
  t.election_jitter_ticks = config.raft.election_jitter_ticks;
  t.max_election_timeout_ticks = 4 * t.election_timeout_min_ticks;
  t.max_clock_drift = settings.max_clock_drift();
  return t;
}

Status CheckTimingFor(const NodeConfig& config, const v1::TimingSettings& settings,
                      const v1::StoredClusterTiming* recorded) {
  EPOCH_RETURN_IF_ERROR(ValidateClusterTiming(settings, recorded));
  raft::Config raft = config.raft;
  raft.SetTiming(RaftTimingOf(config, settings));
  return raft.Validate();
}

std::optional<std::string> GivenTimingConflict(const NodeConfig& config,
                                               const v1::TimingSettings& recorded) {
  const v1::TimingSettings mine = TimingSettingsOf(config);
  const NodeConfig::GivenTiming& given = config.given_timing;
  std::vector<std::string> differ;
  if (given.tick && mine.tick_ms() != recorded.tick_ms()) {
    differ.push_back(Differs("--tick-ms", Ms(recorded.tick_ms()), Ms(mine.tick_ms())));
  }
  if (given.heartbeat && mine.heartbeat_ms() != recorded.heartbeat_ms()) {
    differ.push_back(
        Differs("--heartbeat-interval", Ms(recorded.heartbeat_ms()), Ms(mine.heartbeat_ms())));
  }
  if (given.election_timeout && mine.election_timeout_ms() != recorded.election_timeout_ms()) {
    differ.push_back(Differs("--election-timeout", Ms(recorded.election_timeout_ms()),
                             Ms(mine.election_timeout_ms())));
  }
  if (given.max_clock_drift && mine.max_clock_drift() != recorded.max_clock_drift()) {
    differ.push_back(Differs("--max-clock-drift", fmt::format("{}", recorded.max_clock_drift()),
                             fmt::format("{}", mine.max_clock_drift())));
  }
  if (differ.empty()) return std::nullopt;
  return fmt::format(
      "this member's timing differs from the cluster's: {}. Every member runs the cluster's "
      "timing (the leader lease depends on it): start with the cluster's values or without these "
      "flags, and change the cluster's with `epochctl cluster timing set`",
      fmt::join(differ, "; "));
}

std::optional<std::string> FirstRecordConflict(const NodeConfig& config,
                                               const v1::StoredClusterTiming& recorded) {
  // A change (it has a previous setting): this member's store was behind when it started, and
  // the cluster changed its timing since; the member adopts it like any change.
  if (recorded.has_previous()) return std::nullopt;
  return GivenTimingConflict(config, recorded.current());
}

Result<std::optional<std::string>> BootTiming(NodeConfig* config,
                                              const v1::StoredClusterTiming* recorded) {
  if (recorded == nullptr) return std::optional<std::string>();
  if (std::optional<std::string> conflict = GivenTimingConflict(*config, recorded->current())) {
    return Status::InvalidArgument(*conflict);
  }
  const v1::TimingSettings mine = TimingSettingsOf(*config);
  std::optional<std::string> notice;
  if (!SameTiming(mine, recorded->current())) {
    notice =
        fmt::format("adopting the cluster's timing ({}) in place of this member's defaults ({})",
                    DescribeTiming(recorded->current()), DescribeTiming(mine));
  }
  config->tick = std::chrono::milliseconds(recorded->current().tick_ms());
  config->raft.SetTiming(RaftTimingOf(*config, recorded->current()));
  // Soon after a lower election timeout was applied, this member may have answered the leader
  // with the higher one just before it stopped: withhold its vote for that long at start.
  if (recorded->has_previous() &&
      recorded->previous().election_timeout_ms() > recorded->current().election_timeout_ms()) {
    config->raft.boot_withhold_ticks =
        recorded->previous().election_timeout_ms() / recorded->current().tick_ms();
  }
  EPOCH_RETURN_IF_ERROR(config->raft.Validate().Annotate("the cluster's recorded timing"));
  return notice;
}

LoggedTiming ScanLoggedTiming(const raft::LogReader& log, LogIndex applied,
                              ClusterTimingPtr recorded) {
  LoggedTiming out{std::move(recorded)};
  LogIndex next = std::max(applied.Next(), log.FirstIndex());
  const LogIndex end = log.LastIndex().Next();
  while (next < end) {
    const std::vector<raft::Entry> entries = log.Entries(next, end, 4U << 20);
    for (const raft::Entry& e : entries) {
      if (e.type != raft::EntryType::kNormal || e.data.empty()) continue;
      v1::InternalRequest request;
      if (!request.ParseFromString(e.data) || !request.has_cluster_timing()) continue;
      const v1::SetClusterTiming& change = request.cluster_timing();
      out.longest_election_timeout_ms =
          std::max(out.longest_election_timeout_ms, change.timing().election_timeout_ms());
      if (!ValidateClusterTiming(change.timing(), out.latest.get()).ok()) continue;
      bool changed = false;
      out.latest = WithClusterTiming(out.latest, change, e.index, &changed);
    }
    next = entries.back().index.Next();
  }
  return out;
}

ClusterTimingKeeper::ClusterTimingKeeper(NodeContext& node, ClusterTimingPtr booted, Hooks hooks,
                                         std::chrono::milliseconds period)
    : node_(node),
      hooks_(std::move(hooks)),
      seen_(std::move(booted)),
      checks_(node.read_pool().get_executor(), period, [this] {
        Check();
        return true;
      }) {}

ClusterTimingKeeper::~ClusterTimingKeeper() { Stop(); }

void ClusterTimingKeeper::Start() { checks_.Start(); }

void ClusterTimingKeeper::Stop() { checks_.Stop(); }

void ClusterTimingKeeper::Check() {
  ClusterTimingPtr recorded = node_.store().ClusterTiming();
  if (recorded == nullptr) {
    ProposeOwn();
    return;
  }
  if (recorded == seen_ || (seen_ != nullptr && seen_->index() == recorded->index())) return;
  const bool first = seen_ == nullptr;
  seen_ = recorded;
  if (first) {
    if (std::optional<std::string> conflict = FirstRecordConflict(node_.config(), *recorded)) {
      hooks_.refuse(*conflict);
      return;
    }
  }
  spdlog::info("name={} adopting the cluster's timing recorded at index {}: {}",
               node_.config().name, recorded->index(), DescribeTiming(recorded->current()));
  hooks_.adopt(RaftTimingOf(node_.config(), recorded->current()));
}

void ClusterTimingKeeper::ProposeOwn() {
  // Only the leader records, and only a timing most voters run: each voter's answers carry its
  // election timeout (raft::Message::floor). A leader whose own is not the most common hands
  // leadership to a voter whose is, so that the odd member is the one that stops.
  const DriverStatus s = node_.driver().status();
  if (s.role != raft::Role::kLeader || proposing_.load()) return;
  const std::int64_t own = s.timing.election_timeout_min_ticks;
  std::map<std::int64_t, std::vector<NodeId>> by_floor;
  std::size_t answered = 0;
  for (const auto& [id, floor] : s.voter_floors) {
    if (floor == 0) continue;  // not answered in this term (yet)
    by_floor[floor].push_back(id);
    ++answered;
  }
  if (answered <= s.voter_floors.size() / 2) return;  // wait for a quorum's answers
  const auto most = std::max_element(
      by_floor.begin(), by_floor.end(),
      [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  if (most == by_floor.end()) return;
  if (most->first != own && most->second.size() > by_floor[own].size()) {
    spdlog::warn(
        "name={} runs a {} ms election timeout where most voters run {} ms: handing "
        "leadership to {:x} to record the cluster timing",
        node_.config().name, own * node_.config().tick.count(),
        most->first * node_.config().tick.count(), most->second.front().value());
    node_.driver().TransferLeadership(most->second.front(), [](const Status&) {});
    return;
  }
  proposing_.store(true);
  v1::InternalRequest request;
  v1::SetClusterTiming* set = request.mutable_cluster_timing();
  *set->mutable_timing() = TimingSettingsOf(node_.config());
  set->set_if_unset(true);
  node_.Write(std::move(request), std::chrono::system_clock::now() + std::chrono::seconds(5),
              [this](const Status& status, const v1::InternalResponse&) {
                if (!status.ok()) {
                  spdlog::debug("name={} recording the cluster timing: {}", node_.config().name,
                                status.ToString());
                }
                proposing_.store(false);
              });
}

}  // namespace epoch::server
