#include "distributed/work_pccl.h"

#include <torch/csrc/distributed/c10d/exception.h>

#include "torch/device.h"
#include "torch/pto_check.h"

namespace pto::distributed {

void TransferStatus::finish(std::string why) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (failure.empty()) failure = std::move(why);
    finished = true;
  }
  finished_cv.notify_all();
}

std::string TransferStatus::waitFinished(int* source) {
  std::unique_lock<std::mutex> lock(mutex);
  finished_cv.wait(lock, [&] { return finished; });
  if (source != nullptr) *source = source_rank;
  return failure;
}

WorkPCCL::WorkPCCL(int rank, c10d::OpType type, const char* name, c10::Device device, ptoEvent done,
                   std::shared_ptr<TransferStatus> status, std::vector<at::Tensor> outputs,
                   c10::intrusive_ptr<c10::ivalue::Future> future, bool blocks_host)
    : c10d::Work(rank, type, name),
      name_(name),
      device_(device),
      done_(done),
      status_(std::move(status)),
      outputs_(std::move(outputs)),
      future_(std::move(future)),
      blocks_host_(blocks_host) {}

WorkPCCL::~WorkPCCL() { ptoEventDestroy(done_); }

bool WorkPCCL::isCompleted() {
  // The event completes (carrying any failure) once the whole collective ran.
  return ptoEventQuery(done_) != PTO_ERROR_NOT_READY;
}

bool WorkPCCL::isSuccess() const {
  std::lock_guard<std::mutex> lock(status_->mutex);
  return status_->failure.empty();
}

std::exception_ptr WorkPCCL::exception() const {
  std::lock_guard<std::mutex> lock(status_->mutex);
  if (status_->failure.empty()) return nullptr;
  try {
    TORCH_CHECK_WITH(DistBackendError, false, status_->failure);
  } catch (...) {
    return std::current_exception();
  }
}

void WorkPCCL::throwIfFailed() const {
  if (auto error = exception()) std::rethrow_exception(error);
}

int WorkPCCL::sourceRank() const {
  int source = -1;
  const std::string failure = status_->waitFinished(&source);
  TORCH_CHECK_WITH(DistBackendError, failure.empty(), failure);
  return source;
}

void WorkPCCL::synchronize() {
  const std::string failure = status_->waitFinished();
  TORCH_CHECK_WITH(DistBackendError, failure.empty(), failure);
  const ptoError status = ptoEventSynchronize(done_);
  TORCH_CHECK_WITH(DistBackendError, status == PTO_SUCCESS, "pccl ", name_, " failed on ", device_.str(), ": ",
                   ptoGetRecentErrMsg());
}

void WorkPCCL::blockCurrentStream() {
  PTO_CHECK(ptoStreamWaitEvent(torch_glue::nativeStream(torch_glue::currentStream(device_.index())), done_));
}

bool WorkPCCL::wait(std::chrono::milliseconds timeout) {
  if (blocks_host_) {
    synchronize();
    return true;
  }
  throwIfFailed();
  blockCurrentStream();
  if (timeout != kNoTimeout) {
    // A bounded wait blocks the host, as NCCL's blocking wait does.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock<std::mutex> lock(status_->mutex);
    const bool finished = status_->finished_cv.wait_until(lock, deadline, [&] { return status_->finished; });
    lock.unlock();
    TORCH_CHECK_WITH(DistBackendError, finished, "pccl ", name_, ": not finished within ", timeout.count(), " ms");
    throwIfFailed();
  }
  return true;
}

}  // namespace pto::distributed
