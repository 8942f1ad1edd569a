// epochctl's parsers and file checks, without a cluster: etcdctl's txn syntax, durations, hex
// IDs, the "Error:" line, CRC-32C and the snapshot file verification.
#include <openssl/evp.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <sstream>

#include "ctl.h"
#include "epoch/byte_coding.h"
#include "epoch/crc32c.h"
#include "epoch/etcd_errors.h"
#include "epoch/test_support/files.h"
#include "epoch/test_support/temp_dir.h"
#include "snapshot_file.h"
#include "txn_parse.h"

namespace epoch::ctl {
namespace {

using etcdserverpb::Compare;

TEST_CASE("txn compares: targets, operators, Go quoting", "[ctl]") {
  Result<Compare> c = ParseCompare(R"(value("a\"b") = "x\ny")");
  REQUIRE(c.ok());
  CHECK(c->key() == "a\"b");
  CHECK(c->target() == Compare::VALUE);
  CHECK(c->result() == Compare::EQUAL);
  CHECK(c->value() == "x\ny");
  c = ParseCompare(R"(ver("k") > "3")");
  REQUIRE(c.ok());
  CHECK((c->target() == Compare::VERSION && c->result() == Compare::GREATER && c->version() == 3));
  c = ParseCompare(R"(create("k") != "0")");
  REQUIRE(c.ok());
  CHECK((c->target() == Compare::CREATE && c->result() == Compare::NOT_EQUAL));
  c = ParseCompare(R"(m("k") < "5")");
  REQUIRE(c.ok());
  CHECK((c->target() == Compare::MOD && c->result() == Compare::LESS && c->mod_revision() == 5));
  c = ParseCompare("lease(`k`) = `1f`");
  REQUIRE(c.ok());
  CHECK((c->target() == Compare::LEASE && c->lease() == 31));
  for (const char* bad : {R"(value "k" = "v")", R"(value("k") ~ "v")", R"(size("k") = "1")",
                          R"(ver("k") = "x")", R"(value("k") = "v" extra)", R"(value("k) = "v")"}) {
    INFO(bad);
    Result<Compare> r = ParseCompare(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("malformed comparison") != std::string::npos);
  }
}

TEST_CASE("txn requests: put get del with their etcdctl flags", "[ctl]") {
  Result<etcdserverpb::RequestOp> op = ParseRequestOp("put \"a b\" 'c d' --lease=1f --prev-kv");
  REQUIRE(op.ok());
  REQUIRE(op->has_request_put());
  CHECK(op->request_put().key() == "a b");
  CHECK(op->request_put().value() == "c d");
  CHECK(op->request_put().lease() == 31);
  CHECK(op->request_put().prev_kv());
  op = ParseRequestOp("get k --prefix --limit=2 --rev=5 --sort-by=CREATE");
  REQUIRE(op.ok());
  CHECK(op->request_range().range_end() == "l");
  CHECK(op->request_range().limit() == 2);
  CHECK(op->request_range().revision() == 5);
  CHECK(op->request_range().sort_target() == etcdserverpb::RangeRequest::CREATE);
  CHECK(op->request_range().sort_order() == etcdserverpb::RangeRequest::ASCEND);
  op = ParseRequestOp("del k --from-key");
  REQUIRE(op.ok());
  CHECK(op->request_delete_range().range_end() == std::string(1, '\0'));
  for (const char* bad : {"frob k", "put k", "get k --nope", "get", "del k --prefix --from-key",
                          "put k v --lease=zz"}) {
    INFO(bad);
    CHECK_FALSE(ParseRequestOp(bad).ok());
  }
}

TEST_CASE("txn: sections end at empty lines, prompts only when interactive", "[ctl]") {
  std::istringstream in("value(\"k\") = \"v\"\nver(\"k\") > \"0\"\n\nput k w\nget k\n\ndel k\n\n");
  std::ostringstream prompts;
  Result<etcdserverpb::TxnRequest> txn = ParseTxn(in, true, prompts);
  REQUIRE(txn.ok());
  CHECK(txn->compare_size() == 2);
  CHECK(txn->success_size() == 2);
  CHECK(txn->failure_size() == 1);
  CHECK(prompts.str().find("failure requests (get, put, del):") != std::string::npos);
  std::istringstream quiet("\n\n\n");
  std::ostringstream none;
  Result<etcdserverpb::TxnRequest> empty = ParseTxn(quiet, false, none);
  REQUIRE(empty.ok());
  CHECK(empty->compare_size() + empty->success_size() + empty->failure_size() == 0);
  CHECK(none.str().empty());
}

