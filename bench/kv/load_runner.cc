#include "load_runner.h"

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>

namespace epoch::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ProcessCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

// gRPC deadlines take system_clock or gpr time; the monotonic gpr clock cannot jump.
gpr_timespec MonotonicDeadline(std::chrono::milliseconds from_now) {
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                      gpr_time_from_millis(from_now.count(), GPR_TIMESPAN));
}

// What a phase does; shared read-only by all workers (except the two prefill pointers, whose
// targets are an atomic and a vector whose elements are each written by one client).
struct Plan {
  Workload workload = Workload::kPut;
  const KeySpace* keys = nullptr;
  std::size_t value_size_bytes = 0;
  bool prefill = false;
  std::atomic<std::uint64_t>* next_prefill_key = nullptr;     // prefill: next key to write
  std::vector<std::int64_t>* prefill_revisions = nullptr;     // prefill: key -> mod revision
  const std::vector<std::int64_t>* seed_revisions = nullptr;  // CAS cache seed (may be empty)
  Clock::time_point window_start;  // ops completing in [window_start, window_end) are counted
  Clock::time_point window_end;    // no op starts at or after this
  std::chrono::milliseconds rpc_timeout{0};
  std::chrono::milliseconds error_backoff{0};
  std::uint64_t seed = 0;
  std::string token;  // etcd's "token" metadata on every call; empty: none
};

class Worker;

// One closed-loop client: at most one RPC (or one back-off alarm) outstanding, and it is its own
// completion-queue tag. Invariant: state_ says which of the two is in flight.
class ClientSlot {
 public:
  ClientSlot(Worker* worker, etcdserverpb::KV::Stub* stub, std::uint64_t seed);
  // Starts the next operation; false if the phase is over and the slot retires.
  bool StartNext();
  // Handles the completion of what was in flight; false if the slot retires.
  bool OnEvent(bool ok);

 private:
  enum class State { kIdle, kRpc, kBackoff };
  std::uint64_t NextRandom();
  void StartRpc(Clock::time_point now);
  // Records the reply of a successful RPC into the worker's result.
  void RecordReply(bool in_window);

  Worker* worker_;
  etcdserverpb::KV::Stub* stub_;
  Workload op_;
  std::uint64_t rng_;
  State state_ = State::kIdle;
  std::optional<grpc::ClientContext> ctx_;  // a fresh context per call (gRPC requires it)
  grpc::Alarm alarm_;
  grpc::Status status_;
  Clock::time_point started_;
  std::uint64_t key_ = 0;
  std::uint64_t written_counter_ = 0;  // value-CAS: the counter this op tries to write
  std::string key_str_;
  std::string value_;  // put / mod-CAS value
  etcdserverpb::PutRequest put_req_;
  etcdserverpb::PutResponse put_resp_;
  etcdserverpb::RangeRequest range_req_;
  etcdserverpb::RangeResponse range_resp_;
  etcdserverpb::TxnRequest txn_req_;
  etcdserverpb::TxnResponse txn_resp_;
  std::unique_ptr<grpc::ClientAsyncResponseReader<etcdserverpb::PutResponse>> put_rpc_;
  std::unique_ptr<grpc::ClientAsyncResponseReader<etcdserverpb::RangeResponse>> range_rpc_;
  std::unique_ptr<grpc::ClientAsyncResponseReader<etcdserverpb::TxnResponse>> txn_rpc_;
};

// One thread's share of the clients, its completion queue and its private result.
class Worker {
 public:
  Worker(const Plan& plan, std::uint64_t key_count) : plan_(plan), cas_(key_count) {
    if (plan.seed_revisions != nullptr) {
      for (std::uint64_t k = 0; k < plan.seed_revisions->size() && k < key_count; ++k) {
        cas_.set_mod_revision(k, (*plan.seed_revisions)[k]);
      }
    }
  }
  void AddClient(etcdserverpb::KV::Stub* stub, std::uint64_t seed) {
    slots_.push_back(std::make_unique<ClientSlot>(this, stub, seed));
  }
  void Run();

