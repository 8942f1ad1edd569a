// Client TLS with etcd's flags against real epochd processes: etcdctl 3.4 and epochctl with
// --cacert/--cert/--key (put, get, watch, lease through a follower, lock); clients without a
// certificate, with one from another CA, and over plaintext are refused while the cluster keeps
// serving; certificate rotation without a restart; --auto-tls; --cipher-suites; and startup
// errors that name the flag. Certificates are made with the openssl CLI.
#include <fmt/format.h>

#include <filesystem>
#include <random>

#include "epoch/client/client.h"
#include "epoch/etcd_errors.h"
#include "epoch/test_support/loopback.h"
#include "epoch/test_support/process.h"
#include "epoch/test_support/temp_dir.h"
#include "metrics_support.h"
#include "support.h"

namespace epoch::integration {
namespace {

using std::chrono::seconds;

constexpr auto kOpenssl = "/usr/bin/openssl";

CommandResult Openssl(const std::vector<std::string>& args, std::string_view stdin_data = {}) {
  std::vector<std::string> argv = {kOpenssl};
  argv.insert(argv.end(), args.begin(), args.end());
  return test::RunCommand(argv, stdin_data, seconds(20));
}

void OpensslOk(const std::vector<std::string>& args) {
  CommandResult r = Openssl(args);
  INFO("openssl " << fmt::format("{}", fmt::join(args, " ")) << ": " << r.Describe());
  REQUIRE(r.exit_code == 0);
}

struct CertFiles {
  std::string cert;
  std::string key;
};

// A CA in `dir` and the certificates it signs (EC P-256, for 127.0.0.1, 127.0.0.2 and
// localhost, usable by servers and clients).
class TestCa {
 public:
  TestCa(std::string dir, std::string name) : dir_(std::move(dir)), name_(std::move(name)) {
    ca_ = {dir_ + "/" + name_ + "-ca.pem", dir_ + "/" + name_ + "-ca.key"};
    OpensslOk({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
               "-nodes", "-keyout", ca_.key, "-out", ca_.cert, "-days", "2", "-subj",
               "/CN=" + name_ + "-ca"});
    WriteFile(dir_ + "/leaf.ext",
              "subjectAltName=IP:127.0.0.1,IP:127.0.0.2,DNS:localhost\n"
              "extendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n"
              "keyUsage=critical,digitalSignature,keyEncipherment\n");
  }

  [[nodiscard]] const std::string& ca_file() const { return ca_.cert; }

  // A certificate with subject CN `cn`, in <dir>/<file>.pem and <dir>/<file>.key.
  CertFiles Issue(const std::string& file, const std::string& cn) {
    CertFiles out{dir_ + "/" + file + ".pem", dir_ + "/" + file + ".key"};
    const std::string csr = dir_ + "/" + file + ".csr";
    OpensslOk({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
               "-keyout", out.key, "-out", csr, "-subj", "/CN=" + cn});
    OpensslOk({"x509", "-req", "-in", csr, "-CA", ca_.cert, "-CAkey", ca_.key, "-set_serial",
               std::to_string(++serial_), "-days", "2", "-extfile", dir_ + "/leaf.ext", "-out",
               out.cert});
    return out;
  }

 private:
  std::string dir_;
  std::string name_;
  CertFiles ca_;
  int serial_ = 0;
};

// Two CAs, the nodes' certificate and a client's from the first, a client's from the second.
struct Pki {
  explicit Pki(const std::string& dir) : ca(dir, "main"), other_ca(dir, "other") {
    server = ca.Issue("server", "epoch-server");
    client = ca.Issue("client", "root");
    stranger = other_ca.Issue("stranger", "root");
  }
  TestCa ca;
  TestCa other_ca;
  CertFiles server;
  CertFiles client;
  CertFiles stranger;

