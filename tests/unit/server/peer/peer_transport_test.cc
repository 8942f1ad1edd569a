// PeerTransport over real loopback sockets. No sleeps: every wait is on a condition with a
// deadline.
#include "epoch/peer/peer_transport.h"

#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "epoch/byte_coding.h"

namespace epoch::server {
namespace {

using namespace std::chrono_literals;

// Collects frames delivered to one node.
struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<NodeId, std::string>> frames;
  int unreachable = 0;

  void Add(NodeId from, std::string frame) {
    std::lock_guard lock(mu);
    frames.emplace_back(from, std::move(frame));
    cv.notify_all();
  }
  void Unreachable() {
    std::lock_guard lock(mu);
    ++unreachable;
    cv.notify_all();
  }
  bool WaitFor(std::size_t count, std::chrono::milliseconds deadline = 10s) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, deadline, [&] { return frames.size() >= count; });
  }
  bool WaitUnreachable(std::chrono::milliseconds deadline = 10s) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, deadline, [&] { return unreachable > 0; });
  }
};

// A node: a transport on its own io_context thread.
struct TestNode {
  asio::io_context io;
  Inbox inbox;
  std::unique_ptr<PeerTransport> transport;
  std::thread thread;

  TestNode(NodeId id, std::uint64_t cluster = 7, std::uint16_t port = 0,
           std::function<void(PeerTransportOptions&)> tweak = {}) {
    PeerTransportOptions opts;
    opts.self = id;
    opts.cluster_id = cluster;
    opts.listen_port = port;
    opts.max_frame_bytes = 1 << 20;
    if (tweak) tweak(opts);
    transport = std::make_unique<PeerTransport>(
        io, opts, [this](NodeId from, std::string f) { inbox.Add(from, std::move(f)); },
        [this](NodeId) { inbox.Unreachable(); });
    REQUIRE(transport->Start().ok());
    thread = std::thread([this] {
      auto guard = asio::make_work_guard(io);
      io.run();
    });
  }
  ~TestNode() {
    transport->Stop();
    io.stop();
    thread.join();
  }
  PeerAddress Address() const { return {"127.0.0.1", transport->port()}; }
};

// A loopback port a transport listened on a moment ago and nobody listens on now: dials to it are
// refused.
std::uint16_t ClosedPort() {
  TestNode probe(NodeId(2));
  return probe.transport->port();
}

TEST_CASE("frames arrive in order with the sender's id", "[server][transport]") {
  TestNode a(NodeId(1)), b(NodeId(2));
  a.transport->SetPeer(NodeId(2), b.Address());
  constexpr int kFrames = 2000;
  for (int i = 0; i < kFrames; ++i) a.transport->Send(NodeId(2), "frame-" + std::to_string(i));
  REQUIRE(b.inbox.WaitFor(kFrames));
  std::lock_guard lock(b.inbox.mu);
  for (int i = 0; i < kFrames; ++i) {
    CHECK(b.inbox.frames[i].first == NodeId(1));
    CHECK(b.inbox.frames[i].second == "frame-" + std::to_string(i));
  }
}

TEST_CASE("large and empty frames cross intact", "[server][transport]") {
  TestNode a(NodeId(1)), b(NodeId(2));
  a.transport->SetPeer(NodeId(2), b.Address());
  std::string big(512 * 1024, 'x');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31);
  a.transport->Send(NodeId(2), big);
  a.transport->Send(NodeId(2), "");
  REQUIRE(b.inbox.WaitFor(2));
  std::lock_guard lock(b.inbox.mu);
  CHECK(b.inbox.frames[0].second == big);
  CHECK(b.inbox.frames[1].second.empty());
}

TEST_CASE("a frame over the limit is refused by the sender", "[server][transport]") {
  TestNode a(NodeId(1)), b(NodeId(2));
  a.transport->SetPeer(NodeId(2), b.Address());
  a.transport->Send(NodeId(2), std::string((1 << 20) + 1, 'y'));
  a.transport->Send(NodeId(2), "after");
  REQUIRE(b.inbox.WaitFor(1));
  std::lock_guard lock(b.inbox.mu);
  CHECK(b.inbox.frames.size() == 1);
  CHECK(b.inbox.frames[0].second == "after");
}

