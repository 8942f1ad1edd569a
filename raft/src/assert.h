// RAFT_ASSERT: the core's check for impossible states (docs/conventions.md §4). On in every build
// type; on failure it prints the node, its term, the location and a message, then aborts. Expected
// outcomes (stale terms, dropped proposals) are return values, never assertions.
//
// The macro calls AssertCtx() unqualified: classes that know their node (Raft, RaftLog) define a
// member AssertCtx() that hides the anonymous default below.
//
// Threading: stateless.
#pragma once

#include <fmt/format.h>

#include <string>

#include "epoch/raft/types.h"

namespace epoch::raft {

struct AssertContext {
  NodeId id;
  Term term;
};

[[noreturn]] void AssertFailed(const AssertContext& ctx, const char* file, int line,
                               const char* condition, const std::string& message);

inline AssertContext AssertCtx() { return AssertContext{}; }

}  // namespace epoch::raft

#define RAFT_ASSERT(cond, ...)                                            \
  do {                                                                    \
    if (!(cond)) [[unlikely]] {                                           \
      ::epoch::raft::AssertFailed(AssertCtx(), __FILE__, __LINE__, #cond, \
                                  ::fmt::format(__VA_ARGS__));            \
    }                                                                     \
  } while (0)
