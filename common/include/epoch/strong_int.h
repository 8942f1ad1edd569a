// StrongInt: an integer with a type of its own, so that a Term cannot be passed where a LogIndex is
// expected (docs/conventions.md §3). Header-only; used by every module.
//
// Each strong type is declared by a tag struct. The tag chooses the representation and which
// arithmetic is meaningful:
//   - kOffsetArithmetic: `x + n`, `x - n` (n a plain count) and `x - y` (a distance) are allowed,
//     as for log indexes and revisions. Without it only ++ and comparison exist (terms, IDs).
#pragma once

#include <compare>
#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <type_traits>

#include <fmt/format.h>

namespace epoch {

template <typename Tag>
concept StrongIntTag = requires {
  typename Tag::Rep;
  { Tag::kOffsetArithmetic } -> std::convertible_to<bool>;
} && std::is_integral_v<typename Tag::Rep>;

template <StrongIntTag Tag>
class StrongInt {
 public:
  using Rep = typename Tag::Rep;

  constexpr StrongInt() = default;
  constexpr explicit StrongInt(Rep value) : value_(value) {}

  [[nodiscard]] constexpr Rep value() const { return value_; }
  [[nodiscard]] constexpr bool IsZero() const { return value_ == 0; }

  static constexpr StrongInt Max() { return StrongInt(std::numeric_limits<Rep>::max()); }

  friend constexpr auto operator<=>(StrongInt, StrongInt) = default;

  constexpr StrongInt& operator++() {
    ++value_;
    return *this;
  }
  constexpr StrongInt operator++(int) {
    StrongInt old = *this;
    ++value_;
    return old;
  }
  [[nodiscard]] constexpr StrongInt Next() const { return StrongInt(value_ + 1); }

  // Offset arithmetic: an index plus or minus a count of entries is an index; the difference of
  // two indexes is a count.
  friend constexpr StrongInt operator+(StrongInt a, Rep delta)
    requires Tag::kOffsetArithmetic
  {
    return StrongInt(static_cast<Rep>(a.value_ + delta));
  }
  friend constexpr StrongInt operator-(StrongInt a, Rep delta)
    requires Tag::kOffsetArithmetic
  {
    return StrongInt(static_cast<Rep>(a.value_ - delta));
  }
  friend constexpr Rep operator-(StrongInt a, StrongInt b)
    requires Tag::kOffsetArithmetic
  {
    return static_cast<Rep>(a.value_ - b.value_);
  }
  constexpr StrongInt& operator+=(Rep delta)
    requires Tag::kOffsetArithmetic
  {
    value_ = static_cast<Rep>(value_ + delta);
    return *this;
  }
  constexpr StrongInt& operator--()
    requires Tag::kOffsetArithmetic
  {
    --value_;
    return *this;
  }

  friend std::ostream& operator<<(std::ostream& os, StrongInt v) { return os << v.value_; }

 private:
  Rep value_ = 0;
};

// The project's strong types. Raft's own (Term, LogIndex, NodeId) live here too so that the WAL,
// the server and the tests name them the same way; raft/ re-exports them in epoch::raft.
struct TermTag {
  using Rep = std::uint64_t;
  static constexpr bool kOffsetArithmetic = false;
};
struct LogIndexTag {
  using Rep = std::uint64_t;
  static constexpr bool kOffsetArithmetic = true;
};
struct NodeIdTag {
  using Rep = std::uint64_t;
  static constexpr bool kOffsetArithmetic = false;
};
// etcd revisions are int64 on the wire (mvccpb.KeyValue.create_revision etc.).
struct RevisionTag {
  using Rep = std::int64_t;
  static constexpr bool kOffsetArithmetic = true;
};
// etcd lease IDs are int64 on the wire and printed in hex by clients.
struct LeaseIdTag {
  using Rep = std::int64_t;
  static constexpr bool kOffsetArithmetic = false;
};
// A fencing token is the create_revision of a lock key: only compared, never computed with.
struct FencingTokenTag {
  using Rep = std::int64_t;
  static constexpr bool kOffsetArithmetic = false;
};

using Term = StrongInt<TermTag>;
using LogIndex = StrongInt<LogIndexTag>;
using NodeId = StrongInt<NodeIdTag>;
using Revision = StrongInt<RevisionTag>;
using LeaseId = StrongInt<LeaseIdTag>;
using FencingToken = StrongInt<FencingTokenTag>;

// The one sanctioned conversion between strong types: a lock key's create_revision *is* the
// fencing token of its holder (docs/timing-and-safety.md §9).
constexpr FencingToken FencingTokenFromRevision(Revision create_revision) {
  return FencingToken(create_revision.value());
}

}  // namespace epoch

template <epoch::StrongIntTag Tag>
struct std::hash<epoch::StrongInt<Tag>> {
  std::size_t operator()(epoch::StrongInt<Tag> v) const noexcept {
    return std::hash<typename Tag::Rep>{}(v.value());
  }
};

template <epoch::StrongIntTag Tag>
struct fmt::formatter<epoch::StrongInt<Tag>> : fmt::formatter<typename Tag::Rep> {
  template <typename FormatContext>
  auto format(epoch::StrongInt<Tag> v, FormatContext& ctx) const {
    return fmt::formatter<typename Tag::Rep>::format(v.value(), ctx);
  }
};
