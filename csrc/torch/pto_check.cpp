#include "pto_check.h"

#include <string>

namespace pto::torch_glue {

void throwRuntimeError(ptoError status, const char* call, const char* file, int line) {
  std::string message = std::string("PTO runtime error ") + ptoGetErrorName(status) + ": " +
                        ptoGetRecentErrMsg() + "\n  (from " + call + " at " + file + ":" +
                        std::to_string(line) + ")";
  if (status == PTO_ERROR_OUT_OF_MEMORY) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, message);
  }
  TORCH_CHECK(false, message);
}

}  // namespace pto::torch_glue
