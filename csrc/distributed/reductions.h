// The reductions of received contributions, as pto ops on the communication
// stream (each a PTO instruction: tadd, tmax, tmul, tand ...): never a host loop
// over device memory. bfloat16 and float16 accumulate in float32.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>
#include <vector>

namespace pto::distributed {

std::string reduceOpName(const c10d::ReduceOp& op);
// Throws a clear error when `op` is not defined on the tensors' dtype (BAND on
// floats, AVG on bool, complex tensors ...), before anything is queued.
void checkReduceOp(const char* collective, const c10d::ReduceOp& op, const std::vector<at::Tensor>& tensors);
// Writes into `out` the reduction of `rows` (rank r's contribution is rows[r], each
// of out's dtype and size). `out` and the rows may lie in host memory the device
// reads in place (PTO_DEVICE_ATTR_PAGEABLE_MEMORY_ACCESS).
void reduceInto(const at::Tensor& out, const std::vector<at::Tensor>& rows, const c10d::ReduceOp& op);

}  // namespace pto::distributed
