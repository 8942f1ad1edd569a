// Node: the public façade over Raft (the pimpl keeps raft/src private).
#include "epoch/raft/node.h"

#include "raft.h"

namespace epoch::raft {

std::string_view ProposeErrorName(ProposeError error) {
  switch (error) {
    case ProposeError::kNone: return "none";
    case ProposeError::kNotLeader: return "not leader";
    case ProposeError::kTransferInProgress: return "leadership transfer in progress";
    case ProposeError::kUncommittedLimit: return "too many uncommitted bytes";
    case ProposeError::kConfChangePending: return "a conf change is pending";
    case ProposeError::kLearnerNotCaughtUp: return "learner has not caught up";
    case ProposeError::kInvalidConfChange: return "invalid conf change";
    case ProposeError::kEmptyBatch: return "empty batch";
  }
  return "unknown";
}

std::string_view ProgressStateName(ProgressState state) {
  switch (state) {
    case ProgressState::kProbe: return "probe";
    case ProgressState::kReplicate: return "replicate";
    case ProgressState::kSnapshot: return "snapshot";
  }
  return "unknown";
}

Node::Node(const Config& config, const LogReader& log, std::uint64_t seed)
    : raft_(std::make_unique<Raft>(config, log, seed)) {}

Node::~Node() = default;

void Node::Tick() { raft_->Tick(); }
void Node::CatchUp(std::int64_t ticks) { raft_->CatchUp(ticks); }
StepResult Node::Step(const Message& message) { return raft_->Step(message); }
ProposeResult Node::Propose(std::vector<std::string> commands) {
  return raft_->Propose(std::move(commands));
}
ProposeResult Node::ProposeConfChange(const ConfChange& change) {
  return raft_->ProposeConfChange(change);
}
ReadIndexOutcome Node::ReadIndex(std::uint64_t context) { return raft_->ReadIndex(context); }
TransferOutcome Node::TransferLeadership(NodeId target) {
  return raft_->TransferLeadership(target);
}
void Node::Campaign() { raft_->Campaign(); }
epoch::Status Node::UpdateTiming(const Timing& timing) { return raft_->UpdateTiming(timing); }
void Node::ReportSnapshot(NodeId peer, bool ok) { raft_->ReportSnapshot(peer, ok); }
void Node::ReportUnreachable(NodeId peer) { raft_->ReportUnreachable(peer); }

bool Node::HasReady() const { return raft_->HasReady(); }
Ready Node::GetReady() { return raft_->GetReady(); }
void Node::Advance(const Ready& ready) { raft_->Advance(ready); }

NodeId Node::id() const { return raft_->id(); }
Role Node::role() const { return raft_->role(); }
Term Node::term() const { return raft_->term(); }
NodeId Node::leader() const { return raft_->leader(); }
LogIndex Node::commit_index() const { return raft_->log().committed(); }
LogIndex Node::applied_index() const { return raft_->applied(); }
LogIndex Node::last_index() const { return raft_->log().LastIndex(); }
const ConfState& Node::conf_state() const { return raft_->conf(); }
bool Node::IsLearner() const { return raft::IsLearner(raft_->conf(), raft_->id()); }
bool Node::LeaseValid() const { return raft_->LeaseValid(); }
std::int64_t Node::lease_expiry_tick() const { return raft_->lease_expiry_tick(); }
std::int64_t Node::now_ticks() const { return raft_->now(); }
std::int64_t Node::election_timeout_ticks() const { return raft_->randomized_election_timeout(); }
std::int64_t Node::election_timeout_base_ticks() const { return raft_->election_timeout_base(); }
NodeStatus Node::Status() const { return raft_->Status(); }

}  // namespace epoch::raft
