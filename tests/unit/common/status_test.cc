#include <catch2/catch.hpp>
#include <string>

#include "epoch/status.h"

namespace epoch {
namespace {

Status FailIf(bool fail) {
  if (fail) return Status::IOError("disk on fire");
  return Status::Ok();
}

Status Propagates(bool fail, bool* reached_end) {
  EPOCH_RETURN_IF_ERROR(FailIf(fail));
  *reached_end = true;
  return Status::Ok();
}

TEST_CASE("status codes, messages and annotation", "[common]") {
  Status ok;
  CHECK(ok.ok());
  CHECK(ok.ToString() == "OK");

  Status s = Status::Corruption("bad crc in 00000001.wal at offset 4096");
  CHECK_FALSE(s.ok());
  CHECK(s.Is(StatusCode::kCorruption));
  CHECK(s.ToString() == "Corruption: bad crc in 00000001.wal at offset 4096");
  Status annotated = s.Annotate("open wal");
  CHECK(annotated.code() == StatusCode::kCorruption);
  CHECK(annotated.message() == "open wal: bad crc in 00000001.wal at offset 4096");
  CHECK(ok.Annotate("ignored").ok());
}

TEST_CASE("EPOCH_RETURN_IF_ERROR stops at the first error", "[common]") {
  bool reached = false;
  CHECK(Propagates(false, &reached).ok());
  CHECK(reached);
  reached = false;
  Status s = Propagates(true, &reached);
  CHECK(s.Is(StatusCode::kIOError));
  CHECK_FALSE(reached);
}

TEST_CASE("result holds a value or an error", "[common]") {
  Result<std::string> good(std::string("value"));
  REQUIRE(good.ok());
  CHECK(*good == "value");
  CHECK(good->size() == 5);
  CHECK(good.status().ok());

  Result<std::string> bad(Status::NotFound("no such key"));
  CHECK_FALSE(bad.ok());
  CHECK(bad.status().Is(StatusCode::kNotFound));
  CHECK(bad.status().message() == "no such key");
}

}  // namespace
}  // namespace epoch