TEST_CASE("durations, hex IDs and the error line", "[ctl]") {
  CHECK(ParseDuration("2s").value().count() == 2000);
  CHECK(ParseDuration("500ms").value().count() == 500);
  CHECK(ParseDuration("1.5s").value().count() == 1500);
  CHECK(ParseDuration("1m").value().count() == 60'000);
  CHECK(ParseDuration("3").value().count() == 3000);
  for (const char* bad : {"x", "5parsecs", "-1s", ""}) CHECK_FALSE(ParseDuration(bad).ok());
  CHECK(ParseHexId("1f", "lease").value() == 31);
  CHECK(ParseHexId("ffffffffffffffff", "lease").value() == -1);
  for (const char* bad : {"", "xyz", "12345678901234567"})
    CHECK_FALSE(ParseHexId(bad, "lease").ok());
  CHECK(ErrorLine(Status::NotFound("LeaseRevoke on 127.0.0.1:2379: etcdserver: requested lease not "
                                   "found (grpc NOT_FOUND)")) ==
        std::string(epoch::etcd_errors::kLeaseNotFound.message));
  CHECK(ErrorLine(Status::Timeout("deadline exceeded: Range: cannot connect to 127.0.0.1:1")) ==
        "deadline exceeded: Range: cannot connect to 127.0.0.1:1");
}

// A snapshot archive with no files, built by the SNAPSHOT.md rules.
std::string Archive(std::string_view magic) {
  std::string body;
  PutBigEndian64(&body, 42);     // applied index
  PutBigEndian64(&body, 3);      // applied term
  PutBigEndian64(&body, 17);     // revision
  PutBigEndian64(&body, 0xabc);  // cluster id
  PutBigEndian64(&body, 0);      // created
  PutBigEndian32(&body, 3);
  for (std::uint64_t id : {1, 2, 3}) PutBigEndian64(&body, id);
  PutBigEndian32(&body, 0);  // learners
  PutBigEndian32(&body, 0);  // files
  std::string payload(magic);
  PutBigEndian32(&payload, 1);
  PutBigEndian32(&payload, static_cast<std::uint32_t>(body.size()));
  payload += body;
  PutBigEndian32(&payload, crc32c::Value(body));
  payload += "EPOCHEND";
  payload.resize((payload.size() + 511) / 512 * 512, '\0');
  std::array<unsigned char, 32> digest{};
  unsigned int n = 0;
  EVP_Digest(payload.data(), payload.size(), digest.data(), &n, EVP_sha256(), nullptr);
  return payload + std::string(reinterpret_cast<const char*>(digest.data()), 32);
}

TEST_CASE("snapshot file: size rule, SHA-256 trailer, header", "[ctl]") {
  CHECK(crc32c::Value("123456789") == 0xE3069283u);
  test_support::TempDir dir("epoch-ctl");
  // Writes `bytes` to <dir>/<name>.db and returns its path.
  auto write_temp = [&dir](const std::string& name, const std::string& bytes) {
    test_support::WriteFile(dir.Sub(name + ".db"), bytes);
    return dir.Sub(name + ".db");
  };
  const std::string good = write_temp("ctl-good", Archive("EPOCHSNP"));
  Result<SnapshotInfo> info = ReadSnapshotInfo(good);
  REQUIRE(info.ok());
  CHECK(info->applied_index == 42);
  CHECK(info->revision == 17);
  CHECK(info->voters.size() == 3);
  CHECK(info->total_bytes == 544);
  std::string flipped = Archive("EPOCHSNP");
  flipped[20] ^= 1;
  const std::string corrupt = write_temp("ctl-corrupt", flipped);
  CHECK(ReadSnapshotInfo(corrupt).status().message().find("checksum mismatch") !=
        std::string::npos);
  const std::string other = write_temp("ctl-other", Archive("NOTEPOCH"));
  CHECK(ReadSnapshotInfo(other).status().message().find("not an Epoch snapshot") !=
        std::string::npos);
  const std::string cut = write_temp("ctl-cut", Archive("EPOCHSNP").substr(0, 300));
  CHECK(ReadSnapshotInfo(cut).status().message().find("truncated") != std::string::npos);
}

}  // namespace
}  // namespace epoch::ctl
