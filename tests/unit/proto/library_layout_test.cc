// Our objects and Debian's libprotobuf must agree on the layout of protobuf's classes: generated
// and inline code (ours) and the library's code touch the same objects. GCC's -fsanitize=thread
// defines __SANITIZE_THREAD__, and protobuf's map_field.h then adds members to MapFieldBase that
// the library was built without (cmake/EpochOptions.cmake undefines it for the tsan preset). The
// symptom was a crash reading a map field the library had filled (JWT headers, gateway JSON).
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <catch2/catch.hpp>

namespace {

TEST_CASE("protobuf: a map field filled by libprotobuf reads back in our code", "[proto]") {
  google::protobuf::Struct object;
  REQUIRE(
      google::protobuf::util::JsonStringToMessage(R"({"alg":"RS256","typ":"JWT"})", &object).ok());
  REQUIRE(object.fields().size() == 2);
  auto alg = object.fields().find("alg");
  REQUIRE(alg != object.fields().end());
  CHECK(alg->second.string_value() == "RS256");
  CHECK(object.fields().find("kid") == object.fields().end());
}

}  // namespace
