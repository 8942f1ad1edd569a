#include "abusers.h"

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "epoch/etcd_errors.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::bench {
namespace {

using Clock = std::chrono::steady_clock;

class FullRangeTxnAbuser final : public Abuser {
 public:
  explicit FullRangeTxnAbuser(std::string address) : address_(std::move(address)) {}
  ~FullRangeTxnAbuser() override { Stop(); }

  std::string name() const override { return "txn-127-full-ranges-and-put"; }

  void Start() override {
    stop_ = false;
    thread_ = std::thread([this] { Run(); });
  }

  void Stop() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  std::string Summary() const override {
    return fmt::format(
        "{} txns sent, {} refused by --max-txn-read-keys, {} refused uncounted (too many "
        "requests: --txn-read-refusal-burst), {} other errors, {} ok",
        sent_.load(), refused_.load(), throttled_.load(), errors_.load(), ok_.load());
  }

 private:
  void Run() {
    auto kv = etcdserverpb::KV::NewStub(OwnConnection(address_));
    etcdserverpb::TxnRequest txn;
    // 128 ops, etcd's --max-txn-ops: one more and validation refuses the txn before the read
    // limit is reached.
    for (int i = 0; i < 127; ++i) {
      etcdserverpb::RangeRequest* range = txn.add_success()->mutable_request_range();
      range->set_key(std::string(1, '\0'));
      range->set_range_end(std::string(1, '\0'));  // every key
    }
    etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
    put->set_key("abuse/txn");
    put->set_value("x");
    while (!stop_) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      etcdserverpb::TxnResponse response;
      grpc::Status status = kv->Txn(&ctx, txn, &response);
      ++sent_;
      if (status.ok()) {
        ++ok_;
      } else if (status.error_message() == etcd_errors::kTxnReadTooLarge.message) {
        ++refused_;
      } else if (status.error_message() == etcd_errors::kTooManyRequests.message) {
        ++throttled_;
      } else {
        ++errors_;
      }
    }
  }

  const std::string address_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::atomic<std::uint64_t> sent_{0}, refused_{0}, throttled_{0}, errors_{0}, ok_{0};
};

class UnreadSnapshotAbuser final : public Abuser {
 public:
  UnreadSnapshotAbuser(std::string address, std::chrono::milliseconds every, int max)
      : address_(std::move(address)), every_(every), max_(max) {}
  ~UnreadSnapshotAbuser() override { Stop(); }

  std::string name() const override { return "unread-snapshot-streams"; }

  void Start() override {
    stop_ = false;
    thread_ = std::thread([this] { Run(); });
  }

  void Stop() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    for (Stream& s : streams_) {
      s.ctx->TryCancel();
      etcdserverpb::SnapshotResponse ignored;
      while (s.reader->Read(&ignored)) {
      }
      grpc::Status status = s.reader->Finish();
      if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) ++ended_by_server_;
    }
    streams_.clear();
  }

  std::string Summary() const override {
    return fmt::format("{} snapshot streams opened and left unread", opened_.load());
  }

 private:
  struct Stream {
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<grpc::ClientReader<etcdserverpb::SnapshotResponse>> reader;
  };

  void Run() {
    // No BDP probing: the connection's window stays small, so the server's writes stall soon.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    auto channel = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
    auto maintenance = etcdserverpb::Maintenance::NewStub(channel);
    std::unique_lock lock(mu_);
    while (!stop_ && static_cast<int>(streams_.size()) < max_) {
      Stream s;
      s.ctx = std::make_unique<grpc::ClientContext>();
      s.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
      s.reader = maintenance->Snapshot(s.ctx.get(), etcdserverpb::SnapshotRequest());
      streams_.push_back(std::move(s));
      ++opened_;
      wake_.wait_for(lock, every_, [this] { return stop_; });
    }
  }

  const std::string address_;
  const std::chrono::milliseconds every_;
  const int max_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
  std::vector<Stream> streams_;
  std::atomic<int> opened_{0}, ended_by_server_{0};
};

