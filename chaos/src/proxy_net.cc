#include "epoch/chaos/proxy_net.h"

#include <fmt/format.h>

#include <array>
#include <asio.hpp>
#include <deque>
#include <future>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace epoch::chaos {
namespace {

using asio::ip::tcp;
using SteadyTime = std::chrono::steady_clock::time_point;

struct Link;

// One proxied TCP connection: the dialer's socket and ours to the target. Direction 0 carries
// dialer -> target bytes, direction 1 the replies. Lives on the I/O thread only.
class Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(Link& link, tcp::socket dialer);
  void Start(std::uint16_t target_port);
  void Close();

 private:
  struct Dir {
    explicit Dir(asio::any_io_executor ex) : timer(ex) {}
    tcp::socket* src = nullptr;
    tcp::socket* dst = nullptr;
    std::array<char, 16384> buf{};
    std::deque<std::pair<SteadyTime, std::string>> queue;  // chunks waiting for their due time
    bool writing = false;
    asio::steady_timer timer;
  };

  void Read(int d);
  void OnRead(int d, const asio::error_code& ec, std::size_t n);
  void MaybeWrite(int d);
  void OnDue(int d, const asio::error_code& ec);
  void OnWritten(int d, const asio::error_code& ec);

  Link& link_;
  tcp::socket dialer_;
  tcp::socket target_;
  std::array<Dir, 2> dirs_;
  bool closed_ = false;
};

// One directed link (from -> to): its listener, its fault and its open connections.
struct Link {
  Link(asio::io_context& io, std::mt19937_64& shared_rng, std::uint64_t& broken_counter)
      : acceptor(io), rng(shared_rng), broken(broken_counter) {}
  tcp::acceptor acceptor;
  LinkFault fault;
  std::uint16_t* target_port = nullptr;  // into Impl::targets_
  std::vector<std::weak_ptr<Conn>> conns;
  std::uint64_t accepted = 0;
  std::mt19937_64& rng;
  std::uint64_t& broken;

  void CloseAll() {
    for (auto& w : conns) {
      if (auto c = w.lock()) {
        c->Close();
        ++broken;
      }
    }
    conns.clear();
  }
};

Conn::Conn(Link& link, tcp::socket dialer)
    : link_(link),
      dialer_(std::move(dialer)),
      target_(dialer_.get_executor()),
      dirs_{Dir(dialer_.get_executor()), Dir(dialer_.get_executor())} {
  dirs_[0].src = &dialer_;
  dirs_[0].dst = &target_;
  dirs_[1].src = &target_;
  dirs_[1].dst = &dialer_;
}

void Conn::Start(std::uint16_t target_port) {
  tcp::endpoint target(asio::ip::make_address_v4("127.0.0.1"), target_port);
  target_.async_connect(target, [self = shared_from_this()](const asio::error_code& ec) {
    if (ec || self->closed_) return self->Close();
    self->Read(0);
    self->Read(1);
  });
}

void Conn::Close() {
  if (closed_) return;
  closed_ = true;
  asio::error_code ignored;
  dialer_.close(ignored);
  target_.close(ignored);
  for (Dir& d : dirs_) {
    d.timer.cancel();
    d.queue.clear();
  }
}

void Conn::Read(int d) {
  Dir& dir = dirs_[static_cast<std::size_t>(d)];
  dir.src->async_read_some(asio::buffer(dir.buf), [self = shared_from_this(), d](
                                                      const asio::error_code& ec, std::size_t n) {
    self->OnRead(d, ec, n);
  });
}

void Conn::OnRead(int d, const asio::error_code& ec, std::size_t n) {
  if (ec || closed_) return Close();
  const LinkFault& f = link_.fault;
  bool lost = f.kind == LinkFault::Kind::kCut ||
              (f.kind == LinkFault::Kind::kDrop &&
               std::uniform_real_distribution<double>(0, 1)(link_.rng) < f.drop_probability);
  if (lost) {
    ++link_.broken;
    return Close();
  }
  Dir& dir = dirs_[static_cast<std::size_t>(d)];
  auto delay = f.kind == LinkFault::Kind::kDelay ? f.delay : std::chrono::milliseconds(0);
  dir.queue.emplace_back(std::chrono::steady_clock::now() + delay, std::string(dir.buf.data(), n));
  MaybeWrite(d);
  Read(d);
}

void Conn::MaybeWrite(int d) {
  Dir& dir = dirs_[static_cast<std::size_t>(d)];
  if (dir.writing || dir.queue.empty() || closed_) return;
  dir.writing = true;
  dir.timer.expires_at(dir.queue.front().first);
  dir.timer.async_wait(
      [self = shared_from_this(), d](const asio::error_code& ec) { self->OnDue(d, ec); });
}

void Conn::OnDue(int d, const asio::error_code& ec) {
  Dir& dir = dirs_[static_cast<std::size_t>(d)];
  if (ec || closed_ || dir.queue.empty()) return;
  asio::async_write(*dir.dst, asio::buffer(dir.queue.front().second),
                    [self = shared_from_this(), d](const asio::error_code& wec, std::size_t) {
                      self->OnWritten(d, wec);
                    });
}

