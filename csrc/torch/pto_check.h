// The one checking macro at the boundary between torch glue and the runtime:
// a failing runtime call throws with the caller's file and line, the call that
// failed and the runtime's own message. Out-of-memory becomes torch.OutOfMemoryError.
#pragma once

#include <c10/util/Exception.h>

#include "runtime/pto_runtime.h"

namespace pto::torch_glue {

[[noreturn]] void throwRuntimeError(ptoError status, const char* call, const char* file, int line);

}  // namespace pto::torch_glue

#define PTO_CHECK(call)                                                       \
  do {                                                                        \
    const ptoError pto_check_status_ = (call);                                \
    if (pto_check_status_ != PTO_SUCCESS) {                                   \
      ::pto::torch_glue::throwRuntimeError(pto_check_status_, #call, __FILE__, __LINE__); \
    }                                                                         \
  } while (0)