class UnreadKeepAliveAbuser final : public Abuser {
 public:
  UnreadKeepAliveAbuser(std::string address, std::int64_t lease, int streams)
      : address_(std::move(address)), lease_(lease), streams_wanted_(streams) {}
  ~UnreadKeepAliveAbuser() override { Stop(); }

  std::string name() const override { return "unread-keepalive-streams"; }

  void Start() override {
    stop_ = false;
    // epochd allows --max-concurrent-streams (1000) per connection: 500 per connection stays
    // below it.
    constexpr int kPerConnection = 500;
    const int connections = (streams_wanted_ + kPerConnection - 1) / kPerConnection;
    for (int c = 0; c < connections; ++c) channels_.push_back(OwnConnection(address_));
    for (int t = 0; t < kThreads; ++t) {
      threads_.emplace_back([this, t, connections] { Run(t, connections); });
    }
  }

  void Stop() override {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    channels_.clear();
  }

  bool Settled() const override {
    return opened_.load() >= static_cast<std::uint64_t>(streams_wanted_);
  }

  std::string Summary() const override {
    return fmt::format("{} keep-alive streams open, {} keep-alives written, {} writes failed",
                       opened_.load(), written_.load(), write_failed_.load());
  }

 private:
  static constexpr int kThreads = 4;
  using Stream = grpc::ClientReaderWriter<etcdserverpb::LeaseKeepAliveRequest,
                                          etcdserverpb::LeaseKeepAliveResponse>;
  struct Open {
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<Stream> stream;
    bool broken = false;
  };

  void Run(int t, int connections) {
    std::vector<Open> mine;
    etcdserverpb::LeaseKeepAliveRequest request;
    request.set_id(lease_);
    for (int i = t; i < streams_wanted_ && !stop_; i += kThreads) {
      auto lease = etcdserverpb::Lease::NewStub(channels_[i % connections]);
      Open o;
      o.ctx = std::make_unique<grpc::ClientContext>();
      o.stream = lease->LeaseKeepAlive(o.ctx.get());
      o.broken = !o.stream->Write(request);
      if (o.broken) ++write_failed_;
      ++opened_;
      mine.push_back(std::move(o));
    }
    // One keep-alive per stream per second; answers are never read.
    while (!stop_) {
      const auto round = Clock::now();
      for (Open& o : mine) {
        if (stop_) break;
        if (o.broken) continue;
        if (o.stream->Write(request)) {
          ++written_;
        } else {
          o.broken = true;
          ++write_failed_;
        }
      }
      while (!stop_ && Clock::now() - round < std::chrono::seconds(1)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    for (Open& o : mine) o.ctx->TryCancel();
    for (Open& o : mine) (void)o.stream->Finish();
  }

  const std::string address_;
  const std::int64_t lease_;
  const int streams_wanted_;
  std::atomic<bool> stop_{false};
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::thread> threads_;
  std::atomic<std::uint64_t> opened_{0}, written_{0}, write_failed_{0};
};

}  // namespace

std::shared_ptr<grpc::Channel> OwnConnection(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

std::unique_ptr<Abuser> MakeFullRangeTxnAbuser(std::string address) {
  return std::make_unique<FullRangeTxnAbuser>(std::move(address));
}

std::unique_ptr<Abuser> MakeUnreadSnapshotAbuser(std::string address,
                                                 std::chrono::milliseconds every, int max) {
  return std::make_unique<UnreadSnapshotAbuser>(std::move(address), every, max);
}

std::unique_ptr<Abuser> MakeUnreadKeepAliveAbuser(std::string address, std::int64_t lease,
                                                  int streams) {
  return std::make_unique<UnreadKeepAliveAbuser>(std::move(address), lease, streams);
}

}  // namespace epoch::bench