  [[nodiscard]] test::ClusterTls ClusterTls(bool client_cert_auth) const {
    return {ca.ca_file(), server.cert, server.key, client.cert, client.key, client_cert_auth};
  }
};

ClusterPtr StartTlsCluster(int nodes, test::ClusterTls tls,
                           std::vector<std::string> more_flags = {}) {
  test::ClusterOptions options;
  options.epochd_path = EPOCHD_PATH;
  options.nodes = nodes;
  options.tls = std::move(tls);
  options.extra_flags.insert(options.extra_flags.end(), more_flags.begin(), more_flags.end());
  auto cluster = TestCluster::Start(std::move(options));
  INFO(cluster.status().ToString());
  REQUIRE(cluster.ok());
  return ClusterPtr(cluster->release());
}

// etcdctl with exactly these flags (no TLS flags added), short timeouts: for refusals.
CommandResult RawEtcdctl(const TestCluster& cluster, std::vector<std::string> args) {
  args.insert(args.begin(), {"--dial-timeout=2s", "--command-timeout=3s"});
  return test::RunEtcdctl(cluster.Endpoints(), args, {}, seconds(20));
}

// The subject the server presents to a new TLS connection, as `openssl s_client` prints it.
std::string PresentedSubject(const TestCluster& cluster, int node,
                             const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"s_client", "-connect", cluster.node(node).client_address(),
                                   "-alpn", "h2"};
  args.insert(args.end(), extra.begin(), extra.end());
  CommandResult r = Openssl(args, "");
  const std::string all = r.out + r.err;
  const std::size_t at = all.find("subject=");
  if (at == std::string::npos) return "";
  return all.substr(at, all.find('\n', at) - at);
}

// epoch_grpc_tls_handshake_failures_total summed over the nodes.
std::uint64_t HandshakeFailures(const TestCluster& cluster) {
  double sum = 0;
  for (int i = 0; i < cluster.size(); ++i) {
    sum += cluster.Metric(i, "epoch_grpc_tls_handshake_failures_total").value_or(0);
  }
  return static_cast<std::uint64_t>(sum);
}

// The cluster keeps its leader and serves a linearizable write and read over TLS.
void RequireUnharmed(TestCluster& cluster, int leader_before) {
  REQUIRE(cluster.CheckAlive().ok());
  Result<int> leader = cluster.WaitHealthy(seconds(10));
  REQUIRE(leader.ok());
  CHECK(*leader == leader_before);
  EtcdctlOk(cluster, {"put", "after", "refusals"});
  CHECK(EtcdctlOk(cluster, {"get", "after", "--print-value-only"}) == "refusals\n");
}

}  // namespace

TEST_CASE("etcdctl over client TLS does put get watch lease through a follower and lock",
          "[integration][tls]") {
  test_support::TempDir dir("epoch-tls");
  Pki pki(dir.path());
  ClusterPtr cluster = StartTlsCluster(3, pki.ClusterTls(/*client_cert_auth=*/true));
  Result<int> leader = cluster->WaitForLeader(seconds(10));
  REQUIRE(leader.ok());
  const int follower = (*leader + 1) % cluster->size();
  const std::string follower_endpoint = cluster->node(follower).client_address();

  // A write through a follower (forwarded to the leader) and reads from every member.
  EtcdctlOk(*cluster, {"put", "greeting", "hello"}, {}, follower_endpoint);
  for (int i = 0; i < cluster->size(); ++i) {
    CHECK(EtcdctlOk(*cluster, {"get", "greeting", "--print-value-only"}, {},
                    cluster->node(i).client_address()) == "hello\n");
  }

  // Lease calls on a follower go to the leader's TLS client port.
  const std::string granted = EtcdctlOk(*cluster, {"lease", "grant", "60"}, {}, follower_endpoint);
  INFO(granted);
  const std::size_t id_at = granted.find("lease ");
  REQUIRE(id_at != std::string::npos);
  const std::string lease = granted.substr(id_at + 6, granted.find(' ', id_at + 6) - id_at - 6);
  EtcdctlOk(*cluster, {"put", "leased", "v", "--lease=" + lease}, {}, follower_endpoint);
  CHECK(EtcdctlOk(*cluster, {"lease", "keep-alive", "--once", lease}, {}, follower_endpoint)
            .find("keepalived with TTL") != std::string::npos);
  CHECK(EtcdctlOk(*cluster, {"lease", "timetolive", lease, "--keys"}).find("leased") !=
        std::string::npos);
  EtcdctlOk(*cluster, {"lease", "revoke", lease}, {}, follower_endpoint);
  CHECK(EtcdctlOk(*cluster, {"get", "leased"}).empty());

  // A watch over TLS sees a later put.
  const std::string watch_log = cluster->dir() + "/watch.log";
  std::vector<std::string> watch_argv = {test::kEtcdctlPath,
                                         "--endpoints=" + cluster->node(follower).client_address()};
  for (const std::string& f : cluster->EtcdctlTlsFlags()) watch_argv.push_back(f);
  watch_argv.insert(watch_argv.end(), {"watch", "watched"});
  Result<test::ChildProcess> watch = test::ChildProcess::Spawn(watch_argv, watch_log);
  REQUIRE(watch.ok());
  // The watch is registered once a put made after it started shows up; put until one does.
  int puts = 0;
  CHECK(Eventually(
      [&] {
        EtcdctlOk(*cluster, {"put", "watched", fmt::format("v{}", ++puts)});
        return ReadFileIfExists(watch_log).find("PUT\nwatched\nv") != std::string::npos;
      },
      seconds(20), kProcessPoll));
  watch->KillAndReap();

  // The lock recipe (a session lease, a keyed wait, the unlock) over TLS.
  CHECK(EtcdctlOk(*cluster, {"lock", "tls-lock", "--", "/bin/echo", "held"}).find("held") !=
        std::string::npos);
}

