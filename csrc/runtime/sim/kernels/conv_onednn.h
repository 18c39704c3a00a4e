// The Conv group's convolutions through oneDNN's direct (jit) kernels, one call on the
// calling thread: convolution.cpp splits the batch over the device's cores.
#pragma once

#include <array>
#include <cstdint>

namespace pto::rt::sim::kernels {

enum class ConvPass : uint8_t { kForward, kBackwardData, kBackwardWeight };

// A float32 or bfloat16 tensor of rank 2 + spatial, in any strided layout (element strides).
struct ConvTensor {
  void* data;
  std::array<int64_t, 5> dims;
  std::array<int64_t, 5> strides;
  bool bfloat16 = false;

  int64_t elementBytes() const { return bfloat16 ? 2 : 4; }
};

// y = x * w as the Conv instructions define it (x [N, C, S...], w [O, C / groups, K...],
// y [N, O, Y...]); the pass writes y (forward: + beta * y), x or w from the other two,
// summing in float32. bfloat16 operands may have a float32 weight gradient (the sums of
// a slice of the batch, which convolution.cpp adds up before it rounds them).
struct ConvProblem {
  ConvPass pass;
  int spatial;
  int64_t groups;
  std::array<int64_t, 3> stride, pad, dilation;
  float beta;  // the forward's; 0 for the others
  ConvTensor x, w, y;
};

// Whether oneDNN has a direct kernel for the problem's shapes, layouts and dtypes on this
// CPU (bfloat16: none below AVX-512; its reference loops and its GEMM-based kernels are
// not taken: see conv_onednn.cpp).
bool onednnConvolutionAvailable(const ConvProblem& problem);

// Runs the problem's pass; false, having written nothing, where no direct kernel applies.
bool onednnConvolution(const ConvProblem& problem);

}  // namespace pto::rt::sim::kernels
