#include "epoch/raft/types.h"

// The value types are header-only; this translation unit keeps epoch_raft a real archive until the
// core's sources land beside it, and checks at compile time that the header stands alone.
namespace epoch::raft {
static_assert(kNoNode.IsZero());
}  // namespace epoch::raft
