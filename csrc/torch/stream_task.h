// Host-side work enqueued on a pto stream as a kernel: it runs on the stream's
// worker, in stream order, and a thrown exception becomes the stream's sticky
// error naming `name`. The simulated device executes torch-free kernels the same way.
#pragma once

#include <c10/core/Stream.h>

#include <functional>

namespace pto::backend {

void launchStreamTask(c10::Stream stream, const char* name, std::function<void()> task);

}  // namespace pto::backend