TEST_CASE("client TLS refuses a missing or foreign client certificate and plaintext",
          "[integration][tls]") {
  test_support::TempDir dir("epoch-tls");
  Pki pki(dir.path());
  ClusterPtr cluster = StartTlsCluster(3, pki.ClusterTls(/*client_cert_auth=*/true));
  Result<int> leader = cluster->WaitForLeader(seconds(10));
  REQUIRE(leader.ok());
  EtcdctlOk(*cluster, {"put", "k", "v"});
  // Successful handshakes (the cluster's own clients, the members' calls) are not counted.
  REQUIRE(cluster->Metric(0, "epoch_grpc_tls_handshake_failures_total").has_value());
  CHECK(HandshakeFailures(*cluster) == 0);
  // Each refusal below is counted on the node that refused it.
  auto counted = [&] {
    return Eventually([&] { return HandshakeFailures(*cluster) > 0; }, seconds(10), kProcessPoll);
  };

  SECTION("without a client certificate") {
    CommandResult r = RawEtcdctl(*cluster, {"--cacert=" + pki.ca.ca_file(), "put", "k", "x"});
    INFO(r.Describe());
    CHECK(r.exit_code != 0);
    CHECK(counted());
  }
  SECTION("with a certificate from another CA") {
    CommandResult r =
        RawEtcdctl(*cluster, {"--cacert=" + pki.ca.ca_file(), "--cert=" + pki.stranger.cert,
                              "--key=" + pki.stranger.key, "put", "k", "x"});
    INFO(r.Describe());
    CHECK(r.exit_code != 0);
    CHECK(counted());
  }
  SECTION("over plaintext") {
    CommandResult r = RawEtcdctl(*cluster, {"put", "k", "x"});
    INFO(r.Describe());
    CHECK(r.exit_code != 0);
    // No ClientHello: the port closes the connection before any TLS (and counts it).
    CHECK(Eventually(
        [&] {
          double sum = 0;
          for (int i = 0; i < cluster->size(); ++i) {
            sum += cluster->Metric(i, "epoch_client_connections_rejected_total").value_or(0);
          }
          return sum > 0;
        },
        seconds(10), kProcessPoll));
  }
  SECTION("a client that does not trust the server's CA") {
    CommandResult r =
        RawEtcdctl(*cluster, {"--cacert=" + pki.other_ca.ca_file(), "--cert=" + pki.client.cert,
                              "--key=" + pki.client.key, "put", "k", "x"});
    INFO(r.Describe());
    CHECK(r.exit_code != 0);
    CHECK(counted());
  }
  SECTION("epochctl without a certificate, then with one") {
    CommandResult refused =
        test::RunCommand({EPOCHCTL_PATH, "--endpoints=" + cluster->Endpoints(),
                          "--command-timeout=3s", "--cacert", pki.ca.ca_file(), "put", "k", "x"},
                         {}, seconds(20));
    INFO(refused.Describe());
    CHECK(refused.exit_code != 0);
    CHECK(counted());
    CommandResult ok = test::RunCommand(
        {EPOCHCTL_PATH, "--endpoints=" + cluster->Endpoints(), "--cacert", pki.ca.ca_file(),
         "--cert", pki.client.cert, "--key", pki.client.key, "get", "k", "--print-value-only"},
        {}, seconds(20));
    INFO(ok.Describe());
    CHECK(ok.exit_code == 0);
    CHECK(ok.out == "v\n");
  }
  CHECK(EtcdctlOk(*cluster, {"get", "k", "--print-value-only"}) == "v\n");
  RequireUnharmed(*cluster, *leader);
}

