// tgather, tindexadd, tiota, the triangles (ttril, ttriu), twrapindex and tnonzero. tgather walks out, index and the
// input seen at out's shape with stride 0 along the axis, and adds index * the axis stride per element.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "element_types.h"
#include "execute.h"
#include "multi_index.h"
#include "opcode_dispatch.h"
#include "runtime/sim/sim_parallel.h"
#include "strided_loop.h"

namespace pto::rt::sim::kernels {

namespace {

[[noreturn]] void indexOutOfBounds(int64_t at, int dimension, int64_t extent) {
  char message[160];
  std::snprintf(message, sizeof message, "index %" PRId64 " is out of bounds for dimension %d with size %" PRId64, at,
                dimension, extent);
  throw std::out_of_range(message);
}

}  // namespace

static_assert(coversGroup<isa::Group::Gather, isa::Opcode::kGather>(), "executeGather runs tgather only");

void executeGather(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::Operand& out = instruction.operands[0];
  const isa::Operand& in = instruction.operands[1];
  const isa::Operand& index = instruction.operands[2];
  const int axis = static_cast<int>(instruction.immediates[0]);
  isa::Operand row = in;  // the input at out's shape, not moving along the axis
  for (int d = 0; d < out.rank; ++d) row.shape[d] = out.shape[d];
  if (out.rank > 0) row.strides[axis] = 0;
  const isa::Operand operands[] = {out, index, row};
  const StridedLoop loop = makeLoop(operands, buffers);
  const size_t size = isa::dtypeSize(out.dtype);
  const int64_t extent = out.rank > 0 ? in.shape[axis] : 1;
  const int64_t lowest = instruction.immediates[1] != 0 ? -extent : 0;  // wrap=1: negatives count from the end
  const auto range = static_cast<uint64_t>(extent) - static_cast<uint64_t>(lowest);
  const int64_t axis_stride = out.rank > 0 ? in.strides[axis] * static_cast<int64_t>(size) : 0;
  // Where the run's index is the same for all its elements (a row of x[index],
  // index_select, embedding), the whole run is one copy from the row it picks.
  const bool index_per_run = loop.innerStride(1) == 0;
  // Per element size, so that each copy is one load and one store rather than a call.
  dispatchDType(out.dtype, [&]<typename T>() {
    forEachRow(loop, [&](const std::array<char*, kMaxOperands>& p, int64_t n) {
      const int64_t out_stride = loop.innerStride(0), index_stride = loop.innerStride(1), in_stride = loop.innerStride(2);
      const auto source = [&](const char* index, const char* in) {
        int64_t at = 0;
        std::memcpy(&at, index, sizeof at);
        // at in [lowest, extent), in one unsigned comparison; then negatives (wrap=1) count from the end.
        if (static_cast<uint64_t>(at) - static_cast<uint64_t>(lowest) >= range) indexOutOfBounds(at, axis, extent);
        return in + (at + ((at >> 63) & extent)) * axis_stride;
      };
      if (index_per_run) {
        const char* from = source(p[1], p[2]);
        if (out_stride == sizeof(T) && in_stride == sizeof(T)) {
          std::memcpy(p[0], from, static_cast<size_t>(n) * sizeof(T));
        } else {
          for (int64_t i = 0; i < n; ++i) std::memcpy(p[0] + i * out_stride, from + i * in_stride, sizeof(T));
        }
        return;
      }
      for (int64_t i = 0; i < n; ++i) {
        std::memcpy(p[0] + i * out_stride, source(p[1] + i * index_stride, p[2] + i * in_stride), sizeof(T));
      }
    });
  });
}

static_assert(coversGroup<isa::Group::IndexAdd, isa::Opcode::kIndexAdd>(), "executeIndexAdd runs tindexadd only");

// tindexadd: the loop runs over the positions off the axis (out and in seen with
// extent 1 there); each position adds its whole line of in into out, so every
// element of out belongs to one core.
void executeIndexAdd(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::Operand& out = instruction.operands[0];
  const isa::Operand& in = instruction.operands[1];
  const isa::Operand& index = instruction.operands[2];
  const int axis = static_cast<int>(instruction.immediates[0]);
  const int64_t count = in.shape[axis], extent = out.shape[axis];
  std::vector<int64_t> positions(static_cast<size_t>(count));
  const char* index_base = static_cast<const char*>(buffers[index.buffer]) + index.offset * 8;
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(&positions[i], index_base + i * index.strides[0] * 8, sizeof(int64_t));
    if (positions[i] < 0 || positions[i] >= extent) indexOutOfBounds(positions[i], axis, extent);
  }
  isa::Operand out_line = out, in_line = in;
  out_line.shape[axis] = 1;
  in_line.shape[axis] = 1;
  const isa::Operand operands[] = {out_line, in_line};
  const StridedLoop loop = makeLoop(operands, buffers);
  dispatchDType(out.dtype, [&]<typename T>() {
    if constexpr (isa::kNumericTypes.contains(dtypeOf<T>())) {
      using C = ComputeType<T>;
      const int64_t out_step = out.strides[axis] * static_cast<int64_t>(sizeof(T));
      const int64_t in_step = in.strides[axis] * static_cast<int64_t>(sizeof(T));
      forEachRow(loop, [&](const std::array<char*, kMaxOperands>& p, int64_t n) {
        for (int64_t e = 0; e < n; ++e) {
          char* target = p[0] + e * loop.innerStride(0);
          const char* source = p[1] + e * loop.innerStride(1);
          for (int64_t i = 0; i < count; ++i) {
            char* slot = target + positions[i] * out_step;
            if constexpr (std::is_floating_point_v<C>) {
              store<T>(slot, load<T>(slot) + load<T>(source + i * in_step));
            } else {
              using U = std::make_unsigned_t<C>;  // integers wrap
              store<T>(slot, static_cast<C>(static_cast<U>(load<T>(slot)) + static_cast<U>(load<T>(source + i * in_step))));
            }
          }
        }
      });
    }
  });
}