  const Plan& plan() const { return plan_; }
  grpc::CompletionQueue* cq() { return &cq_; }
  CasCache* cas() { return &cas_; }
  LoadResult& result() { return result_; }

 private:
  const Plan& plan_;
  grpc::CompletionQueue cq_;
  CasCache cas_;
  LoadResult result_;
  std::vector<std::unique_ptr<ClientSlot>> slots_;
};

ClientSlot::ClientSlot(Worker* worker, etcdserverpb::KV::Stub* stub, std::uint64_t seed)
    : worker_(worker), stub_(stub), rng_(seed) {
  const Plan& plan = worker_->plan();
  op_ = plan.prefill ? Workload::kPut : plan.workload;
  value_ = plan.prefill ? EncodeCasValue(0, plan.value_size_bytes)
                        : RandomValue(plan.value_size_bytes, seed);
  put_req_.set_value(value_);
  range_req_.set_serializable(op_ == Workload::kGetSerializable);
}

std::uint64_t ClientSlot::NextRandom() {  // splitmix64
  std::uint64_t z = (rng_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

bool ClientSlot::StartNext() {
  const Plan& plan = worker_->plan();
  const Clock::time_point now = Clock::now();
  if (plan.prefill) {
    key_ = plan.next_prefill_key->fetch_add(1, std::memory_order_relaxed);
    if (key_ >= plan.keys->count()) return false;
  } else {
    if (now >= plan.window_end) return false;
    key_ = NextRandom() % plan.keys->count();
  }
  plan.keys->Format(key_, &key_str_);
  StartRpc(now);
  return true;
}

void ClientSlot::StartRpc(Clock::time_point now) {
  const Plan& plan = worker_->plan();
  ctx_.reset();
  ctx_.emplace();
  ctx_->set_deadline(MonotonicDeadline(plan.rpc_timeout));
  if (!plan.token.empty()) ctx_->AddMetadata("token", plan.token);
  grpc::CompletionQueue* cq = worker_->cq();
  state_ = State::kRpc;
  started_ = now;
  switch (op_) {
    case Workload::kPut:
      put_req_.set_key(key_str_);
      put_rpc_ = stub_->AsyncPut(&*ctx_, put_req_, cq);
      put_rpc_->Finish(&put_resp_, &status_, this);
      return;
    case Workload::kGet:
    case Workload::kGetSerializable:
      range_req_.set_key(key_str_);
      range_rpc_ = stub_->AsyncRange(&*ctx_, range_req_, cq);
      range_rpc_->Finish(&range_resp_, &status_, this);
      return;
    case Workload::kTxnCasMod:
      BuildCasMod(key_str_, worker_->cas()->mod_revision(key_), value_, &txn_req_);
      break;
    case Workload::kTxnCasValue: {
      const std::uint64_t c = worker_->cas()->counter(key_);
      written_counter_ = c + 1;
      BuildCasValue(key_str_, EncodeCasValue(c, plan.value_size_bytes),
                    EncodeCasValue(written_counter_, plan.value_size_bytes), &txn_req_);
      break;
    }
  }
  txn_rpc_ = stub_->AsyncTxn(&*ctx_, txn_req_, cq);
  txn_rpc_->Finish(&txn_resp_, &status_, this);
}

void ClientSlot::RecordReply(bool in_window) {
  const Plan& plan = worker_->plan();
  LoadResult& r = worker_->result();
  if (plan.prefill) (*plan.prefill_revisions)[key_] = put_resp_.header().revision();
  if (!IsCas(op_)) return;
  if (!ApplyCasReply(op_, key_, written_counter_, txn_resp_, worker_->cas())) {
    ++r.malformed_replies;
    return;
  }
  if (!in_window) return;
  if (txn_resp_.succeeded()) {
    ++r.cas_succeeded;
  } else {
    ++r.cas_failed;
  }
}

bool ClientSlot::OnEvent(bool ok) {
  const Plan& plan = worker_->plan();
  if (state_ == State::kBackoff) {
    state_ = State::kIdle;
    return StartNext();
  }
  assert(state_ == State::kRpc);
  state_ = State::kIdle;
  const Clock::time_point now = Clock::now();
  const bool in_window = plan.prefill || (now >= plan.window_start && now < plan.window_end);
  LoadResult& r = worker_->result();
  if (ok && status_.ok()) {
    RecordReply(in_window);
    if (in_window) {
      r.latency.Record(static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(now - started_).count()));
      ++r.ops;
    }
    return StartNext();
  }
  if (in_window) {
    ++r.errors;
    ErrorSample& e = r.errors_by_code[ok ? status_.error_code() : -1];
    if (e.count++ == 0) e.first_message = ok ? status_.error_message() : "completion not ok";
  }
  if (!plan.prefill && now >= plan.window_end) return false;
  // Back off before the next try so a dead endpoint does not turn the client into a busy loop.
  state_ = State::kBackoff;
  alarm_.Set(worker_->cq(), MonotonicDeadline(plan.error_backoff), this);
  return true;
}

void Worker::Run() {
  std::size_t active = 0;
  for (auto& s : slots_) active += s->StartNext() ? 1 : 0;
  void* tag = nullptr;
  bool ok = false;
  while (active > 0 && cq_.Next(&tag, &ok)) {
    if (!static_cast<ClientSlot*>(tag)->OnEvent(ok)) --active;
  }
  cq_.Shutdown();
  while (cq_.Next(&tag, &ok)) {
  }
}

void MergeInto(const LoadResult& from, LoadResult* into) {
  into->latency.Merge(from.latency);
  into->ops += from.ops;
  into->errors += from.errors;
  for (const auto& [code, e] : from.errors_by_code) {
    ErrorSample& mine = into->errors_by_code[code];
    if (mine.count == 0) mine.first_message = e.first_message;
    mine.count += e.count;
  }
  into->cas_succeeded += from.cas_succeeded;
  into->cas_failed += from.cas_failed;
  into->malformed_replies += from.malformed_replies;
}

// CPU seconds of this process and of the servers at one instant.
struct CpuSample {
  double client = 0;
  double server = -1;
};
CpuSample SampleCpu(const std::vector<int>& server_pids) {
  return CpuSample{ProcessCpuSeconds(),
                   server_pids.empty() ? -1.0 : ProcessesCpuSeconds(server_pids)};
}

// Spreads the clients over threads and connections, runs the plan, merges the results. CPU is
// sampled at the window's edges by a thread that sleeps until them (for prefill: at the phase's).
LoadResult RunPlan(const LoadOptions& opts, Connections& conns, const Plan& plan) {
  const int threads = std::max(1, std::min(opts.threads, opts.clients));
  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < threads; ++t) {
    workers.push_back(std::make_unique<Worker>(plan, plan.keys->count()));
  }
  for (int c = 0; c < opts.clients; ++c) {
    workers[c % threads]->AddClient(conns.stub(c % conns.size()),
                                    opts.seed * 1000003ULL + static_cast<std::uint64_t>(c));
  }
  CpuSample at_start = SampleCpu(opts.server_pids);
  CpuSample at_end;
  std::thread cpu_monitor;
  if (!plan.prefill) {
    cpu_monitor = std::thread([&] {
      std::this_thread::sleep_until(plan.window_start);
      at_start = SampleCpu(opts.server_pids);
      std::this_thread::sleep_until(plan.window_end);
      at_end = SampleCpu(opts.server_pids);
    });
  }
  std::vector<std::thread> running;
  for (int t = 1; t < threads; ++t) running.emplace_back([&w = *workers[t]] { w.Run(); });
  workers[0]->Run();
  for (auto& th : running) th.join();
  if (cpu_monitor.joinable()) {
    cpu_monitor.join();
  } else {
    at_end = SampleCpu(opts.server_pids);
  }
  LoadResult total;
  for (const auto& w : workers) MergeInto(w->result(), &total);
  total.client_cpu_seconds = at_end.client - at_start.client;
  if (at_start.server >= 0 && at_end.server >= 0) {
    total.server_cpu_seconds = at_end.server - at_start.server;
  }
  return total;
}

}  // namespace

