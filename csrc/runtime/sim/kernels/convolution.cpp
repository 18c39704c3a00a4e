// The Conv group on the sim device: oneDNN's direct kernels (conv_onednn.h), the batch
// split into one slice per core, each slice one call on its core's thread (the weight
// gradient: one partial sum per slice, added up after). One call using several OpenMP
// threads would need a second team of threads beside the device's, which spin after
// each call; slices keep every core on one thread, as matmul.cpp's row bands do.
// Where oneDNN has no direct kernel for a problem (on AVX2: weight gradients with
// dilation or 3 input channels, 3-D gradients), each slice runs its GEMM form instead:
// im2col columns per image and MKL's sgemm. The plain loops of convolutionReference
// define the instructions and run the empty ones. bfloat16 runs in oneDNN's bfloat16
// kernels (AVX-512 and up: AVX512-BF16, AMX), its sums in float32 rounded once; where
// it has none, in float32 copies of the operands, the result rounded once.
#include "convolution.h"

#include <algorithm>
#include <array>
#include <optional>
#include <vector>

#include "conv_onednn.h"
#include "element_types.h"
#include "execute.h"
#include "gemm_mkl.h"
#include "isa/convolution.h"
#include "opcode_dispatch.h"
#include "runtime/sim/sim_parallel.h"

namespace pto::rt::sim::kernels {
namespace {

constexpr int kRank = 2 + isa::kMaxConvSpatial;

// An operand at rank 5: the spatial dimensions it lacks of extent 1.
struct Tensor5 {
  float* data;
  std::array<int64_t, kRank> shape, strides;

  float& at(int64_t n, int64_t c, int64_t i, int64_t j, int64_t k) const {
    return data[n * strides[0] + c * strides[1] + i * strides[2] + j * strides[3] + k * strides[4]];
  }
};

Tensor5 tensor5(const isa::Operand& operand, std::span<void* const> buffers) {
  Tensor5 t{static_cast<float*>(buffers[operand.buffer]) + operand.offset, {}, {}};
  t.shape.fill(1);
  for (int d = 0; d < operand.rank; ++d) {
    t.shape[d] = operand.shape[d];
    t.strides[d] = operand.strides[d];
  }
  return t;
}

bool isEmpty(const isa::ConvGeometry& g) { return g.x->numel() == 0 || g.w->numel() == 0 || g.y->numel() == 0; }

ConvPass passOf(isa::Opcode opcode) {
  return opcode == isa::Opcode::kConv ? ConvPass::kForward
         : opcode == isa::Opcode::kConvBackwardData ? ConvPass::kBackwardData
                                                    : ConvPass::kBackwardWeight;
}

ConvTensor convTensor(const isa::Operand& operand, std::span<void* const> buffers, int rank) {
  ConvTensor c{nullptr, {}, {}, operand.dtype == isa::DType::kBFloat16};
  c.data = static_cast<char*>(buffers[operand.buffer]) + operand.offset * c.elementBytes();
  c.dims.fill(1);
  for (int d = 0; d < rank; ++d) c.dims[d] = operand.shape[d], c.strides[d] = operand.strides[d];
  return c;
}

// The problem over batch entries [begin, end) of x and y.
ConvProblem sliceOf(const ConvProblem& whole, int64_t begin, int64_t end) {
  ConvProblem slice = whole;
  for (ConvTensor* t : {&slice.x, &slice.y}) {
    t->data = static_cast<char*>(t->data) + begin * t->strides[0] * t->elementBytes();
    t->dims[0] = end - begin;
  }
  return slice;
}

// The GEMM form of a convolution, for problems oneDNN has no direct kernel for (its
// GEMM-based ones cannot run here: conv_onednn.cpp): per image and group, the image's
// windows as im2col columns [C / g * |K|, |Y|] in a buffer of the thread's, and one MKL
// sgemm with the weight [O / g, C / g * |K|] on the calling thread.
class GemmForm {
 public:
  GemmForm(ConvPass pass, const isa::ConvGeometry& g, std::span<void* const> buffers)
      : pass_(pass), g_(g), x_(tensor5(*g.x, buffers)), w_(tensor5(*g.w, buffers)), y_(tensor5(*g.y, buffers)) {
    group_in_ = w_.shape[1];
    group_out_ = w_.shape[0] / g.groups;
    window_ = group_in_ * w_.shape[2] * w_.shape[3] * w_.shape[4];
    positions_ = y_.shape[2] * y_.shape[3] * y_.shape[4];
    if (pass != ConvPass::kBackwardWeight) packWeight();
  }