static_assert(coversGroup<isa::Group::Triangle, isa::Opcode::kTril, isa::Opcode::kTriu>(),
              "executeTriangle runs ttril and ttriu only");

// Matrix row by matrix row, in parallel: each row of the last two dims keeps the
// columns on its side of the diagonal and zeroes the rest.
void executeTriangle(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::Operand& out = instruction.operands[0];
  const isa::Operand& in = instruction.operands[1];
  const bool lower = instruction.opcode == isa::Opcode::kTril;
  const double diagonal = instruction.immediates[0];
  const int r = out.rank;
  const int64_t rows = out.shape[r - 2], cols = out.shape[r - 1];
  if (out.numel() == 0) return;
  const auto size = static_cast<int64_t>(isa::dtypeSize(out.dtype));
  char* const out_base = static_cast<char*>(buffers[out.buffer]) + out.offset * size;
  const char* const in_base = static_cast<const char*>(buffers[in.buffer]) + in.offset * size;
  const int64_t matrix_rows = out.numel() / cols;
  rt::sim::parallelFor(static_cast<size_t>(matrix_rows), static_cast<size_t>(std::max<int64_t>(1, 16384 / cols)),
                       [&](size_t begin, size_t end) {
    for (size_t flat = begin; flat < end; ++flat) {
      int64_t out_offset = 0, in_offset = 0;
      for (int64_t rest = static_cast<int64_t>(flat), d = r - 2; d >= 0; --d) {
        const int64_t index = rest % out.shape[d];
        rest /= out.shape[d];
        out_offset += index * out.strides[d];
        in_offset += index * in.strides[d];
      }
      const int64_t row = static_cast<int64_t>(flat) % rows;
      for (int64_t column = 0; column < cols; ++column) {
        const double distance = static_cast<double>(column - row);
        const bool keep = lower ? distance <= diagonal : distance >= diagonal;
        char* target = out_base + (out_offset + column * out.strides[r - 1]) * size;
        if (keep) std::memcpy(target, in_base + (in_offset + column * in.strides[r - 1]) * size, static_cast<size_t>(size));
        else std::memset(target, 0, static_cast<size_t>(size));
      }
    }
  });
}

static_assert(coversGroup<isa::Group::WrapIndex, isa::Opcode::kWrapIndex>(), "executeWrapIndex runs twrapindex only");

void executeWrapIndex(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::Operand operands[] = {instruction.operands[0], instruction.operands[1]};
  const auto extent = static_cast<int64_t>(instruction.immediates[0]);
  const auto dimension = static_cast<int>(instruction.immediates[1]);
  const StridedLoop loop = makeLoop(operands, buffers);
  dispatchDType(operands[1].dtype, [&]<typename T>() {
    if constexpr (isa::kIntTypes.contains(dtypeOf<T>())) {
      forEachRow(loop, [&](const std::array<char*, kMaxOperands>& p, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          int64_t at = static_cast<int64_t>(load<T>(p[1] + i * loop.innerStride(1)));
          if (at < -extent || at >= extent) indexOutOfBounds(at, dimension, extent);
          if (at < 0) at += extent;
          std::memcpy(p[0] + i * loop.innerStride(0), &at, sizeof at);
        }
      });
    }
  });
}

