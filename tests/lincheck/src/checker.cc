#include "epoch/lincheck/checker.h"

namespace epoch::lincheck::detail {

std::string FormatTime(std::int64_t t) {
  return t == kNeverReturned ? std::string("never") : fmt::format("{}", t);
}

}  // namespace epoch::lincheck::detail
