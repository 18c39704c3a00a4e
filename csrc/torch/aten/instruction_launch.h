// From aten tensors to one PTO instruction on the current stream: tensors become
// buffers (their storage) and operands (their strided view of it).
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <bitset>
#include <initializer_list>
#include <vector>

#include "isa/program.h"
#include "recipes/recipe.h"

namespace pto::torch_glue {

// A tensor an op reads, by reference. Copying an at::Tensor that Python alone holds
// takes the GIL (its refcount leaving 1 increments the Python object's), which the op
// runs without: a launch copies none. It binds a temporary too (a view made for the
// call), which lives until the call that takes the list returns.
class TensorRef {
 public:
  TensorRef(const at::Tensor& tensor) : tensor_(&tensor) {}  // NOLINT: implicit, as a reference
  operator const at::Tensor&() const { return *tensor_; }    // NOLINT
  const at::Tensor& get() const { return *tensor_; }

 private:
  const at::Tensor* tensor_;
};
using TensorRefs = std::initializer_list<TensorRef>;

// Launches `opcode` with `out` as output and `inputs` as inputs, all pto tensors
// of one device with out's shape (broadcast inputs with expand()), on the current
// stream of that device. Throws with the verifier's message if they do not fit.
// Operands of a rank above PTO's limit are merged or sliced to fit where the
// instruction allows it (see launchAnyRank).
void launchInstruction(isa::Opcode opcode, const at::Tensor& out, TensorRefs inputs,
                       std::array<double, isa::kMaxImmediates> immediates = {});

// The same with the operands in one list, the output first.
void launchInstruction(isa::Opcode opcode, const std::vector<at::Tensor>& operands,
                       std::array<double, isa::kMaxImmediates> immediates);

// Launches a recipe step: `opcode` over `views` (the output first) of `buffers`, a
// recipe's buffers, each view strided in elements of its buffer's storage. Binds the
// views as they are, no tensor made per view, where PTO's rank holds them.
void launchViews(isa::Opcode opcode, const std::vector<at::Tensor>& buffers, const std::vector<recipes::View>& views,
                 std::array<double, isa::kMaxImmediates> immediates);

// out = in read backwards along the dimensions set in `reversed` (torch.flip): one
// tmov whose input views in's storage with those strides negated, from their last
// element on: no copy of the input.
void launchReversedMove(const at::Tensor& out, const at::Tensor& in, std::bitset<isa::kMaxRank> reversed);

}  // namespace pto::torch_glue
