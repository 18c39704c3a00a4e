// pypto_torch._C: the Python face of the torch glue. Thin: argument conversion
// and nothing else; every behaviour lives in csrc/torch.
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include <ATen/Context.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "isa/instructions.h"
#include "isa/program.h"
#include "runtime/pto_runtime.h"
#include "recipes/aten_instructions.h"
#include "torch/aten/fallback.h"
#include "torch/autograd_exit.h"
#include "torch/device.h"
#include "torch/dtype_map.h"
#include "torch/generator.h"
#include "torch/pto_check.h"
#include "torch/sync_debug.h"

namespace py = pybind11;
using namespace pto::torch_glue;

namespace {

FallbackMode parseFallbackMode(const std::string& name) {
  if (name == "warn") return FallbackMode::kWarn;
  if (name == "silent") return FallbackMode::kSilent;
  if (name == "error") return FallbackMode::kError;
  throw py::value_error("fallback mode must be 'warn', 'silent' or 'error', got '" + name + "'");
}

const char* fallbackModeName(FallbackMode mode) {
  switch (mode) {
    case FallbackMode::kWarn: return "warn";
    case FallbackMode::kSilent: return "silent";
    case FallbackMode::kError: return "error";
  }
  return "warn";
}

// The instruction table as Python data, for docs/ISA.md (pypto_torch.isa_doc).
py::list isaTable() {
  namespace isa = pto::isa;
  py::list rows;
  for (const isa::InstructionInfo& entry : isa::instructionTable()) {
    py::list dtypes;
    for (int d = 0; d < isa::kDTypeCount; ++d) {
      const auto dtype = static_cast<isa::DType>(d);
      if (entry.dtypes.contains(dtype)) dtypes.append(std::string(isa::dtypeName(dtype)));
    }
    py::list immediates;
    for (int i = 0; i < entry.immediateCount(); ++i) immediates.append(std::string(entry.immediates[i]));
    py::list properties;
    for (int p = 0; p < isa::kPropertyCount; ++p) {
      const auto property = static_cast<isa::Property>(p);
      if (entry.has(property)) properties.append(std::string(isa::propertyName(property)));
    }
    py::dict row;
    row["mnemonic"] = std::string(entry.name);
    row["group"] = std::string(isa::groupName(entry.group));
    row["inputs"] = entry.inputs;
    row["dtypes"] = dtypes;
    row["output"] = std::string(isa::outputName(entry.output));
    row["immediates"] = immediates;
    row["properties"] = properties;
    rows.append(row);
  }
  return rows;
}

// The aten -> PTO table as Python data, for the compiler's lowering.
py::list atenInstructions() {
  py::list rows;
  for (const pto::recipes::AtenInstruction& entry : pto::recipes::kAtenInstructions) {
    py::dict row;
    row["op"] = std::string(entry.op);
    row["form"] = std::string(entry.form);
    row["argument"] = std::string(entry.argument);
    row["value"] = std::string(entry.value);
    row["mnemonic"] = std::string(pto::isa::info(entry.opcode).name);
    row["promotion"] = std::string(pto::recipes::promotionName(entry.promotion));
    rows.append(row);
  }
  return rows;
}

// The torch <-> PTO dtype map as (torch dtype, PTO dtype name) pairs, for the compiler.
std::vector<std::pair<at::ScalarType, std::string>> dtypeMapPairs() {
  std::vector<std::pair<at::ScalarType, std::string>> pairs;
  for (const DTypePair& pair : dtypeMap()) pairs.emplace_back(pair.torch, pto::isa::dtypeName(pair.pto));
  return pairs;
}

// A program as the compiler's program builder (pypto_torch/compile/program_builder.py)
// holds it, in PTO-AS's names: buffers as (kind, bytes), instructions as (mnemonic,
// operands, immediates by name), operands as (buffer, dtype, shape, strides, offset).
using BufferParts = std::pair<std::string, uint64_t>;
using OperandParts = std::tuple<int32_t, std::string, std::vector<int64_t>, std::vector<int64_t>, int64_t>;
using InstructionParts = std::tuple<std::string, std::vector<OperandParts>, std::map<std::string, double>>;

pto::isa::Operand operandOf(const OperandParts& parts) {
  namespace isa = pto::isa;
  const auto& [buffer, dtype, shape, strides, offset] = parts;
  const auto pto_dtype = isa::parseDType(dtype);
  if (!pto_dtype) throw py::value_error("no PTO dtype '" + dtype + "'");
  if (shape.size() > isa::kMaxRank || strides.size() != shape.size()) {
    throw py::value_error("an operand has at most 8 dimensions and one stride for each");
  }
  isa::Operand operand{.buffer = buffer, .dtype = *pto_dtype, .rank = static_cast<int32_t>(shape.size()),
                       .offset = offset};
  std::copy(shape.begin(), shape.end(), operand.shape.begin());
  std::copy(strides.begin(), strides.end(), operand.strides.begin());
  return operand;
}

pto::isa::Instruction instructionOf(const InstructionParts& parts) {
  namespace isa = pto::isa;
  const auto& [mnemonic, operands, immediates] = parts;
  const auto opcode = isa::opcodeByName(mnemonic);
  if (!opcode) throw py::value_error("no PTO instruction '" + mnemonic + "'");
  isa::Instruction instruction{.opcode = *opcode};
  for (const OperandParts& operand : operands) instruction.operands.push_back(operandOf(operand));
  const isa::InstructionInfo& entry = isa::info(*opcode);
  for (int i = 0; i < entry.immediateCount(); ++i) {
    const auto found = immediates.find(std::string(entry.immediates[i]));
    if (found == immediates.end()) throw py::value_error(mnemonic + " needs " + std::string(entry.immediates[i]) + "=");
    instruction.immediates[i] = found->second;
  }
  if (immediates.size() != static_cast<size_t>(entry.immediateCount())) {
    throw py::value_error(mnemonic + " was given an immediate it does not take");
  }
  return instruction;
}

pto::isa::BufferKind bufferKindOf(const std::string& name) {
  namespace isa = pto::isa;
  for (const isa::BufferKind kind : {isa::BufferKind::kInput, isa::BufferKind::kOutput, isa::BufferKind::kTemp}) {
    if (isa::kindName(kind) == name) return kind;
  }
  throw py::value_error("no buffer kind '" + name + "' (input, output, temp)");
}

}  // namespace

