// The global CPU fallback: every aten op without a native pto kernel runs on the
// CPU with its pto tensors copied in and out, so every op works on pto, correctly.
//
// PTO_FALLBACK=warn (default) warns once per op, =silent says nothing, =error
// raises NotImplementedError instead of falling back.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>

#include <cstdint>
#include <map>
#include <string>

namespace pto::torch_glue {

enum class FallbackMode { kWarn, kSilent, kError };

void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Runs one op through cpuFallback from a native kernel that cannot take its
// arguments: Fallback<ATEN_OP(mm)>::call(self, mat2).
template <class Op>
using Fallback = at::native::call_fallback_fn<&cpuFallback, Op>;
// Every CPU-computed op passes here: it enforces the mode, counts and warns.
void enterCpuFallback(const std::string& op);

FallbackMode fallbackMode();
void setFallbackMode(FallbackMode mode);
// Every op that went through the fallback in this process, with its call count.
std::map<std::string, int64_t> fallbackCounts();

}  // namespace pto::torch_glue