void Conn::OnWritten(int d, const asio::error_code& ec) {
  if (ec || closed_) return Close();
  Dir& dir = dirs_[static_cast<std::size_t>(d)];
  dir.queue.pop_front();
  dir.writing = false;
  MaybeWrite(d);
}

}  // namespace

class ProxyNet::Impl {
 public:
  Impl(int nodes, std::uint64_t seed)
      : nodes_(nodes), rng_(seed), targets_(static_cast<std::size_t>(nodes), 0) {
    for (int i = 0; i < nodes * nodes; ++i) {
      links_.push_back(std::make_unique<Link>(io_, rng_, broken_));
    }
  }
  ~Impl() {
    RunOnIo([this] {
      for (auto& l : links_) {
        asio::error_code ignored;
        l->acceptor.close(ignored);
        l->CloseAll();
      }
    });
    work_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  Status Listen() {
    for (int from = 0; from < nodes_; ++from) {
      for (int to = 0; to < nodes_; ++to) {
        if (from == to) continue;
        Link& l = link(from, to);
        l.target_port = &targets_[static_cast<std::size_t>(to)];
        asio::error_code ec;
        tcp::endpoint ep(asio::ip::make_address_v4("127.0.0.1"), 0);
        l.acceptor.open(ep.protocol(), ec);
        if (!ec) l.acceptor.bind(ep, ec);
        if (!ec) l.acceptor.listen(asio::socket_base::max_listen_connections, ec);
        if (ec) {
          return Status::IOError(fmt::format("proxy n{}->n{}: {}", from + 1, to + 1, ec.message()));
        }
        Accept(l);
      }
    }
    thread_ = std::thread([this] { io_.run(); });
    return Status::Ok();
  }

  Link& link(int from, int to) { return *links_[static_cast<std::size_t>(from * nodes_ + to)]; }

  template <typename F>
  void RunOnIo(F&& f) {
    if (!thread_.joinable() || std::this_thread::get_id() == thread_.get_id()) return f();
    std::promise<void> done;
    asio::post(io_, [&] {
      f();
      done.set_value();
    });
    done.get_future().wait();
  }

  void Accept(Link& l) {
    l.acceptor.async_accept([this, &l](const asio::error_code& ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted || !l.acceptor.is_open()) return;
      if (!ec) {
        ++l.accepted;
        std::uint16_t port = *l.target_port;
        if (l.fault.kind == LinkFault::Kind::kCut || port == 0) {
          asio::error_code ignored;
          s.close(ignored);
        } else {
          auto c = std::make_shared<Conn>(l, std::move(s));
          std::erase_if(l.conns, [](const std::weak_ptr<Conn>& w) { return w.expired(); });
          l.conns.push_back(c);
          c->Start(port);
        }
      }
      Accept(l);
    });
  }

  const int nodes_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{
      asio::make_work_guard(io_)};
  std::mt19937_64 rng_;
  std::uint64_t broken_ = 0;  // I/O thread only
  std::vector<std::uint16_t> targets_;
  std::vector<std::unique_ptr<Link>> links_;
  std::thread thread_;
};

ProxyNet::ProxyNet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProxyNet::~ProxyNet() = default;

Result<std::unique_ptr<ProxyNet>> ProxyNet::Start(int nodes, std::uint64_t seed) {
  if (nodes < 2 || nodes > 7) {
    return Status::InvalidArgument(fmt::format("ProxyNet: nodes must be in [2, 7], got {}", nodes));
  }
  auto impl = std::make_unique<Impl>(nodes, seed);
  EPOCH_RETURN_IF_ERROR(impl->Listen());
  return std::unique_ptr<ProxyNet>(new ProxyNet(std::move(impl)));
}

int ProxyNet::nodes() const { return impl_->nodes_; }

std::uint16_t ProxyNet::listen_port(int from, int to) const {
  return impl_->link(from, to).acceptor.local_endpoint().port();
}

void ProxyNet::SetTarget(int to, std::uint16_t peer_port) {
  impl_->RunOnIo([&] { impl_->targets_.at(static_cast<std::size_t>(to)) = peer_port; });
}

void ProxyNet::Set(int from, int to, LinkFault fault) {
  impl_->RunOnIo([&] {
    Link& l = impl_->link(from, to);
    l.fault = fault;
    if (fault.kind == LinkFault::Kind::kCut) l.CloseAll();
  });
}

void ProxyNet::HealAll() {
  impl_->RunOnIo([&] {
    for (auto& l : impl_->links_) l->fault = LinkFault::Pass();
  });
}

std::uint64_t ProxyNet::accepted(int from, int to) const {
  std::uint64_t n = 0;
  impl_->RunOnIo([&] { n = impl_->link(from, to).accepted; });
  return n;
}

std::uint64_t ProxyNet::connections_broken() const {
  std::uint64_t n = 0;
  impl_->RunOnIo([&] { n = impl_->broken_; });
  return n;
}

}  // namespace epoch::chaos
