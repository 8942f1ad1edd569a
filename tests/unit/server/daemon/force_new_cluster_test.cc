// ForceNewCluster (force_new_cluster.h) on a real WAL and store: the uncommitted suffix dropped,
// the removals appended committed, their contexts applied by the state machine to the member
// table, and the flag acting once.
#include "force_new_cluster.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <future>
#include <span>

#include "epoch/raft/conf_change.h"
#include "epoch/replication/kv_state_machine.h"
#include "epoch/test_support/files.h"
#include "epoch/test_support/temp_dir.h"
#include "epoch/wal/posix_file_system.h"
#include "peer_membership.h"

namespace epoch::server {
namespace {

Status Durably(const std::function<Status(wal::DurableCallback)>& submit) {
  std::promise<Status> promise;
  std::future<Status> done = promise.get_future();
  EPOCH_RETURN_IF_ERROR(submit([&promise](const Status& s) { promise.set_value(s); }));
  return done.get();
}

// n2 of n1, n2, n3: a bootstrapped log with three empty entries, two of them known committed.
struct Fixture {
  test_support::TempDir dir{"epoch-force-new-cluster"};
  NodeConfig config;
  wal::PosixFileSystem fs;
  std::unique_ptr<wal::Wal> wal;
  std::unique_ptr<KvStore> store;

  Fixture() {
    config.name = "n2";
    config.data_dir = dir.path();
    REQUIRE(
        ParseInitialCluster("n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003", "", &config)
            .ok());
    config.raft.id = MemberIdFor(config.cluster_token, config.name);
    config.force_new_cluster = true;
    auto opened = KvStore::Open(dir.Sub("kv"), KvStoreOptions{});
    REQUIRE(opened.ok());
    store = std::move(*opened);
    REQUIRE(store->SeedMemberTable(InitialMemberTableOf(config)).ok());
    auto log = wal::Wal::Open(fs, dir.Sub("wal"));
    REQUIRE(log.ok());
    wal = std::move(*log);
  }

  NodeId Id(const std::string& name) const { return MemberIdFor(config.cluster_token, name); }

