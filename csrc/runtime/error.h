// Recording failures: every runtime entry point that fails goes through fail(),
// which keeps the message for ptoGetRecentErrMsg() on the calling thread.
#pragma once

#include <sstream>
#include <string>

#include "pto_runtime.h"

namespace pto::rt {

ptoError fail(ptoError code, std::string message);

template <typename... Parts>
std::string formatMessage(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

template <typename... Parts>
ptoError failf(ptoError code, const Parts&... parts) {
  return fail(code, formatMessage(parts...));
}

// The error a kernel or host function reported last on this thread (worker side).
std::string recentErrorMessage();

}  // namespace pto::rt
