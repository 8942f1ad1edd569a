// Raft: the protocol core behind raft::Node (etcd raft's `raft` struct). One step function and one
// tick function per role; everything that must reach the outside world is queued here (messages,
// read states) and collected by Node into a Ready. Node also reports persistence (OnPersisted)
// and application (OnApplied) back.
//
// Files: raft.cc (construction, role transitions, the common Step, ticks), raft_election.cc
// (campaigns, votes, adaptive timeouts), raft_replication.cc (leader: append, commit, snapshots,
// heartbeats; follower: AppendEntries, InstallSnapshot), raft_read.cc (ReadIndex, lease),
// raft_membership.cc (proposals, conf changes, leadership transfer).
//
// Threading: not thread-safe; owned by one Node.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "assert.h"
#include "epoch/raft/config.h"
#include "epoch/raft/log_reader.h"
#include "epoch/raft/logger.h"
#include "epoch/raft/message.h"
#include "epoch/raft/node.h"
#include "epoch/raft/ready.h"
#include "progress.h"
#include "raft_log.h"
#include "read_only.h"
#include "rng.h"

namespace epoch::raft {

// Window of the latency samples behind the adaptive election timeout (raft/README.md): two floors,
// i.e. at least six heartbeat rounds (Config::Validate: heartbeat <= floor / 3). A sample is
// remembered one to two windows.
inline std::int64_t LatencyWindowTicks(const Config& config) {
  return 2 * config.election_timeout_min_ticks;
}

class Raft {
 public:
  Raft(const Config& config, const LogReader& log, std::uint64_t seed);

  // --- Inputs (see node.h). ---
  void Tick();
  void CatchUp(std::int64_t ticks);
  StepResult Step(const Message& m);
  ProposeResult Propose(std::vector<std::string> commands);
  ProposeResult ProposeConfChange(const ConfChange& change);
  ReadIndexOutcome ReadIndex(std::uint64_t context);
  TransferOutcome TransferLeadership(NodeId target);
  void Campaign();
  epoch::Status UpdateTiming(const Timing& timing);
  void ReportSnapshot(NodeId peer, bool ok);
  void ReportUnreachable(NodeId peer);

  // --- Ready / Advance (Node forwards these; raft_ready.cc). ---
  [[nodiscard]] bool HasReady() const;
  [[nodiscard]] Ready GetReady();
  void Advance(const Ready& ready);

  // --- Node plumbing. ---
  // Starts the heartbeat round that confirms the ReadIndex requests queued since the last one.
  void FlushReadRound();
  [[nodiscard]] bool HasReadRoundToFlush() const;
  // Entries up to (index, term) are durable.
  void OnPersisted(LogIndex index, Term term);
  void OnSnapshotPersisted(LogIndex index);
  // Committed entries up to `index` were applied; `conf_changes` are the kConfChange entries among
  // them, in order; `bytes` their total data size.
  void OnApplied(LogIndex index, const std::vector<Entry>& conf_changes, std::uint64_t bytes);
  void ObservePersistLatency(std::int64_t ticks);
  [[nodiscard]] std::vector<Entry> NextCommittedEntries() const;
  [[nodiscard]] std::size_t CountDurable(const std::vector<Entry>& committed) const;
  [[nodiscard]] bool HasCommittedEntriesToApply() const;
  std::vector<Message> TakeMessages();
  std::vector<Message> TakeMessagesAfterPersist();
  std::vector<ReadState> TakeReadStates();
  // Whether the applied configuration changed since the last call.
  bool TakeConfChanged();
  [[nodiscard]] bool HasPendingOutput() const;

  // --- Introspection. ---
  [[nodiscard]] NodeId id() const { return id_; }
  [[nodiscard]] Role role() const { return role_; }
  [[nodiscard]] Term term() const { return term_; }
  [[nodiscard]] NodeId vote() const { return vote_; }
  [[nodiscard]] NodeId leader() const { return leader_; }
  [[nodiscard]] LogIndex applied() const { return applied_; }
  [[nodiscard]] const ConfState& conf() const { return conf_; }
  [[nodiscard]] RaftLog& log() { return log_; }
  [[nodiscard]] const RaftLog& log() const { return log_; }
  [[nodiscard]] SoftState soft_state() const { return SoftState{role_, leader_, term_}; }
  [[nodiscard]] HardState hard_state() const { return HardState{term_, vote_, log_.committed()}; }
  [[nodiscard]] bool LeaseValid() const;
  [[nodiscard]] std::int64_t lease_expiry_tick() const { return lease_expiry_tick_; }
  [[nodiscard]] std::int64_t now() const { return now_; }
  [[nodiscard]] std::int64_t randomized_election_timeout() const {
    return randomized_election_timeout_;
  }
  [[nodiscard]] std::int64_t election_timeout_base() const { return timeout_base_; }
  [[nodiscard]] NodeStatus Status() const;

