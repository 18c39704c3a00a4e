// The geometry of a Conv instruction (instructions.def), read from its operands and
// immediates: which operand is the image read (x), the weight (w) and the image
// written (y) of the convolution y = x * w it stands for, and its parameters. The
// verifier, the cost model and the kernels read it here.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "program.h"

namespace pto::isa {

inline constexpr int kMaxConvSpatial = 3;

// Where the Conv instructions' immediates are (instructions.def): groups, then stride,
// pad and dilation of each spatial dimension, then tconv's beta.
inline constexpr int kConvGroups = 0;
inline constexpr int kConvStride = 1;
inline constexpr int kConvPad = kConvStride + kMaxConvSpatial;
inline constexpr int kConvDilation = kConvPad + kMaxConvSpatial;
inline constexpr int kConvBeta = kConvDilation + kMaxConvSpatial;

struct ConvGeometry {
  const Operand* x;  // [N, C, S...]
  const Operand* w;  // [O, C / groups, K...]
  const Operand* y;  // [N, O, Y...]
  int spatial;       // 1 to 3 where the operands' ranks agree, else their rank - 2
  int64_t groups;
  std::array<int64_t, kMaxConvSpatial> stride, pad, dilation;
  double beta;  // tconv's; 0 for the gradients
};

ConvGeometry convGeometry(const Instruction& instruction);

// "" where the instruction is a convolution, else what is wrong: ranks, parameters out
// of range, the channels and groups, or y's spatial sizes not the windows x has.
// convGeometry reads only instructions this accepts.
std::string checkConvolution(const Instruction& instruction);

// The multiply-adds of the convolution: N * O * |Y| * C / groups * |K|.
double convMultiplyAdds(const ConvGeometry& geometry);

}  // namespace pto::isa
