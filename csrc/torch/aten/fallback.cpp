#include "fallback.h"

#include <ATen/ATen.h>
#include <ATen/native/CPUFallback.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "../pto_graph.h"
#include "../generator.h"
#include "composite.h"

namespace pto::torch_glue {
namespace {

FallbackMode modeFromEnvironment() {
  const char* value = std::getenv("PTO_FALLBACK");
  if (value == nullptr || std::strcmp(value, "warn") == 0) return FallbackMode::kWarn;
  if (std::strcmp(value, "silent") == 0) return FallbackMode::kSilent;
  if (std::strcmp(value, "error") == 0) return FallbackMode::kError;
  TORCH_WARN("PTO_FALLBACK='", value, "' is not one of warn, silent, error; using warn");
  return FallbackMode::kWarn;
}

std::atomic<FallbackMode>& modeSetting() {
  static std::atomic<FallbackMode> mode{modeFromEnvironment()};
  return mode;
}

std::mutex counts_mutex;
std::map<std::string, int64_t>& counts() {
  static std::map<std::string, int64_t> all;
  return all;
}

std::string fullName(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

// Ops that take CPU tensors beside device tensors by design (indices, as with CUDA).
bool acceptsCpuTensors(const c10::OperatorName& name) {
  static const char* const kMixed[] = {"aten::index", "aten::index_put", "aten::index_put_",
                                       "aten::_index_put_impl_"};
  for (const char* mixed : kMixed) {
    if (name.name == mixed) return true;
  }
  return false;
}

// Same rule, same message as torch's own device check for CUDA and CPU:
// CPU tensors may only join pto tensors as 0-dim scalars.
std::optional<c10::Device> checkDevices(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const auto arguments = torch::jit::last(*stack, schema.arguments().size());
  std::optional<c10::Device> pto_device;
  std::optional<c10::Device> other;
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (t.device().type() == c10::kPrivateUse1) {
      if (!pto_device) pto_device = t.device();
      else if (*pto_device != t.device()) other = t.device();
    } else if (t.dim() > 0 || t.device().type() != c10::kCPU) {
      if (!other) other = t.device();
    }
  };
  for (const c10::IValue& value : arguments) {
    if (value.isTensor()) visit(value.toTensor());
    else if (value.isTensorList()) for (const at::Tensor& t : value.toTensorList().vec()) visit(t);
    else if (value.isOptionalTensorList()) {
      for (const auto& t : value.toOptionalTensorList().vec()) if (t) visit(*t);
    }
  }
  if (pto_device && other && !acceptsCpuTensors(schema.operator_name())) {
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ",
                *pto_device, " and ", *other, "! (when checking arguments of ",
                fullName(schema.operator_name()), ")");
  }
  return pto_device;
}

// Random ops draw from the pto device's generator (torch.pto.manual_seed), not the
// CPU's: from a CPU generator it seeds, advancing its state.
void useDeviceGenerators(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                         c10::DeviceIndex device) {
  const auto& arguments = op.schema().arguments();
  const size_t first = stack->size() - arguments.size();
  for (size_t i = 0; i < arguments.size(); ++i) {
    const auto optional = arguments[i].type()->cast<c10::OptionalType>();
    const bool is_generator = arguments[i].type()->kind() == c10::TypeKind::GeneratorType ||
        (optional && optional->getElementType()->kind() == c10::TypeKind::GeneratorType);
    if (!is_generator) continue;
    c10::IValue& value = (*stack)[first + i];
    const bool own = !value.isNone() && value.toGenerator().device().type() == c10::kPrivateUse1;
    if (value.isNone() || own) {
      at::Generator generator = own ? value.toGenerator() : defaultGenerator(device);
      std::lock_guard<std::mutex> lock(generator.mutex());
      value = generator.get<PtoGeneratorImpl>()->forkCpuGenerator();
    }
  }
}

// A view op's result aliases its input: compute its geometry on meta tensors
// and return a pto view of the same storage, instead of a CPU copy.
bool isViewOp(const c10::FunctionSchema& schema) {
  if (schema.returns().size() != 1 || schema.arguments().empty()) return false;
  const auto* ret = schema.returns()[0].alias_info();
  const auto* arg = schema.arguments()[0].alias_info();
  return ret != nullptr && arg != nullptr && !ret->isWrite() && ret->beforeSets() == arg->beforeSets();
}

void viewFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t count = op.schema().arguments().size();
  const size_t first = stack->size() - count;
  const at::Tensor base = (*stack)[first].toTensor();
  for (size_t i = first; i < stack->size(); ++i) {
    if ((*stack)[i].isTensor() && (*stack)[i].toTensor().device().type() == c10::kPrivateUse1) {
      (*stack)[i] = metaTwin((*stack)[i].toTensor());
    }
  }
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), stack);
  c10::IValue result = torch::jit::pop(*stack);
  auto as_view = [&](const at::Tensor& meta) {
    if (meta.dtype() == base.dtype()) {
      return base.as_strided(meta.sizes(), meta.strides(), meta.storage_offset());
    }
    // A reinterpreting view (view_as_real, ...): same bytes, another dtype.
    at::Tensor view = at::empty({0}, base.options().dtype(meta.dtype()));
    view.set_(base.storage(), meta.storage_offset(), meta.sizes(), meta.strides());
    return view;
  };
  if (result.isTensor()) {
    torch::jit::push(*stack, as_view(result.toTensor()));
  } else {
    std::vector<at::Tensor> views;
    for (const at::Tensor& meta : result.toTensorVector()) views.push_back(as_view(meta));
    torch::jit::push(*stack, views);
  }
}

