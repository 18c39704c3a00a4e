// The Conv group's kernels: execute() (oneDNN's direct kernels, the batch split over
// the device's cores) and the GEMM form it falls back on (convolutionGemmForm) against
// the plain loops of convolutionReference, which define the instructions, over 1 to 3 spatial dimensions, NCHW and channels_last layouts,
// groups, strides, padding, dilation, tconv's beta and a transposed convolution's
// output_padding; and the reference itself against sums written out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "isa/convolution.h"
#include "isa/program.h"
#include "runtime/sim/kernels/conv_onednn.h"
#include "runtime/sim/kernels/convolution.h"
#include "runtime/sim/kernels/execute.h"
#include "runtime/sim/kernels/half.h"

namespace {

using pto::isa::DType;
using pto::isa::Instruction;
using pto::isa::Opcode;
using pto::isa::Operand;

// A convolution y = x * w: its sizes and parameters, per spatial dimension.
struct Case {
  std::string name;
  int64_t batch, channels, out_channels, groups;
  std::vector<int64_t> size, kernel, stride, pad, dilation;
  std::vector<int64_t> extra;  // x's extent past y's last window (a transposed output_padding); none: 0
  bool channels_last;

  int spatial() const { return static_cast<int>(size.size()); }
  std::vector<int64_t> output() const {
    std::vector<int64_t> out;
    for (int i = 0; i < spatial(); ++i) {
      out.push_back((size[i] + 2 * pad[i] - dilation[i] * (kernel[i] - 1) - 1) / stride[i] + 1);
    }
    return out;
  }
};

// A float32 operand of `shape` over buffer `buffer`, row-major or channels_last (channels
// innermost, then the spatial dimensions, then dimension 0).
Operand operandOf(int32_t buffer, const std::vector<int64_t>& shape, bool channels_last) {
  Operand operand;
  operand.buffer = buffer;
  operand.dtype = DType::kFloat32;
  operand.rank = static_cast<int32_t>(shape.size());
  std::vector<int> order;  // innermost first
  if (channels_last) {
    order.push_back(1);
    for (int d = operand.rank - 1; d >= 2; --d) order.push_back(d);
    order.push_back(0);
  } else {
    for (int d = operand.rank - 1; d >= 0; --d) order.push_back(d);
  }
  int64_t stride = 1;
  for (int d : order) {
    operand.shape[d] = shape[d];
    operand.strides[d] = stride;
    stride *= shape[d];
  }
  return operand;
}

struct Problem {
  Instruction instruction;
  std::vector<std::vector<float>> buffers;  // by operand
};

Problem problemOf(const Case& c, Opcode opcode, std::mt19937& rng) {
  std::vector<int64_t> x{c.batch, c.channels}, w{c.out_channels, c.channels / c.groups}, y{c.batch, c.out_channels};
  const std::vector<int64_t> out = c.output();
  for (int i = 0; i < c.spatial(); ++i) {
    x.push_back(c.size[i] + (c.extra.empty() ? 0 : c.extra[i]));
    w.push_back(c.kernel[i]);
    y.push_back(out[i]);
  }
  const std::vector<std::vector<int64_t>> shapes = opcode == Opcode::kConv ? std::vector{y, x, w}
                                                   : opcode == Opcode::kConvBackwardData ? std::vector{x, y, w}
                                                                                        : std::vector{w, y, x};
  Problem p;
  p.instruction.opcode = opcode;
  std::normal_distribution<float> normal;
  for (int32_t k = 0; k < 3; ++k) {
    p.instruction.operands.push_back(operandOf(k, shapes[k], c.channels_last));
    p.buffers.emplace_back(static_cast<size_t>(p.instruction.operands.back().numel()));
    for (float& value : p.buffers.back()) value = normal(rng);
  }
  auto& imm = p.instruction.immediates;
  imm[pto::isa::kConvGroups] = static_cast<double>(c.groups);
  for (int i = 0; i < pto::isa::kMaxConvSpatial; ++i) {
    const bool used = i < c.spatial();
    imm[pto::isa::kConvStride + i] = used ? static_cast<double>(c.stride[i]) : 1;
    imm[pto::isa::kConvPad + i] = used ? static_cast<double>(c.pad[i]) : 0;
    imm[pto::isa::kConvDilation + i] = used ? static_cast<double>(c.dilation[i]) : 1;
  }
  return p;
}

// The largest |fast - reference| over the output, relative to the sum of the products'
// magnitudes: a float32 sum of n products is off by at most about n * 2^-24 of it.
enum class Path { kExecute, kGemmForm };

void expectAgrees(const Case& c, Opcode opcode, double beta, Path path = Path::kExecute) {
  std::mt19937 rng(7);
  Problem fast = problemOf(c, opcode, rng);
  if (opcode == Opcode::kConv) fast.instruction.immediates[pto::isa::kConvBeta] = beta;
  Problem reference = fast;
  Problem magnitudes = fast;  // the same sums over |values|: each element's error scale
  for (auto& buffer : magnitudes.buffers) {
    for (float& value : buffer) value = std::fabs(value);
  }
  const auto run = [path](Problem& p, bool reference_loops) {
    std::vector<void*> bases;
    for (auto& buffer : p.buffers) bases.push_back(buffer.data());
    const std::string error = pto::isa::verifyInstruction(
        p.instruction, std::vector<uint64_t>{p.buffers[0].size() * 4, p.buffers[1].size() * 4, p.buffers[2].size() * 4});
    ASSERT_EQ(error, "");
    if (reference_loops) {
      pto::rt::sim::kernels::convolutionReference(p.instruction, bases);
    } else if (path == Path::kGemmForm) {
      pto::rt::sim::kernels::convolutionGemmForm(p.instruction, bases);
    } else {
      pto::rt::sim::kernels::execute(p.instruction, bases);
    }
  };
  run(fast, false);
  run(reference, true);
  run(magnitudes, true);
  // Products summed per output element, at most: a weight's worth, or a batch of images.
  const pto::isa::ConvGeometry g = pto::isa::convGeometry(fast.instruction);
  const double terms = std::max(static_cast<double>(g.w->numel()),
                                static_cast<double>(g.y->numel()) / static_cast<double>(g.y->shape[1]));
  const double tolerance = 4.0 * terms * std::ldexp(1.0, -24) + std::ldexp(1.0, -23);
  for (size_t i = 0; i < fast.buffers[0].size(); ++i) {
    const double scale = magnitudes.buffers[0][i] + 1e-30;
    ASSERT_LE(std::fabs(fast.buffers[0][i] - reference.buffers[0][i]), tolerance * scale)
        << c.name << " " << pto::isa::info(opcode).name << (path == Path::kGemmForm ? " (GEMM form)" : "") << " element " << i << ": " << fast.buffers[0][i] << " vs "
        << reference.buffers[0][i];
  }
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"2d nchw", 3, 8, 16, 1, {9, 10}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {}, false},
      {"2d channels_last", 3, 8, 16, 1, {9, 10}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {}, true},
      {"2d strided dilated grouped", 5, 12, 8, 4, {11, 7}, {3, 2}, {2, 1}, {1, 0}, {2, 1}, {}, false},
      {"2d depthwise channels_last", 2, 16, 16, 16, {8, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {}, true},
      {"2d 1x1 stride 2 (negative right padding)", 4, 16, 32, 1, {8, 8}, {1, 1}, {2, 2}, {0, 0}, {1, 1}, {}, false},
      {"2d output_padding", 2, 8, 8, 1, {7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false},
      {"1d", 3, 4, 8, 2, {17}, {5}, {2}, {2}, {1}, {}, false},
      {"3d", 2, 4, 8, 1, {5, 6, 7}, {3, 2, 3}, {1, 2, 1}, {1, 0, 1}, {1, 1, 2}, {}, false},
      {"3d channels_last", 2, 8, 8, 1, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {}, true},
      {"2d 3 channels, 7x7 stride 2 (a stem)", 3, 3, 16, 1, {15, 15}, {7, 7}, {2, 2}, {3, 3}, {1, 1}, {}, false},
      {"2d dilated channels_last", 3, 16, 16, 1, {12, 12}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {}, true},
  };
  return all;
}

TEST(ConvKernels, ForwardAgreesWithTheReference) {
  for (const Case& c : cases()) {
    if (!c.extra.empty()) continue;  // output_padding: a transposed convolution's, tested as tconvbwdd
    expectAgrees(c, Opcode::kConv, 0.0);
    expectAgrees(c, Opcode::kConv, 1.0);  // a bias moved in first
  }
}

TEST(ConvKernels, InputGradientAgreesWithTheReference) {
  for (const Case& c : cases()) expectAgrees(c, Opcode::kConvBackwardData, 0.0);
}

TEST(ConvKernels, WeightGradientAgreesWithTheReference) {
  for (const Case& c : cases()) expectAgrees(c, Opcode::kConvBackwardWeight, 0.0);
}

TEST(ConvKernels, GemmFormAgreesWithTheReference) {
  for (const Case& c : cases()) {
    if (c.extra.empty()) {
      expectAgrees(c, Opcode::kConv, 0.0, Path::kGemmForm);
      expectAgrees(c, Opcode::kConv, 1.0, Path::kGemmForm);
    }
    expectAgrees(c, Opcode::kConvBackwardData, 0.0, Path::kGemmForm);
    expectAgrees(c, Opcode::kConvBackwardWeight, 0.0, Path::kGemmForm);
  }
}

// The comparisons above hold whichever path ran; this checks that the fast one does
// run for the common layouts: oneDNN has direct kernels for float32 NCHW (reordered)
// and channels_last images on every x86-64 CPU (SSE4.1 up), for each pass.
TEST(ConvKernels, DirectKernelsTakeNchwAndChannelsLast) {
  using pto::rt::sim::kernels::ConvPass;
  using pto::rt::sim::kernels::ConvProblem;
  using pto::rt::sim::kernels::ConvTensor;
  std::vector<float> x(2 * 16 * 8 * 8), w(32 * 16 * 3 * 3), y(2 * 32 * 8 * 8);
  const auto tensor = [](std::vector<float>& data, std::array<int64_t, 5> dims, bool channels_last) {
    const Operand operand = operandOf(0, {dims[0], dims[1], dims[2], dims[3]}, channels_last);
    ConvTensor t{data.data(), dims, {}};
    for (int d = 0; d < 4; ++d) t.strides[d] = operand.strides[d];
    return t;
  };
  for (bool channels_last : {false, true}) {
    for (ConvPass pass : {ConvPass::kForward, ConvPass::kBackwardData, ConvPass::kBackwardWeight}) {
      const ConvProblem problem{pass, 2, 1, {1, 1, 1}, {1, 1, 0}, {1, 1, 1}, 0.0f,
                                tensor(x, {2, 16, 8, 8, 1}, channels_last), tensor(w, {32, 16, 3, 3, 1}, false),
                                tensor(y, {2, 32, 8, 8, 1}, channels_last)};
      EXPECT_TRUE(pto::rt::sim::kernels::onednnConvolutionAvailable(problem))
          << (channels_last ? "channels_last" : "NCHW") << " pass " << static_cast<int>(pass);
    }
  }
}

// bfloat16 operands, in oneDNN's bfloat16 kernels where the host has them (AVX-512 and
// up) or on float32 copies: the float32 sums of the same (rounded) values, rounded once,
// so within half a bfloat16 step (2^-9 of the value) of the float32 reference, which is
// itself within expectAgrees' bound of the exact sum.
TEST(ConvKernels, BFloat16IsTheFloat32SumRoundedOnce) {
  using pto::rt::sim::kernels::toBFloat16;
  using pto::rt::sim::kernels::toFloat;
  for (const Case& c : cases()) {
    for (Opcode opcode : {Opcode::kConv, Opcode::kConvBackwardData, Opcode::kConvBackwardWeight}) {
      if (opcode == Opcode::kConv && !c.extra.empty()) continue;
      std::mt19937 rng(7);
      Problem reference = problemOf(c, opcode, rng);
      if (opcode == Opcode::kConv) reference.instruction.immediates[pto::isa::kConvBeta] = 1.0;
      Instruction narrow = reference.instruction;
      std::vector<std::vector<pto::rt::sim::kernels::BFloat16>> narrow_buffers(3);
      std::vector<void*> narrow_bases;
      for (size_t k = 0; k < 3; ++k) {
        narrow.operands[k].dtype = DType::kBFloat16;
        for (float& value : reference.buffers[k]) {
          narrow_buffers[k].push_back(toBFloat16(value));
          value = toFloat(narrow_buffers[k].back());
        }
        narrow_bases.push_back(narrow_buffers[k].data());
      }
      Problem magnitudes = reference;
      for (auto& buffer : magnitudes.buffers) {
        for (float& value : buffer) value = std::fabs(value);
      }
      for (Problem* p : {&reference, &magnitudes}) {
        std::vector<void*> bases;
        for (auto& buffer : p->buffers) bases.push_back(buffer.data());
        pto::rt::sim::kernels::convolutionReference(p->instruction, bases);
      }
      ASSERT_EQ(pto::isa::verifyInstruction(narrow, std::vector<uint64_t>{narrow_buffers[0].size() * 2,
                                                                          narrow_buffers[1].size() * 2,
                                                                          narrow_buffers[2].size() * 2}),
                "");
      pto::rt::sim::kernels::execute(narrow, narrow_bases);
      const pto::isa::ConvGeometry g = pto::isa::convGeometry(narrow);
      const double terms = std::max(static_cast<double>(g.w->numel()),
                                    static_cast<double>(g.y->numel()) / static_cast<double>(g.y->shape[1]));
      const double tolerance = 4.0 * terms * std::ldexp(1.0, -24) + std::ldexp(1.0, -23);
      for (size_t i = 0; i < reference.buffers[0].size(); ++i) {
        const double expected = reference.buffers[0][i];
        const double bound = std::ldexp(std::fabs(expected), -8) + tolerance * (magnitudes.buffers[0][i] + 1e-30);
        ASSERT_LE(std::fabs(toFloat(narrow_buffers[0][i]) - expected), bound)
            << c.name << " " << pto::isa::info(opcode).name << " element " << i;
      }
    }
  }
}

// The reference's sums, written out for one small case: x [1, 1, 3], w [1, 1, 2],
// stride 1, padding 1: y[j] = x[j - 1] * w[0] + x[j] * w[1] over j = 0..3.
TEST(ConvKernels, ReferenceByHand) {
  const Operand x = operandOf(0, {1, 1, 3}, false), w = operandOf(0, {1, 1, 2}, false), y = operandOf(0, {1, 1, 4}, false);
  // Runs `opcode` over operands (output first) whose values are `buffers`, buffer i the i-th.
  const auto run = [](Opcode opcode, std::vector<Operand> operands, std::vector<std::vector<float>> buffers) {
    Instruction instruction;
    instruction.opcode = opcode;
    for (size_t i = 0; i < operands.size(); ++i) operands[i].buffer = static_cast<int32_t>(i);
    instruction.operands = operands;
    instruction.immediates = {1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0};
    std::vector<void*> bases;
    for (auto& buffer : buffers) bases.push_back(buffer.data());
    pto::rt::sim::kernels::convolutionReference(instruction, bases);
    return buffers[0];
  };
  const std::vector<float> x_values{1, 2, 3}, w_values{10, 100}, dy{1, 2, 3, 4};
  EXPECT_EQ(run(Opcode::kConv, {y, x, w}, {std::vector<float>(4, 99.0f), x_values, w_values}),
            (std::vector<float>{100, 210, 320, 30}));
  // tconvbwdd: dx[i] = sum over j with i = j - 1 + k of dy[j] * w[k].
  EXPECT_EQ(run(Opcode::kConvBackwardData, {x, y, w}, {std::vector<float>(3, 99.0f), dy, w_values}),
            (std::vector<float>{1 * 100 + 2 * 10, 2 * 100 + 3 * 10, 3 * 100 + 4 * 10}));
  // tconvbwdw: dw[k] = sum over j of dy[j] * x[j - 1 + k].
  EXPECT_EQ(run(Opcode::kConvBackwardWeight, {w, y, x}, {std::vector<float>(2, 99.0f), dy, x_values}),
            (std::vector<float>{2 * 1 + 3 * 2 + 4 * 3, 1 * 1 + 2 * 2 + 3 * 3}));
}

}  // namespace