TEST_CASE("a peer of another cluster is rejected", "[server][transport]") {
  TestNode a(NodeId(1), /*cluster=*/7), b(NodeId(2), /*cluster=*/8);
  a.transport->SetPeer(NodeId(2), b.Address());
  a.transport->Send(NodeId(2), "hello?");
  // b closes the connection after the hello; a notices on a later write and reports the peer.
  for (int i = 0; i < 200 && a.inbox.unreachable == 0; ++i) {
    a.transport->Send(NodeId(2), "again");
    a.inbox.WaitUnreachable(20ms);
  }
  CHECK(a.inbox.WaitUnreachable());
  std::lock_guard lock(b.inbox.mu);
  CHECK(b.inbox.frames.empty());
}

TEST_CASE("the sender reconnects after the peer restarts", "[server][transport]") {
  TestNode a(NodeId(1));
  std::uint16_t port;
  {
    TestNode b(NodeId(2));
    port = b.transport->port();
    a.transport->SetPeer(NodeId(2), b.Address());
    a.transport->Send(NodeId(2), "first");
    REQUIRE(b.inbox.WaitFor(1));
  }
  // b is gone: a gets told the peer is unreachable once a write or a dial fails.
  for (int i = 0; i < 500 && a.inbox.unreachable == 0; ++i) {
    a.transport->Send(NodeId(2), "into the void");
    a.inbox.WaitUnreachable(10ms);
  }
  REQUIRE(a.inbox.unreachable > 0);

  TestNode b2(NodeId(2), 7, port);
  // Keep sending until the redial succeeds. A frame queued after the last failure (the final
  // "into the void") may still arrive first: the queue is dropped when a connection fails, not
  // while the next dial is pending.
  auto got_second = [&b2] {
    std::lock_guard lock(b2.inbox.mu);
    for (const auto& f : b2.inbox.frames) {
      if (f.second == "second") return true;
    }
    return false;
  };
  bool delivered = false;
  for (int i = 0; i < 500 && !delivered; ++i) {
    a.transport->Send(NodeId(2), "second");
    b2.inbox.WaitFor(1, 10ms);
    delivered = got_second();
  }
  REQUIRE(delivered);
  std::lock_guard lock(b2.inbox.mu);
  for (const auto& f : b2.inbox.frames) {
    CHECK((f.second == "second" || f.second == "into the void"));
  }
  CHECK(a.transport->Stats(NodeId(2)).connects >= 2);
}

TEST_CASE("a peer that connects to us is redialled at once instead of after the backoff",
          "[server][transport]") {
  const std::uint16_t port = ClosedPort();
  // Backoff of 30-90 s after the first failed dial: only the nudge can bring the link up in time.
  TestNode a(NodeId(1), 7, 0, [](PeerTransportOptions& o) {
    o.reconnect_min_ms = 60000;
    o.reconnect_max_ms = 60000;
  });
  a.transport->SetPeer(NodeId(2), {"127.0.0.1", port});
  REQUIRE(a.inbox.WaitUnreachable());  // the dial was refused; a is now backing off
  a.transport->Send(NodeId(2), "queued while backing off");

  TestNode b(NodeId(2), 7, port);
  b.transport->SetPeer(NodeId(1), a.Address());
  b.transport->Send(NodeId(1), "b is back");
  REQUIRE(a.inbox.WaitFor(1));
  REQUIRE(b.inbox.WaitFor(1));
  std::lock_guard lock(b.inbox.mu);
  CHECK(b.inbox.frames[0].second == "queued while backing off");
}