TEST_CASE("a replaced certificate is served to new connections without a restart",
          "[integration][tls]") {
  test_support::TempDir dir("epoch-tls");
  Pki pki(dir.path());
  // The nodes read copies, which the test replaces.
  test::ClusterTls tls = pki.ClusterTls(/*client_cert_auth=*/true);
  tls.cert_file = dir.path() + "/live.pem";
  tls.key_file = dir.path() + "/live.key";
  std::filesystem::copy_file(pki.server.cert, tls.cert_file);
  std::filesystem::copy_file(pki.server.key, tls.key_file);
  ClusterPtr cluster = StartTlsCluster(1, tls);
  const std::vector<std::string> client = {"-CAfile",       pki.ca.ca_file(), "-cert",
                                           pki.client.cert, "-key",           pki.client.key};
  CHECK(PresentedSubject(*cluster, 0, client).find("CN = epoch-server") != std::string::npos);

  CertFiles rotated = pki.ca.Issue("rotated", "epoch-rotated");
  // Each file replaced by a rename, as a certificate manager does.
  std::filesystem::copy_file(rotated.key, tls.key_file + ".new");
  std::filesystem::copy_file(rotated.cert, tls.cert_file + ".new");
  std::filesystem::rename(tls.key_file + ".new", tls.key_file);
  std::filesystem::rename(tls.cert_file + ".new", tls.cert_file);
  CHECK(Eventually(
      [&] {
        return PresentedSubject(*cluster, 0, client).find("CN = epoch-rotated") !=
               std::string::npos;
      },
      seconds(20), kProcessPoll));
  // The port's HTTPS side (a ClientHello without h2: the gateway's handshake) rotates too.
  std::vector<std::string> http1 = client;
  http1.insert(http1.end(), {"-alpn", "http/1.1"});
  CHECK(Eventually(
      [&] {
        return PresentedSubject(*cluster, 0, http1).find("CN = epoch-rotated") != std::string::npos;
      },
      seconds(20), kProcessPoll));
  // The new certificate verifies and serves; the node never restarted.
  EtcdctlOk(*cluster, {"put", "after", "rotation"});
  CHECK(EtcdctlOk(*cluster, {"get", "after", "--print-value-only"}) == "rotation\n");
  REQUIRE(cluster->CheckAlive().ok());
}

TEST_CASE("auto TLS serves a self-signed certificate, and clients skip verification",
          "[integration][tls]") {
  test::ClusterTls tls;  // no files: --auto-tls
  ClusterPtr cluster = StartTlsCluster(3, tls);
  const std::string cert = cluster->node(0).data_dir + "/fixtures/client/cert.pem";
  REQUIRE(std::filesystem::exists(cert));
  CHECK((std::filesystem::status(cluster->node(0).data_dir + "/fixtures/client/key.pem")
             .permissions() &
         (std::filesystem::perms::group_all | std::filesystem::perms::others_all)) ==
        std::filesystem::perms::none);
  // Lease calls forwarded between members with self-signed certificates.
  Result<int> leader = cluster->WaitForLeader(seconds(10));
  REQUIRE(leader.ok());
  const std::string follower = cluster->node((*leader + 1) % 3).client_address();
  CHECK(EtcdctlOk(*cluster, {"lease", "grant", "30"}, {}, follower).find("granted") !=
        std::string::npos);
  EtcdctlOk(*cluster, {"put", "auto", "tls"}, {}, follower);
  CommandResult ctl = test::RunCommand(
      {EPOCHCTL_PATH, "--endpoints=" + cluster->Endpoints(), "--insecure-transport=false",
       "--insecure-skip-tls-verify", "get", "auto", "--print-value-only"},
      {}, seconds(20));
  INFO(ctl.Describe());
  CHECK(ctl.out == "tls\n");
  // Without skipping verification a self-signed certificate is refused, and so is plaintext.
  CHECK(RawEtcdctl(*cluster, {"--insecure-transport=false", "get", "auto"}).exit_code != 0);
  CHECK(RawEtcdctl(*cluster, {"get", "auto"}).exit_code != 0);
}

