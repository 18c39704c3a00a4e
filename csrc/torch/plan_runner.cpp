#include "plan_runner.h"

#include "aten/tensor_factories.h"
#include "device.h"

namespace pto::torch_glue {

PlanRunner::PlanRunner(std::vector<Layout> inputs, int64_t slot_count,
                       std::vector<std::pair<int64_t, at::Tensor>> constants, std::vector<Step> steps,
                       std::vector<Output> outputs)
    : inputs_(std::move(inputs)),
      slot_count_(slot_count),
      constants_(std::move(constants)),
      steps_(std::move(steps)),
      outputs_(std::move(outputs)) {}

std::optional<std::vector<at::Tensor>> PlanRunner::run(const std::vector<at::Tensor>& args) const {
  if (args.size() != inputs_.size()) return std::nullopt;
  for (size_t i = 0; i < args.size(); ++i) {
    const Layout& expected = inputs_[i];
    const at::Tensor& arg = args[i];
    if (!arg.defined() || arg.scalar_type() != expected.dtype || arg.device() != expected.device ||
        arg.sizes() != c10::IntArrayRef(expected.sizes) || arg.strides() != c10::IntArrayRef(expected.strides)) {
      return std::nullopt;
    }
  }
  std::vector<at::Tensor> slots(static_cast<size_t>(slot_count_));
  std::copy(args.begin(), args.end(), slots.begin());
  for (const auto& [slot, tensor] : constants_) slots[static_cast<size_t>(slot)] = tensor;
  std::vector<std::optional<at::Tensor>> buffers;
  for (const Step& step : steps_) {
    buffers.clear();
    std::optional<c10::DeviceIndex> device;
    for (const Binding& binding : step.bindings) {
      if (binding.slot < 0) {
        buffers.emplace_back();
        continue;
      }
      at::Tensor& tensor = slots[static_cast<size_t>(binding.slot)];
      if (binding.allocate) {
        const Layout& layout = *binding.allocate;
        // The pto kernel itself: a factory has no tensor to dispatch on, and the
        // dispatcher's way to it cost ~600 of a tiny graph's 7.8k instructions a call.
        tensor = layout.device.is_privateuseone()
                     ? emptyStrided(layout.sizes, layout.strides, layout.dtype, std::nullopt, layout.device, std::nullopt)
                     : at::empty_strided(layout.sizes, layout.strides,
                                         at::TensorOptions().dtype(layout.dtype).device(layout.device));
      }
      if (!device && tensor.device().type() == c10::kPrivateUse1) device = tensor.device().index();
      buffers.emplace_back(tensor);
    }
    step.program->run(buffers, device.value_or(currentDevice()));
  }
  std::vector<at::Tensor> results;
  results.reserve(outputs_.size());
  for (const Output& output : outputs_) {
    const at::Tensor& base = slots[static_cast<size_t>(output.slot)];
    if (output.offset == 0 && base.sizes() == c10::IntArrayRef(output.sizes) &&
        base.strides() == c10::IntArrayRef(output.strides)) {
      results.push_back(base);
    } else {
      results.push_back(base.as_strided(output.sizes, output.strides, base.storage_offset() + output.offset));
    }
  }
  return results;
}

}  // namespace pto::torch_glue