TEST_CASE("a frame that never reached the socket is reported as not sent", "[server][transport]") {
  const std::uint16_t port = ClosedPort();
  TestNode a(NodeId(1), 7, 0, [](PeerTransportOptions& o) {
    o.reconnect_min_ms = 20;
    o.reconnect_max_ms = 50;
  });
  std::atomic<int> not_sent{0};
  // Unknown peer: dropped at once.
  a.transport->Send(NodeId(9), "nobody", [&] { ++not_sent; });
  CHECK(not_sent == 1);
  // Queued for a peer whose dial is then refused: dropped with the failed connection.
  a.transport->SetPeer(NodeId(2), {"127.0.0.1", port});
  a.transport->Send(NodeId(2), "queued", [&] { ++not_sent; });
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (not_sent < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  CHECK(not_sent == 2);
}

TEST_CASE("listening on a taken port fails with a clear message", "[server][transport]") {
  TestNode a(NodeId(1));
  asio::io_context io;
  PeerTransportOptions opts;
  opts.self = NodeId(3);
  opts.listen_port = a.transport->port();
  PeerTransport t(
      io, opts, [](NodeId, std::string) {}, [](NodeId) {});
  // SO_REUSEADDR does not allow two listeners on one port on Linux.
  Status s = t.Start();
  CHECK(s.Is(StatusCode::kIOError));
  CHECK(s.message().find("cannot listen for peers") != std::string::npos);
}

// A raw client socket to `port`; returns whether the server closed it within `deadline` after
// `bytes` were written (reads until EOF or an error; data is not expected).
bool ServerClosesAfter(std::uint16_t port, const std::string& bytes,
                       std::chrono::milliseconds deadline) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), port});
  if (!bytes.empty()) asio::write(socket, asio::buffer(bytes));
  bool closed = false;
  std::array<char, 64> buf{};
  socket.async_read_some(asio::buffer(buf), [&](std::error_code ec, std::size_t) {
    closed = static_cast<bool>(ec);  // EOF or reset
  });
  io.run_for(deadline);
  return closed;
}

std::string BigEndian32(std::uint32_t v) {
  std::string out;
  PutBigEndian32(&out, v);
  return out;
}

// A frame as the transport writes it: big-endian length prefix, then the payload.
std::string RawFrame(const std::string& payload) {
  return BigEndian32(static_cast<std::uint32_t>(payload.size())) + payload;
}

// The hello a node with `id` of cluster `cluster` sends first (the transport's wire format).
std::string RawHello(std::uint64_t cluster, std::uint64_t id) {
  std::string body = "EPOCHP1\n";
  for (int i = 7; i >= 0; --i) body.push_back(static_cast<char>(cluster >> (8 * i)));
  for (int i = 7; i >= 0; --i) body.push_back(static_cast<char>(id >> (8 * i)));
  return RawFrame(body);
}