TEST_CASE("the cipher suites flag limits the TLS 1.2 suites served", "[integration][tls]") {
  test_support::TempDir dir("epoch-tls");
  Pki pki(dir.path());
  ClusterPtr cluster =
      StartTlsCluster(1, pki.ClusterTls(/*client_cert_auth=*/false),
                      {"--cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"});
  CHECK(PresentedSubject(*cluster, 0, {"-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256"})
            .find("epoch-server") != std::string::npos);
  CHECK(PresentedSubject(*cluster, 0, {"-tls1_2", "-cipher", "ECDHE-ECDSA-AES256-GCM-SHA384"}) ==
        "");
  CHECK(EtcdctlOk(*cluster, {"put", "k", "v"}) == "OK\n");
}

TEST_CASE("epoch_bench runs its load over mutual TLS", "[integration][tls]") {
  test_support::TempDir dir("epoch-tls");
  Pki pki(dir.path());
  ClusterPtr cluster = StartTlsCluster(1, pki.ClusterTls(/*client_cert_auth=*/true));
  auto bench = [&](const std::vector<std::string>& tls) {
    std::vector<std::string> argv = {EPOCH_BENCH_PATH,
                                     "--endpoints",
                                     cluster->Endpoints(),
                                     "--workload",
                                     "put",
                                     "--clients",
                                     "2",
                                     "--conns",
                                     "1",
                                     "--keys",
                                     "8",
                                     "--duration",
                                     "0.5",
                                     "--warmup",
                                     "0",
                                     "--rpc-timeout",
                                     "2",
                                     "--json"};
    argv.insert(argv.end(), tls.begin(), tls.end());
    return test::RunCommand(argv, {}, seconds(60));
  };
  CommandResult ok =
      bench({"--cacert", pki.ca.ca_file(), "--cert", pki.client.cert, "--key", pki.client.key});
  INFO(ok.Describe());
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.find("\"errors\":0,") != std::string::npos);
  CHECK(ok.out.find("\"ops\":0,") == std::string::npos);
  // Without its certificate the bench cannot connect.
  CHECK(bench({"--cacert", pki.ca.ca_file()}).exit_code != 0);
}

