// pypto_torch._C's compiled graphs: a program bound to tensors (_BoundProgram), a plan
// of them run natively (_PlanRunner, csrc/torch/plan_runner.h), and the callable the
// pypto backend hands Dynamo (_CompiledCall).
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "torch/bound_program.h"
#include "torch/plan_runner.h"

namespace py = pybind11;
using pto::torch_glue::BoundProgram;
using pto::torch_glue::PlanRunner;

namespace {

// The inputs as tensors, or nothing if one is not a tensor (not a signature a plan
// was lowered for).
std::optional<std::vector<at::Tensor>> tensorsOf(const py::tuple& args) {
  std::vector<at::Tensor> tensors;
  tensors.reserve(args.size());
  for (const py::handle arg : args) {
    if (!THPVariable_Check(arg.ptr())) return std::nullopt;
    tensors.push_back(THPVariable_Unpack(arg.ptr()));
  }
  return tensors;
}

// What the backend returns for a graph (pypto_torch/compile/disk_cache.py): Dynamo
// calls it with the graph's inputs. While it has a runner whose signature the inputs
// match, the call is native from Dynamo's frame to the launches: a Python frame of a
// wrapper in between and the list-to-tuple copy of the results cost 0.4-0.6 us of a
// 16-float graph's ~4.2 on the AVX2 EPYC. Every other call (another signature, a plan with eager
// steps, the call that stores the plan to disk) goes to `target`, which can
// retarget this object once it has a runner.
class CompiledCall {
 public:
  // runner: a _PlanRunner, or None.
  CompiledCall(py::object target, py::object runner, bool returns_list) {
    retarget(std::move(target), std::move(runner), returns_list);
  }

  void retarget(py::object target, py::object runner, bool returns_list) {
    target_ = std::move(target);
    runner_ = runner.is_none() ? nullptr : runner.cast<const PlanRunner*>();
    runner_object_ = std::move(runner);
    returns_list_ = returns_list;
  }

  py::object call(const py::args& args) const {
    if (runner_ != nullptr) {
      if (auto inputs = tensorsOf(args)) {
        if (auto results = runner_->run(*inputs)) return wrap(std::move(*results));
      }
    }
    return target_(*args);
  }

  const py::object& target() const { return target_; }

 private:
  py::object wrap(std::vector<at::Tensor> results) const {
    if (returns_list_) return py::cast(std::move(results));
    py::tuple tuple(results.size());
    for (size_t i = 0; i < results.size(); ++i) {
      tuple[i] = py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(results[i])));
    }
    return tuple;
  }

  py::object target_;
  py::object runner_object_ = py::none();  // keeps runner_ alive
  const PlanRunner* runner_ = nullptr;
  bool returns_list_ = false;
};

}  // namespace

void bindCompiledGraphs(py::module_& m) {
  py::class_<BoundProgram>(m, "_BoundProgram")
      .def(py::init<const std::string&, bool, bool>(), py::arg("pto_as"), py::arg("debug") = false,
           py::arg("fuse") = true)
      .def_property_readonly("text", &BoundProgram::text)
      .def_property_readonly("fused_stages", &BoundProgram::fusedStages)
      .def_property_readonly("stages", &BoundProgram::stageCount)
      .def_property_readonly("instructions", &BoundProgram::instructionCount)
      .def_property_readonly("workspace_bytes", &BoundProgram::workspaceBytes)
      .def_property_readonly("buffer_kinds", &BoundProgram::bufferKinds)
      .def("run", [](BoundProgram& program, const std::vector<std::optional<at::Tensor>>& buffers, int device) {
        program.run(buffers, static_cast<c10::DeviceIndex>(device));
      });

  // steps: [(program, [None | (slot, None | (sizes, strides, dtype, device))])]; the
  // runner keeps the list, and so the programs, alive (keep_alive).
  using Layout = std::tuple<std::vector<int64_t>, std::vector<int64_t>, at::ScalarType, at::Device>;
  using BindingSpec = std::optional<std::pair<int64_t, std::optional<Layout>>>;
  py::class_<PlanRunner>(m, "_PlanRunner")
      .def(py::init([](const std::vector<Layout>& inputs, int64_t slot_count,
                       std::vector<std::pair<int64_t, at::Tensor>> constants, const py::list& steps,
                       const std::vector<std::tuple<int64_t, std::vector<int64_t>, std::vector<int64_t>, int64_t>>&
                           outputs) {
             auto layout = [](const Layout& spec) {
               const auto& [sizes, strides, dtype, device] = spec;
               return PlanRunner::Layout{sizes, strides, dtype, device};
             };
             std::vector<PlanRunner::Layout> input_layouts;
             for (const Layout& input : inputs) input_layouts.push_back(layout(input));
             std::vector<PlanRunner::Step> native_steps;
             for (const py::handle step : steps) {
               const auto [program, bindings] = step.cast<std::pair<BoundProgram*, std::vector<BindingSpec>>>();
               PlanRunner::Step& native = native_steps.emplace_back(PlanRunner::Step{program, {}});
               for (const BindingSpec& binding : bindings) {
                 PlanRunner::Binding& bound = native.bindings.emplace_back();
                 if (!binding) continue;
                 bound.slot = binding->first;
                 if (binding->second) bound.allocate = layout(*binding->second);
               }
             }
             std::vector<PlanRunner::Output> results;
             for (const auto& [slot, sizes, strides, offset] : outputs) results.push_back({slot, sizes, strides, offset});
             return std::make_unique<PlanRunner>(std::move(input_layouts), slot_count, std::move(constants),
                                                 std::move(native_steps), std::move(results));
           }),
           py::keep_alive<1, 5>())
      .def("run", [](const PlanRunner& runner, const py::tuple& args) -> py::object {
        std::optional<std::vector<at::Tensor>> inputs = tensorsOf(args);
        std::optional<std::vector<at::Tensor>> results = inputs ? runner.run(*inputs) : std::nullopt;
        return results ? py::cast(std::move(*results)) : py::none();
      });

  // _CompiledCall(target, runner or None, returns_list); retarget(the same).
  py::class_<CompiledCall>(m, "_CompiledCall")
      .def(py::init<py::object, py::object, bool>(), py::arg("target"), py::arg("runner") = py::none(),
           py::arg("returns_list") = false)
      .def("__call__", &CompiledCall::call)
      .def("retarget", &CompiledCall::retarget, py::arg("target"), py::arg("runner"), py::arg("returns_list"))
      .def_property_readonly("target", &CompiledCall::target);
}