// The reader parses frames out of whatever each recv returns: many frames in one segment, a
// frame split at every byte, and a frame larger than its read buffer must all arrive whole and in
// order.
TEST_CASE("frames split or packed arbitrarily on the wire arrive whole and in order",
          "[server][transport]") {
  TestNode b(NodeId(2));
  std::vector<std::string> payloads;
  for (int i = 0; i < 500; ++i) payloads.push_back("packed-" + std::to_string(i));
  std::string big(300 * 1024, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + 3);
  payloads.push_back(big);
  payloads.push_back("");
  for (int i = 0; i < 20; ++i) payloads.push_back("dribbled-" + std::to_string(i));

  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), b.transport->port()});
  std::string packed = RawHello(7, 1);
  for (int i = 0; i < 500; ++i) packed += RawFrame(payloads[i]);
  // The hello and 500 frames in as few segments as TCP likes.
  asio::write(socket, asio::buffer(packed));
  const std::string big_frame = RawFrame(big) + RawFrame("");
  for (std::size_t at = 0; at < big_frame.size(); at += 40'000) {  // split at odd offsets
    asio::write(socket, asio::buffer(big_frame.data() + at,
                                     std::min<std::size_t>(40'000, big_frame.size() - at)));
  }
  socket.set_option(asio::ip::tcp::no_delay(true));
  for (int i = 0; i < 20; ++i) {
    const std::string f = RawFrame(payloads[502 + i]);
    for (char c : f) {  // one byte per write: prefixes and bodies arrive in pieces
      asio::write(socket, asio::buffer(&c, 1));
    }
  }
  REQUIRE(b.inbox.WaitFor(payloads.size()));
  std::lock_guard lock(b.inbox.mu);
  REQUIRE(b.inbox.frames.size() == payloads.size());
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    CHECK(b.inbox.frames[i].first == NodeId(1));
    CHECK(b.inbox.frames[i].second == payloads[i]);
  }
}

// Frames before a bad one are delivered; the bad one closes the connection.
TEST_CASE("an oversized frame after good ones closes the connection after delivering them",
          "[server][transport]") {
  TestNode b(NodeId(2));
  std::string bytes = RawHello(7, 1) + RawFrame("one") + RawFrame("two");
  bytes += BigEndian32((1U << 20) + 1);  // over this node's max_frame_bytes
  CHECK(ServerClosesAfter(b.transport->port(), bytes, 10s));
  REQUIRE(b.inbox.WaitFor(2));
  std::lock_guard lock(b.inbox.mu);
  REQUIRE(b.inbox.frames.size() == 2);
  CHECK(b.inbox.frames[0].second == "one");
  CHECK(b.inbox.frames[1].second == "two");
}

TEST_CASE("a connection that sends no hello is closed after the hello timeout",
          "[server][transport]") {
  TestNode b(NodeId(2), 7, 0,
             [](PeerTransportOptions& o) { o.hello_timeout = std::chrono::milliseconds(200); });
  CHECK(ServerClosesAfter(b.transport->port(), "", 10s));
}

TEST_CASE("a first frame that is not a hello is refused before its body is read",
          "[server][transport]") {
  TestNode b(NodeId(2));
  // Announces a 1000-byte frame (under max_frame_bytes) and sends nothing more: the server must
  // not wait for, or allocate, the body of an unidentified peer.
  CHECK(ServerClosesAfter(b.transport->port(), BigEndian32(1000), 10s));
  std::lock_guard lock(b.inbox.mu);
  CHECK(b.inbox.frames.empty());
}

TEST_CASE("a hello from a node that is not a member is rejected", "[server][transport]") {
  TestNode a(NodeId(1));
  TestNode b(NodeId(2), 7, 0, [](PeerTransportOptions& o) {
    o.accept_peer = [](NodeId id) { return id == NodeId(3); };
  });
  a.transport->SetPeer(NodeId(2), b.Address());
  for (int i = 0; i < 200 && a.inbox.unreachable == 0; ++i) {
    a.transport->Send(NodeId(2), "let me in");
    a.inbox.WaitUnreachable(20ms);
  }
  CHECK(a.inbox.WaitUnreachable());
  std::lock_guard lock(b.inbox.mu);
  CHECK(b.inbox.frames.empty());
}

TEST_CASE("an outbound connection the peer closes is noticed without another send",
          "[server][transport]") {
  // A raw listener that reads the hello and the first frame, then closes: the sender must report
  // the peer unreachable (and redial) on its own, not only when it next writes into the dead
  // socket — that next frame would be lost.
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  const std::uint16_t port = acceptor.local_endpoint().port();
  TestNode a(NodeId(1));
  a.transport->SetPeer(NodeId(2), PeerAddress{"127.0.0.1", port});
  a.transport->Send(NodeId(2), "only frame");
  asio::ip::tcp::socket peer(io);
  acceptor.accept(peer);
  std::array<char, 16> buf{};
  asio::read(peer, asio::buffer(buf));  // part of the hello: the link is up
  peer.close();
  CHECK(a.inbox.WaitUnreachable());
}

TEST_CASE("a frame left half-sent is cut off at the read deadline, and counted",
          "[server][transport][limits]") {
  PeerDrops drops;
  TestNode b(NodeId(2), 7, 0, [&drops](PeerTransportOptions& o) {
    o.frame_read_timeout = std::chrono::milliseconds(200);
    o.drops = &drops;
  });
  // A whole frame first (the link is fine), then 1,000 of an announced 100,000 bytes.
  std::string bytes =
      RawHello(7, 1) + RawFrame("whole") + BigEndian32(100'000) + std::string(1000, 'x');
  CHECK(ServerClosesAfter(b.transport->port(), bytes, 10s));
  CHECK(drops.Get(FrameDrop::kPartialFrameTimeout) == 1);
  REQUIRE(b.inbox.WaitFor(1));
  // A frame over the size limit is counted too.
  CHECK(ServerClosesAfter(b.transport->port(), RawHello(7, 1) + BigEndian32((1U << 20) + 1), 10s));
  CHECK(drops.Get(FrameDrop::kFrameTooLarge) == 1);
  // So are a hello of another cluster and a first frame that is not a hello.
  CHECK(ServerClosesAfter(b.transport->port(), RawHello(8, 1), 10s));
  CHECK(ServerClosesAfter(b.transport->port(), BigEndian32(1000), 10s));
  CHECK(drops.Get(ConnectionRefusal::kWrongCluster) == 1);
  CHECK(drops.Get(ConnectionRefusal::kBadHello) == 1);
}

TEST_CASE("a slow but steady frame is not cut off", "[server][transport][limits]") {
  PeerDrops drops;
  TestNode b(NodeId(2), 7, 0, [&drops](PeerTransportOptions& o) {
    o.frame_read_timeout = std::chrono::milliseconds(2000);
    o.drops = &drops;
  });
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), b.transport->port()});
  const std::string payload(200'000, 'p');
  const std::string bytes = RawHello(7, 1) + RawFrame(payload);
  // Sent in two halves, the second once the first has been read: well within the deadline.
  asio::write(socket, asio::buffer(bytes.data(), bytes.size() / 2));
  asio::write(socket,
              asio::buffer(bytes.data() + bytes.size() / 2, bytes.size() - bytes.size() / 2));
  REQUIRE(b.inbox.WaitFor(1));
  std::lock_guard lock(b.inbox.mu);
  CHECK(b.inbox.frames[0].second == payload);
  CHECK(drops.Get(FrameDrop::kPartialFrameTimeout) == 0);
}