TEST_CASE("client TLS startup errors name the flag", "[integration][tls]") {
  test_support::TempDir dir("epoch-tls");
  Pki pki(dir.path());
  const std::string garbage = dir.path() + "/garbage.pem";
  WriteFile(garbage, "not a certificate\n");
  Result<test::PortBlock> ports = test::PortBlock::Reserve();
  REQUIRE(ports.ok());
  auto run = [&](const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {EPOCHD_PATH,
                                     "--name",
                                     "n1",
                                     "--data-dir",
                                     dir.Sub("data"),
                                     "--listen-peer-urls",
                                     fmt::format("127.0.0.1:{}", ports->port(1)),
                                     "--initial-cluster",
                                     fmt::format("n1=127.0.0.1:{}", ports->port(1)),
                                     "--listen-client-urls",
                                     fmt::format("https://127.0.0.1:{}", ports->port(0))};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return test::RunCommand(argv, {}, seconds(20));
  };
  struct Case {
    std::vector<std::string> flags;
    std::string names;
  };
  const std::vector<Case> cases = {
      {{}, "--cert-file"},
      {{"--cert-file", pki.server.cert}, "--key-file"},
      {{"--cert-file", garbage, "--key-file", pki.server.key}, "--cert-file"},
      {{"--cert-file", pki.server.cert, "--key-file", pki.client.key}, "--key-file"},
      {{"--cert-file", dir.path() + "/missing.pem", "--key-file", pki.server.key}, "--cert-file"},
      {{"--cert-file", pki.server.cert, "--key-file", pki.server.key, "--trusted-ca-file", garbage},
       "--trusted-ca-file"},
      {{"--cert-file", pki.server.cert, "--key-file", pki.server.key, "--client-cert-auth"},
       "--trusted-ca-file"},
      {{"--auto-tls", "--cipher-suites", "TLS_NO_SUCH_SUITE"}, "--cipher-suites"},
      {{"--auto-tls", "--tls-min-version", "TLS1.3"}, "--tls-min-version"},
  };
  for (const Case& c : cases) {
    CommandResult r = run(c.flags);
    INFO(fmt::format("flags: {}\n{}", fmt::join(c.flags, " "), r.Describe()));
    CHECK(r.exit_code != 0);
    CHECK(r.err.find(c.names) != std::string::npos);
  }
}

// curl against an https:// listener at `address` (host:port): GET `path` (POST `body` when
// given), with the client certificate when `with_cert`; the body on exit 0. curl offers HTTP/2
// and HTTP/1.1 (--http2), as it does by default.
CommandResult CurlHttps(const Pki& pki, const std::string& address, const std::string& path,
                        bool with_cert, const std::string& body = {}) {
  std::vector<std::string> argv = {
      "/usr/bin/curl", "--silent", "--show-error", "--fail",        "--http2",
      "--max-time",    "5",        "--cacert",     pki.ca.ca_file()};
  if (with_cert) argv.insert(argv.end(), {"--cert", pki.client.cert, "--key", pki.client.key});
  if (!body.empty()) argv.insert(argv.end(), {"-X", "POST", "--data-binary", body});
  argv.push_back(fmt::format("https://{}{}", address, path));
  return test::RunCommand(argv, {}, seconds(10));
}

CommandResult CurlMetrics(const Pki& pki, std::uint16_t port, const std::string& path,
                          bool with_cert, const std::string& body = {}) {
  return CurlHttps(pki, fmt::format("127.0.0.1:{}", port), path, with_cert, body);
}

