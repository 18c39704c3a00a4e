// The Conv group's kernels (convolution.cpp): executeConv (execute.h) runs an
// instruction in oneDNN's direct kernels or, where it has none, as im2col and MKL's
// sgemm, its batch split over the device's cores; this is the plain loop that defines
// it, against which the fast ones are tested.
#pragma once

#include <span>

#include "isa/program.h"

namespace pto::rt::sim::kernels {

// The instruction (a verified tconv, tconvbwdd or tconvbwdw) on the calling thread,
// every product summed in double and rounded once (bfloat16: to float32, then to it).
void convolutionReference(const isa::Instruction& instruction, std::span<void* const> buffers);

// The instruction in its GEMM form alone (what executeConv runs where oneDNN has no
// direct kernel), for the tests to compare on any CPU.
void convolutionGemmForm(const isa::Instruction& instruction, std::span<void* const> buffers);

}  // namespace pto::rt::sim::kernels
