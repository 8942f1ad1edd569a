#include "epoch/chaos/proxy_net.h"

#include <fmt/format.h>

#include <array>
#include <asio.hpp>
#include <deque>
#include <functional>
#include <future>
#include <map>
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
  // Connects to the target, then forwards `prefix` (bytes already read from the dialer) and
  // everything after it.
  void Start(std::uint16_t target_port, std::string prefix = {});
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
  // Queues one chunk read in direction d under the link's fault; false when the fault lost it
  // (the connection is then closed).
  bool Deliver(int d, std::string chunk);
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

void Conn::Start(std::uint16_t target_port, std::string prefix) {
  tcp::endpoint target(asio::ip::make_address_v4("127.0.0.1"), target_port);
  target_.async_connect(target, [self = shared_from_this(),
                                 prefix = std::move(prefix)](const asio::error_code& ec) mutable {
    if (ec || self->closed_) return self->Close();
    if (!prefix.empty() && !self->Deliver(0, std::move(prefix))) return;
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
  Dir& dir = dirs_[static_cast<std::size_t>(d)];
  if (Deliver(d, std::string(dir.buf.data(), n))) Read(d);
}

bool Conn::Deliver(int d, std::string chunk) {
  const LinkFault& f = link_.fault;
  bool lost = f.kind == LinkFault::Kind::kCut ||
              (f.kind == LinkFault::Kind::kDrop &&
               std::uniform_real_distribution<double>(0, 1)(link_.rng) < f.drop_probability);
  if (lost) {
    ++link_.broken;
    Close();
    return false;
  }
  Dir& dir = dirs_[static_cast<std::size_t>(d)];
  auto delay = f.kind == LinkFault::Kind::kDelay ? f.delay : std::chrono::milliseconds(0);
  dir.queue.emplace_back(std::chrono::steady_clock::now() + delay, std::move(chunk));
  MaybeWrite(d);
  return true;
}

// Reads the first bytes of a connection accepted on an entry: a peer hello names its sender.
// `done` gets the sender's member ID (nullopt when the bytes are no hello), the socket and the
// bytes read, which the proxied connection forwards first. Closed after the server's own hello
// deadline (5 s) or when the dialer closes first.
class Sniffer : public std::enable_shared_from_this<Sniffer> {
 public:
  using Done =
      std::function<void(std::optional<std::uint64_t> sender, tcp::socket, std::string prefix)>;
  Sniffer(tcp::socket s, Done done)
      : socket_(std::move(s)), timer_(socket_.get_executor()), done_(std::move(done)) {}

  void Start() {
    timer_.expires_after(std::chrono::seconds(5));
    timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
      if (!ec) self->socket_.close();
    });
    Read();
  }

 private:
  static constexpr std::size_t kMagicEnd = 12;  // length (4) + magic (8)
  static constexpr std::size_t kHelloEnd = 28;  // + cluster ID (8) + sender ID (8)

  void Read() {
    socket_.async_read_some(asio::buffer(buf_),
                            [self = shared_from_this()](const asio::error_code& ec, std::size_t n) {
                              self->OnRead(ec, n);
                            });
  }
  void OnRead(const asio::error_code& ec, std::size_t n) {
    if (ec) return;  // closed by the dialer or the deadline
    have_.append(buf_.data(), n);
    if (have_.size() < kMagicEnd) return Read();
    static constexpr std::string_view kHelloStart(
        "\0\0\0\x18"
        "EPOCHP1\n",
        kMagicEnd);
    const bool hello = std::string_view(have_).substr(0, kMagicEnd) == kHelloStart;
    if (hello && have_.size() < kHelloEnd) return Read();
    timer_.cancel();
    std::optional<std::uint64_t> sender;
    if (hello) {
      std::uint64_t id = 0;
      for (std::size_t k = 20; k < kHelloEnd; ++k)
        id = (id << 8) | static_cast<std::uint8_t>(have_[k]);
      sender = id;
    }
    done_(sender, std::move(socket_), std::move(have_));
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  Done done_;
  std::array<char, 64> buf_{};
  std::string have_;
};

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
    for (int to = 0; to < nodes; ++to) {
      unattributed_links_.push_back(std::make_unique<Link>(io_, rng_, broken_));
      unattributed_links_.back()->target_port = &targets_[static_cast<std::size_t>(to)];
    }
  }
  ~Impl() {
    RunOnIo([this] {
      for (auto* all : {&links_, &entries_, &unattributed_links_}) {
        for (auto& l : *all) {
          asio::error_code ignored;
          l->acceptor.close(ignored);
          l->CloseAll();
        }
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
        if (asio::error_code ec = ListenOnLoopback(l.acceptor)) {
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
      if (!ec) Carry(l, std::move(s), {});
      Accept(l);
    });
  }

  // One accepted connection carried on link `l`, `prefix` first.
  void Carry(Link& l, tcp::socket s, std::string prefix) {
    ++l.accepted;
    std::uint16_t port = *l.target_port;
    if (l.fault.kind == LinkFault::Kind::kCut || port == 0) {
      asio::error_code ignored;
      s.close(ignored);
      return;
    }
    auto c = std::make_shared<Conn>(l, std::move(s));
    std::erase_if(l.conns, [](const std::weak_ptr<Conn>& w) { return w.expired(); });
    l.conns.push_back(c);
    c->Start(port, std::move(prefix));
  }

  // An entry of node `to` (its Link holds only the acceptor): each connection is sniffed, then
  // carried on the sender's link, or unfaulted.
  void AcceptEntry(Link& entry, int to) {
    entry.acceptor.async_accept([this, &entry, to](const asio::error_code& ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted || !entry.acceptor.is_open()) return;
      if (!ec) {
        ++entry.accepted;
        auto sniffer = std::make_shared<Sniffer>(
            std::move(s),
            [this, to](std::optional<std::uint64_t> sender, tcp::socket sock, std::string prefix) {
              auto it = sender ? member_slots_.find(*sender) : member_slots_.end();
              if (it != member_slots_.end() && it->second != to) {
                return Carry(link(it->second, to), std::move(sock), std::move(prefix));
              }
              ++unattributed_;
              Carry(*unattributed_links_[static_cast<std::size_t>(to)], std::move(sock),
                    std::move(prefix));
            });
        sniffer->Start();
      }
      AcceptEntry(entry, to);
    });
  }

  static asio::error_code ListenOnLoopback(tcp::acceptor& acceptor) {
    asio::error_code ec;
    tcp::endpoint ep(asio::ip::make_address_v4("127.0.0.1"), 0);
    acceptor.open(ep.protocol(), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    return ec;
  }

  const int nodes_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{
      asio::make_work_guard(io_)};
  std::mt19937_64 rng_;
  std::uint64_t broken_ = 0;  // I/O thread only
  std::vector<std::uint16_t> targets_;
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<std::unique_ptr<Link>> entries_;             // AddEntry's listeners
  std::vector<std::unique_ptr<Link>> unattributed_links_;  // per node: never faulted
  std::map<std::uint64_t, int> member_slots_;              // member ID -> node (slot)
  std::uint64_t unattributed_ = 0;                         // I/O thread only
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

void ProxyNet::SetMemberId(int slot, std::uint64_t member_id) {
  impl_->RunOnIo([&] { impl_->member_slots_[member_id] = slot; });
}

Result<std::uint16_t> ProxyNet::AddEntry(int to) {
  if (to < 0 || to >= impl_->nodes_) {
    return Status::InvalidArgument(fmt::format("ProxyNet::AddEntry: no node {}", to));
  }
  Result<std::uint16_t> port = Status::Unavailable("not run");
  impl_->RunOnIo([&] {
    auto entry = std::make_unique<Link>(impl_->io_, impl_->rng_, impl_->broken_);
    if (asio::error_code ec = Impl::ListenOnLoopback(entry->acceptor)) {
      port = Status::IOError(fmt::format("proxy entry of n{}: {}", to + 1, ec.message()));
      return;
    }
    port = entry->acceptor.local_endpoint().port();
    impl_->AcceptEntry(*entry, to);
    impl_->entries_.push_back(std::move(entry));
  });
  return port;
}

std::uint64_t ProxyNet::unattributed() const {
  std::uint64_t n = 0;
  impl_->RunOnIo([&] { n = impl_->unattributed_; });
  return n;
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
