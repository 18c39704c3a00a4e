// Enqueueing PTO instructions on a runtime stream: the stream's worker runs the
// kernel of each one, in stream order.
#pragma once

#include <span>

#include "isa/program.h"
#include "runtime/pto_runtime.h"

namespace pto::kernels {

// Verifies `instruction` against the buffers' sizes, then launches it on `stream`.
// Returns PTO_ERROR_INVALID_VALUE (message: the verifier's) if it is not valid.
ptoError launch(ptoStream stream, const isa::Instruction& instruction,
                std::span<void* const> buffers, std::span<const uint64_t> buffer_bytes);

}  // namespace pto::kernels
