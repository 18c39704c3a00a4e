// The defaults of the Driver's optional methods, written against its required
// ones, so that a new driver runs everything from its first day.
#include "driver.h"

#include <cstdlib>
#include <cstring>

#include "error.h"
#include "isa/tuning.h"

namespace pto::rt {
namespace {

constexpr size_t kPageBytes = 4096;
// The PTO ISA version whose instructions a driver runs by default.
constexpr int64_t kIsaVersionMajor = 1;
constexpr int64_t kIsaVersionMinor = 0;

}  // namespace

ptoError Driver::deviceAttribute(int32_t device, ptoDeviceAttribute attribute, int64_t* value) {
  switch (attribute) {
    case PTO_DEVICE_ATTR_CORE_COUNT: *value = 1; return PTO_SUCCESS;
    case PTO_DEVICE_ATTR_UNIFIED_BUFFER_BYTES: *value = isa::reference_core::kUnifiedBufferBytes; return PTO_SUCCESS;
    case PTO_DEVICE_ATTR_PAGEABLE_MEMORY_ACCESS: *value = 0; return PTO_SUCCESS;
    case PTO_DEVICE_ATTR_HOST_ACCESS_TO_DEVICE_MEMORY: *value = 0; return PTO_SUCCESS;
    case PTO_DEVICE_ATTR_BFLOAT16: *value = 0; return PTO_SUCCESS;
    case PTO_DEVICE_ATTR_FLOAT64: *value = 1; return PTO_SUCCESS;
    case PTO_DEVICE_ATTR_ISA_VERSION_MAJOR: *value = kIsaVersionMajor; return PTO_SUCCESS;
    case PTO_DEVICE_ATTR_ISA_VERSION_MINOR: *value = kIsaVersionMinor; return PTO_SUCCESS;
    case PTO_DEVICE_ATTR_BUSY_NANOSECONDS:
      return failf(PTO_ERROR_NOT_SUPPORTED, "the driver does not count its devices' busy time");
    case PTO_DEVICE_ATTR_VECTOR_ISA:
      return failf(PTO_ERROR_NOT_SUPPORTED, "the driver's devices do not compute on the host's vector units");
    case PTO_DEVICE_ATTR_TILE_ELEMENTS: *value = isa::reference_core::kTileElements; return PTO_SUCCESS;
    case PTO_DEVICE_ATTR_GEMM_TILE_ROWS: *value = isa::reference_core::kGemmTileRows; return PTO_SUCCESS;
    case PTO_DEVICE_ATTR_PARALLEL_GEMM_TILES: *value = isa::reference_core::kParallelGemmTiles; return PTO_SUCCESS;
    case PTO_DEVICE_ATTR_TOTAL_MEMORY_BYTES: {
      size_t free_bytes = 0, total_bytes = 0;
      if (ptoError s = memGetInfo(device, &free_bytes, &total_bytes); s != PTO_SUCCESS) return s;
      *value = static_cast<int64_t>(total_bytes);
      return PTO_SUCCESS;
    }
  }
  return failf(PTO_ERROR_INVALID_VALUE, "unknown device attribute ", static_cast<int>(attribute));
}

ptoError Driver::mallocHost(size_t size, void** ptr) {
  const size_t rounded = (size + kPageBytes - 1) / kPageBytes * kPageBytes;
  *ptr = rounded < size ? nullptr : std::aligned_alloc(kPageBytes, rounded == 0 ? kPageBytes : rounded);
  if (*ptr == nullptr) return failf(PTO_ERROR_OUT_OF_MEMORY, "cannot allocate ", size, " bytes of host memory");
  return PTO_SUCCESS;
}

ptoError Driver::freeHost(void* ptr) {
  std::free(ptr);
  return PTO_SUCCESS;
}

namespace {

struct FillSource {
  Driver* driver;
  void* host;
};

const char* freeFillSource(void* user_data) {
  auto* source = static_cast<FillSource*>(user_data);
  source->driver->freeHost(source->host);
  delete source;
  return nullptr;
}

}  // namespace

ptoError Driver::memsetAsync(void* ptr, int value, size_t count, ptoStream stream) {
  void* host = nullptr;
  if (ptoError s = mallocHost(count, &host); s != PTO_SUCCESS) return s;
  std::memset(host, value, count);
  if (ptoError s = memcpyAsync(ptr, host, count, PTO_MEMCPY_HOST_TO_DEVICE, stream); s != PTO_SUCCESS) {
    freeHost(host);
    return s;
  }
  // The source lives until the copy has run: freed by a host function after it.
  return launchHostFunc(stream, &freeFillSource, new FillSource{this, host});
}

ptoError Driver::defaultStream(int32_t device, ptoStream* stream) {
  std::lock_guard<std::mutex> lock(default_streams_mutex_);
  if (default_streams_.empty()) default_streams_.assign(static_cast<size_t>(deviceCount()), nullptr);
  ptoStream& slot = default_streams_[static_cast<size_t>(device)];
  if (slot == nullptr) {
    if (ptoError s = streamCreate(device, &slot); s != PTO_SUCCESS) return s;
  }
  *stream = slot;
  return PTO_SUCCESS;
}

namespace {

struct NodeList final : DeviceGraph {
  std::vector<GraphNode> nodes;
};

}  // namespace

ptoError Driver::instantiateGraph(int32_t, const std::vector<GraphNode>& nodes, std::shared_ptr<DeviceGraph>* graph) {
  auto list = std::make_shared<NodeList>();
  list->nodes = nodes;
  *graph = std::move(list);
  return PTO_SUCCESS;
}

ptoError Driver::launchGraph(ptoStream stream, const std::shared_ptr<DeviceGraph>& graph) {
  for (const GraphNode& node : static_cast<const NodeList&>(*graph).nodes) {
    ptoError status = PTO_SUCCESS;
    switch (node.kind) {
      case GraphNode::Kind::kProgram:
        status = launchProgram(stream, node.program, node.buffers, node.workspace);
        break;
      case GraphNode::Kind::kMemcpy:
        status = memcpyAsync(node.dst, node.src, node.bytes, node.copy_kind, stream);
        break;
      case GraphNode::Kind::kMemset:
        status = memsetAsync(node.dst, node.fill_value, node.bytes, stream);
        break;
      case GraphNode::Kind::kHostFunc:
        status = launchHostFunc(stream, node.host_fn, node.user_data);
        break;
    }
    if (status != PTO_SUCCESS) return status;
  }
  return PTO_SUCCESS;
}

ptoError Driver::ipcGetMemHandle(void*, ptoIpcMemHandle*) {
  return failf(PTO_ERROR_NOT_SUPPORTED, "the ", name(), " driver cannot share device memory with other processes");
}

ptoError Driver::ipcOpenMemHandle(int32_t, const ptoIpcMemHandle&, void**) {
  return failf(PTO_ERROR_NOT_SUPPORTED, "the ", name(), " driver cannot share device memory with other processes");
}

ptoError Driver::ipcCloseMemHandle(void*) {
  return failf(PTO_ERROR_NOT_SUPPORTED, "the ", name(), " driver cannot share device memory with other processes");
}

ptoError Driver::eventElapsedTime(float*, ptoEvent, ptoEvent) {
  return failf(PTO_ERROR_NOT_SUPPORTED, "the ", name(), " driver does not time events");
}

}  // namespace pto::rt
