// What the hostile-peer tests share (hostile_peer_test.cc over plaintext, hostile_peer_tls_test.cc
// over peer mTLS, peer_tls_test.cc): a test CA and certificates made with the `openssl` CLI, an
// attacker's raw connection to a peer port (plain TCP, or TLS with or without a client
// certificate), the forged frames, the /metrics counters, and each attack as a function that
// sends it through a given connector and checks that the node dropped and counted it.
//
// An attack compares counters with their values just before it, so several attacks can run one
// after another against one cluster (while a client workload runs).
//
// Threading: the attacks and checks use Catch2 assertions: call them from the test's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "epoch/test_support/temp_dir.h"
#include "epoch/v1/internal.pb.h"
#include "raftpb/raft.pb.h"
#include "support.h"

namespace epoch::integration::hostile {

// --- a test PKI ---

// A CA (ca.pem) and, for n1..n3, a key and a certificate it signed with CN and SAN DNS = the
// member's name (and IP 127.0.0.1). More CAs and certificates on demand.
class Pki {
 public:
  Pki();
  // A self-signed CA <name>.pem / <name>.key.
  void MakeCa(const std::string& name);
  // <file>.pem / <file>.key: CN `cn`, SAN DNS `cn` and IP 127.0.0.1, signed by CA `ca`.
  void Issue(const std::string& file, const std::string& cn, const std::string& ca = "ca");
  [[nodiscard]] std::string Cert(const std::string& file) const { return dir_.Sub(file + ".pem"); }
  [[nodiscard]] std::string Key(const std::string& file) const { return dir_.Sub(file + ".key"); }
  // The peer mTLS flags of a member presenting certificate `cert_of`.
  [[nodiscard]] std::vector<std::string> PeerFlags(const std::string& cert_of) const;

 private:
  test_support::TempDir dir_{"epoch-peer-pki"};
};

// --- an attacker's connection ---

// A client certificate for an attacker's TLS connection; empty files: none presented.
struct AttackerCert {
  std::string cert_file;
  std::string key_file;
};

// A raw connection to a peer port on 127.0.0.1 from `source` (a loopback address): plain TCP, or
// TLS (the attacker does not verify the server; it presents `cert` when given). A TLS handshake
// the server refuses may still look complete to the attacker (TLS 1.3 checks the client's
// certificate after the client finished): the server then closes the connection.
class RawPeer {
 public:
  RawPeer(std::uint16_t port, const char* source, const AttackerCert* tls = nullptr);
  ~RawPeer();
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  [[nodiscard]] bool connected() const { return connected_; }
  // Whether every byte was written (a closed connection fails the write).
  bool Send(const std::string& bytes);
  // Whether the node closed the connection within `timeout` (it never writes on it otherwise).
  bool ClosedWithin(std::chrono::milliseconds timeout);

