// epochd --restore-snapshot (daemon/ snapshot_restore.h): an archive of a KvStore checkpoint
// becomes a new member's data directory.
#include "epoch/daemon/snapshot_restore.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "epoch/node/node_config.h"
#include "epoch/snapshot/snapshot_archive.h"
#include "epoch/snapshot/snapshot_checkpoints.h"
#include "epoch/wal/posix_file_system.h"
#include "epoch/wal/wal.h"
#include "snapshot_test_util.h"

namespace epoch::server {
namespace {

using namespace snapshot_testing;

ArchiveHeader SampleHeader() {
  ArchiveHeader h;
  h.applied_index = LogIndex(1234);
  h.applied_term = Term(7);
  h.revision = Revision(99);
  h.cluster_id = 0xabcdef;
  h.created_unix_ms = 1'700'000'000'000;
  h.conf.voters = {NodeId(1), NodeId(2), NodeId(3)};
  h.conf.learners = {NodeId(9)};
  return h;
}

}  // namespace

TEST_CASE("restore mode: a KvStore checkpoint archive becomes a new member's data dir",
          "[snapshot]") {
  TempDir tmp;
  LogIndex applied;
  {
    auto store = OpenStore(tmp.Sub("source"));
    for (int i = 1; i <= 50; ++i)
      Put(*store, 10 + i, fmt::format("k{:03}", i), fmt::format("v{}", i));
    auto ck = store->CreateCheckpoint(tmp.Sub("ckpt"));
    REQUIRE(ck.ok());
    applied = ck->applied;
    CHECK(applied == LogIndex(60));
    auto files = ListCheckpointFiles(tmp.Sub("ckpt"));
    REQUIRE(files.ok());
    ArchiveHeader header = SampleHeader();
    header.applied_index = applied;
    REQUIRE(WriteArchiveFile(header, *files, tmp.Sub("snap.db")).ok());
  }
  NodeConfig config;
  config.name = "n2";
  config.data_dir = tmp.Sub("restored");
  for (std::uint64_t id : {11, 22, 33}) {
    config.members.push_back(MemberInfo{NodeId(id), fmt::format("n{}", id / 11), {}, {}});
  }
  auto restored = RestoreSnapshot(tmp.Sub("snap.db"), config);
  REQUIRE(restored.ok());
  CHECK(restored->snapshot_index == applied);
  CHECK(restored->voters == 3);
  {
    auto store = OpenStore(config.data_dir + "/kv");
    CHECK(store->AppliedIndex() == applied);
    CHECK(Get(*store, "k001") == "v1");
    CHECK(Get(*store, "k050") == "v50");
  }
  {
    wal::PosixFileSystem fs;
    auto log = wal::Wal::Open(fs, config.data_dir + "/wal");
    REQUIRE(log.ok());
    const raft::SnapshotMeta meta = (*log)->LastSnapshot();
    CHECK(meta.index == applied);
    CHECK(meta.term == Term(1));
    CHECK(meta.conf.voters == std::vector<NodeId>{NodeId(11), NodeId(22), NodeId(33)});
    CHECK((*log)->InitialHardState() == raft::HardState{Term(1), raft::kNoNode, applied});
    CHECK((*log)->FirstIndex() == applied.Next());
    REQUIRE((*log)->Close().ok());
  }
  SECTION("a second restore into the same directory is refused") {
    auto again = RestoreSnapshot(tmp.Sub("snap.db"), config);
    REQUIRE(!again.ok());
    CHECK_THAT(again.status().message(), Catch::Contains("is not empty"));
  }
  SECTION("a damaged file leaves the (fresh) directory absent") {
    std::string bytes = ReadFile(tmp.Sub("snap.db"));
    bytes[100] = static_cast<char>(bytes[100] ^ 4);
    WriteFile(tmp.Sub("bad.db"), bytes);
    config.data_dir = tmp.Sub("restored-bad");
    auto bad = RestoreSnapshot(tmp.Sub("bad.db"), config);
    REQUIRE(!bad.ok());
    CHECK_THAT(bad.status().message(), Catch::Contains("SHA-256 checksum mismatch"));
    CHECK(!std::filesystem::exists(config.data_dir));
  }
}

}  // namespace epoch::server
