// What a pccl collective returns: a c10d::Work with NCCL's semantics. The
// collective is queued on the device's communication stream; wait() makes the
// caller's current stream wait for it (the host does not block), synchronize()
// blocks the host, is_completed() asks without blocking. A transfer that fails
// (a peer died, a rank never joined, shapes disagree) fails the communication
// stream, and through the event every stream that waited for it: the next
// synchronize there raises the collective's error, as NCCL's watchdog would.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/pto_runtime.h"

namespace pto::distributed {

// What the host side of a collective found, filled in by its transfer.
struct TransferStatus {
  std::mutex mutex;
  bool finished = false;
  std::string failure;  // empty: it succeeded (so far)
  int source_rank = -1;  // a receive from any source: who sent
  std::condition_variable finished_cv;

  void finish(std::string why);
  // Blocks until the transfer has run; returns its failure ("" if none).
  std::string waitFinished(int* source = nullptr);
};

class WorkPCCL final : public c10d::Work {
 public:
  WorkPCCL(int rank, c10d::OpType type, const char* name, c10::Device device, ptoEvent done,
           std::shared_ptr<TransferStatus> status, std::vector<at::Tensor> outputs,
           c10::intrusive_ptr<c10::ivalue::Future> future, bool blocks_host);
  ~WorkPCCL() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void blockCurrentStream() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  void throwIfFailed() const;

  const char* name_;
  c10::Device device_;
  ptoEvent done_;
  std::shared_ptr<TransferStatus> status_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool blocks_host_;  // a barrier: wait() returns once every rank has arrived
};

}  // namespace pto::distributed
