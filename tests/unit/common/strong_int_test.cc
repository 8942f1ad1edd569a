#include <catch2/catch.hpp>
#include <sstream>
#include <type_traits>
#include <unordered_set>

#include "epoch/strong_int.h"

namespace epoch {
namespace {

// The point of strong types: no silent conversions between them or from raw integers.
static_assert(!std::is_convertible_v<std::uint64_t, Term>);
static_assert(!std::is_convertible_v<Term, std::uint64_t>);
static_assert(!std::is_constructible_v<Term, LogIndex>);
static_assert(!std::is_constructible_v<LogIndex, Term>);
static_assert(!std::is_constructible_v<NodeId, Term>);
static_assert(!std::is_constructible_v<Revision, LogIndex>);
static_assert(!std::is_constructible_v<FencingToken, Revision>);
static_assert(!std::is_constructible_v<LeaseId, Revision>);
static_assert(!std::is_assignable_v<Term&, LogIndex>);

template <typename A, typename B>
concept Comparable = requires(A a, B b) { a < b; };
static_assert(Comparable<Term, Term>);
static_assert(!Comparable<Term, LogIndex>);
static_assert(!Comparable<Revision, FencingToken>);

template <typename T>
concept HasOffsetArithmetic = requires(T t) { t + 1u; };
static_assert(HasOffsetArithmetic<LogIndex>);
static_assert(HasOffsetArithmetic<Revision>);
static_assert(!HasOffsetArithmetic<Term>);
static_assert(!HasOffsetArithmetic<NodeId>);
static_assert(!HasOffsetArithmetic<FencingToken>);
static_assert(!HasOffsetArithmetic<LeaseId>);

static_assert(sizeof(Term) == sizeof(std::uint64_t));
static_assert(std::is_trivially_copyable_v<LogIndex>);
static_assert(std::is_same_v<Revision::Rep, std::int64_t>);

TEST_CASE("strong ints default to zero and compare by value", "[common]") {
  CHECK(Term().IsZero());
  CHECK(Term(3) < Term(4));
  CHECK(Term(4) == Term(4));
  CHECK(Term(5) != Term(4));
  CHECK(NodeId(2) > NodeId(1));
  CHECK(Revision(-1) < Revision(0));
}

TEST_CASE("log index offset arithmetic yields indexes and distances", "[common]") {
  LogIndex i(10);
  CHECK(i + 5 == LogIndex(15));
  CHECK(i - 3 == LogIndex(7));
  CHECK(LogIndex(15) - i == 5u);
  i += 2;
  CHECK(i == LogIndex(12));
  --i;
  CHECK(i == LogIndex(11));
  CHECK(i.Next() == LogIndex(12));
  CHECK(i == LogIndex(11));  // Next() does not mutate
}

TEST_CASE("increment works on every strong int", "[common]") {
  Term t(7);
  CHECK((t++) == Term(7));
  CHECK(t == Term(8));
  CHECK((++t) == Term(9));
}

TEST_CASE("fencing token comes only from a create revision", "[common]") {
  Revision create_rev(42);
  FencingToken token = FencingTokenFromRevision(create_rev);
  CHECK(token.value() == 42);
  CHECK(FencingTokenFromRevision(Revision(43)) > token);
}

TEST_CASE("strong ints hash, format and stream as their value", "[common]") {
  std::unordered_set<NodeId> ids{NodeId(1), NodeId(2), NodeId(1)};
  CHECK(ids.size() == 2);
  CHECK(fmt::format("node={} term={}", NodeId(3), Term(7)) == "node=3 term=7");
  CHECK(fmt::format("{:x}", LeaseId(255)) == "ff");
  std::ostringstream os;
  os << Revision(-5);
  CHECK(os.str() == "-5");
  CHECK(LogIndex::Max().value() == std::numeric_limits<std::uint64_t>::max());
}

}  // namespace
}  // namespace epoch