  // Images [begin, end); a weight gradient is summed into `partial`, plain [O, C / g, K...].
  void run(int64_t begin, int64_t end, float* partial) const {
    thread_local std::vector<float> columns, products;
    columns.resize(static_cast<size_t>(window_ * positions_));
    products.resize(static_cast<size_t>(group_out_ * positions_));
    for (int64_t n = begin; n < end; ++n) {
      if (pass_ == ConvPass::kBackwardData) clearImage(n);
      for (int64_t group = 0; group < g_.groups; ++group) {
        const float* weight = weight_.data() + group * group_out_ * window_;
        if (pass_ == ConvPass::kBackwardData) {
          gatherOutput(n, group, products.data());
          mklGemm(GemmMatrix<float>{weight, window_, true}, GemmMatrix<float>{products.data(), positions_, false},
                  window_, positions_, group_out_, 1.0f, 0.0f, columns.data(), positions_);
          windows(n, group, columns.data(), true);
        } else if (pass_ == ConvPass::kBackwardWeight) {
          windows(n, group, columns.data(), false);
          gatherOutput(n, group, products.data());
          mklGemm(GemmMatrix<float>{products.data(), positions_, false},
                  GemmMatrix<float>{columns.data(), positions_, true}, group_out_, window_, positions_, 1.0f, 1.0f,
                  partial + group * group_out_ * window_, window_);
        } else {
          windows(n, group, columns.data(), false);
          mklGemm(GemmMatrix<float>{weight, window_, false}, GemmMatrix<float>{columns.data(), positions_, false},
                  group_out_, positions_, window_, 1.0f, 0.0f, products.data(), positions_);
          scatterOutput(n, group, products.data());
        }
      }
    }
  }

 private:
  void packWeight() {
    weight_.resize(static_cast<size_t>(w_.shape[0] * window_));
    int64_t at = 0;
    for (int64_t o = 0; o < w_.shape[0]; ++o) {
      for (int64_t c = 0; c < w_.shape[1]; ++c) {
        for (int64_t i = 0; i < w_.shape[2]; ++i) {
          for (int64_t j = 0; j < w_.shape[3]; ++j) {
            for (int64_t k = 0; k < w_.shape[4]; ++k) weight_[at++] = w_.at(o, c, i, j, k);
          }
        }
      }
    }
  }

  void clearImage(int64_t n) const {
    for (int64_t c = 0; c < x_.shape[1]; ++c) {
      for (int64_t i = 0; i < x_.shape[2]; ++i) {
        for (int64_t j = 0; j < x_.shape[3]; ++j) {
          for (int64_t k = 0; k < x_.shape[4]; ++k) x_.at(n, c, i, j, k) = 0;
        }
      }
    }
  }

  // Each (channel, kernel tap) of the group: a row of columns over y's positions, read
  // from x (0 in the padding), or added back into x (`add`: col2im).
  void windows(int64_t n, int64_t group, float* columns, bool add) const {
    for (int64_t c = 0; c < group_in_; ++c) {
      const int64_t channel = group * group_in_ + c;
      for (int64_t ki = 0; ki < w_.shape[2]; ++ki) {
        for (int64_t kj = 0; kj < w_.shape[3]; ++kj) {
          for (int64_t kk = 0; kk < w_.shape[4]; ++kk) {
            float* row = columns + (((c * w_.shape[2] + ki) * w_.shape[3] + kj) * w_.shape[4] + kk) * positions_;
            for (int64_t yi = 0; yi < y_.shape[2]; ++yi) {
              const int64_t xi = yi * g_.stride[0] - g_.pad[0] + ki * g_.dilation[0];
              for (int64_t yj = 0; yj < y_.shape[3]; ++yj) {
                const int64_t xj = yj * g_.stride[1] - g_.pad[1] + kj * g_.dilation[1];
                for (int64_t yk = 0; yk < y_.shape[4]; ++yk, ++row) {
                  const int64_t xk = yk * g_.stride[2] - g_.pad[2] + kk * g_.dilation[2];
                  const bool inside = xi >= 0 && xi < x_.shape[2] && xj >= 0 && xj < x_.shape[3] && xk >= 0 &&
                                      xk < x_.shape[4];
                  if (add) {
                    if (inside) x_.at(n, channel, xi, xj, xk) += *row;
                  } else {
                    *row = inside ? x_.at(n, channel, xi, xj, xk) : 0.0f;
                  }
                }
              }
            }
          }
        }
      }
    }
  }