  [[nodiscard]] AssertContext AssertCtx() const { return {id_, term_}; }

 private:
  // raft.cc: transitions and dispatch.
  void BecomeFollower(Term term, NodeId leader);
  void BecomePreCandidate();
  void BecomeCandidate();
  void BecomeLeader();
  void ResetRoleState(Term term);
  StepResult StepStaleTerm(const Message& m);
  StepResult StepLeader(const Message& m);
  StepResult StepCandidate(const Message& m);
  StepResult StepFollower(const Message& m);
  void TickElection();
  [[nodiscard]] bool HeldAfterStall(std::int64_t elapsed, std::int64_t timeout) const;
  void TickHeartbeat();
  void Send(Message m);
  template <typename... Args>
  void Log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) const {
    if (logger_ != nullptr)
      logger_->Log(level, id_, term_, fmt::format(format, std::forward<Args>(args)...));
  }

  // raft_election.cc
  void StartCampaign(bool transfer);
  void CampaignRound(MessageType type, bool transfer);
  void SendVoteRequest(MessageType type, NodeId to, Term vote_term, bool transfer);
  void AskAgain(NodeId voter);
  void HandleVoteRequest(const Message& m);
  StepResult HandleVoteResponse(const Message& m);
  [[nodiscard]] bool ShouldWithholdVote(const Message& m) const;
  [[nodiscard]] bool LosesPreVoteTie(const Message& m) const;
  [[nodiscard]] bool DeferCampaignAfterGrant() const;
  [[nodiscard]] bool Promotable() const;
  [[nodiscard]] bool HasUnappliedConfChanges() const;
  void HeardFromLeader(NodeId leader);
  void RedrawElectionTimeout();
  void BackOffElectionTimeout();
  void MaybeAdaptElectionTimeout();
  [[nodiscard]] std::int64_t LatencyTargetBase() const;

  // raft_replication.cc
  bool MaybeSendAppend(NodeId peer, Progress& pr, bool send_if_empty);
  bool MaybeSendSnapshot(NodeId peer, Progress& pr);
  void BroadcastAppend(bool send_if_empty);
  void BroadcastHeartbeat();
  bool MaybeCommit();
  void AfterCommitAdvanced();
  void HandleAppendEntries(const Message& m);
  void HandleHeartbeat(const Message& m);
  void HandleInstallSnapshot(const Message& m);
  void HandleAppendResponse(const Message& m, Progress& pr);
  void HandleHeartbeatResponse(const Message& m, Progress& pr);
  void AppendAsLeader(std::vector<Entry> entries);
  [[nodiscard]] bool QuorumActive() const;
  // Whether a voter other than this node acknowledged an entry past `index` (durably stored).
  [[nodiscard]] bool OtherVoterDurablePast(LogIndex index) const;
  [[nodiscard]] Progress& SelfProgress();
  void ResetProgress();
  void CheckDurabilityStall();

  // raft_read.cc
  void AckRound(Progress& pr, std::uint64_t round);
  void UpdateQuorumRound();
  ReadIndexOutcome ServeRead(std::uint64_t context, NodeId from);
  void RespondRead(std::uint64_t context, NodeId from, LogIndex index, bool via_lease);
  void ReleaseReadsAwaitingCommit();
  [[nodiscard]] std::int64_t QuorumFloor(std::uint64_t round) const;
  [[nodiscard]] bool CommittedInCurrentTerm() const;

  // raft_membership.cc
  void ApplyConfChangeEntry(const Entry& entry);
  void StepDownAfterRemoval();
  void SendTimeoutNow(NodeId target);
  void AbortTransfer();

  // --- Identity and configuration. ---
  const NodeId id_;
  Config config_;  // timing fields change through UpdateTiming
  Logger* const logger_;
  Rng rng_;

  // --- Persistent state (Raft Fig. 2), made durable through Ready.hard_state. ---
  Term term_;    // current_term_: latest term seen; never decreases
  NodeId vote_;  // voted_for_ in term_, or kNoNode; set at most once per term
  RaftLog log_;  // log[] and commit_index

