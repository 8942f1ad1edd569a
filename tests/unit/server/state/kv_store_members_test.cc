// Members' published attributes in the state machine: the latest publication per member is kept
// (sorted by ID), survives a restart and travels in snapshot images; bad publications are refused
// deterministically; none of it moves the revision.
#include <catch2/catch.hpp>

#include "epoch/state/published_members.h"
#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)

ApplyResult Publish(TestStore& s, std::uint64_t id, const std::string& name,
                    std::vector<std::string> urls) {
  v1::InternalRequest req;
  v1::MemberAttributes* a = req.mutable_member_attributes();
  a->set_id(id);
  a->set_name(name);
  for (const std::string& u : urls) a->add_client_urls(u);
  return s.Apply(req);
}

TEST_CASE("the latest publication of each member is kept", "[server][members]") {
  TempDir dir;
  TestStore s(dir.Sub("a"));
  CHECK(s->Members()->empty());
  REQUIRE(Publish(s, 20, "n2", {"http://127.0.0.1:2389"}).status.ok());
  REQUIRE(Publish(s, 10, "n1", {"http://127.0.0.1:2379"}).status.ok());
  REQUIRE(Publish(s, 20, "n2", {"http://10.0.0.2:2379", "http://127.0.0.1:2389"}).status.ok());
  CHECK(s->CurrentRevision() == Revision(1));
  const PublishedMembers expected = {{10, "n1", {"http://127.0.0.1:2379"}},
                                     {20, "n2", {"http://10.0.0.2:2379", "http://127.0.0.1:2389"}}};
  CHECK(*s->Members() == expected);

  s.Reopen();
  CHECK(*s->Members() == expected);
  REQUIRE(s->CreateCheckpoint(dir.Sub("image")).ok());
  TestStore follower(dir.Sub("b"));
  REQUIRE(follower->ReplaceWithCheckpoint(dir.Sub("image")).ok());
  CHECK(*follower->Members() == expected);
}

TEST_CASE("publications that cannot be applied are refused", "[server][members]") {
  TempDir dir;
  TestStore s(dir.path());
  CHECK(Publish(s, 0, "n1", {"http://a:1"}).status.code() == StatusCode::kInvalidArgument);
  CHECK(Publish(s, 1, "", {"http://a:1"}).status.code() == StatusCode::kInvalidArgument);
  CHECK(Publish(s, 1, "n1", {}).status.code() == StatusCode::kInvalidArgument);
  CHECK(Publish(s, 1, "n1", {std::string(300, 'x')}).status.code() == StatusCode::kInvalidArgument);
  CHECK(Publish(s, 1, "n1", std::vector<std::string>(17, "http://a:1")).status.code() ==
        StatusCode::kInvalidArgument);
  CHECK(s->Members()->empty());
}

TEST_CASE("a client URL's dial target", "[server][members]") {
  CHECK(DialTarget("http://127.0.0.1:2379") == "127.0.0.1:2379");
  CHECK(DialTarget("https://h:1/") == "h:1");
  CHECK(DialTarget("h:1") == "h:1");
}

}  // namespace
}  // namespace epoch::server
