// etcdctl 3.4 against a real 3-node cluster: put, get with each flag of docs/etcd-compatibility.md
// §2, del, txn -i from stdin, compaction. Outputs are checked line by line (simple format) or
// parsed (-w json). What etcdctl 3.4 cannot send (count_only, min/max filters) goes through a gRPC
// stub.
#include <fmt/format.h>

#include "epoch/etcd_errors.h"
#include "support.h"

namespace epoch::integration {
namespace {

// The data set every get check below reads. Final state at revision 9:
//   foo/a = date      create 2, mod 9, version 3
//   foo/b = blueberry create 3, mod 7, version 2
//   foo/c = zucchini  create 4, mod 4, version 1
//   fop = x (create 5), zeta = z (create 6)
// so each sort target orders foo/a..c differently.
void SeedFoo(TestCluster& cluster) {
  const std::vector<std::pair<std::string, std::string>> puts = {
      {"foo/a", "apple"}, {"foo/b", "banana"},    {"foo/c", "zucchini"}, {"fop", "x"},
      {"zeta", "z"},      {"foo/b", "blueberry"}, {"foo/a", "cherry"},   {"foo/a", "date"}};
  std::int64_t revision = 1;  // an empty store is at revision 1
  for (const auto& [key, value] : puts) {
    auto put =
        ParseJson<etcdserverpb::PutResponse>(EtcdctlOk(cluster, {"put", key, value, "-w", "json"}));
    CHECK(put.header().revision() == revision + 1);
    revision = put.header().revision();
  }
  REQUIRE(revision == 9);
}

std::string Get(TestCluster& cluster, std::vector<std::string> args) {
  args.insert(args.begin(), "get");
  return EtcdctlOk(cluster, args);
}

std::vector<std::string> KeysOnly(TestCluster& cluster, std::vector<std::string> args) {
  args.push_back("--keys-only");
  return Lines(Get(cluster, std::move(args)));
}

using Keys = std::vector<std::string>;

TEST_CASE("etcdctl get honours key, prefix, from-key, range end, rev and limit",
          "[integration][etcdctl]") {
  auto cluster = StartCluster();
  SeedFoo(*cluster);

  CHECK(Get(*cluster, {"foo/a"}) == "foo/a\ndate\n");
  CHECK(Get(*cluster, {"foo/a", "--print-value-only"}) == "date\n");
  CHECK(Get(*cluster, {"foo/nope"}).empty());
  CHECK(Get(*cluster, {"foo/", "--prefix"}) == "foo/a\ndate\nfoo/b\nblueberry\nfoo/c\nzucchini\n");
  CHECK(KeysOnly(*cluster, {"foo/b", "--from-key"}) == Keys{"foo/b", "foo/c", "fop", "zeta"});
  // [foo/a, foo/c): the range end is exclusive.
  CHECK(KeysOnly(*cluster, {"foo/a", "foo/c"}) == Keys{"foo/a", "foo/b"});
  CHECK(KeysOnly(*cluster, {"f", "--prefix"}) == Keys{"foo/a", "foo/b", "foo/c", "fop"});

  // --rev reads history: foo/a was apple at 2..6, cherry at 8, date from 9.
  CHECK(Get(*cluster, {"foo/a", "--rev=2"}) == "foo/a\napple\n");
  CHECK(Get(*cluster, {"foo/a", "--rev=8"}) == "foo/a\ncherry\n");
  CHECK(Get(*cluster, {"foo/a", "--rev=1"}).empty());  // not created yet
  CHECK(KeysOnly(*cluster, {"foo/", "--prefix", "--rev=3"}) == Keys{"foo/a", "foo/b"});

  CHECK(KeysOnly(*cluster, {"foo/", "--prefix", "--limit=2"}) == Keys{"foo/a", "foo/b"});
  auto limited = ParseJson<etcdserverpb::RangeResponse>(
      Get(*cluster, {"foo/", "--prefix", "--limit=2", "-w", "json"}));
  CHECK(limited.kvs_size() == 2);
  CHECK(limited.more());
  CHECK(limited.count() == 3);  // the count before the limit
}

TEST_CASE("etcdctl get sorts by every target in both orders", "[integration][etcdctl]") {
  auto cluster = StartCluster();
  SeedFoo(*cluster);
  struct Case {
    const char* target;
    Keys ascend;
  };
  const Case cases[] = {
      {"KEY", {"foo/a", "foo/b", "foo/c"}},    {"VERSION", {"foo/c", "foo/b", "foo/a"}},
      {"CREATE", {"foo/a", "foo/b", "foo/c"}}, {"MODIFY", {"foo/c", "foo/b", "foo/a"}},
      {"VALUE", {"foo/b", "foo/a", "foo/c"}},
  };
  for (const Case& c : cases) {
    INFO("sort by " << c.target);
    Keys descend(c.ascend.rbegin(), c.ascend.rend());
    std::string by = fmt::format("--sort-by={}", c.target);
    CHECK(KeysOnly(*cluster, {"foo/", "--prefix", by, "--order=ASCEND"}) == c.ascend);
    CHECK(KeysOnly(*cluster, {"foo/", "--prefix", by, "--order=DESCEND"}) == descend);
  }
  // --order alone sorts by key.
  CHECK(KeysOnly(*cluster, {"foo/", "--prefix", "--order=DESCEND"}) ==
        Keys{"foo/c", "foo/b", "foo/a"});
  // Sorting happens before the limit: the two newest creations.
  CHECK(KeysOnly(*cluster, {"foo/", "--prefix", "--sort-by=CREATE", "--order=DESCEND",
                            "--limit=2"}) == Keys{"foo/c", "foo/b"});
  // etcdctl rejects an unknown target itself, before any RPC.
  CommandResult bad = cluster->Etcdctl({"get", "foo/", "--prefix", "--sort-by=BOGUS"});
  CHECK(bad.exit_code != 0);
  CHECK(bad.err.find("bad sort target BOGUS") != std::string::npos);
}

TEST_CASE("etcdctl get -w json carries revisions, versions and keys-only",
          "[integration][etcdctl]") {
  auto cluster = StartCluster();
  SeedFoo(*cluster);

  auto a = ParseJson<etcdserverpb::RangeResponse>(Get(*cluster, {"foo/a", "-w", "json"}));
  CHECK(a.header().revision() == 9);
  CHECK(a.header().raft_term() >= 2);
  CHECK(a.header().cluster_id() != 0);
  CHECK(cluster->IndexOf(a.header().member_id()) >= 0);
  REQUIRE(a.kvs_size() == 1);
  CHECK(a.kvs(0).key() == "foo/a");
  CHECK(a.kvs(0).value() == "date");
  CHECK(a.kvs(0).create_revision() == 2);
  CHECK(a.kvs(0).mod_revision() == 9);
  CHECK(a.kvs(0).version() == 3);
  CHECK(a.kvs(0).lease() == 0);
  CHECK(a.count() == 1);

  auto all =
      ParseJson<etcdserverpb::RangeResponse>(Get(*cluster, {"foo/", "--prefix", "-w", "json"}));
  REQUIRE(all.kvs_size() == 3);
  CHECK(all.kvs(1).create_revision() == 3);
  CHECK(all.kvs(1).mod_revision() == 7);
  CHECK(all.kvs(1).version() == 2);
  CHECK(all.kvs(2).create_revision() == 4);
  CHECK(all.kvs(2).mod_revision() == 4);
  CHECK(all.kvs(2).version() == 1);

  // A historical read still reports the current revision in its header.
  auto old =
      ParseJson<etcdserverpb::RangeResponse>(Get(*cluster, {"foo/a", "--rev=3", "-w", "json"}));
  CHECK(old.header().revision() == 9);
  REQUIRE(old.kvs_size() == 1);
  CHECK(old.kvs(0).version() == 1);
  CHECK(old.kvs(0).mod_revision() == 2);

  auto keys = ParseJson<etcdserverpb::RangeResponse>(
      Get(*cluster, {"foo/", "--prefix", "--keys-only", "-w", "json"}));
  REQUIRE(keys.kvs_size() == 3);
  for (const auto& kv : keys.kvs()) CHECK(kv.value().empty());
  CHECK(keys.kvs(0).mod_revision() == 9);  // keys_only keeps the metadata
}

TEST_CASE("count_only, revision filters and serializable reads", "[integration][etcdctl]") {
  auto cluster = StartCluster();
  SeedFoo(*cluster);
  Result<int> leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  int follower = (*leader + 1) % cluster->size();
  auto kv = etcdserverpb::KV::NewStub(cluster->Channel(follower));

  // etcdctl 3.4 has no --count-only: send count_only through the stub.
  etcdserverpb::RangeRequest count;
  count.set_key("foo/");
  count.set_range_end(PrefixEnd("foo/"));
  count.set_count_only(true);
  etcdserverpb::RangeResponse counted;
  REQUIRE(Range(*kv, count, &counted).ok());
  CHECK(counted.count() == 3);
  CHECK(counted.kvs_size() == 0);

  // Filters (set by clientv3's WithMinModRev etc., not by etcdctl flags).
  etcdserverpb::RangeRequest filtered = count;
  filtered.set_count_only(false);
  filtered.set_min_mod_revision(5);
  etcdserverpb::RangeResponse newer;
  REQUIRE(Range(*kv, filtered, &newer).ok());
  REQUIRE(newer.kvs_size() == 2);
  CHECK(newer.kvs(0).key() == "foo/a");
  CHECK(newer.kvs(1).key() == "foo/b");
  filtered.set_min_mod_revision(0);
  filtered.set_max_create_revision(2);
  etcdserverpb::RangeResponse oldest;
  REQUIRE(Range(*kv, filtered, &oldest).ok());
  REQUIRE(oldest.kvs_size() == 1);
  CHECK(oldest.kvs(0).key() == "foo/a");

  // A serializable read on a follower sees a write once the follower applied it (no deadline
  // on how soon; it must happen).
  EtcdctlOk(*cluster, {"put", "foo/s", "late"}, {}, cluster->node(*leader).client_address());
  std::string follower_endpoint = cluster->node(follower).client_address();
  std::string seen;
  Eventually(
      [&] {
        seen = EtcdctlOk(*cluster, {"get", "foo/s", "--consistency=s"}, {}, follower_endpoint);
        return !seen.empty();
      },
      std::chrono::seconds(10), kProcessPoll);
  CHECK(seen == "foo/s\nlate\n");
  // A linearizable read through the follower sees it at once.
  CHECK(EtcdctlOk(*cluster, {"get", "foo/s"}, {}, follower_endpoint) == "foo/s\nlate\n");
}

TEST_CASE("etcdctl del, and put with --prev-kv, --ignore-value, --ignore-lease",
          "[integration][etcdctl]") {
  auto cluster = StartCluster();
  SeedFoo(*cluster);

  CHECK(EtcdctlOk(*cluster, {"put", "zeta", "z2", "--prev-kv"}) == "OK\nzeta\nz\n");  // rev 10
  auto put = ParseJson<etcdserverpb::PutResponse>(
      EtcdctlOk(*cluster, {"put", "zeta", "z3", "--prev-kv", "-w", "json"}));  // rev 11
  CHECK(put.header().revision() == 11);
  CHECK(put.prev_kv().value() == "z2");
  CHECK(put.prev_kv().version() == 2);
  CHECK(put.prev_kv().mod_revision() == 10);
  CHECK(put.prev_kv().create_revision() == 6);

  // Deleting nothing keeps the revision.
  auto none = ParseJson<etcdserverpb::DeleteRangeResponse>(
      EtcdctlOk(*cluster, {"del", "foo/nope", "-w", "json"}));
  CHECK(none.deleted() == 0);
  CHECK(none.header().revision() == 11);

  CHECK(EtcdctlOk(*cluster, {"del", "foo/", "--prefix", "--prev-kv"}) ==
        "3\nfoo/a\ndate\nfoo/b\nblueberry\nfoo/c\nzucchini\n");
  // One delete of three keys is one revision.
  auto after = MustRange(*cluster, 0, "fop");
  CHECK(after.header().revision() == 12);
  CHECK(Get(*cluster, {"foo/", "--prefix"}).empty());

  // A key re-created after a delete starts over at version 1.
  auto recreated = ParseJson<etcdserverpb::PutResponse>(
      EtcdctlOk(*cluster, {"put", "foo/a", "again", "-w", "json"}));
  CHECK(recreated.header().revision() == 13);
  auto a = ParseJson<etcdserverpb::RangeResponse>(Get(*cluster, {"foo/a", "-w", "json"}));
  REQUIRE(a.kvs_size() == 1);
  CHECK(a.kvs(0).version() == 1);
  CHECK(a.kvs(0).create_revision() == 13);

  // Every key >= "fop": fop and zeta ("foo/a" sorts before "fop").
  CHECK(EtcdctlOk(*cluster, {"del", "fop", "--from-key"}) == "2\n");
  CHECK(KeysOnly(*cluster, {"a", "--from-key"}) == Keys{"foo/a"});
  CHECK(EtcdctlOk(*cluster, {"del", "foo/a"}) == "1\n");  // revision 15

  // --ignore-value keeps the value and still counts as a write; on a missing key it is refused.
  EtcdctlOk(*cluster, {"put", "iv", "kept"});                             // 16
  CHECK(EtcdctlOk(*cluster, {"put", "iv", "--ignore-value"}) == "OK\n");  // 17
  auto iv = ParseJson<etcdserverpb::RangeResponse>(Get(*cluster, {"iv", "-w", "json"}));
  REQUIRE(iv.kvs_size() == 1);
  CHECK(iv.kvs(0).value() == "kept");
  CHECK(iv.kvs(0).version() == 2);
  CHECK(iv.kvs(0).mod_revision() == 17);
  EtcdctlFails(*cluster, {"put", "missing", "--ignore-value"},
               std::string(epoch::etcd_errors::kKeyNotFound.message));
  // --ignore-lease keeps the (absent) lease and writes the new value.
  CHECK(EtcdctlOk(*cluster, {"put", "iv", "new", "--ignore-lease"}) == "OK\n");  // 18
  CHECK(Get(*cluster, {"iv"}) == "iv\nnew\n");
  // Both at once: a write that changes only the revision.
  CHECK(EtcdctlOk(*cluster, {"put", "iv", "--ignore-value", "--ignore-lease"}) == "OK\n");
  auto both = ParseJson<etcdserverpb::RangeResponse>(Get(*cluster, {"iv", "-w", "json"}));
  REQUIRE(both.kvs_size() == 1);
  CHECK(both.kvs(0).value() == "new");
  CHECK(both.kvs(0).mod_revision() == 19);
  CHECK(both.header().revision() == 19);
}

}  // namespace
}  // namespace epoch::integration
