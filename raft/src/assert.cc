#include "assert.h"

#include <cstdio>
#include <cstdlib>

namespace epoch::raft {

void AssertFailed(const AssertContext& ctx, const char* file, int line, const char* condition,
                  const std::string& message) {
  fmt::print(stderr, "raft assertion failed: node={} term={} at {}:{}: ({}) {}\n", ctx.id, ctx.term,
             file, line, condition, message);
  std::fflush(stderr);
  std::abort();
}

}  // namespace epoch::raft
