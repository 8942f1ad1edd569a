#include "node_shell.h"

#include <fmt/format.h>

#include <stdexcept>
#include <utility>

namespace epoch::nodesim {

NodeShell::NodeShell(NodeShellOptions options, raft::MemoryLog initial_log,
                     const std::int64_t* global_us, server::MessageSender& sender)
    : options_(std::move(options)),
      disk_(std::move(initial_log)),
      clock_(global_us),
      sender_(sender) {}

NodeShell::~NodeShell() { Crash(); }

void NodeShell::Start() {
  if (up()) return;
  ++incarnation_;
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
  driver_options.on_fatal = [this](const Status& status) {
    throw std::runtime_error(
        fmt::format("node {:x} fail-stop: {}", options_.raft.id.value(), status.ToString()));
  };
  driver_ =
      std::make_unique<server::RaftDriver>(*io_, driver_options, disk_, *state_machine_, sender_);
  driver_->Start();
  Poll();
}

void NodeShell::Crash() {
  if (!up()) return;
  driver_.reset();
  state_machine_.reset();
  io_.reset();
  store_.reset();
  disk_.Crash();
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
