#include "etcd_server.h"

#include <signal.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "epoch/client/client.h"
#include "epoch/test_support/eventually.h"
#include "epoch/test_support/files.h"

namespace epoch::client::testing {
namespace {

std::string FindInPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::filesystem::path candidate = std::filesystem::path(dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  throw std::runtime_error("`" + name +
                           "` not found in PATH: install the etcd-server / etcd-client packages "
                           "(the test command does); this test needs a real etcd");
}

}  // namespace

std::string EtcdBinary() { return FindInPath("etcd"); }
std::string EtcdctlBinary() { return FindInPath("etcdctl"); }

EtcdCluster::EtcdCluster(int members) {
  const std::string binary = EtcdBinary();
  std::string initial_cluster;
  for (int i = 0; i < members; ++i) {
    Member m;
    m.name = "m" + std::to_string(i);
    m.client_port = FreeLoopbackPort();
    m.peer_port = FreeLoopbackPort();
    if (!initial_cluster.empty()) initial_cluster += ",";
    initial_cluster += m.name + "=http://127.0.0.1:" + std::to_string(m.peer_port);
    members_.push_back(std::move(m));
  }
  for (Member& m : members_) {
    const std::string client_url = "http://127.0.0.1:" + std::to_string(m.client_port);
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(m.peer_port);
    m.process =
        std::make_unique<ChildProcess>(std::vector<std::string>{binary,
                                                                "--name",
                                                                m.name,
                                                                "--data-dir",
                                                                dir_.Sub(m.name),
                                                                "--listen-client-urls",
                                                                client_url,
                                                                "--advertise-client-urls",
                                                                client_url,
                                                                "--listen-peer-urls",
                                                                peer_url,
                                                                "--initial-advertise-peer-urls",
                                                                peer_url,
                                                                "--initial-cluster",
                                                                initial_cluster,
                                                                "--initial-cluster-state",
                                                                "new",
                                                                "--heartbeat-interval",
                                                                "50",
                                                                "--election-timeout",
                                                                "500",
                                                                "--logger",
                                                                "zap",
                                                                "--log-outputs",
                                                                "stderr",
                                                                "--log-level",
                                                                "warn"},
                                       dir_.Sub(m.name + ".log"));
  }
  // Ready = every member answers Status and knows a leader.
  for (int i = 0; i < members; ++i) {
    ClientOptions options;
    options.endpoints = {Endpoint(i)};
    options.call_timeout = std::chrono::milliseconds(500);
    auto client = Client::Create(options);
    if (!client.ok()) throw std::runtime_error(client.status().ToString());
    const bool ready = test_support::Eventually(
        [&] {
          if (!members_[i].process->Running()) return false;
          auto status = (*client)->StatusOf(0);
          return status.ok() && status->leader() != 0;
        },
        std::chrono::seconds(30), test_support::kProcessPoll);
    if (!ready) {
      throw std::runtime_error("etcd member " + members_[i].name + " not ready within 30 s:\n" +
                               test_support::FileTail(dir_.Sub(members_[i].name + ".log")));
    }
  }
}

EtcdCluster::~EtcdCluster() {
  for (Member& m : members_) StopMember(static_cast<int>(&m - members_.data()));
}

void EtcdCluster::StopMember(int member) {
  auto& process = members_[member].process;
  if (process && !process->Stop(SIGTERM, std::chrono::seconds(10))) {
    process->Stop(SIGKILL, std::chrono::seconds(10));
  }
}

std::vector<std::string> EtcdCluster::Endpoints() const {
  std::vector<std::string> endpoints;
  for (int i = 0; i < static_cast<int>(members_.size()); ++i) endpoints.push_back(Endpoint(i));
  return endpoints;
}

std::string EtcdCluster::Endpoint(int member) const {
  return "127.0.0.1:" + std::to_string(members_[member].client_port);
}

}  // namespace epoch::client::testing