void bindDistributed(py::module_& m);  // distributed.cpp
void bindMemory(py::module_& m);  // memory.cpp
void bindMemoryHistory(py::module_& m);  // memory_history.cpp
void bindGraphs(py::module_& m);  // graphs.cpp
void bindCompiledGraphs(py::module_& m);  // compiled_graphs.cpp
void bindRecipes(py::module_& m);  // recipes.cpp
void bindSharing(py::module_& m);  // sharing.cpp

PYBIND11_MODULE(_C, m) {
  bindMemory(m);
  bindMemoryHistory(m);
  bindGraphs(m);
  bindCompiledGraphs(m);
  bindRecipes(m);
  bindSharing(m);
  m.doc() = "pypto_torch native module: the pto device for PyTorch";

  m.def("_init", [] { at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1); });
  m.def("_driver_name", [] { return std::string(ptoGetDriverName()); });
  m.def("_device_count", [] { return static_cast<int>(deviceCount()); });
  m.def("_device_attribute", [](int device, const std::string& name) {
    static const std::map<std::string, ptoDeviceAttribute> kAttributes = {
        {"core_count", PTO_DEVICE_ATTR_CORE_COUNT},
        {"unified_buffer_bytes", PTO_DEVICE_ATTR_UNIFIED_BUFFER_BYTES},
        {"pageable_memory_access", PTO_DEVICE_ATTR_PAGEABLE_MEMORY_ACCESS},
        {"host_access_to_device_memory", PTO_DEVICE_ATTR_HOST_ACCESS_TO_DEVICE_MEMORY},
        {"bfloat16", PTO_DEVICE_ATTR_BFLOAT16},
        {"float64", PTO_DEVICE_ATTR_FLOAT64},
        {"total_memory_bytes", PTO_DEVICE_ATTR_TOTAL_MEMORY_BYTES},
        {"isa_version_major", PTO_DEVICE_ATTR_ISA_VERSION_MAJOR},
        {"isa_version_minor", PTO_DEVICE_ATTR_ISA_VERSION_MINOR},
        {"busy_nanoseconds", PTO_DEVICE_ATTR_BUSY_NANOSECONDS},
        {"vector_isa", PTO_DEVICE_ATTR_VECTOR_ISA},
        {"tile_elements", PTO_DEVICE_ATTR_TILE_ELEMENTS},
        {"gemm_tile_rows", PTO_DEVICE_ATTR_GEMM_TILE_ROWS},
        {"parallel_gemm_tiles", PTO_DEVICE_ATTR_PARALLEL_GEMM_TILES}};
    const auto found = kAttributes.find(name);
    TORCH_CHECK(found != kAttributes.end(), "unknown pto device attribute '", name, "'");
    return deviceAttribute(static_cast<c10::DeviceIndex>(device), found->second);
  });
  m.def("_is_initialized", &deviceInitialized);
  m.def("_is_in_bad_fork", &inBadFork);
  m.def("_settle_autograd_device_threads", &settleAutogradDeviceThreads, py::call_guard<py::gil_scoped_release>());
  m.def("_current_device", [] { return static_cast<int>(currentDevice()); });
  m.def("_set_device", [](int index) { setCurrentDevice(static_cast<c10::DeviceIndex>(index)); });
  m.def("_exchange_device", [](int index) {
    const int previous = currentDevice();
    if (index >= 0) setCurrentDevice(static_cast<c10::DeviceIndex>(index));
    return previous;
  });
  m.def("_synchronize", [](int index) {
    py::gil_scoped_release no_gil;
    const c10::DeviceGuard guard(c10::Device(c10::kPrivateUse1, resolveDeviceIndex(index)));
    PTO_CHECK(ptoDeviceSynchronize());
  });
  m.def("_set_sync_debug_mode", &setSyncDebugMode);
  m.def("_get_sync_debug_mode", [] { return static_cast<int64_t>(syncDebugMode()); });
  m.def("_external_stream_id", [](uintptr_t handle, int index) {
    return externalStream(reinterpret_cast<ptoStream>(handle), static_cast<c10::DeviceIndex>(index)).id();
  });
  // A stream made by the runtime outside torch, as another library would make one
  // (what torch.pto.ExternalStream wraps), and its destruction by its owner.
  m.def("_runtime_stream_create", [](int index) {
    const c10::DeviceGuard guard(c10::Device(c10::kPrivateUse1, resolveDeviceIndex(index)));
    ptoStream stream = nullptr;
    PTO_CHECK(ptoStreamCreate(&stream));
    return reinterpret_cast<uintptr_t>(stream);
  });
  m.def("_runtime_stream_destroy", [](uintptr_t handle) {
    py::gil_scoped_release no_gil;  // waits for the stream's work
    PTO_CHECK(ptoStreamDestroy(reinterpret_cast<ptoStream>(handle)));
  });
  m.def("_default_generator", [](int index) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(defaultGenerator(static_cast<c10::DeviceIndex>(index))));
  });
  m.def("_fallback_counts", [] { return fallbackCounts(); });
  m.def("_fallback_mode", [] { return std::string(fallbackModeName(fallbackMode())); });
  m.def("_isa_table", &isaTable);
  m.def("_aten_instructions", &atenInstructions);
  m.def("_dtype_map", &dtypeMapPairs);
  m.def("_pto_as", [](const std::vector<BufferParts>& buffers, const std::vector<InstructionParts>& instructions) {
    pto::isa::Program program;
    for (const auto& [kind, bytes] : buffers) program.buffers.push_back({bufferKindOf(kind), bytes});
    for (const InstructionParts& instruction : instructions) program.instructions.push_back(instructionOf(instruction));
    return pto::isa::print(program);
  });
  m.def("_set_fallback_mode", [](const std::string& mode) { setFallbackMode(parseFallbackMode(mode)); });

  m.def("_profiler_start", [] { PTO_CHECK(ptoProfilerStart()); });
  m.def("_profiler_stop", [] { PTO_CHECK(ptoProfilerStop()); });
  m.def("_profiler_now_ns", [] { return ptoProfilerNow(); });
  m.def("_profiler_flush", [] {
    static constexpr const char* kKinds[] = {"instruction", "copy", "fill", "program", "stage", "launch"};
    py::list activities;
    std::vector<ptoActivity> batch(4096);
    for (size_t count = batch.size(); count == batch.size();) {
      PTO_CHECK(ptoProfilerFlush(batch.data(), batch.size(), &count));
      for (size_t i = 0; i < count; ++i) {
        const ptoActivity& a = batch[i];
        activities.append(py::make_tuple(std::string(a.name), std::string(a.detail), kKinds[a.kind], a.device,
                                         a.stream, a.start_ns, a.end_ns, a.bytes, a.flops));
      }
    }
    return activities;
  });

  bindDistributed(m);
}
