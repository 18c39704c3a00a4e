// Running a compiled program on a stream: ONE launch for the whole program. The
// stream's worker runs its kernels in order; a tiled kernel runs tile by tile,
// its tiles spread over the simulated device's cores, each with its own scratch.
#pragma once

#include <memory>
#include <span>

#include "compiled_program.h"
#include "runtime/pto_runtime.h"

namespace pto::compiler {

// `bound` holds the address of every input and output buffer (entries for other
// buffers are ignored) and `bound_bytes` their sizes, which must cover what the
// program declares; `arena` holds compiled.arena_bytes. Returns
// PTO_ERROR_INVALID_VALUE, naming the buffer, when they do not. A failing
// instruction fails the launch with "instruction N (mnemonic): why" at the next sync.
ptoError launchProgram(ptoStream stream, std::shared_ptr<const CompiledProgram> compiled,
                       std::span<void* const> bound, std::span<const uint64_t> bound_bytes, void* arena);

}  // namespace pto::compiler