  // The group's output channels of image n, [O / g, |Y|], out of y or into it (+ beta * y).
  void gatherOutput(int64_t n, int64_t group, float* into) const { moveOutput(n, group, into, false); }
  void scatterOutput(int64_t n, int64_t group, float* from) const { moveOutput(n, group, from, true); }
  void moveOutput(int64_t n, int64_t group, float* matrix, bool store) const {
    for (int64_t o = 0; o < group_out_; ++o) {
      for (int64_t i = 0; i < y_.shape[2]; ++i) {
        for (int64_t j = 0; j < y_.shape[3]; ++j) {
          for (int64_t k = 0; k < y_.shape[4]; ++k, ++matrix) {
            float& element = y_.at(n, group * group_out_ + o, i, j, k);
            if (!store) {
              *matrix = element;
            } else {
              element = g_.beta != 0 ? *matrix + static_cast<float>(g_.beta) * element : *matrix;
            }
          }
        }
      }
    }
  }

  ConvPass pass_;
  isa::ConvGeometry g_;
  Tensor5 x_, w_, y_;
  int64_t group_in_, group_out_, window_, positions_;
  std::vector<float> weight_;
};

enum class Kernels { kDirectElseGemmForm, kGemmForm, kDirectOnly };

// The whole instruction, batch slices on the device's cores: in oneDNN's direct kernels
// where `kernels` allows and it has them, else in its GEMM form (float32 only). False,
// having written nothing, where only direct kernels may run and there are none.
bool convolveOnCores(const isa::Instruction& instruction, const isa::ConvGeometry& g, std::span<void* const> buffers,
                     Kernels kernels) {
  const int rank = g.spatial + 2;
  ConvProblem whole{passOf(instruction.opcode), g.spatial, g.groups, g.stride, g.pad, g.dilation,
                    static_cast<float>(g.beta), convTensor(*g.x, buffers, rank), convTensor(*g.w, buffers, rank),
                    convTensor(*g.y, buffers, rank)};
  const int64_t batch = g.x->shape[0];
  const int64_t slices = std::min<int64_t>(batch, static_cast<int64_t>(rt::sim::parallelism()));
  const auto bounds = [&](int64_t slice) { return slice * batch / slices; };
  // A weight gradient's slices sum into partials of their own: plain [O, C / g, K...].
  std::vector<float> partials;
  std::array<int64_t, kRank> plain{};
  if (whole.pass == ConvPass::kBackwardWeight) {
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; --d) plain[d] = stride, stride *= whole.w.dims[d];
    partials.resize(static_cast<size_t>(slices * stride));
  }
  const auto problem = [&](int64_t slice) {
    ConvProblem p = sliceOf(whole, bounds(slice), bounds(slice + 1));
    if (p.pass == ConvPass::kBackwardWeight) {
      p.w.data = partials.data() + slice * plain[0] * p.w.dims[0];
      p.w.strides = plain;
      p.w.bfloat16 = false;
    }
    return p;
  };
  // The slices have at most two sizes: both must have a direct kernel.
  const bool direct = kernels != Kernels::kGemmForm && onednnConvolutionAvailable(problem(0)) &&
                      onednnConvolutionAvailable(problem(slices - 1));
  if (!direct && kernels == Kernels::kDirectOnly) return false;
  const std::optional<GemmForm> gemm_form =
      direct ? std::nullopt : std::optional<GemmForm>(std::in_place, whole.pass, g, buffers);
  rt::sim::parallelFor(static_cast<size_t>(slices), 1, [&](size_t begin, size_t end) {
    for (auto slice = static_cast<int64_t>(begin); slice < static_cast<int64_t>(end); ++slice) {
      if (direct) {
        onednnConvolution(problem(slice));
      } else {
        gemm_form->run(bounds(slice), bounds(slice + 1), partials.data() + slice * plain[0] * whole.w.dims[0]);
      }
    }
  });
  if (whole.pass == ConvPass::kBackwardWeight) {
    const ConvTensor& out = whole.w;
    const int64_t per_slice = plain[0] * whole.w.dims[0];
    int64_t element = 0;
    for (int64_t o = 0; o < out.dims[0]; ++o) {
      for (int64_t c = 0; c < out.dims[1]; ++c) {
        for (int64_t i = 0; i < out.dims[2]; ++i) {
          for (int64_t j = 0; j < out.dims[3]; ++j) {
            for (int64_t k = 0; k < out.dims[4]; ++k, ++element) {
              float sum = 0;
              for (int64_t slice = 0; slice < slices; ++slice) sum += partials[slice * per_slice + element];
              const int64_t at = o * out.strides[0] + c * out.strides[1] + i * out.strides[2] + j * out.strides[3] +
                                 k * out.strides[4];
              char* to = static_cast<char*>(out.data) + at * out.elementBytes();
              if (out.bfloat16) store<BFloat16>(to, sum);
              else store<float>(to, sum);
            }
          }
        }
      }
    }
  }
  return true;
}

// A dense float32 copy of each operand of a bfloat16 instruction (the output's too: a
// forward's beta reads it), the instruction run on the copies, the output rounded back.
// The copies are tcvt's, whose kernel converts vectors at a time over the device's cores.
void runWidened(const isa::Instruction& instruction, std::span<void* const> buffers,
                void (*run)(const isa::Instruction&, std::span<void* const>)) {
  // tcvt of `from` (an operand of the buffer at from_base) into `to` (of to_base's).
  const auto convert = [](isa::Operand to, void* to_base, isa::Operand from, void* from_base) {
    to.buffer = 0;
    from.buffer = 1;
    const std::array<void*, 2> bases{to_base, from_base};
    executeConvert(isa::Instruction{isa::Opcode::kConvert, {to, from}, {}}, bases);
  };
  isa::Instruction wide = instruction;
  std::vector<std::vector<float>> copies(instruction.operands.size());
  std::vector<void*> wide_buffers;
  for (size_t i = 0; i < instruction.operands.size(); ++i) {
    const isa::Operand& operand = instruction.operands[i];
    copies[i].resize(static_cast<size_t>(operand.numel()));
    isa::Operand& copy = wide.operands[i];
    copy.dtype = isa::DType::kFloat32;
    copy.buffer = static_cast<int32_t>(i);
    copy.offset = 0;
    for (int64_t d = operand.rank - 1, stride = 1; d >= 0; --d) copy.strides[d] = stride, stride *= operand.shape[d];
    convert(copy, copies[i].data(), operand, buffers[operand.buffer]);
    wide_buffers.push_back(copies[i].data());
  }
  run(wide, wide_buffers);
  const isa::Operand& out = instruction.operands[0];
  convert(out, buffers[out.buffer], wide.operands[0], copies[0].data());
}

}  // namespace