TEST_CASE("an https:// --listen-metrics-urls serves /metrics and the probes over mutual TLS",
          "[integration][tls][metrics]") {
  test_support::TempDir dir("epoch-tls");
  Pki pki(dir.path());
  Result<test::PortBlock> ports = test::PortBlock::Reserve();
  REQUIRE(ports.ok());
  const std::uint16_t metrics_port = ports->port(2);
  std::vector<std::string> argv = {EPOCHD_PATH,
                                   "--name",
                                   "n1",
                                   "--data-dir",
                                   dir.Sub("data"),
                                   "--listen-peer-urls",
                                   fmt::format("127.0.0.1:{}", ports->port(1)),
                                   "--initial-cluster",
                                   fmt::format("n1=127.0.0.1:{}", ports->port(1)),
                                   "--listen-client-urls",
                                   fmt::format("https://127.0.0.1:{}", ports->port(0)),
                                   "--listen-metrics-urls",
                                   fmt::format("https://127.0.0.1:{}", metrics_port),
                                   "--cert-file",
                                   pki.server.cert,
                                   "--key-file",
                                   pki.server.key,
                                   "--trusted-ca-file",
                                   pki.ca.ca_file(),
                                   "--client-cert-auth"};
  Result<test::ChildProcess> node = test::ChildProcess::Spawn(argv, dir.Sub("n1.log"));
  REQUIRE(node.ok());
  INFO(ReadFileIfExists(dir.Sub("n1.log")).substr(0, 4000));
  CommandResult health;
  const bool healthy = Eventually(
      [&] {
        health = CurlMetrics(pki, metrics_port, "/health", true);
        return health.exit_code == 0 && health.out.find(R"("health":"true")") != std::string::npos;
      },
      seconds(20), kProcessPoll);
  INFO(health.Describe());
  REQUIRE(healthy);
  CommandResult metrics = CurlMetrics(pki, metrics_port, "/metrics", true);
  REQUIRE(metrics.exit_code == 0);
  CHECK(metrics.out.find("etcd_server_has_leader 1") != std::string::npos);
  // --client-cert-auth: no certificate, no answer.
  CommandResult anonymous = CurlMetrics(pki, metrics_port, "/metrics", false);
  CHECK(anonymous.exit_code != 0);
  CHECK(anonymous.out.find("etcd_server") == std::string::npos);
  // Plain HTTP on the TLS port gets no metrics either, and the node keeps serving.
  Result<test::HttpResponse> plain = test::HttpGet(metrics_port, "/metrics", seconds(5));
  CHECK((!plain.ok() || plain->code != 200));
  CHECK(CurlMetrics(pki, metrics_port, "/livez", true).exit_code == 0);
  // etcd's HTTP/JSON gateway on the same TLS listener.
  CommandResult put =
      CurlMetrics(pki, metrics_port, "/v3/kv/put", true, R"({"key":"dA==","value":"dg=="})");
  INFO(put.Describe());
  CHECK(put.exit_code == 0);
  CommandResult range = CurlMetrics(pki, metrics_port, "/v3/kv/range", true, R"({"key":"dA=="})");
  INFO(range.Describe());
  CHECK(range.out.find(R"("value":"dg==")") != std::string::npos);
  CHECK(CurlMetrics(pki, metrics_port, "/v3/kv/range", false, R"({"key":"dA=="})").exit_code != 0);
  CHECK(node->Running());
  node->KillAndReap();
}

TEST_CASE("an https:// client URL serves gRPC, etcd's gateway, /metrics and the probes on one port",
          "[integration][tls][gateway]") {
  test_support::TempDir dir("epoch-tls");
  Pki pki(dir.path());
  ClusterPtr cluster = StartTlsCluster(1, pki.ClusterTls(/*client_cert_auth=*/true));
  REQUIRE(cluster->WaitForLeader(seconds(10)).ok());
  const std::string address = cluster->node(0).client_address();
  // gRPC (etcdctl offers only h2) and the gateway (curl offers h2 and http/1.1) on one port,
  // each seeing the other's writes.
  EtcdctlOk(*cluster, {"put", "from-grpc", "g"});
  CommandResult put =
      CurlHttps(pki, address, "/v3/kv/put", true, R"({"key":"dA==","value":"dg=="})");
  INFO(put.Describe());
  CHECK(put.exit_code == 0);
  CHECK(put.out.find(R"("revision":")") != std::string::npos);
  CHECK(EtcdctlOk(*cluster, {"get", "t", "--print-value-only"}) == "v\n");
  CommandResult range = CurlHttps(pki, address, "/v3/kv/range", true, R"({"key":"ZnJvbS1ncnBj"})");
  INFO(range.Describe());
  CHECK(range.out.find(R"("value":"Zw==")") != std::string::npos);
  CommandResult version = CurlHttps(pki, address, "/version", true);
  CHECK(version.out.find(R"("etcdserver":"3.4.0")") != std::string::npos);
  CHECK(CurlHttps(pki, address, "/health", true).out.find(R"("health":"true")") !=
        std::string::npos);
  CommandResult metrics = CurlHttps(pki, address, "/metrics", true);
  REQUIRE(metrics.exit_code == 0);
  CHECK(metrics.out.find("etcd_server_has_leader 1") != std::string::npos);
  // --client-cert-auth holds for the gateway as for gRPC.
  CHECK(CurlHttps(pki, address, "/v3/kv/range", false, R"({"key":"dA=="})").exit_code != 0);
  // Plain HTTP on the TLS port: no answer, counted.
  Result<test::HttpResponse> plain =
      test::HttpGet(static_cast<std::uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))),
                    "/metrics", seconds(5));
  CHECK((!plain.ok() || plain->code != 200));
  CHECK(Eventually(
      [&] { return cluster->Metric(0, "epoch_client_connections_rejected_total").value_or(0) > 0; },
      seconds(10), kProcessPoll));
  // Both sides were used, and the relays of etcdctl's connections are counted.
  const std::string page = CurlHttps(pki, address, "/metrics", true).out;
  CHECK(SampleValue(page, "epoch_client_tls_relays_total").value_or(0) > 0);
  CHECK(SampleValue(page, "epoch_client_connections_total", {"protocol=\"http\""}).value_or(0) > 0);
  REQUIRE(cluster->CheckAlive().ok());
}

