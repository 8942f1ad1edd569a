// EtcdServer / EtcdCluster: real etcd members on loopback as test peers for the gRPC client (the
// same client talks to Epoch unchanged). Each member gets a temp data dir and free ports,
// and is stopped by PID on destruction.
//
// A missing etcd binary or a member that does not come up throws std::runtime_error with the
// reason and the member's log: the test fails loudly, it never skips.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "epoch/test_support/temp_dir.h"
#include "test_support.h"

namespace epoch::client::testing {

class EtcdCluster {
 public:
  // Starts `members` etcd processes forming one cluster and waits until it has a leader.
  explicit EtcdCluster(int members = 1);
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // "127.0.0.1:<port>" of every member, in member order.
  [[nodiscard]] std::vector<std::string> Endpoints() const;
  [[nodiscard]] std::string Endpoint(int member) const;
  [[nodiscard]] pid_t Pid(int member) const { return members_[member].process->pid(); }
  // SIGSTOPs member `member` and waits until all its threads are stopped (ChildProcess::Pause).
  bool Pause(int member) { return members_[member].process->Pause(); }

  // Stops member `member` (SIGTERM, then SIGKILL); a stopped member stays down.
  void StopMember(int member);

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    std::unique_ptr<ChildProcess> process;
  };
  test_support::TempDir dir_{"epoch-etcd"};
  std::vector<Member> members_;
};

// Path of the etcd binary (PATH lookup of `etcd`); throws if there is none.
std::string EtcdBinary();
// Path of the etcdctl binary; throws if there is none.
std::string EtcdctlBinary();

}  // namespace epoch::client::testing
