// etcdctl txn -i (compares and both branches fed on stdin) and compaction against a real cluster.
#include <fmt/format.h>

#include "epoch/etcd_errors.h"
#include "support.h"

namespace epoch::integration {
namespace {

// etcdctl txn -i prints three prompts to stdout, then the outcome and one block per operation.
std::vector<std::string> TxnOutput(const std::string& out) {
  std::vector<std::string> lines = Lines(out);
  const std::vector<std::string> prompts = {
      "compares:", "success requests (get, put, del):", "failure requests (get, put, del):"};
  REQUIRE(lines.size() >= prompts.size());
  CHECK(std::vector<std::string>(lines.begin(), lines.begin() + 3) == prompts);
  return {lines.begin() + 3, lines.end()};
}

using Lines_ = std::vector<std::string>;

std::string Txn(TestCluster& cluster, const std::string& script) {
  return EtcdctlOk(cluster, {"txn", "-i"}, script);
}

// foo = bar (create 2, mod 3, version 2), other = 1 (create 4): revision 4.
void Seed(TestCluster& cluster) {
  EtcdctlOk(cluster, {"put", "foo", "first"});
  EtcdctlOk(cluster, {"put", "foo", "bar"});
  EtcdctlOk(cluster, {"put", "other", "1"});
}

TEST_CASE("etcdctl txn -i runs the success branch when every compare holds",
          "[integration][etcdctl][txn]") {
  auto cluster = StartCluster();
  Seed(*cluster);
  std::string script =
      "value(\"foo\") = \"bar\"\n"
      "version(\"foo\") = \"2\"\n"
      "create(\"foo\") = \"2\"\n"
      "mod(\"foo\") > \"2\"\n"
      "mod(\"other\") < \"5\"\n"
      "version(\"other\") != \"7\"\n"
      "\n"
      "put t/one yes\n"
      "put t/two yes\n"
      "get foo\n"
      "\n"
      "put t/fail no\n"
      "\n";
  CHECK(TxnOutput(Txn(*cluster, script)) == Lines_{"SUCCESS", "OK", "OK", "foo", "bar"});
  // Both puts of the branch share one revision.
  auto one = MustRange(*cluster, 0, "t/one");
  auto two = MustRange(*cluster, 1, "t/two");
  REQUIRE(one.kvs_size() == 1);
  REQUIRE(two.kvs_size() == 1);
  CHECK(one.kvs(0).mod_revision() == 5);
  CHECK(two.kvs(0).mod_revision() == 5);
  CHECK(one.header().revision() == 5);
  CHECK(MustRange(*cluster, 2, "t/fail").kvs_size() == 0);
}

TEST_CASE("etcdctl txn -i runs the failure branch when a compare fails",
          "[integration][etcdctl][txn]") {
  auto cluster = StartCluster();
  Seed(*cluster);
  // The second compare fails (foo's version is 2).
  std::string script =
      "value(\"foo\") = \"bar\"\n"
      "version(\"foo\") > \"2\"\n"
      "\n"
      "put t/ok yes\n"
      "\n"
      "put t/fail no\n"
      "del other\n"
      "get other\n"
      "\n";
  CHECK(TxnOutput(Txn(*cluster, script)) == Lines_{"FAILURE", "OK", "1"});
  CHECK(MustRange(*cluster, 0, "t/ok").kvs_size() == 0);
  auto fail = MustRange(*cluster, 0, "t/fail");
  REQUIRE(fail.kvs_size() == 1);
  CHECK(fail.kvs(0).value() == "no");
  CHECK(fail.header().revision() == 5);  // put + delete in one revision
  CHECK(MustRange(*cluster, 0, "other").kvs_size() == 0);

  // On an absent key CREATE compares against 0 and a VALUE compare always fails
  // (docs/etcd-compatibility.md §3.2) — the lock primitive depends on the first.
  CHECK(TxnOutput(Txn(*cluster, "create(\"absent\") = \"0\"\n\nput t/c 1\n\n\n")) ==
        Lines_{"SUCCESS", "OK"});
  CHECK(TxnOutput(Txn(*cluster, "value(\"absent\") != \"x\"\n\nput t/v 1\n\n\n")) ==
        Lines_{"FAILURE"});
  // A txn that changes nothing keeps the revision.
  auto rev = MustRange(*cluster, 0, "foo").header().revision();
  CHECK(rev == 6);
  CHECK(TxnOutput(Txn(*cluster, "mod(\"foo\") = \"3\"\n\nget foo\n\n\n")) ==
        Lines_{"SUCCESS", "foo", "bar"});
  CHECK(MustRange(*cluster, 0, "foo").header().revision() == rev);
}

TEST_CASE("compaction: reads below the compacted revision fail, at and above succeed",
          "[integration][etcdctl][compaction]") {
  auto cluster = StartCluster();
  for (int i = 1; i <= 6; ++i) EtcdctlOk(*cluster, {"put", "k", fmt::format("v{}", i)});
  // k = v1 at revision 2, ..., v6 at revision 7.
  CHECK(EtcdctlOk(*cluster, {"get", "k", "--rev=3"}) == "k\nv2\n");
  CHECK(EtcdctlOk(*cluster, {"compaction", "4"}) == "compacted revision 4\n");

  EtcdctlFails(*cluster, {"get", "k", "--rev=3"},
               std::string(epoch::etcd_errors::kCompacted.message));
  CHECK(EtcdctlOk(*cluster, {"get", "k", "--rev=4"}) == "k\nv3\n");
  CHECK(EtcdctlOk(*cluster, {"get", "k", "--rev=6"}) == "k\nv5\n");
  CHECK(EtcdctlOk(*cluster, {"get", "k"}) == "k\nv6\n");
  EtcdctlFails(*cluster, {"get", "k", "--rev=100"},
               std::string(epoch::etcd_errors::kFutureRev.message));
  // Compacting again below (or at) the compacted revision is refused the same way.
  EtcdctlFails(*cluster, {"compaction", "3"}, std::string(epoch::etcd_errors::kCompacted.message));
  // Every member compacted: a read below the compacted revision fails on each of them.
  for (int i = 0; i < cluster->size(); ++i) {
    EtcdctlFails(*cluster, {"get", "k", "--rev=2"},
                 std::string(epoch::etcd_errors::kCompacted.message), {},
                 cluster->node(i).client_address());
  }
  // Writes go on after a compaction.
  CHECK(EtcdctlOk(*cluster, {"put", "k", "v7"}) == "OK\n");
  CHECK(EtcdctlOk(*cluster, {"get", "k", "--rev=5"}) == "k\nv4\n");
}

}  // namespace
}  // namespace epoch::integration
