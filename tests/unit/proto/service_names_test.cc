// The gRPC paths clients call are "/<package>.<Service>/<Method>". These tests read them from the
// generated descriptors and compare with etcd's service list (docs/etcd-compatibility.md §1),
// including which methods stream.
#include <google/protobuf/descriptor.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "epoch/v1/epoch.grpc.pb.h"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "v3electionpb/v3election.grpc.pb.h"
#include "v3lockpb/v3lock.grpc.pb.h"

namespace {

using google::protobuf::DescriptorPool;
using google::protobuf::MethodDescriptor;
using google::protobuf::ServiceDescriptor;

const ServiceDescriptor& Service(const std::string& full_name) {
  const ServiceDescriptor* s = DescriptorPool::generated_pool()->FindServiceByName(full_name);
  REQUIRE(s != nullptr);
  return *s;
}

std::vector<std::string> Paths(const std::string& full_name) {
  const ServiceDescriptor& s = Service(full_name);
  std::vector<std::string> out;
  for (int i = 0; i < s.method_count(); ++i) {
    out.push_back("/" + s.full_name() + "/" + s.method(i)->name());
  }
  return out;
}

const MethodDescriptor& Method(const std::string& service, const std::string& name) {
  const MethodDescriptor* m = Service(service).FindMethodByName(name);
  REQUIRE(m != nullptr);
  return *m;
}

TEST_CASE("etcdserverpb.KV method paths", "[proto]") {
  CHECK(std::string(etcdserverpb::KV::service_full_name()) == "etcdserverpb.KV");
  CHECK(Paths("etcdserverpb.KV") ==
        std::vector<std::string>{"/etcdserverpb.KV/Range", "/etcdserverpb.KV/Put",
                                 "/etcdserverpb.KV/DeleteRange", "/etcdserverpb.KV/Txn",
                                 "/etcdserverpb.KV/Compact"});
}

TEST_CASE("etcdserverpb.Watch and Lease method paths and streaming", "[proto]") {
  CHECK(Paths("etcdserverpb.Watch") == std::vector<std::string>{"/etcdserverpb.Watch/Watch"});
  const MethodDescriptor& watch = Method("etcdserverpb.Watch", "Watch");
  CHECK(watch.client_streaming());
  CHECK(watch.server_streaming());

  CHECK(Paths("etcdserverpb.Lease") ==
        std::vector<std::string>{
            "/etcdserverpb.Lease/LeaseGrant", "/etcdserverpb.Lease/LeaseRevoke",
            "/etcdserverpb.Lease/LeaseKeepAlive", "/etcdserverpb.Lease/LeaseTimeToLive",
            "/etcdserverpb.Lease/LeaseLeases"});
  const MethodDescriptor& keepalive = Method("etcdserverpb.Lease", "LeaseKeepAlive");
  CHECK(keepalive.client_streaming());
  CHECK(keepalive.server_streaming());
  CHECK_FALSE(Method("etcdserverpb.Lease", "LeaseGrant").server_streaming());
}

TEST_CASE("etcdserverpb.Cluster and Maintenance method paths", "[proto]") {
  CHECK(Paths("etcdserverpb.Cluster") ==
        std::vector<std::string>{
            "/etcdserverpb.Cluster/MemberAdd", "/etcdserverpb.Cluster/MemberRemove",
            "/etcdserverpb.Cluster/MemberUpdate", "/etcdserverpb.Cluster/MemberList",
            "/etcdserverpb.Cluster/MemberPromote"});
  CHECK(Paths("etcdserverpb.Maintenance") ==
        std::vector<std::string>{
            "/etcdserverpb.Maintenance/Alarm", "/etcdserverpb.Maintenance/Status",
            "/etcdserverpb.Maintenance/Defragment", "/etcdserverpb.Maintenance/Hash",
            "/etcdserverpb.Maintenance/HashKV", "/etcdserverpb.Maintenance/Snapshot",
            "/etcdserverpb.Maintenance/MoveLeader"});
  const MethodDescriptor& snapshot = Method("etcdserverpb.Maintenance", "Snapshot");
  CHECK_FALSE(snapshot.client_streaming());
  CHECK(snapshot.server_streaming());
}

TEST_CASE("etcdserverpb.Auth has Authenticate and the user/role methods", "[proto]") {
  std::vector<std::string> paths = Paths("etcdserverpb.Auth");
  CHECK(paths.size() == 17);
  for (const char* name :
       {"/etcdserverpb.Auth/Authenticate", "/etcdserverpb.Auth/AuthEnable",
        "/etcdserverpb.Auth/UserAdd", "/etcdserverpb.Auth/RoleGrantPermission"}) {
    CHECK(std::find(paths.begin(), paths.end(), name) != paths.end());
  }
}

TEST_CASE("v3lockpb.Lock and v3electionpb.Election method paths", "[proto]") {
  CHECK(Paths("v3lockpb.Lock") ==
        std::vector<std::string>{"/v3lockpb.Lock/Lock", "/v3lockpb.Lock/Unlock"});
  CHECK(std::string(v3lockpb::Lock::service_full_name()) == "v3lockpb.Lock");
  CHECK(Paths("v3electionpb.Election") ==
        std::vector<std::string>{"/v3electionpb.Election/Campaign",
                                 "/v3electionpb.Election/Proclaim", "/v3electionpb.Election/Leader",
                                 "/v3electionpb.Election/Observe",
                                 "/v3electionpb.Election/Resign"});
  const MethodDescriptor& observe = Method("v3electionpb.Election", "Observe");
  CHECK_FALSE(observe.client_streaming());
  CHECK(observe.server_streaming());
  CHECK(std::string(v3electionpb::Election::service_full_name()) == "v3electionpb.Election");
}

TEST_CASE("epoch.v1 extension services live in their own package", "[proto]") {
  CHECK(std::string(epoch::v1::Lease::service_full_name()) == "epoch.v1.Lease");
  CHECK(Paths("epoch.v1.Jobs") ==
        std::vector<std::string>{"/epoch.v1.Jobs/Acquire", "/epoch.v1.Jobs/Status",
                                 "/epoch.v1.Jobs/Release", "/epoch.v1.Jobs/ListDeadLetters"});
  CHECK(Paths("epoch.v1.Idempotent").size() == 3);
  CHECK(Method("epoch.v1.Lease", "KeepAlive").client_streaming());
}

}  // namespace
