#include "instruction_launch.h"

#include <c10/util/SmallVector.h>

#include <algorithm>
#include <vector>

#include "../device.h"
#include "../dtype_map.h"
#include "../pto_check.h"
#include "../program_cache.h"

namespace pto::torch_glue {

namespace {

// `tensor`'s dtype as an operand's, or the error naming it.
isa::DType operandDType(const at::Tensor& tensor) {
  const auto dtype = ptoDType(tensor.scalar_type());
  TORCH_CHECK(dtype, "pto: dtype ", tensor.scalar_type(), " has no PTO equivalent");
  return *dtype;
}

// An instruction under construction: its operands and the buffers behind them.
struct Launch {
  isa::Instruction instruction;
  c10::SmallVector<void*, 4> buffers;
  c10::SmallVector<uint64_t, 4> sizes;

  Launch(isa::Opcode opcode, std::array<double, isa::kMaxImmediates> immediates, size_t operands) {
    instruction.opcode = opcode;
    instruction.immediates = immediates;
    instruction.operands.reserve(operands);
  }

  // `tensor` as it is.
  isa::Operand& bind(const at::Tensor& tensor, const at::Tensor& out) {
    TORCH_CHECK(tensor.dim() <= isa::kMaxRank, "pto: tensors of rank ", tensor.dim(),
                " exceed the PTO limit of ", isa::kMaxRank);
    return add(tensor, out, tensor.sizes(), tensor.strides(), tensor.storage_offset());
  }

  // A recipe's view of `buffer`'s storage.
  void bind(const at::Tensor& buffer, const recipes::View& view, const at::Tensor& out) {
    add(buffer, out, view.shape, view.strides, view.offset);
  }

  // The instruction is a one-instruction program, loaded once per device and kept.
  void onStreamOf(const at::Tensor& out) {
    const c10::DeviceIndex device = out.device().index();
    const ptoProgram program = loadedProgram(instruction, device);
    const ptoStream stream = currentNativeStream(device);
    PTO_CHECK(ptoProgramLaunch(program, stream, buffers.data(), sizes.data(), buffers.size(), nullptr));
  }