 private:
  struct Tls;
  int fd_ = -1;
  bool connected_ = false;
  std::unique_ptr<Tls> tls_;
};

// Opens an attacker's connection to `port` from `source`.
using Connector = std::function<std::unique_ptr<RawPeer>(std::uint16_t port, const char* source)>;
[[nodiscard]] Connector PlaintextConnector();
[[nodiscard]] Connector TlsConnector(AttackerCert cert);

// --- forged frames ---

std::string BigEndian(std::uint64_t v, int bytes);
std::string Framed(const std::string& payload);
// The transport's hello (server/peer/src/peer_transport.cc): magic, cluster id, member id.
std::string Hello(std::uint64_t cluster_id, std::uint64_t member);
std::string MessageFrame(raftpb::MessageType type, std::uint64_t from, std::uint64_t to,
                         std::uint64_t term);
// A ForwardRequest frame carrying `request`.
std::string ForwardFrame(std::uint64_t id, const v1::InternalRequest& request);
// A put of `key` forwarded to the leader.
std::string ForwardedPut(std::uint64_t id, const std::string& key);
// A member publication giving `member` the client URL `url`.
std::string ForgedMemberUrls(std::uint64_t id, std::uint64_t member, const std::string& url);
// An answer to forward `id`.
std::string ForwardAnswer(std::uint64_t id);
// A last snapshot chunk at index 1,000,000 whose configuration has `voter` as its only voter.
std::string SnapshotChunk(std::uint64_t from, std::uint64_t to, std::uint64_t term,
                          std::uint64_t voter);

// --- counters ---

// epoch_peer_frames_dropped_total{reason} / epoch_peer_connections_refused_total{reason} on node
// i's /metrics (0 when absent or unreadable).
std::uint64_t FramesDropped(const TestCluster& cluster, int i, const std::string& reason);
std::uint64_t ConnectionsRefused(const TestCluster& cluster, int i, const std::string& reason);
// Every epoch_peer_frames_dropped_total sample of node i, summed.
std::uint64_t AllFramesDropped(const TestCluster& cluster, int i);
// Whether count() reaches at_least within 10 s.
bool WaitCount(const std::function<std::uint64_t()>& count, std::uint64_t at_least);

// --- the cluster under attack ---

struct Victim {
  int leader = -1;
  int follower = -1;  // the node attacked
  int other = -1;     // the third node, whose identity the attacker claims
  std::uint64_t cluster_id = 0;
  std::uint64_t term = 0;
};

// The leader, the roles above and the current term (REQUIREs a healthy 3-node cluster).
Victim Survey(TestCluster& cluster);
// After an attack: the same leader in the same term, serving writes on every node.
void RequireUnharmed(TestCluster& cluster, const Victim& v, const std::string& probe);

// The flags of a cluster under attack: short limits, so the test sees them act (a frame must
// complete within 1 s, 16 connections per address), and elections only after 1 s of silence.
std::vector<std::string> HostileFlags();
// A 3-node cluster with HostileFlags; with `pki`, peer mTLS (each member presents its own
// certificate, --peer-client-cert-auth). Plaintext client ports.
ClusterPtr StartHostileCluster(const Pki* pki = nullptr);

// Clients working while the attacks run: chaos/'s RegisterWorkload (put / get / cas / delete
// with unique values, 4 clients over 16 keys, each client preferring another node), recorded as
// a history. Finish() stops them and checks the history is linearizable (tests/lincheck).
class ConcurrentClients {
 public:
  explicit ConcurrentClients(const TestCluster& cluster);
  ~ConcurrentClients();
  ConcurrentClients(const ConcurrentClients&) = delete;
  ConcurrentClients& operator=(const ConcurrentClients&) = delete;

  // REQUIREs that the clients completed `more` operations from now on (within 20 s).
  void RequireProgress(std::uint64_t more);
  // Stops the clients; REQUIREs progress during the run, a linearizable history (verdict kOk,
  // never kUnknown) and plausible serializable reads.
  void Finish();

 private:
  struct Load;
  std::unique_ptr<Load> load_;
};

// --- attacks: each sends through `connect`, checks the drop and its counter, then
// RequireUnharmed ---

// Messages with term 2^64-1 and index 2^62 claiming to come from `other`: `malformed`.
void TermOverflow(TestCluster& cluster, const Victim& v, const Connector& connect);
// TimeoutNow from a follower (this term and the next): `timeout_now_not_leader`; "from the
// leader" on a follower's connection: `sender_mismatch`.
void ForgedTimeoutNow(TestCluster& cluster, const Victim& v, const Connector& connect);
// A stranger's hello (`not_member`), a follower publishing URLs for the leader
// (`forward_forged`), an answer to a forward nobody sent (`forward_unknown`); the member list is
// unchanged and the stranger's write absent.
void ForgedForwards(TestCluster& cluster, const Victim& v, const Connector& connect);
// Snapshot chunks from a follower (`snapshot_not_leader`) and "from the leader" on a follower's
// connection (`sender_mismatch`); the follower's index does not jump.
void ForgedSnapshotChunk(TestCluster& cluster, const Victim& v, const Connector& connect);
// A heartbeat "from the leader" on a follower's connection (`sender_mismatch`) and one for the
// leader sent to the follower (`wrong_recipient`).
void FrameFromAnotherMember(TestCluster& cluster, const Victim& v, const Connector& connect);
// A frame announcing 64 MiB, 1 MiB sent, then silence (`partial_frame_timeout`); a prefix over
// the limit (`frame_too_large`).
void HalfSentFrame(TestCluster& cluster, const Victim& v, const Connector& connect);
// 1,000 idle TCP connections from 127.0.0.9 to the leader (an attacker that never says a word,
// whatever the port speaks): all but 16 refused at once (`per_address_limit`), the 16 cut at the
// hello deadline (`hello_timeout`).
void IdleConnections(TestCluster& cluster, const Victim& v);
// Every attack above, one after another.
void EveryAttack(TestCluster& cluster, const Victim& v, const Connector& connect);

// An attacker the TLS port refuses before reading any frame: it sends a hello as `other` and
// every forged frame; the connection is closed, `refusal` counted, and no frame reached the
// frame checks (no frame-drop counter moved).
void RefusedBeforeAnyFrame(TestCluster& cluster, const Victim& v, const Connector& connect,
                           const std::string& refusal);

}  // namespace epoch::integration::hostile