std::vector<std::string> SplitEndpoints(const std::string& csv) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= csv.size()) {
    std::size_t comma = csv.find(',', pos);
    if (comma == std::string::npos) comma = csv.size();
    std::string ep = csv.substr(pos, comma - pos);
    for (std::string_view scheme : {"http://", "https://"}) {
      if (ep.starts_with(scheme)) ep.erase(0, scheme.size());
    }
    if (!ep.empty()) out.push_back(ep);
    pos = comma + 1;
  }
  return out;
}

double ProcessesCpuSeconds(const std::vector<int>& pids) {
  static const double ticks_per_second = static_cast<double>(sysconf(_SC_CLK_TCK));
  double total = 0;
  for (const int pid : pids) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(in, line)) return -1;
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    const std::size_t close = line.rfind(')');
    if (close == std::string::npos) return -1;
    std::istringstream fields(line.substr(close + 1));
    std::string field;
    double utime = 0;
    double stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i == 14) utime = std::stod(field);
      if (i == 15) stime = std::stod(field);
    }
    total += (utime + stime) / ticks_per_second;
  }
  return total;
}

Connections::Connections(const std::vector<std::string>& endpoints, int count,
                         const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  for (int i = 0; i < count; ++i) {
    const std::string& target = endpoints[static_cast<std::size_t>(i) % endpoints.size()];
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("epoch.bench.connection", i);  // distinct args: never one shared connection
    args.SetMaxReceiveMessageSize(-1);
    targets_.push_back(target);
    channels_.push_back(grpc::CreateCustomChannel(target, credentials, args));
    stubs_.push_back(etcdserverpb::KV::NewStub(channels_.back()));
  }
}