TEST_CASE("an https:// --listen-metrics-urls needs the certificate flags", "[integration][tls]") {
  test_support::TempDir dir("epoch-tls");
  CommandResult r = test::RunCommand(
      {EPOCHD_PATH, "--name", "n1", "--data-dir", dir.Sub("data"), "--initial-cluster",
       "n1=127.0.0.1:2380", "--listen-metrics-urls", "https://127.0.0.1:2381"},
      {}, seconds(20));
  INFO(r.Describe());
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--listen-metrics-urls https://127.0.0.1:2381: https:// needs --cert-file") !=
        std::string::npos);
}

TEST_CASE("a certificate-only user (CN) works without a password through the client and epochctl",
          "[integration][tls][auth]") {
  test_support::TempDir dir("epoch-tls");
  Pki pki(dir.path());
  const CertFiles worker_cert = pki.ca.Issue("worker", "worker");
  // The cluster's own etcdctl presents CN=root: root administers without a password.
  ClusterPtr cluster = StartTlsCluster(1, pki.ClusterTls(/*client_cert_auth=*/true));
  EtcdctlOk(*cluster, {"user", "add", "root", "--no-password"});
  EtcdctlOk(*cluster, {"user", "add", "worker", "--no-password"});
  EtcdctlOk(*cluster, {"role", "add", "jobs"});
  EtcdctlOk(*cluster, {"role", "grant-permission", "jobs", "--prefix=true", "readwrite", "/jobs/"});
  EtcdctlOk(*cluster, {"user", "grant-role", "worker", "jobs"});
  EtcdctlOk(*cluster, {"auth", "enable"});
  EtcdctlOk(*cluster, {"put", "/other", "o"});

  // The client library: the certificate alone, and the user named with no password.
  for (const std::string user : {"", "worker"}) {
    INFO("user '" << user << "'");
    client::ClientOptions options;
    options.endpoints = {"https://" + cluster->node(0).client_address()};
    options.tls.ca_file = pki.ca.ca_file();
    options.tls.cert_file = worker_cert.cert;
    options.tls.key_file = worker_cert.key;
    options.user = user;
    auto made = client::Client::Create(options);
    INFO(made.status().ToString());
    REQUIRE(made.ok());
    client::Client& worker = **made;
    auto put = worker.Put("/jobs/" + user + "a", "v");
    INFO(put.status().ToString());
    CHECK(put.ok());
    auto denied = worker.Get("/other");
    REQUIRE(!denied.ok());
    CHECK(denied.status().Is(ErrorId::kPermissionDenied));
    CHECK(worker.authentications() == 0);
  }

  // epochctl with the worker's certificate: its prefix, and etcd's refusal elsewhere.
  const std::vector<std::string> as_worker = {EPOCHCTL_PATH, "--endpoints=" + cluster->Endpoints(),
                                              "--cacert",    pki.ca.ca_file(),
                                              "--cert",      worker_cert.cert,
                                              "--key",       worker_cert.key};
  auto run = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = as_worker;
    argv.insert(argv.end(), args.begin(), args.end());
    return test::RunCommand(argv, {}, seconds(20));
  };
  const CommandResult put = run({"put", "/jobs/ctl", "c"});
  INFO(put.Describe());
  CHECK(put.exit_code == 0);
  CHECK(run({"get", "/jobs/ctl", "--print-value-only"}).out == "c\n");
  const CommandResult refused = run({"get", "/other"});
  CHECK(refused.exit_code != 0);
  CHECK(refused.err == "Error: etcdserver: permission denied\n");
}

}  // namespace epoch::integration