namespace {

// Calls fn(element, coordinates) for the elements [begin, end) of `in` in row-major order.
template <typename Fn>
void walkRowMajor(const isa::Operand& in, const char* base, int64_t begin, int64_t end, Fn&& fn) {
  const auto size = static_cast<int64_t>(isa::dtypeSize(in.dtype));
  ElementWalk element(in, begin);
  for (int64_t flat = begin; flat < end; ++flat, element.step(in)) fn(base + element.offset * size, element.index);
}

}  // namespace

static_assert(coversGroup<isa::Group::Nonzero, isa::Opcode::kNonzero>(), "executeNonzero runs tnonzero only");

// tnonzero in two passes over row-major chunks of the input, each in parallel: count
// every chunk's nonzero elements, then let each chunk write its rows of coordinates
// from the sum of the counts before it.
void executeNonzero(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::Operand& out = instruction.operands[0];
  const isa::Operand& in = instruction.operands[1];
  constexpr int64_t kChunk = 65536;
  const int64_t total = in.numel(), rows = out.shape[0];
  const int64_t chunks = (total + kChunk - 1) / kChunk;
  std::vector<int64_t> starts(static_cast<size_t>(chunks) + 1, 0);
  const auto size = static_cast<int64_t>(isa::dtypeSize(in.dtype));
  const char* in_base = total == 0 ? nullptr : static_cast<const char*>(buffers[in.buffer]) + in.offset * size;
  dispatchDType(in.dtype, [&]<typename T>() {
    const auto nonzero = [](const char* element) { return load<T>(element) != ComputeType<T>(0); };  // NaN is nonzero
    rt::sim::parallelFor(static_cast<size_t>(chunks), 1, [&](size_t begin, size_t end) {
      for (size_t c = begin; c < end; ++c) {
        int64_t found = 0;
        const auto first = static_cast<int64_t>(c) * kChunk;
        walkRowMajor(in, in_base, first, std::min(total, first + kChunk),
                     [&](const char* element, const auto&) { found += nonzero(element); });
        starts[c + 1] = found;
      }
    });
    for (size_t c = 0; c < static_cast<size_t>(chunks); ++c) starts[c + 1] += starts[c];
    if (starts.back() != rows) {
      char message[160];
      std::snprintf(message, sizeof message,
                    "the input has %" PRId64 " nonzero elements, but the output has %" PRId64 " rows", starts.back(),
                    rows);
      throw std::length_error(message);
    }
    if (out.numel() == 0) return;
    char* const out_base = static_cast<char*>(buffers[out.buffer]) + out.offset * 8;
    rt::sim::parallelFor(static_cast<size_t>(chunks), 1, [&](size_t begin, size_t end) {
      for (size_t c = begin; c < end; ++c) {
        int64_t row = starts[c];
        const auto first = static_cast<int64_t>(c) * kChunk;
        walkRowMajor(in, in_base, first, std::min(total, first + kChunk),
                     [&](const char* element, const std::array<int64_t, isa::kMaxRank>& coordinates) {
          if (!nonzero(element)) return;
          for (int d = 0; d < in.rank; ++d) {
            std::memcpy(out_base + (row * out.strides[0] + d * out.strides[1]) * 8, &coordinates[d], 8);
          }
          ++row;
        });
      }
    });
  });
}

static_assert(coversGroup<isa::Group::Iota, isa::Opcode::kIota>(), "executeIota runs tiota only");

void executeIota(const isa::Instruction& instruction, std::span<void* const> buffers) {
  const isa::Operand& out = instruction.operands[0];
  const double start = instruction.immediates[0], step = instruction.immediates[1];
  char* base = static_cast<char*>(buffers[out.buffer]);
  dispatchDType(out.dtype, [&]<typename T>() {
    const int64_t stride = out.strides[0] * static_cast<int64_t>(sizeof(T));
    char* first = base + out.offset * static_cast<int64_t>(sizeof(T));
    for (int64_t i = 0; i < out.shape[0]; ++i) {
      // Integer ranges count in int64 (wrapping, never undefined), as PyTorch's
      // arange does; floats in double. The verifier bounded start and step.
      if constexpr (std::is_integral_v<ComputeType<T>>) {
        const uint64_t value = static_cast<uint64_t>(static_cast<int64_t>(start)) +
                               static_cast<uint64_t>(i) * static_cast<uint64_t>(static_cast<int64_t>(step));
        store<T>(first + i * stride, static_cast<int64_t>(value));
      } else {
        store<T>(first + i * stride, start + static_cast<double>(i) * step);
      }
    }
  });
}

}  // namespace pto::rt::sim::kernels