TEST_CASE("inbound connections are capped per address and in total",
          "[server][transport][limits]") {
  PeerDrops drops;
  TestNode b(NodeId(2), 7, 0, [&drops](PeerTransportOptions& o) {
    o.max_inbound_per_address = 3;
    o.max_inbound_connections = 5;
    o.drops = &drops;
  });
  asio::io_context io;
  auto connect = [&](const char* source) {
    auto socket = std::make_unique<asio::ip::tcp::socket>(io);
    socket->open(asio::ip::tcp::v4());
    socket->bind({asio::ip::make_address(source), 0});
    socket->connect({asio::ip::make_address("127.0.0.1"), b.transport->port()});
    return socket;
  };
  auto closed_soon = [&](asio::ip::tcp::socket& socket) {
    bool closed = false;
    std::array<char, 8> buf{};
    socket.async_read_some(asio::buffer(buf), [&](std::error_code ec, std::size_t) {
      closed = static_cast<bool>(ec);
    });
    io.restart();
    io.run_for(5s);
    return closed;
  };
  std::vector<std::unique_ptr<asio::ip::tcp::socket>> held;
  for (int i = 0; i < 3; ++i) held.push_back(connect("127.0.0.1"));
  auto fourth = connect("127.0.0.1");
  CHECK(closed_soon(*fourth));
  CHECK(drops.Get(ConnectionRefusal::kPerAddressLimit) == 1);
  for (int i = 0; i < 2; ++i) held.push_back(connect("127.0.0.2"));
  auto sixth = connect("127.0.0.3");
  CHECK(closed_soon(*sixth));
  CHECK(drops.Get(ConnectionRefusal::kTotalLimit) == 1);
  // A held connection closes: its slot is free again.
  held.front()->close();
  held.erase(held.begin());
  bool admitted = false;
  for (int attempt = 0; attempt < 100 && !admitted; ++attempt) {
    auto again = connect("127.0.0.1");
    std::array<char, 8> buf{};
    bool closed = false;
    again->async_read_some(asio::buffer(buf), [&](std::error_code ec, std::size_t) {
      closed = static_cast<bool>(ec);
    });
    io.restart();
    io.run_for(50ms);
    admitted = !closed;
    if (admitted) held.push_back(std::move(again));
  }
  CHECK(admitted);
}

}  // namespace
}  // namespace epoch::server
