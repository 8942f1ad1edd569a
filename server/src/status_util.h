// Building an epoch::Status from a code chosen at run time (stored records, error tables).
//
// Thread-safety: pure function.
#pragma once

#include <string>

#include "epoch/status.h"

namespace epoch::server {

Status MakeStatus(StatusCode code, std::string message);

}  // namespace epoch::server
