// Names the calling thread (what `top -H`, `ps -L`, perf and gdb show), so an operator can tell
// epochd's Raft, network, WAL and watch threads apart. Linux keeps 15 bytes; longer is cut.
#pragma once

#include <pthread.h>

#include <string>
#include <string_view>

namespace epoch {

inline void SetThreadName(std::string_view name) {
  std::string n(name.substr(0, 15));
  (void)pthread_setname_np(pthread_self(), n.c_str());
}

}  // namespace epoch
