#include "node_shell.h"

#include <fmt/format.h>

#include <stdexcept>
#include <string_view>
#include <utility>

#include "epoch/raft/conf_change.h"

namespace epoch::nodesim {

// Once armed, the next fdatasync fails (EIO) — or the power goes out just before it, with the
// frame written and not synced (SimFileSystem::CrashRandom), and then fails.
class SyncFault final : public wal::FaultHook {
 public:
  explicit SyncFault(wal::SimFileSystem& fs) : fs_(fs) {}
  Status BeforeOp(wal::FsOp op, std::string_view /*path*/) override {
    if (!armed || op != wal::FsOp::kSync) return Status::Ok();
    armed = false;
    if (power_loss) {
      crashed = true;
      stats = fs_.CrashRandom(seed);
      return Status::IOError("simulated power loss during fdatasync");
    }
    return Status::IOError("simulated EIO on fdatasync");
  }
  bool armed = false;
  bool power_loss = false;
  std::uint64_t seed = 0;
  bool crashed = false;  // the file system is down since the power loss
  wal::CrashStats stats;

 private:
  wal::SimFileSystem& fs_;
};

NodeShell::NodeShell(NodeShellOptions options, std::vector<NodeId> voters,
                     const std::int64_t* global_us, server::MessageSender& sender)
    : options_(std::move(options)),
      voters_(std::move(voters)),
      fs_(options_.seed),
      clock_(global_us),
      sender_(sender),
      sync_fault_(std::make_shared<SyncFault>(fs_)) {
  fs_.SetFaultHook(sync_fault_);
}

NodeShell::~NodeShell() { (void)Crash(0); }

void NodeShell::ClearDiskFault() { sync_fault_->armed = false; }

void NodeShell::FailNextSync(bool power_loss, std::uint64_t seed) {
  sync_fault_->armed = true;
  sync_fault_->power_loss = power_loss;
  sync_fault_->seed = seed;
}

namespace {

constexpr const char* kWalDir = "/data/wal";

void Check(const Status& status, std::string_view what) {
  if (!status.ok()) throw std::runtime_error(fmt::format("{}: {}", what, status.ToString()));
}

// What epochd does before the driver starts on an empty WAL: the bootstrap snapshot (index 1,
// term 1, the initial voters) and hard state, durable.
void Bootstrap(wal::Wal& wal, const std::vector<NodeId>& voters) {
  if (!wal.LastSnapshot().IsEmpty() || wal.LastIndex() > LogIndex(0) ||
      !wal.InitialHardState().IsEmpty()) {
    return;
  }
  Status written;
  Check(wal.SaveSnapshot(raft::BootstrapSnapshot(voters), [&](const Status& s) { written = s; }),
        "bootstrap snapshot");
  Check(
      wal.SaveHardState(raft::HardState{raft::kBootstrapTerm, raft::kNoNode, raft::kBootstrapIndex},
                        [&](const Status& s) { written = written.ok() ? s : written; }),
      "bootstrap hard state");
  wal.SyncPending();
  Check(written, "bootstrap");
}

}  // namespace

void NodeShell::Start() {
  if (up()) return;
  ++incarnation_;
  failed_ = false;
  sync_fault_->armed = false;
  wal::Options wal_options;
  wal_options.manual_sync = true;
  wal_options.segment_bytes = 256 * 1024;  // small: rollovers and compaction happen in a run
  wal_options.log = [](wal::LogLevel, std::string_view) {};
  auto opened = wal::Wal::Open(fs_, kWalDir, wal_options);
  Check(opened.status(), "open WAL");
  wal_ = std::move(*opened);
  Bootstrap(*wal_, voters_);
  log_ = std::make_unique<server::WalLog>(*wal_);
  server::KvStoreOptions store_options;
  store_options.skip_flush_on_close = true;     // every close is a crash
  store_options.background_compaction = false;  // no thread of its own
  auto store = server::KvStore::Open(options_.store_dir, store_options);
  if (!store.ok()) {
    throw std::runtime_error(
        fmt::format("open store {}: {}", options_.store_dir, store.status().ToString()));
  }
  store_ = std::move(*store);
  state_machine_ = std::make_unique<server::KvStateMachine>(*store_);
  io_ = std::make_unique<asio::io_context>(1);
  server::RaftDriverOptions driver_options;
  driver_options.raft = options_.raft;
  driver_options.seed = options_.seed ^ incarnation_;
  driver_options.mutations = options_.driver_mutations;
  driver_options.clock = [this] {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(clock_.LocalNs()));
  };
  // A delay on this node's clock lasts delay / rate of global time.
  driver_options.schedule_tick = [this, life = incarnation_](
                                     std::chrono::steady_clock::duration delay,
                                     std::function<void()> fire) {
    const auto local_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(delay).count();
    const auto global_us =
        static_cast<std::int64_t>(static_cast<double>(local_ns) / clock_.rate() / 1000.0) + 1;
    options_.schedule(global_us, life, std::move(fire));
  };
  // The driver has stopped itself (a failed WAL); the simulator takes the process down.
  driver_options.on_fatal = [this](const Status&) { failed_ = true; };
  driver_ =
      std::make_unique<server::RaftDriver>(*io_, driver_options, *log_, *state_machine_, sender_);
  driver_->Start();
  Poll();
}

wal::CrashStats NodeShell::Crash(std::uint64_t seed) {
  if (!up()) return {};
  // After a power loss during a sync, the file system is already down.
  const wal::CrashStats stats = sync_fault_->crashed ? sync_fault_->stats : fs_.CrashRandom(seed);
  sync_fault_->crashed = false;
  // The WAL first: closing it on the dead file system fails its queued requests, whose callbacks
  // only post to the driver's strand, which never runs again.
  (void)wal_->Close();
  log_.reset();
  wal_.reset();
  driver_.reset();
  state_machine_.reset();
  io_.reset();
  store_.reset();
  fs_.Restart();
  return stats;
}

void NodeShell::Poll() {
  if (!up()) return;
  for (int round = 0; round < 1000; ++round) {
    io_->restart();
    if (io_->poll() == 0) return;
  }
  throw std::runtime_error("node io_context never ran dry (a handler reposts itself forever)");
}

}  // namespace epoch::nodesim