// torch's cpu_fallback puts new results on the first tensor argument's device: a CPU
// scalar first (torch.tensor(2j) * z) would leave the result on the CPU. As on CUDA,
// a result of an op with pto tensors is a pto tensor; results that alias an argument
// (in-place, out=) stay where that argument is, and an op given a device (factories,
// to) keeps the one it was given.
void moveNewResultsTo(const c10::Device& device, const c10::FunctionSchema& schema, torch::jit::Stack* stack) {
  for (const c10::Argument& argument : schema.arguments()) {
    const auto optional = argument.type()->cast<c10::OptionalType>();
    const c10::TypePtr& type = optional ? optional->getElementType() : argument.type();
    if (type->kind() == c10::TypeKind::DeviceObjType) return;
  }
  const size_t count = schema.returns().size();
  for (size_t i = 0; i < count; ++i) {
    c10::IValue& value = (*stack)[stack->size() - count + i];
    if (schema.returns()[i].alias_info() != nullptr || !value.isTensor()) continue;
    const at::Tensor& result = value.toTensor();
    if (result.defined() && result.is_cpu()) value = result.to(device);
  }
}

}  // namespace

FallbackMode fallbackMode() { return modeSetting().load(); }
void setFallbackMode(FallbackMode mode) { modeSetting().store(mode); }

std::map<std::string, int64_t> fallbackCounts() {
  std::lock_guard<std::mutex> lock(counts_mutex);
  return counts();
}

void enterCpuFallback(const std::string& op) {
  const FallbackMode mode = modeSetting().load();
  TORCH_CHECK_NOT_IMPLEMENTED(mode != FallbackMode::kError, op,
                              " has no native pto kernel, and PTO_FALLBACK=error forbids "
                              "running it on the CPU");
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(counts_mutex);
    first = counts()[op]++ == 0;
  }
  if (first && mode == FallbackMode::kWarn) {
    TORCH_WARN(op, " has no native pto kernel yet: it runs on the CPU, with its tensors copied "
               "there and back. Set PTO_FALLBACK=silent to hide this warning, or "
               "PTO_FALLBACK=error to forbid the fallback.");
  }
}

void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const std::optional<c10::Device> device = checkDevices(op, stack);
  if (isViewOp(schema) && (*stack)[stack->size() - schema.arguments().size()].isTensor()) {
    viewFallback(op, stack);
    return;
  }
  enterCpuFallback(fullName(schema.operator_name()));
  useDeviceGenerators(op, stack, device ? device->index() : -1);
  try {
    at::native::cpu_fallback(op, stack);
    if (device) moveNewResultsTo(*device, schema, stack);
  } catch (const c10::Error& error) {
    rethrowNamingCapture(error, fullName(schema.operator_name()) + ", which has no native pto kernel and falls back to the CPU,");
  }
}

}  // namespace pto::torch_glue
