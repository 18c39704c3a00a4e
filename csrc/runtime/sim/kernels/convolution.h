// The Conv group's kernels (convolution.cpp): executeConv (execute.h) runs an
// instruction in oneDNN's direct kernels, its batch split over the device's cores;
// this is the plain loop that defines it, against which the fast one is tested, and
// which runs what oneDNN has no direct kernel for.
#pragma once

#include <span>

#include "isa/program.h"

namespace pto::rt::sim::kernels {

// The instruction (a verified tconv, tconvbwdd or tconvbwdw) on the calling thread,
// every product summed in double and rounded once.
void convolutionReference(const isa::Instruction& instruction, std::span<void* const> buffers);

}  // namespace pto::rt::sim::kernels
