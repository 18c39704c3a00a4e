// A compiled graph's plan run natively: for a plan of programs only (no eager step, no
// host memory), the checks of its input signature, the allocation of its outputs, the
// binding of buffers and the launches, in one call from Python. The plan as Python
// runs it (pypto_torch/compile/graph_runner.py, Plan.run) costs microseconds per
// step in the interpreter: as much as a tiny graph's whole launch.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <utility>
#include <vector>

#include "bound_program.h"

namespace pto::torch_glue {

class PlanRunner {
 public:
  // A tensor's layout: an input the plan was lowered for, or an output it allocates.
  struct Layout {
    std::vector<int64_t> sizes, strides;
    at::ScalarType dtype;
    c10::Device device;
  };
  // A program's buffer: slot -1 is a temporary (the program's workspace).
  struct Binding {
    int64_t slot = -1;
    std::optional<Layout> allocate;  // a new tensor of this layout into the slot first
  };
  struct Step {
    BoundProgram* program;  // kept alive by the caller (the plan holds it)
    std::vector<Binding> bindings;
  };
  // A result: a view of the tensor in `slot`, offset in elements from its storage offset.
  struct Output {
    int64_t slot;
    std::vector<int64_t> sizes, strides;
    int64_t offset;
  };

  PlanRunner(std::vector<Layout> inputs, int64_t slot_count, std::vector<std::pair<int64_t, at::Tensor>> constants,
             std::vector<Step> steps, std::vector<Output> outputs);

  // The results, or nothing when the inputs' layouts are not those the plan was
  // lowered for (the caller plans for them).
  std::optional<std::vector<at::Tensor>> run(const std::vector<at::Tensor>& args) const;

 private:
  std::vector<Layout> inputs_;
  int64_t slot_count_;
  std::vector<std::pair<int64_t, at::Tensor>> constants_;
  std::vector<Step> steps_;
  std::vector<Output> outputs_;
};

}  // namespace pto::torch_glue