  void WriteLog() {
    raft::SnapshotMeta meta = raft::BootstrapSnapshot({Id("n1"), Id("n2"), Id("n3")});
    REQUIRE(Durably([&](wal::DurableCallback d) { return wal->SaveSnapshot(meta, d); }).ok());
    std::vector<raft::Entry> entries;
    for (std::uint64_t i = 2; i <= 4; ++i) entries.push_back({Term(1), LogIndex(i), {}, {}});
    const raft::HardState hs{Term(1), Id("n1"), LogIndex(3)};
    REQUIRE(Durably([&](wal::DurableCallback d) { return wal->Append(entries, hs, d); }).ok());
  }
};

TEST_CASE("force-new-cluster: removals replace the uncommitted suffix and reach the member table",
          "[server][daemon][force_new_cluster]") {
  Fixture f;
  f.WriteLog();
  REQUIRE(ForceNewCluster(f.config, *f.wal, *f.store).ok());

  REQUIRE(f.wal->LastIndex() == LogIndex(5));  // 4 (never known committed) replaced
  CHECK(f.wal->InitialHardState() == raft::HardState{Term(1), f.Id("n1"), LogIndex(5)});
  const std::vector<raft::Entry> forced = f.wal->Entries(LogIndex(4), LogIndex(6), 1 << 20);
  REQUIRE(forced.size() == 2);
  const std::vector<NodeId> removed = {f.Id("n1"), f.Id("n3")};
  std::vector<NodeId> in_log;
  for (const raft::Entry& e : forced) {
    CHECK(e.type == raft::EntryType::kConfChange);
    std::optional<raft::ConfChange> change = raft::DecodeConfChange(e.data);
    REQUIRE(change);
    CHECK(change->type == raft::ConfChangeType::kRemoveNode);
    in_log.push_back(change->node);
  }
  std::sort(in_log.begin(), in_log.end());
  std::vector<NodeId> expected = removed;
  std::sort(expected.begin(), expected.end());
  CHECK(in_log == expected);
  CHECK(test_support::ReadFile(f.dir.path() + "/" + kForcedFile) == "forced_index 5\n");

  // Applied as the driver applies committed entries: the others are recorded removed.
  KvStateMachine machine(*f.store);
  const std::vector<raft::Entry> log = f.wal->Entries(LogIndex(2), LogIndex(6), 1 << 20);
  for (const ApplyOutcome& out : machine.Apply(std::span(log))) {
    INFO(out.index);
    CHECK(out.status.ok());
  }
  for (const v1::ClusterMember& m : f.store->MemberTable()->members()) {
    INFO(m.id());
    CHECK(m.removed() == (NodeId(m.id()) != f.config.self_id()));
  }
  CHECK(ConfStateOf(*f.store->MemberTable()) == raft::ConfState{{f.config.self_id()}, {}});
}

TEST_CASE("force-new-cluster: acts once; ignored without a log or without the flag",
          "[server][daemon][force_new_cluster]") {
  Fixture f;
  REQUIRE(ForceNewCluster(f.config, *f.wal, *f.store).ok());  // no log yet
  CHECK(f.wal->LastIndex() == LogIndex(0));
  CHECK_FALSE(std::filesystem::exists(f.dir.path() + "/" + kForcedFile));

  f.WriteLog();
  f.config.force_new_cluster = false;
  REQUIRE(ForceNewCluster(f.config, *f.wal, *f.store).ok());
  CHECK(f.wal->LastIndex() == LogIndex(4));

  f.config.force_new_cluster = true;
  REQUIRE(ForceNewCluster(f.config, *f.wal, *f.store).ok());
  REQUIRE(f.wal->LastIndex() == LogIndex(5));
  // Members added since (here: an entry appended after the forced ones) stay: the file says
  // this data directory was forced already.
  const raft::Entry later{Term(2), LogIndex(6), raft::EntryType::kConfChange,
                          raft::EncodeConfChange({raft::ConfChangeType::kAddVoter, NodeId(9), {}})};
  REQUIRE(
      Durably([&](wal::DurableCallback d) {
        return f.wal->Append({later}, raft::HardState{Term(2), f.config.self_id(), LogIndex(6)}, d);
      }).ok());
  REQUIRE(ForceNewCluster(f.config, *f.wal, *f.store).ok());
  CHECK(f.wal->LastIndex() == LogIndex(6));
  CHECK(f.wal->InitialHardState().commit == LogIndex(6));
}

TEST_CASE("force-new-cluster: each forced change carries its member-table change",
          "[server][daemon][force_new_cluster]") {
  Fixture f;
  const NodeId self = f.config.self_id();
  auto member_change = [&](raft::ConfChangeType type, NodeId id) {
    v1::InternalRequest request;
    REQUIRE(request.ParseFromString(ForcedChangeContext(f.config, {type, id, {}})));
    REQUIRE(request.has_member_change());
    CHECK(request.member_change().id() == id.value());
    return request.member_change();
  };
  CHECK(member_change(raft::ConfChangeType::kRemoveNode, f.Id("n1")).kind() ==
        v1::MemberChange::REMOVE);
  CHECK(member_change(raft::ConfChangeType::kPromoteLearner, self).kind() ==
        v1::MemberChange::PROMOTE);
  const v1::MemberChange add = member_change(raft::ConfChangeType::kAddVoter, self);
  CHECK(add.kind() == v1::MemberChange::ADD);
  CHECK_FALSE(add.is_learner());
  REQUIRE(add.peer_urls_size() == 1);
  CHECK(add.peer_urls(0) == "http://127.0.0.1:7002");
}

TEST_CASE("force-new-cluster: refused on a member its committed configuration removed",
          "[server][daemon][force_new_cluster]") {
  Fixture f;
  f.WriteLog();
  const raft::Entry removal{
      Term(1), LogIndex(5), raft::EntryType::kConfChange,
      raft::EncodeConfChange({raft::ConfChangeType::kRemoveNode, f.config.self_id(), {}})};
  REQUIRE(Durably([&](wal::DurableCallback d) {
            return f.wal->Append({removal}, raft::HardState{Term(1), f.Id("n1"), LogIndex(5)}, d);
          }).ok());
  Status forced = ForceNewCluster(f.config, *f.wal, *f.store);
  CHECK(forced.code() == StatusCode::kFailedPrecondition);
  CHECK(f.wal->LastIndex() == LogIndex(5));
  CHECK_FALSE(std::filesystem::exists(f.dir.path() + "/" + kForcedFile));
}

}  // namespace
}  // namespace epoch::server