  // --- Volatile state. ---
  Role role_ = Role::kFollower;
  NodeId leader_;     // the leader of term_ as far as we know
  LogIndex applied_;  // last_applied: highest index the driver applied (Advance)
  // The membership as of applied_ (takes effect when applied, like etcd raft).
  ConfState conf_;
  LogIndex conf_index_;  // index of the snapshot or entry conf_ comes from
  bool conf_changed_ = false;
  // Highest index handed out for application (>= applied_; equal when no Ready is outstanding).
  LogIndex applying_;

  // --- Time (ticks). ---
  std::int64_t now_ = 0;  // ticks since construction: the clock for leases and rounds
  std::int64_t election_elapsed_ = 0;
  std::int64_t heartbeat_elapsed_ = 0;
  // Ticks since a message from a live leader (or our own leadership, or boot). Votes and
  // pre-votes are withheld while it is below the election floor: a node may have acknowledged a
  // leader's heartbeat just before it restarted, so boot counts as contact.
  std::int64_t ticks_since_leader_contact_ = 0;
  // Until this tick we neither grant (pre)votes nor campaign, whatever the floor: set when the
  // floor is lowered (the last leader contact was answered with the old one) and at boot
  // (Config::boot_withhold_ticks).
  std::int64_t hold_until_tick_ = 0;
  // After a replay of missed ticks (CatchUp): elections and check-quorum wait until this tick.
  std::int64_t stall_hold_until_tick_ = 0;
  std::int64_t last_leader_message_tick_ = -1;
  NodeId last_leader_from_;  // sender and term of that message: gaps are measured per leader term
  Term last_leader_term_;
  std::int64_t randomized_election_timeout_ = 0;  // in [timeout_base_, timeout_base_ + jitter)
  // Adaptive base T. Invariant: floor <= timeout_base_ <= max_election_timeout_ticks.
  std::int64_t timeout_base_;
  std::int64_t stable_leadership_ticks_ = 0;
  bool campaigned_without_leader_ = false;
  // A TimeoutNow that arrived while committed conf changes were not applied yet (a removed
  // leader hands over as it commits its removal, before its followers applied it): the transfer
  // campaign runs once they are, if the term has not moved and within an election timeout (a
  // transfer the leader gave up on is not revived). Term 0: none.
  Term deferred_transfer_term_;
  std::int64_t deferred_transfer_tick_ = 0;
  // Split-vote tie-break (raft_election.cc): when our current pre-campaign started, and when we
  // last granted someone else a pre-vote.
  std::int64_t pre_campaign_tick_ = 0;
  std::int64_t pre_vote_granted_tick_ = std::numeric_limits<std::int64_t>::min() / 2;
  WindowedMax leader_gap_ticks_;
  WindowedMax round_trip_ticks_;
  WindowedMax persist_latency_ticks_;

  // --- Candidate state. ---
  std::map<NodeId, bool> votes_;

  // --- Leader state (cleared on every role change). ---
  std::map<NodeId, Progress> progress_;  // every voter and learner, self included
  NodeId transfer_target_;
  std::int64_t transfer_elapsed_ = 0;
  bool timeout_now_sent_ = false;  // this term: lease reads are over for good
  LogIndex pending_conf_index_;    // index of the last conf change proposed in this term
  std::uint64_t uncommitted_bytes_ = 0;
  std::int64_t durability_stall_elapsed_ = 0;
  HeartbeatRounds rounds_;
  std::uint64_t quorum_acked_round_ = 0;
  std::int64_t lease_expiry_tick_ = 0;  // lease valid while now_ < lease_expiry_tick_
  ReadOnly read_only_;

  // --- Ready bookkeeping. ---
  // What the outstanding Ready asked for, so Advance knows what became durable and applied.
  struct Outstanding {
    std::uint64_t sequence = 0;
    std::optional<std::pair<LogIndex, Term>> last_entry;
    std::optional<LogIndex> snapshot_index;
    std::optional<LogIndex> applied_to;
    std::vector<Entry> conf_changes;
    std::uint64_t applied_bytes = 0;
    bool must_sync = false;
    std::int64_t handed_out_tick = 0;
  };
  std::optional<Outstanding> outstanding_;
  std::uint64_t ready_sequence_ = 0;
  SoftState prev_soft_;
  HardState prev_hard_;

  // --- Output queues (drained by GetReady). ---
  std::vector<Message> messages_;
  std::vector<Message> messages_after_persist_;
  std::vector<ReadState> read_states_;
};

}  // namespace epoch::raft
