#include "stream_task.h"

#include <exception>
#include <memory>

#include "device.h"
#include "pto_check.h"

namespace pto::backend {
namespace {

struct TaskArgs {
  std::function<void()>* task;  // owned: deleted by the kernel once run
};

ptoError runTask(const void* raw_args) {
  const auto* args = static_cast<const TaskArgs*>(raw_args);
  std::unique_ptr<std::function<void()>> task(args->task);
  try {
    (*task)();
  } catch (const std::exception& error) {
    return ptoSetKernelError(PTO_ERROR_LAUNCH_FAILED, error.what());
  }
  return PTO_SUCCESS;
}

}  // namespace

void launchStreamTask(c10::Stream stream, const char* name, std::function<void()> task) {
  auto owned = std::make_unique<std::function<void()>>(std::move(task));
  const TaskArgs args{owned.get()};
  PTO_CHECK(ptoLaunchKernel(nativeStream(stream), name, &runTask, &args, sizeof args));
  owned.release();  // the kernel owns it now
}

}  // namespace pto::backend