void convolutionReference(const isa::Instruction& instruction, std::span<void* const> buffers) {
  if (instruction.operands[0].dtype == isa::DType::kBFloat16) {
    return runWidened(instruction, buffers, &convolutionReference);
  }
  const isa::ConvGeometry g = isa::convGeometry(instruction);
  const Tensor5 x = tensor5(*g.x, buffers), w = tensor5(*g.w, buffers), y = tensor5(*g.y, buffers);
  const isa::Operand& out_operand = instruction.operands[0];
  const Tensor5 out = tensor5(out_operand, buffers);
  // The sums, row-major over the output's shape at rank 5.
  std::vector<double> sums(static_cast<size_t>(out_operand.numel()), 0.0);
  const auto sumOf = [&](int64_t a, int64_t b, int64_t i, int64_t j, int64_t k) -> double& {
    return sums[(((a * out.shape[1] + b) * out.shape[2] + i) * out.shape[3] + j) * out.shape[4] + k];
  };
  const isa::Opcode opcode = instruction.opcode;
  const int64_t group_in = w.shape[1], group_out = w.shape[0] / g.groups;
  for (int64_t n = 0; n < y.shape[0]; ++n) {
    for (int64_t o = 0; o < y.shape[1]; ++o) {
      const int64_t first_channel = o / group_out * group_in;
      for (int64_t c = 0; c < group_in; ++c) {
        for (int64_t ki = 0; ki < w.shape[2]; ++ki) {
          for (int64_t kj = 0; kj < w.shape[3]; ++kj) {
            for (int64_t kk = 0; kk < w.shape[4]; ++kk) {
              for (int64_t yi = 0; yi < y.shape[2]; ++yi) {
                const int64_t xi = yi * g.stride[0] - g.pad[0] + ki * g.dilation[0];
                if (xi < 0 || xi >= x.shape[2]) continue;
                for (int64_t yj = 0; yj < y.shape[3]; ++yj) {
                  const int64_t xj = yj * g.stride[1] - g.pad[1] + kj * g.dilation[1];
                  if (xj < 0 || xj >= x.shape[3]) continue;
                  for (int64_t yk = 0; yk < y.shape[4]; ++yk) {
                    const int64_t xk = yk * g.stride[2] - g.pad[2] + kk * g.dilation[2];
                    if (xk < 0 || xk >= x.shape[4]) continue;
                    const double xv = x.at(n, first_channel + c, xi, xj, xk), wv = w.at(o, c, ki, kj, kk),
                                 yv = y.at(n, o, yi, yj, yk);
                    if (opcode == isa::Opcode::kConv) {
                      sumOf(n, o, yi, yj, yk) += xv * wv;
                    } else if (opcode == isa::Opcode::kConvBackwardData) {
                      sumOf(n, first_channel + c, xi, xj, xk) += yv * wv;
                    } else {
                      sumOf(o, c, ki, kj, kk) += yv * xv;
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  for (int64_t a = 0; a < out.shape[0]; ++a) {
    for (int64_t b = 0; b < out.shape[1]; ++b) {
      for (int64_t i = 0; i < out.shape[2]; ++i) {
        for (int64_t j = 0; j < out.shape[3]; ++j) {
          for (int64_t k = 0; k < out.shape[4]; ++k) {
            float& element = out.at(a, b, i, j, k);
            const double old = g.beta != 0 ? g.beta * element : 0.0;
            element = static_cast<float>(sumOf(a, b, i, j, k) + old);
          }
        }
      }
    }
  }
}

static_assert(coversGroup<isa::Group::Conv, isa::Opcode::kConv, isa::Opcode::kConvBackwardData,
                          isa::Opcode::kConvBackwardWeight>(),
              "executeConv runs tconv, tconvbwdd and tconvbwdw");

void executeConv(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::ConvGeometry g = isa::convGeometry(instruction);
  if (instruction.operands[0].numel() == 0) return;
  if (instruction.operands[0].dtype == isa::DType::kBFloat16) {
    if (!isEmpty(g) && convolveOnCores(instruction, g, buffers, Kernels::kDirectOnly)) return;
    return runWidened(instruction, buffers, &executeConv);
  }
  if (isEmpty(g)) return convolutionReference(instruction, buffers);  // zeros, or nothing to sum
  convolveOnCores(instruction, g, buffers, Kernels::kDirectElseGemmForm);
}

void convolutionGemmForm(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::ConvGeometry g = isa::convGeometry(instruction);
  if (instruction.operands[0].numel() == 0) return;
  if (instruction.operands[0].dtype == isa::DType::kBFloat16) {
    return runWidened(instruction, buffers, &convolutionGemmForm);
  }
  if (isEmpty(g)) return convolutionReference(instruction, buffers);
  convolveOnCores(instruction, g, buffers, Kernels::kGemmForm);
}

}  // namespace pto::rt::sim::kernels
