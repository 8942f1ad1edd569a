#include "sim_node.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "epoch/raft/conf_change.h"

namespace epoch::sim {

using raft::Ready;
using raft::Role;

SimNode::SimNode(int index, raft::Config config, NodeHost& host, Prng rng)
    : index_(index), config_(std::move(config)), host_(host), rng_(rng) {}

SimNode::~SimNode() = default;

void SimNode::Bootstrap(const std::vector<NodeId>& voters) {
  disk_log_ = raft::MemoryLog::Bootstrapped(voters);
  // The bootstrap snapshot is the same on every initial member: chain value 0 at index 1.
  durable_chain_.Reset(raft::kBootstrapIndex, raft::kBootstrapTerm, 0);
}

void SimNode::Join() {
  disk_log_ = raft::MemoryLog();
  durable_chain_.Reset(LogIndex(0), Term(0), 0);
}

void SimNode::Start() {
  ++incarnation_;
  core_ = std::make_unique<raft::Node>(config_, disk_log_, rng_.Next());
  mirror_ = durable_chain_;
  applied_ = disk_log_.LastSnapshot().index;
  state_ = host_.SnapshotImage(applied_);
  Drive();
}

void SimNode::UpdateTiming(const raft::Timing& timing) {
  raft::Config next = config_;
  next.SetTiming(timing);
  next.boot_withhold_ticks = config_.election_timeout_min_ticks;
  if (!next.Validate().ok()) return;
  if (core_ != nullptr && !core_->UpdateTiming(timing).ok()) return;
  config_ = next;
}

void SimNode::Crash() {
  ++incarnation_;
  core_.reset();
  in_flight_.reset();  // the unsynced buffer is lost
  pending_writes_.clear();
  pending_reads_.clear();
  state_ = KvStateMachine{};
  applied_ = LogIndex(0);
}

NodeView SimNode::View() const {
  NodeView v;
  v.id = config_.id;
  v.durable = &durable_chain_;
  v.up = up();
  if (v.up) {
    v.role = core_->role();
    v.term = core_->term();
    v.lease_valid = core_->LeaseValid();
  }
  return v;
}

void SimNode::Tick() {
  if (!up()) return;
  core_->Tick();
  Drive();
}

void SimNode::Deliver(const raft::Message& message) {
  if (!up()) return;
  core_->Step(message);
  if (message.type == raft::MessageType::kReadIndex && core_->role() == Role::kLeader &&
      core_->LeaseValid()) {
    // A follower's read, confirmed now by our lease (raft ServeRead answers by lease exactly
    // when the lease is valid).
    host_.checker().OnLeaseRead(config_.id, core_->term(), host_.Now());
  }
  Drive();
}

void SimNode::TransferLeadership(NodeId target) {
  if (!up() || core_->role() != Role::kLeader) return;
  core_->TransferLeadership(target);
  Drive();
}

raft::ProposeResult SimNode::ProposeConfChange(const raft::ConfChange& change) {
  if (!up()) return raft::ProposeResult{raft::ProposeError::kNotLeader, {}, {}, {}, {}};
  raft::ProposeResult r = core_->ProposeConfChange(change);
  Drive();
  return r;
}

void SimNode::ReportSnapshot(NodeId peer, bool ok, std::uint64_t incarnation) {
  if (!up() || incarnation != incarnation_) return;
  core_->ReportSnapshot(peer, ok);
  Drive();
}

bool SimNode::ProposeProbe() {
  if (!up() || core_->role() != Role::kLeader) return false;
  KvCommand probe{0, lincheck::KvInput::Put("__probe", "p")};
  raft::ProposeResult r = core_->Propose({EncodeCommand(probe)});
  Drive();
  return r.ok();
}

void SimNode::RespondWrite(std::uint64_t request_id, int client, ClientResponse::Status status,
                           lincheck::KvOutput output) {
  ClientResponse response;
  response.request_id = request_id;
  response.client = client;
  response.status = status;
  response.output = std::move(output);
  if (up()) response.leader_hint = core_->leader();
  host_.Respond(index_, response);
}

void SimNode::HandleClient(const ClientRequest& request) {
  if (!up()) return;
  const std::int64_t now = host_.Now();
  if (request.input.kind == lincheck::KvOpKind::kGet) {
    if (request.serializable) {
      ++stats_.serializable_reads;
      RespondWrite(request.request_id, request.client, ClientResponse::Status::kOk,
                   state_.Get(request.input.key));
      return;
    }
    raft::ReadIndexOutcome outcome = core_->ReadIndex(request.request_id);
    if (outcome == raft::ReadIndexOutcome::kNoLeader) {
      RespondWrite(request.request_id, request.client, ClientResponse::Status::kFailed);
      return;
    }
    if (outcome == raft::ReadIndexOutcome::kLease) {
      host_.checker().OnLeaseRead(config_.id, core_->term(), now);
      if (host_.tracing()) {
        host_.Trace(fmt::format("node {} lease read in term {} (lease until tick {}, now {})",
                                config_.id, core_->term(), core_->lease_expiry_tick(),
                                core_->now_ticks()));
      }
    }
    pending_reads_[request.request_id] = PendingRead{request, std::nullopt, false};
    Drive();
    return;
  }
  if (core_->role() != Role::kLeader) {
    RespondWrite(request.request_id, request.client, ClientResponse::Status::kNotLeader);
    return;
  }
  raft::ProposeResult r =
      core_->Propose({EncodeCommand(KvCommand{request.request_id, request.input})});
  if (!r.ok()) {
    RespondWrite(request.request_id, request.client,
                 r.error == raft::ProposeError::kNotLeader ? ClientResponse::Status::kNotLeader
                                                           : ClientResponse::Status::kFailed);
    return;
  }
  pending_writes_[r.first_index] = PendingWrite{r.term, request};
  Drive();
}

void SimNode::MirrorEntries(const Ready& ready) {
  if (ready.snapshot) {
    // A snapshot covers committed entries only: its chain value is the committed chain's.
    mirror_.Reset(ready.snapshot->index, ready.snapshot->term,
                  host_.checker().CommittedChainAt(ready.snapshot->index));
  }
  if (ready.entries.empty()) return;
  for (const raft::Entry& e : ready.entries) mirror_.Append(e);
  host_.checker().OnAppend(config_.id, mirror_, ready.entries.front().index, host_.Now());
}

// Drives the Ready loop (ready.h): one Ready at a time; a Ready that must be synced completes
// after the disk latency (PersistDone), others complete at once.
void SimNode::Drive() {
  while (up() && !in_flight_ && core_->HasReady()) {
    Ready ready = core_->GetReady();
    ++stats_.readies;
    const std::int64_t now = host_.Now();
    MirrorEntries(ready);
    host_.checker().OnReady(config_.id, core_->role(), core_->term(), mirror_,
                            core_->commit_index(), now);
    for (const raft::Message& m : ready.messages) host_.SendPeer(m);
    for (const raft::ReadState& rs : ready.read_states) {
      auto it = pending_reads_.find(rs.context);
      if (it == pending_reads_.end()) continue;
      it->second.index = rs.index;
      it->second.via_lease = rs.via_lease;
    }
    ServeReads();
    const bool needs_sync = ready.must_sync || !ready.entries.empty() || ready.snapshot;
    if (!needs_sync) {
      Finish(std::move(ready));
      continue;
    }
    // Entries an earlier Ready made durable are applied while this one is written (ready.h).
    for (std::size_t i = 0; i < ready.durable_committed; ++i) Apply(ready.committed_entries[i]);
    ServeReads();
    std::int64_t start = std::max(now, disk.stalled_until_us);
    std::int64_t done =
        start + rng_.Range(disk.latency_min_us, disk.latency_max_us) + disk.slow_extra_us;
    in_flight_ = std::move(ready);
    host_.SchedulePersist(index_, ++persist_token_, done);
  }
}

void SimNode::RecoverDisk() {
  disk.slow_extra_us = 0;
  disk.stalled_until_us = 0;
  if (!up() || !in_flight_) return;
  host_.SchedulePersist(index_, ++persist_token_,
                        host_.Now() + rng_.Range(disk.latency_min_us, disk.latency_max_us));
}

void SimNode::PersistDone(std::uint64_t token) {
  if (token != persist_token_ || !in_flight_) return;
  Ready ready = std::move(*in_flight_);
  in_flight_.reset();
  Finish(std::move(ready));
  Drive();
}

void SimNode::PersistToDisk(const Ready& ready) {
  if (ready.snapshot) {
    // Install the image that came with the InstallSnapshot, then persist the meta.
    state_ = host_.SnapshotImage(ready.snapshot->index);
    applied_ = ready.snapshot->index;
    ++stats_.snapshots_installed;
    disk_log_.ApplySnapshot(*ready.snapshot);
    durable_chain_.Reset(ready.snapshot->index, ready.snapshot->term,
                         host_.checker().CommittedChainAt(ready.snapshot->index));
  }
  if (!ready.entries.empty()) {
    disk_log_.Append(ready.entries);
    for (const raft::Entry& e : ready.entries) durable_chain_.Append(e);
  }
  if (ready.hard_state) disk_log_.SetHardState(*ready.hard_state);
}

void SimNode::Finish(Ready ready) {
  PersistToDisk(ready);
  for (const raft::Message& m : ready.messages_after_persist) host_.SendPeer(m);
  // Apply() skips those applied before the write (durable_committed).
  for (const raft::Entry& e : ready.committed_entries) Apply(e);
  ServeReads();
  core_->Advance(ready);
  MaybeCompact();
}

// Log compaction (raft/DESIGN.md "Compaction"): snapshot the state machine at the applied index
// with the membership as of that index, then discard the log up to it.
void SimNode::MaybeCompact() {
  if (compact_every == 0 || applied_ > disk_log_.LastIndex() || applied_ < disk_log_.FirstIndex() ||
      applied_ - disk_log_.FirstIndex() + 1 < compact_every) {
    return;
  }
  if (core_->applied_index() != applied_) return;  // conf_state() must be as of applied_
  host_.SaveSnapshotImage(applied_, state_);
  disk_log_.Compact(applied_, core_->conf_state());
  ++stats_.compactions;
}

void SimNode::Apply(const raft::Entry& entry) {
  if (entry.index <= applied_) return;  // already in the state machine
  host_.checker().OnApply(config_.id, durable_chain_, entry, host_.Now());
  applied_ = entry.index;
  lincheck::KvOutput out;
  if (entry.type == raft::EntryType::kConfChange) host_.OnConfChangeApplied(entry);
  if (entry.type == raft::EntryType::kNormal) {
    if (std::optional<KvCommand> command = DecodeCommand(entry.data)) {
      out = state_.Apply(command->input);
      ++stats_.writes_applied;
      if (command->request_id == 0) probe_applied_ = true;
      if (command->request_id != 0) host_.OnApplied(command->request_id, out);
    }
  }
  auto it = pending_writes_.find(entry.index);
  if (it == pending_writes_.end()) return;
  PendingWrite pending = std::move(it->second);
  pending_writes_.erase(it);
  if (pending.term == entry.term) {
    RespondWrite(pending.request.request_id, pending.request.client, ClientResponse::Status::kOk,
                 std::move(out));
  } else {
    // Another entry was committed at our index; by log matching ours can be nowhere else.
    RespondWrite(pending.request.request_id, pending.request.client,
                 ClientResponse::Status::kFailed);
  }
}

void SimNode::ServeReads() {
  for (auto it = pending_reads_.begin(); it != pending_reads_.end();) {
    const PendingRead& r = it->second;
    if (!r.index || *r.index > applied_) {
      ++it;
      continue;
    }
    ++(r.via_lease ? stats_.lease_reads : stats_.read_index_reads);
    ClientResponse response;
    response.request_id = r.request.request_id;
    response.client = r.request.client;
    response.output = state_.Get(r.request.input.key);
    response.via_lease = r.via_lease;
    response.leader_hint = core_->leader();
    host_.Respond(index_, response);
    it = pending_reads_.erase(it);
  }
}

}  // namespace epoch::sim
