// The one map between torch dtypes and PTO dtypes. The aten kernels read it here;
// the compiler's lowering reads it through pypto_torch._C._dtype_map().
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>
#include <span>

#include "isa/instructions.h"

namespace pto::torch_glue {

struct DTypePair {
  at::ScalarType torch;
  isa::DType pto;
};

// Every torch dtype PTO has, with its PTO dtype.
std::span<const DTypePair> dtypeMap();

// The PTO dtype of a torch dtype, if PTO has it.
std::optional<isa::DType> ptoDType(at::ScalarType type);

// The torch dtype of a PTO dtype (every PTO dtype has one).
at::ScalarType torchDType(isa::DType dtype);

// Whether the instruction accepts inputs of `type` (and PTO has the dtype at all).
bool accepts(isa::Opcode opcode, at::ScalarType type);

}  // namespace pto::torch_glue
