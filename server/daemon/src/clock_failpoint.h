// ClockFailpoint: the member's tick clock run fast or slow at run time (the chaos suite's
// clock-skew fault). It drives the node's ScaledClock (scaled_clock.h) from GET requests on the
// metrics listener, served only when epochd runs with --enable-failpoints:
//
//   /failpoint/clock?rate=R    the tick clock runs R times as fast as CLOCK_MONOTONIC from now on
//                              (R in (0, 2]; re-anchored, so it never jumps or goes back)
//   /failpoint/clock?clear=1   back to rate 1 (from where the clock stands)
//
// The reply is 200 with a one-line summary, or 400 with a one-line reason.
//
// Threading: Handle() may be called from any thread, concurrently with readers of the clock.
#pragma once

#include <string_view>

#include "metrics_http.h"
#include "scaled_clock.h"

namespace epoch::server {

class ClockFailpoint {
 public:
  static constexpr std::string_view kPathPrefix = "/failpoint/clock";

  // `clock` must outlive this object.
  explicit ClockFailpoint(ScaledClock& clock) : clock_(clock) {}

  // `target` is the request target: "/failpoint/clock?name=value".
  [[nodiscard]] HttpReply Handle(std::string_view target);

 private:
  ScaledClock& clock_;
};

}  // namespace epoch::server