bool Connections::WaitConnected(std::chrono::milliseconds timeout, std::string* failed) {
  const auto deadline = std::chrono::system_clock::now() + timeout;
  for (std::size_t i = 0; i < channels_.size(); ++i) {
    if (!channels_[i]->WaitForConnected(deadline)) {
      *failed = targets_[i];
      return false;
    }
  }
  return true;
}

LoadResult RunPrefill(const LoadOptions& opts, Connections& conns,
                      std::vector<std::int64_t>* mod_revisions) {
  const KeySpace keys(opts.key_prefix, opts.key_count);
  std::atomic<std::uint64_t> next{0};
  mod_revisions->assign(opts.key_count, 0);
  Plan plan;
  plan.workload = Workload::kPut;
  plan.keys = &keys;
  plan.value_size_bytes = opts.value_size_bytes;
  plan.prefill = true;
  plan.next_prefill_key = &next;
  plan.prefill_revisions = mod_revisions;
  plan.window_start = Clock::now();
  plan.window_end = Clock::time_point::max();
  plan.rpc_timeout = opts.rpc_timeout;
  plan.token = opts.token;
  plan.error_backoff = opts.error_backoff;
  plan.seed = opts.seed;
  LoadResult r = RunPlan(opts, conns, plan);
  r.window_seconds = std::chrono::duration<double>(Clock::now() - plan.window_start).count();
  return r;
}

LoadResult RunLoad(const LoadOptions& opts, Connections& conns,
                   const std::vector<std::int64_t>& mod_revisions) {
  const KeySpace keys(opts.key_prefix, opts.key_count);
  Plan plan;
  plan.workload = opts.workload;
  plan.keys = &keys;
  plan.value_size_bytes = opts.value_size_bytes;
  plan.seed_revisions = &mod_revisions;
  plan.window_start = Clock::now() + opts.warmup;
  plan.window_end = plan.window_start + opts.duration;
  plan.rpc_timeout = opts.rpc_timeout;
  plan.token = opts.token;
  plan.error_backoff = opts.error_backoff;
  plan.seed = opts.seed;
  LoadResult r = RunPlan(opts, conns, plan);
  r.window_seconds = std::chrono::duration<double>(opts.duration).count();
  return r;
}

}  // namespace epoch::bench