 private:
  // An operand over `tensor`'s storage, a buffer of its own.
  isa::Operand& add(const at::Tensor& tensor, const at::Tensor& out, c10::IntArrayRef shape, c10::IntArrayRef strides,
                    int64_t offset) {
    TORCH_CHECK(tensor.device() == out.device(), isa::info(instruction.opcode).name, ": operand on ",
                tensor.device(), " but the output is on ", out.device());
    isa::Operand& operand = instruction.operands.emplace_back();
    operand.buffer = static_cast<int32_t>(buffers.size());
    operand.dtype = operandDType(tensor);
    operand.rank = static_cast<int32_t>(shape.size());
    std::copy(shape.begin(), shape.end(), operand.shape.begin());
    std::copy(strides.begin(), strides.end(), operand.strides.begin());
    operand.offset = offset;
    buffers.push_back(tensor.storage().mutable_data());
    sizes.push_back(tensor.storage().nbytes());
    return operand;
  }
};

// An op's operands, the output first: by reference (TensorRef), or views made here.
using Operands = c10::ArrayRef<TensorRef>;

c10::SmallVector<TensorRef, 6> refsTo(const std::vector<at::Tensor>& tensors) {
  return c10::SmallVector<TensorRef, 6>(tensors.begin(), tensors.end());
}

void launchOnce(isa::Opcode opcode, Operands operands, std::array<double, isa::kMaxImmediates> immediates) {
  Launch launch(opcode, immediates, operands.size());
  for (const TensorRef& operand : operands) launch.bind(operand, operands.front());
  launch.onStreamOf(operands.front());
}

// The operands (output first, all of one shape) with the dimensions they all walk as
// one merged, as TensorIterator coalesces: a dimension of size 1 goes, and one whose
// stride in every operand is its inner neighbour's stride times that neighbour's size
// joins it. A row instruction keeps its last dimension, the row, apart.
std::vector<at::Tensor> coalesced(Operands operands, bool keep_last) {
  const at::Tensor& out = operands.front();
  const int64_t rank = out.dim();
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides(operands.size());
  auto joins_inner = [&](int64_t d) {  // dimension d merges into the one merged last
    for (size_t i = 0; i < operands.size(); ++i) {
      if (operands[i].get().stride(d) != strides[i].back() * sizes.back()) return false;
    }
    return true;
  };
  for (int64_t d = rank - 1; d >= 0; --d) {
    const bool row = keep_last && d == rank - 1;
    if (out.size(d) == 1 && !row) continue;
    if (!sizes.empty() && !(keep_last && sizes.size() == 1) && joins_inner(d)) {
      sizes.back() *= out.size(d);
      continue;
    }
    sizes.push_back(out.size(d));
    for (size_t i = 0; i < operands.size(); ++i) strides[i].push_back(operands[i].get().stride(d));
  }
  std::reverse(sizes.begin(), sizes.end());
  std::vector<at::Tensor> views;
  for (size_t i = 0; i < operands.size(); ++i) {
    std::reverse(strides[i].begin(), strides[i].end());
    views.push_back(operands[i].get().as_strided(sizes, strides[i], operands[i].get().storage_offset()));
  }
  return views;
}

void launchAnyRank(isa::Opcode opcode, Operands operands, std::array<double, isa::kMaxImmediates> immediates);

// An instruction that works along one dimension (its first immediate is "axis":
// gathers, scatters, scans, sorts) or on the last two (triangles), above PTO's rank:
// it runs once per index of the first other dimension, on the operands of the
// output's rank sliced there (as far as the smallest reaches: a scatter's output may
// be the larger, a gather's input) and a lower-rank one (tindexadd's index) whole;
// the axis shifts with the dimension removed. Any other instruction keeps its
// operands, and the verifier names the rank.
void launchPerLine(isa::Opcode opcode, Operands operands, std::array<double, isa::kMaxImmediates> immediates) {
  const at::Tensor& out = operands.front();
  const isa::InstructionInfo& info = isa::info(opcode);
  const bool along_axis = info.immediates[0] == "axis";
  const bool triangle = info.group == isa::Group::Triangle;
  if (!along_axis && !triangle) {
    launchOnce(opcode, operands, immediates);
    return;
  }
  const auto axis = static_cast<int64_t>(immediates[0]);
  const int64_t split = along_axis && axis == 0 ? 1 : 0;  // triangles: any batch dimension
  int64_t extent = out.size(split);
  for (const at::Tensor& t : operands) {
    if (t.dim() == out.dim()) extent = std::min(extent, t.size(split));
  }
  if (along_axis && split < axis) immediates[0] = static_cast<double>(axis - 1);
  std::vector<at::Tensor> slice(operands.size());
  for (int64_t index = 0; index < extent; ++index) {
    for (size_t i = 0; i < operands.size(); ++i) {
      const at::Tensor& operand = operands[i];
      slice[i] = operand.dim() == out.dim() ? operand.select(split, index) : operand;
    }
    launchAnyRank(opcode, refsTo(slice), immediates);
  }
}

// Operands of a rank above PTO's (torch allows 64): merged where they can be; still
// above it, the instruction runs once per index of a dimension each output element
// has its own of (the output's stride is not 0: not one a reduction folds; a row
// instruction's row is never one). Other instructions go line by line (launchPerLine).
void launchAnyRank(isa::Opcode opcode, Operands operands, std::array<double, isa::kMaxImmediates> immediates) {
  const at::Tensor& out = operands.front();
  if (out.dim() <= isa::kMaxRank) {
    launchOnce(opcode, operands, immediates);
    return;
  }
  const isa::InstructionInfo& info = isa::info(opcode);
  const bool same_shape = std::all_of(operands.begin(), operands.end(),
                                      [&](const TensorRef& t) { return t.get().sizes() == out.sizes(); });
  const bool mergeable = info.has(isa::Property::SameShape) &&
      (info.has(isa::Property::Elementwise) || info.has(isa::Property::Reduction) || info.has(isa::Property::RowOp));
  if (!(same_shape && mergeable)) {
    launchPerLine(opcode, operands, immediates);
    return;
  }
  const bool row = info.has(isa::Property::RowOp);
  const std::vector<at::Tensor> merged = coalesced(operands, row);
  const at::Tensor& merged_out = merged.front();
  int64_t split = 0;
  while (split < merged_out.dim() - (row ? 1 : 0) && merged_out.stride(split) == 0) ++split;
  if (merged_out.dim() <= isa::kMaxRank || split == merged_out.dim() - (row ? 1 : 0)) {
    launchOnce(opcode, refsTo(merged), immediates);
    return;
  }
  std::vector<at::Tensor> slice(merged.size());
  for (int64_t index = 0; index < merged_out.size(split); ++index) {
    for (size_t i = 0; i < merged.size(); ++i) slice[i] = merged[i].select(split, index);
    launchAnyRank(opcode, refsTo(slice), immediates);
  }
}

}  // namespace

void launchInstruction(isa::Opcode opcode, const at::Tensor& out, TensorRefs inputs,
                       std::array<double, isa::kMaxImmediates> immediates) {
  c10::SmallVector<TensorRef, 6> operands{out};
  operands.append(inputs.begin(), inputs.end());
  launchAnyRank(opcode, operands, immediates);
}

void launchInstruction(isa::Opcode opcode, const std::vector<at::Tensor>& operands,
                       std::array<double, isa::kMaxImmediates> immediates) {
  launchAnyRank(opcode, refsTo(operands), immediates);
}

void launchViews(isa::Opcode opcode, const std::vector<at::Tensor>& buffers, const std::vector<recipes::View>& views,
                 std::array<double, isa::kMaxImmediates> immediates) {
  const bool fits = std::all_of(views.begin(), views.end(),
                                [](const recipes::View& view) { return view.rank() <= isa::kMaxRank; });
  if (!fits) {
    std::vector<at::Tensor> operands;
    for (const recipes::View& view : views) {
      operands.push_back(buffers[static_cast<size_t>(view.buffer)].as_strided(view.shape, view.strides, view.offset));
    }
    launchAnyRank(opcode, refsTo(operands), immediates);
    return;
  }
  const at::Tensor& out = buffers[static_cast<size_t>(views.front().buffer)];
  Launch launch(opcode, immediates, views.size());
  for (const recipes::View& view : views) launch.bind(buffers[static_cast<size_t>(view.buffer)], view, out);
  launch.onStreamOf(out);
}

void launchReversedMove(const at::Tensor& out, const at::Tensor& in, std::bitset<isa::kMaxRank> reversed) {
  Launch launch(isa::Opcode::kMove, {}, 2);
  launch.bind(out, out);
  isa::Operand& source = launch.bind(in, out);
  for (int d = 0; d < source.rank; ++d) {
    if (!reversed.test(static_cast<size_t>(d)) || source.shape[d] == 0) continue;
    source.offset += (source.shape[d] - 1) * source.strides[d];
    source.strides[d] = -source.strides[d];
  }
  launch.onStreamOf(out);
}

}  // namespace pto::torch_glue
