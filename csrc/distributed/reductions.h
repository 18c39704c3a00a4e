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
// Row r of `gathered` ([ranks, count]) is rank r's contribution; returns their
// reduction ([count], gathered's dtype).
at::Tensor reduceRows(const at::Tensor& gathered, const c10d::ReduceOp& op, int ranks);

}  // namespace pto::distributed
