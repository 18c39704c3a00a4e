// Failures as callers see them: the message of each thread's most recent failure
// (fail(), error.h) and the C entry points that name errors.
#include <algorithm>
#include <cstring>

#include "entry_point.h"
#include "error.h"

namespace pto::rt {
namespace {

// A plain buffer, not a std::string: a thread's std::string thread-locals are
// destroyed before the process's atexit handlers run, and the driver's exit hook
// (which lets queued work finish) may still report an error on this thread.
constexpr size_t kRecentErrorBytes = 8192;
thread_local char tls_recent_error[kRecentErrorBytes] = "";

}  // namespace

ptoError fail(ptoError code, std::string message) {
  // Longer messages are cut (they are for people, and 8 KiB is far more than any says).
  const size_t length = std::min(message.size(), kRecentErrorBytes - 1);
  std::memcpy(tls_recent_error, message.data(), length);
  tls_recent_error[length] = '\0';
  return code;
}

std::string recentErrorMessage() { return tls_recent_error; }

}  // namespace pto::rt

extern "C" {

const char* ptoGetErrorName(ptoError error) {
  switch (pto::rt::enumValue(error)) {
    case PTO_SUCCESS: return "PTO_SUCCESS";
    case PTO_ERROR_INVALID_VALUE: return "PTO_ERROR_INVALID_VALUE";
    case PTO_ERROR_INVALID_DEVICE: return "PTO_ERROR_INVALID_DEVICE";
    case PTO_ERROR_OUT_OF_MEMORY: return "PTO_ERROR_OUT_OF_MEMORY";
    case PTO_ERROR_INVALID_HANDLE: return "PTO_ERROR_INVALID_HANDLE";
    case PTO_ERROR_NOT_READY: return "PTO_ERROR_NOT_READY";
    case PTO_ERROR_LAUNCH_FAILED: return "PTO_ERROR_LAUNCH_FAILED";
    case PTO_ERROR_NOT_INITIALIZED: return "PTO_ERROR_NOT_INITIALIZED";
    case PTO_ERROR_NOT_SUPPORTED: return "PTO_ERROR_NOT_SUPPORTED";
    case PTO_ERROR_CAPTURE_UNSUPPORTED: return "PTO_ERROR_CAPTURE_UNSUPPORTED";
    case PTO_ERROR_CAPTURE_INVALIDATED: return "PTO_ERROR_CAPTURE_INVALIDATED";
  }
  return "PTO_ERROR_UNKNOWN";
}

const char* ptoGetRecentErrMsg(void) { return pto::rt::tls_recent_error; }

}  // extern "C"
