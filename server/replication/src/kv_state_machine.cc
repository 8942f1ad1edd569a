#include "epoch/replication/kv_state_machine.h"

#include <google/protobuf/arena.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "epoch/raft/conf_change.h"

namespace epoch::server {
namespace {

// The serialized v1::InternalRequest an entry carries: a kNormal entry's data, a kConfChange
// entry's context (a membership change, epoch/state/member_table.h); empty for none.
std::string RequestBytes(const raft::Entry& e) {
  if (e.type == raft::EntryType::kNormal) return e.data;
  std::optional<raft::ConfChange> change = raft::DecodeConfChange(e.data);
  return change ? std::move(change->context) : std::string();
}

bool CarriesRequest(const raft::Entry& e) {
  if (e.type == raft::EntryType::kNormal) return !e.data.empty();
  return e.data.size() > raft::kConfChangeHeaderBytes;
}

[[noreturn]] void StorageFailure(const Status& s, LogIndex index) {
  spdlog::critical("fail-stop: cannot apply entry {} to the state machine: {}", index,
                   s.ToString());
  std::abort();
}

}  // namespace

std::vector<ApplyOutcome> KvStateMachine::Apply(std::span<const raft::Entry> entries) {
  std::vector<ApplyOutcome> out;
  out.reserve(entries.size());
  std::size_t i = 0;
  while (i < entries.size()) {
    if (!CarriesRequest(entries[i])) {
      Status s = store_.ApplyEmpty(entries[i].index);
      if (!s.ok()) StorageFailure(s, entries[i].index);
      out.push_back(ApplyOutcome{entries[i].index, 0, Status::Ok(), {}});
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < entries.size() && CarriesRequest(entries[end])) ++end;
    ApplyRun(entries, i, end, &out);
    i = end;
  }
  return out;
}

void KvStateMachine::ApplyRun(std::span<const raft::Entry> entries, std::size_t begin,
                              std::size_t end, std::vector<ApplyOutcome>* out) {
  // The requests live only for this call: one arena instead of an allocation per string field.
  google::protobuf::Arena arena;
  std::vector<v1::InternalRequest*> requests(end - begin);
  std::vector<ApplyInput> inputs;
  inputs.reserve(end - begin);
  for (std::size_t k = begin; k < end; ++k) {
    requests[k - begin] = google::protobuf::Arena::CreateMessage<v1::InternalRequest>(&arena);
    v1::InternalRequest& request = *requests[k - begin];
    if (!request.ParseFromString(RequestBytes(entries[k]))) {
      // Every replica fails to parse the same bytes, so an empty request applies identically
      // (KvStore answers it with an error) and the log stays usable.
      spdlog::error("entry {} carries an unparsable request", entries[k].index);
      request.Clear();
    }
    inputs.push_back(ApplyInput{entries[k].index, &request});
  }
  Result<std::vector<ApplyResult>> results = store_.ApplyBatch(inputs);
  if (!results.ok()) StorageFailure(results.status(), entries[begin].index);
  for (std::size_t k = begin; k < end; ++k) {
    ApplyResult& r = (*results)[k - begin];
    for (const AppliedHook& hook : on_applied_) hook(entries[k].index, r);
    out->push_back(ApplyOutcome{entries[k].index, requests[k - begin]->request_id(), r.status,
                                std::move(r.response)});
  }
}

}  // namespace epoch::server
