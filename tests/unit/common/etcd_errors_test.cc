// The etcd error table (epoch/etcd_errors.h): codes, identities carried in Status, lookups.
#include "epoch/etcd_errors.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <set>
#include <string>

namespace epoch {
namespace {

TEST_CASE("etcd error table: codes and lookup by message", "[common][errors]") {
  using etcd_errors::kCompacted;
  CHECK(kCompacted.code == GrpcCode::kOutOfRange);
  CHECK(GrpcCodeFor(kCompacted.ToStatus()) == GrpcCode::kOutOfRange);
  CHECK(GrpcCodeFor(etcd_errors::kLeaseNotFound.ToStatus()) == GrpcCode::kNotFound);
  CHECK(etcd_errors::kLeaseNotFound.ToStatus().Is(StatusCode::kNotFound));
  CHECK(GrpcCodeFor(etcd_errors::kNoLeader.ToStatus()) == GrpcCode::kUnavailable);
  CHECK(etcd_errors::kNotLeader.ToStatus().Is(StatusCode::kNotLeader));
  CHECK(GrpcCodeFor(etcd_errors::kNotLeader.ToStatus()) == GrpcCode::kFailedPrecondition);
  CHECK(GrpcCodeFor(etcd_errors::kTooManyRequests.ToStatus()) == GrpcCode::kResourceExhausted);
  CHECK(GrpcCodeFor(Status::IOError("disk")) == GrpcCode::kInternal);
  CHECK(GrpcCodeFor(Status::Ok()) == GrpcCode::kOk);
  const EtcdError* timeout = FindEtcdError(etcd_errors::kTimeout.message);
  REQUIRE(timeout != nullptr);
  CHECK(timeout->id == ErrorId::kTimeout);
  CHECK(timeout->code == GrpcCode::kUnavailable);
  CHECK(FindEtcdError("nope") == nullptr);
}

TEST_CASE("etcd error table: every entry is found by its id and its message", "[common][errors]") {
  std::set<std::string> messages;
  for (const EtcdError& e : AllEtcdErrors()) {
    CHECK(FindEtcdError(e.id) == &e);
    CHECK(FindEtcdError(e.message) == &e);
    CHECK(messages.insert(std::string(e.message)).second);  // unique
    const Status s = e.ToStatus();
    CHECK(s.Is(e.id));
    CHECK(s.message() == e.message);
    CHECK(GrpcCodeFor(s) == e.code);
  }
  CHECK(FindEtcdError(ErrorId::kNone) == nullptr);
  // etcd's own come first, all with etcd's prefix; Epoch's follow.
  const std::string_view prefix = etcd_errors::kNoLeader.message.substr(0, 12);
  CHECK(prefix == etcd_errors::kNotLeader.message.substr(0, 12));
  for (const EtcdError& e : AllEtcdErrors()) {
    if (e.id >= ErrorId::kProposalDropped) break;
    CHECK(e.message.starts_with(prefix));
  }
}

TEST_CASE("an error's identity survives Annotate and detail, not a look-alike message",
          "[common][errors]") {
  const Status dropped = etcd_errors::kProposalDropped.ToStatus("not leader");
  CHECK(dropped.Is(ErrorId::kProposalDropped));
  CHECK(dropped.message() == std::string(etcd_errors::kProposalDropped.message) + " (not leader)");
  CHECK(GrpcCodeFor(dropped) == GrpcCode::kUnavailable);
  const Status annotated = etcd_errors::kLeaderChanged.ToStatus().Annotate("forward");
  CHECK(annotated.Is(ErrorId::kLeaderChanged));
  CHECK(GrpcCodeFor(annotated) == GrpcCode::kUnavailable);
  // The same text without an identity is not the error: the layers compare ids, not messages.
  const Status look_alike =
      Status::FailedPrecondition(std::string(etcd_errors::kNotLeader.message));
  CHECK_FALSE(look_alike.Is(ErrorId::kNotLeader));
  CHECK_FALSE(Status::Ok().Is(ErrorId::kNone));
  // Where text arrives from outside (a stored record, another process), the edge recovers it.
  CHECK(IdentifyEtcdError(look_alike).Is(ErrorId::kNotLeader));
  CHECK(IdentifyEtcdError(Status::Unavailable("other")).id() == ErrorId{});
}

std::string_view CodeName(GrpcCode code) {
  switch (code) {
    case GrpcCode::kInvalidArgument: return "InvalidArgument";
    case GrpcCode::kOutOfRange: return "OutOfRange";
    case GrpcCode::kResourceExhausted: return "ResourceExhausted";
    case GrpcCode::kNotFound: return "NotFound";
    case GrpcCode::kFailedPrecondition: return "FailedPrecondition";
    case GrpcCode::kUnavailable: return "Unavailable";
    case GrpcCode::kDataLoss: return "DataLoss";
    case GrpcCode::kPermissionDenied: return "PermissionDenied";
    case GrpcCode::kUnauthenticated: return "Unauthenticated";
    default: return "other";
  }
}

TEST_CASE("etcd error table: exactly etcd's messages and codes (etcd_error_messages.tsv)",
          "[common][errors]") {
  std::ifstream in(EPOCH_ETCD_ERROR_MESSAGES);
  REQUIRE(in.good());
  std::map<std::string, std::string> golden;  // message -> code name
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t tab = line.find('\t');
    REQUIRE(tab != std::string::npos);
    golden[line.substr(tab + 1)] = line.substr(0, tab);
  }
  CHECK(golden.size() == static_cast<std::size_t>(ErrorId::kProposalDropped) - 1);
  for (const auto& [message, code] : golden) {
    INFO(message);
    const EtcdError* e = FindEtcdError(message);
    REQUIRE(e != nullptr);
    CHECK(CodeName(e->code) == code);
  }
  for (const EtcdError& e : AllEtcdErrors()) {
    if (e.id >= ErrorId::kProposalDropped) break;
    INFO(e.message);
    CHECK(golden.contains(std::string(e.message)));
  }
}

}  // namespace
}  // namespace epoch
