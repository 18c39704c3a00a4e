// The simulated PTO device: separate memory with a capacity per device, streams
// on worker threads, events. Device memory is host memory the runtime owns;
// only runtime calls and kernels launched through it touch it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <cstdlib>
#include <string>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "../driver.h"
#include "../error.h"
#include "host_caches.h"
#include "sim_config.h"
#include "sim_event.h"
#include "sim_memory.h"
#include "sim_parallel.h"
#include "sim_program.h"
#include "sim_stream.h"
#include "kernels/vector_target.h"

namespace pto::rt::sim {
namespace {

constexpr size_t kDeviceAlignment = 64;
constexpr size_t kHostAlignment = 4096;

// The sim's tuning, reported as device attributes for the compiler to schedule by.
// Its cores are the host's, and the cache a tile's intermediates should stay in is
// the host core's: a tile aims at half its L2 over eight float32 tile operands live
// at once (16384 elements with a 1 MiB L2), bounded so that a tile is never tiny,
// nor a stage a single tile.
int64_t tileElements() {
  return std::clamp<int64_t>(hostCaches().l2_bytes / 2 / (8 * static_cast<int64_t>(sizeof(float))), 4096, 65536);
}
// A GEMM tile's output rows: enough for BLAS to run at full speed on each core's
// band. The tiles run in order, because tmatmul spreads each one's bands over the
// device's cores itself (kernels/matmul.cpp).
constexpr int64_t kGemmTileRows = 1024;
constexpr bool kParallelGemmTiles = false;

struct Allocation {
  size_t size = 0;
  int32_t device = -1;  // -1: pinned host memory
  bool opened = false;  // another process's memory, mapped by ipcOpenMemHandle: not counted in `used`
};

struct SimDevice {
  size_t capacity = 0;
  size_t used = 0;  // guarded by SimDriver::memory_mutex_
  std::once_flag default_stream_once;
  std::unique_ptr<SimStream> default_stream_owner;
  std::atomic<SimStream*> default_stream{nullptr};  // published once created
  std::atomic<uint64_t> busy_ns{0};  // PTO_DEVICE_ATTR_BUSY_NANOSECONDS
};

// Saturates to SIZE_MAX (never a valid aligned size) instead of wrapping to a
// small size, so a near-SIZE_MAX request is refused rather than granted.
size_t roundUp(size_t value, size_t alignment) {
  if (value > SIZE_MAX - (alignment - 1)) return SIZE_MAX;
  return (value + alignment - 1) / alignment * alignment;
}

// What a ptoIpcMemHandle holds: where another process finds the allocation's
// memfd (its pid and descriptor), the file it must find there (so that a reused
// descriptor number is not taken for it) and the allocation's size.
struct IpcHandle {
  uint32_t magic = 0;
  int32_t pid = 0;
  int32_t fd = -1;
  int32_t unused = 0;  // named, so that no byte of a handle is padding: two handles of one allocation compare equal
  uint64_t file_device = 0;
  uint64_t inode = 0;
  uint64_t mapped_bytes = 0;  // the memfd's size
  uint64_t size = 0;          // the allocation's, as pointerGetAttributes reports it
};
static_assert(sizeof(IpcHandle) <= sizeof(ptoIpcMemHandle));
constexpr uint32_t kIpcMagic = 0x50544f49;  // "PTOI"

ptoIpcMemHandle encode(const IpcHandle& contents) {
  ptoIpcMemHandle handle{};
  std::memcpy(handle.reserved, &contents, sizeof contents);
  return handle;
}

IpcHandle decode(const ptoIpcMemHandle& handle) {
  IpcHandle contents;
  std::memcpy(&contents, handle.reserved, sizeof contents);
  return contents;
}

ptoStream toHandle(SimStream* stream) { return reinterpret_cast<ptoStream>(stream); }
ptoEvent toHandle(SimEvent* event) { return reinterpret_cast<ptoEvent>(event); }

class SimDriver final : public Driver {
 public:
  explicit SimDriver(const SimConfig& config)
      : memory_(config.strict), devices_(config.device_count), faults_(config.faults) {
    for (auto& device : devices_) device.capacity = config.memory_capacity;
    if (config.vector_isa_cap) kernels::capVectorIsa(*config.vector_isa_cap);
  }

  const char* name() const override { return "sim"; }
  int32_t deviceCount() const override { return static_cast<int32_t>(devices_.size()); }

  ptoError synchronizeDevice(int32_t device) override {
    ptoError first = PTO_SUCCESS;
    std::string message;
    for (const std::shared_ptr<SimStream>& stream : streamsOf(device)) {
      const ptoError status = stream->synchronize();
      if (status != PTO_SUCCESS && first == PTO_SUCCESS) {
        first = status;
        message = recentErrorMessage();
      }
    }
    return first == PTO_SUCCESS ? PTO_SUCCESS : fail(first, message);
  }

  ptoError malloc(int32_t device, size_t size, void** ptr) override {
    *ptr = nullptr;
    if (size == 0) return PTO_SUCCESS;
    if (const uint64_t fault = faults_.strike(FaultSite::kMalloc)) {
      return failf(PTO_ERROR_OUT_OF_MEMORY, "out of memory on pto:", device, ": requested ", size,
                   " bytes (", describeFault(FaultSite::kMalloc, fault), ")");
    }
    SimDevice& dev = devices_[device];
    const size_t rounded = roundUp(size, kDeviceAlignment);
    std::lock_guard<std::mutex> lock(memory_mutex_);
    if (rounded > dev.capacity - dev.used) {
      return failf(PTO_ERROR_OUT_OF_MEMORY, "out of memory on pto:", device, ": requested ", size,
                   " bytes, ", dev.used, " bytes in use of a ", dev.capacity,
                   "-byte capacity (PTO_SIM_MEMORY)");
    }
    void* memory = memory_.allocate(rounded, kDeviceAlignment);
    if (memory == nullptr) {
      return failf(PTO_ERROR_OUT_OF_MEMORY, "out of memory on pto:", device,
                   ": the host could not back ", rounded, " bytes");
    }
    dev.used += rounded;
    allocations_[reinterpret_cast<uintptr_t>(memory)] = Allocation{rounded, device};
    *ptr = memory;
    return PTO_SUCCESS;
  }

  ptoError free(void* ptr) override {
    int32_t device = -1;
    {
      std::lock_guard<std::mutex> lock(memory_mutex_);
      auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
      if (it != allocations_.end()) device = it->second.device;
    }
    if (device < 0) {
      return failf(PTO_ERROR_INVALID_VALUE, "ptoFree: ", ptr, " is not a device allocation");
    }
    if (isOpened(ptr)) {
      return failf(PTO_ERROR_INVALID_VALUE, "ptoFree: ", ptr,
                   " was opened from another process's handle: close it with ptoIpcCloseMemHandle");
    }
    // As cudaFree and aclrtFree do: work queued on the device may still read or
    // write this memory, so it goes back only once that work is done.
    for (const std::shared_ptr<SimStream>& stream : streamsOf(device)) stream->waitIdle();
    std::lock_guard<std::mutex> lock(memory_mutex_);
    auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations_.end() || it->second.device < 0) {
      return failf(PTO_ERROR_INVALID_VALUE, "ptoFree: ", ptr, " is not a device allocation");
    }
    devices_[it->second.device].used -= it->second.size;
    allocations_.erase(it);
    memory_.release(ptr);
    return PTO_SUCCESS;
  }

  ptoError mallocHost(size_t size, void** ptr) override {
    *ptr = nullptr;
    if (size == 0) return PTO_SUCCESS;
    const size_t rounded = roundUp(size, kHostAlignment);
    void* memory = rounded == SIZE_MAX ? nullptr : std::aligned_alloc(kHostAlignment, rounded);
    if (memory == nullptr) {
      return failf(PTO_ERROR_OUT_OF_MEMORY, "ptoMallocHost: cannot pin ", size, " bytes");
    }
    std::lock_guard<std::mutex> lock(memory_mutex_);
    allocations_[reinterpret_cast<uintptr_t>(memory)] = Allocation{rounded, -1};
    *ptr = memory;
    return PTO_SUCCESS;
  }

  ptoError freeHost(void* ptr) override {
    std::lock_guard<std::mutex> lock(memory_mutex_);
    auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations_.end() || it->second.device >= 0) {
      return failf(PTO_ERROR_INVALID_VALUE, "ptoFreeHost: ", ptr, " is not pinned host memory");
    }
    allocations_.erase(it);
    std::free(ptr);
    return PTO_SUCCESS;
  }

  ptoError memGetInfo(int32_t device, size_t* free_bytes, size_t* total_bytes) override {
    std::lock_guard<std::mutex> lock(memory_mutex_);
    *total_bytes = devices_[device].capacity;
    *free_bytes = devices_[device].capacity - devices_[device].used;
    return PTO_SUCCESS;
  }

  ptoError pointerGetAttributes(const void* ptr, ptoPointerAttributes* attributes) override {
    std::lock_guard<std::mutex> lock(memory_mutex_);
    *attributes = ptoPointerAttributes{PTO_MEMORY_UNREGISTERED, -1, nullptr, 0};
    const auto* found = findLocked(ptr);
    if (found == nullptr) return PTO_SUCCESS;
    attributes->type = found->second.device >= 0 ? PTO_MEMORY_DEVICE : PTO_MEMORY_HOST_PINNED;
    attributes->device = found->second.device;
    attributes->base = reinterpret_cast<void*>(found->first);
    attributes->size = found->second.size;
    return PTO_SUCCESS;
  }

  ptoError ipcGetMemHandle(void* ptr, ptoIpcMemHandle* handle) override {
    std::lock_guard<std::mutex> lock(memory_mutex_);
    const Allocation& allocation = allocations_.at(reinterpret_cast<uintptr_t>(ptr));
    if (allocation.opened) {
      return failf(PTO_ERROR_INVALID_VALUE, "ptoIpcGetMemHandle: ", ptr,
                   " was opened from another process's handle; only the process that allocated memory shares it");
    }
    const int fd = memory_.share(ptr);
    struct stat file{};
    if (fd < 0 || fstat(fd, &file) != 0) {
      return failf(PTO_ERROR_OUT_OF_MEMORY, "ptoIpcGetMemHandle: cannot back the ", allocation.size,
                   "-byte allocation at ", ptr, " with shared memory: ", std::strerror(errno));
    }
    *handle = encode(IpcHandle{.magic = kIpcMagic, .pid = getpid(), .fd = fd,
                               .file_device = static_cast<uint64_t>(file.st_dev),
                               .inode = static_cast<uint64_t>(file.st_ino),
                               .mapped_bytes = static_cast<uint64_t>(file.st_size), .size = allocation.size});
    return PTO_SUCCESS;
  }

  ptoError ipcOpenMemHandle(int32_t device, const ptoIpcMemHandle& handle, void** ptr) override {
    const IpcHandle shared = decode(handle);
    if (shared.magic != kIpcMagic) {
      return failf(PTO_ERROR_INVALID_HANDLE, "ptoIpcOpenMemHandle: not a handle ptoIpcGetMemHandle made");
    }
    // The other process's descriptor of its memfd, opened anew through /proc: the
    // same file, as long as that process lives and keeps the allocation.
    const std::string path = "/proc/" + std::to_string(shared.pid) + "/fd/" + std::to_string(shared.fd);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      return failf(PTO_ERROR_INVALID_HANDLE, "ptoIpcOpenMemHandle: the memory of process ", shared.pid,
                   " cannot be opened (", path, ": ", std::strerror(errno),
                   "): that process has exited or freed it, or it belongs to another user");
    }
    struct stat file{};
    const bool same = fstat(fd, &file) == 0 && static_cast<uint64_t>(file.st_dev) == shared.file_device &&
                      static_cast<uint64_t>(file.st_ino) == shared.inode &&
                      static_cast<uint64_t>(file.st_size) == shared.mapped_bytes;
    void* memory = same ? memory_.map(fd, shared.mapped_bytes) : nullptr;
    const int error = errno;
    ::close(fd);
    if (!same) {
      return failf(PTO_ERROR_INVALID_HANDLE, "ptoIpcOpenMemHandle: process ", shared.pid,
                   " has freed the memory of this handle");
    }
    if (memory == nullptr) {
      return failf(PTO_ERROR_OUT_OF_MEMORY, "ptoIpcOpenMemHandle: cannot map ", shared.mapped_bytes,
                   " bytes of process ", shared.pid, "'s memory: ", std::strerror(error));
    }
    std::lock_guard<std::mutex> lock(memory_mutex_);
    allocations_[reinterpret_cast<uintptr_t>(memory)] = Allocation{shared.size, device, true};
    *ptr = memory;
    return PTO_SUCCESS;
  }

  ptoError ipcCloseMemHandle(void* ptr) override {
    if (!isOpened(ptr)) {
      return failf(PTO_ERROR_INVALID_VALUE, "ptoIpcCloseMemHandle: ", ptr,
                   " is not memory opened by ptoIpcOpenMemHandle");
    }
    int32_t device = -1;
    {
      std::lock_guard<std::mutex> lock(memory_mutex_);
      device = allocations_.at(reinterpret_cast<uintptr_t>(ptr)).device;
    }
    // As free: the work queued on the device may still use the memory. A host
    // function dropping the last use of received memory (a collective's keep-alive)
    // closes it on its stream's worker, whose earlier work has run: waiting for
    // that stream would wait for itself.
    for (const std::shared_ptr<SimStream>& stream : streamsOf(device)) {
      if (!stream->runsOnThisThread()) stream->waitIdle();
    }
    std::lock_guard<std::mutex> lock(memory_mutex_);
    allocations_.erase(reinterpret_cast<uintptr_t>(ptr));
    memory_.release(ptr);
    return PTO_SUCCESS;
  }

  ptoError memcpyAsync(void* dst, const void* src, size_t count, ptoMemcpyKind kind,
                       ptoStream stream) override {
    Command command;
    if (ptoError s = memcpyCommand(dst, src, count, kind, &command); s) return s;
    command.injected_fault = faults_.strike(FaultSite::kMemcpy);
    return submit(stream, std::move(command));
  }

  ptoError memsetAsync(void* ptr, int value, size_t count, ptoStream stream) override {
    Command command;
    if (ptoError s = memsetCommand(ptr, value, count, &command); s) return s;
    return submit(stream, std::move(command));
  }

 private:
  struct SimGraph final : DeviceGraph {
    explicit SimGraph(std::shared_ptr<const std::vector<Command>> made) : commands(std::move(made)) {}
    std::shared_ptr<const std::vector<Command>> commands;
  };

  ptoError memcpyCommand(void* dst, const void* src, size_t count, ptoMemcpyKind kind, Command* command) {
    static constexpr const char* kNames[] = {"memcpy host-to-host", "memcpy host-to-device",
                                             "memcpy device-to-host", "memcpy device-to-device"};
    const char* name = kNames[kind];
    const bool dst_on_device =
        kind == PTO_MEMCPY_HOST_TO_DEVICE || kind == PTO_MEMCPY_DEVICE_TO_DEVICE;
    const bool src_on_device =
        kind == PTO_MEMCPY_DEVICE_TO_HOST || kind == PTO_MEMCPY_DEVICE_TO_DEVICE;
    if (ptoError s = checkRange(name, "destination", dst, count, dst_on_device); s) return s;
    if (ptoError s = checkRange(name, "source", src, count, src_on_device); s) return s;
    command->kind = Command::Kind::kMemcpy;
    command->name = name;
    command->dst = dst;
    command->src = src;
    command->bytes = count;
    return PTO_SUCCESS;
  }

  ptoError memsetCommand(void* ptr, int value, size_t count, Command* command) {
    if (ptoError s = checkRange("memset", "destination", ptr, count, true); s) return s;
    command->kind = Command::Kind::kMemset;
    command->name = "memset";
    command->dst = ptr;
    command->bytes = count;
    command->fill_value = value;
    return PTO_SUCCESS;
  }

  static Command hostFuncCommand(ptoHostFn fn, void* user_data) {
    Command command;
    command.kind = Command::Kind::kHostFunc;
    command.name = "host function";
    command.host_fn = fn;
    command.user_data = user_data;
    return command;
  }

 public:

  ptoError defaultStream(int32_t device, ptoStream* stream) override {
    *stream = toHandle(&defaultStreamOf(device));
    return PTO_SUCCESS;
  }

  ptoError streamCreate(int32_t device, ptoStream* stream) override {
    auto created = std::make_shared<SimStream>(device, memory_, devices_[device].busy_ns);
    *stream = toHandle(created.get());
    std::lock_guard<std::mutex> lock(streams_mutex_);
    streams_.emplace(*stream, std::move(created));
    return PTO_SUCCESS;
  }

  ptoError streamDestroy(ptoStream stream) override {
    std::shared_ptr<SimStream> doomed;
    {
      std::lock_guard<std::mutex> lock(streams_mutex_);
      auto it = streams_.find(stream);
      if (it == streams_.end()) {
        return failf(PTO_ERROR_INVALID_HANDLE, "ptoStreamDestroy: ", stream,
                     " is not a live stream (the default stream cannot be destroyed)");
      }
      doomed = std::move(it->second);
      streams_.erase(it);
    }
    // Outside the lock: waits for the stream's pending work (or leaves that to a
    // thread still waiting on the stream, which holds the last reference).
    doomed.reset();
    return PTO_SUCCESS;
  }

  ptoError streamSynchronize(ptoStream stream) override {
    SimStream* target = nullptr;
    if (ptoError s = lookupStream(stream, &target); s) return s;
    return target->synchronize();
  }

  ptoError streamQuery(ptoStream stream) override {
    SimStream* target = nullptr;
    if (ptoError s = lookupStream(stream, &target); s) return s;
    return target->query();
  }

  ptoError streamWaitEvent(ptoStream stream, ptoEvent event) override {
    SimStream* target = nullptr;
    if (ptoError s = lookupStream(stream, &target); s) return s;
    std::shared_ptr<SimEvent> waited;
    if (ptoError s = lookupEvent(event, &waited); s) return s;
    const uint64_t generation = waited->recordedGeneration();
    if (generation == 0) return PTO_SUCCESS;  // never recorded: nothing to wait for
    Command command;
    command.kind = Command::Kind::kEventWait;
    command.name = "stream wait event";
    command.event = std::move(waited);
    command.generation = generation;
    target->enqueue(std::move(command));
    return PTO_SUCCESS;
  }

  ptoError streamGetDevice(ptoStream stream, int32_t* device) override {
    SimStream* target = nullptr;
    if (ptoError s = lookupStream(stream, &target); s) return s;
    *device = target->device();
    return PTO_SUCCESS;
  }

  ptoError eventCreate(ptoEvent* event) override {
    auto created = std::make_shared<SimEvent>();
    *event = toHandle(created.get());
    std::lock_guard<std::mutex> lock(events_mutex_);
    events_.emplace(*event, std::move(created));
    return PTO_SUCCESS;
  }

  ptoError eventDestroy(ptoEvent event) override {
    std::lock_guard<std::mutex> lock(events_mutex_);
    // A stream still waiting on it keeps its own reference to the event.
    if (events_.erase(event) == 0) {
      return failf(PTO_ERROR_INVALID_HANDLE, "ptoEventDestroy: ", event, " is not a live event");
    }
    return PTO_SUCCESS;
  }

  ptoError eventRecord(ptoEvent event, ptoStream stream) override {
    SimStream* target = nullptr;
    if (ptoError s = lookupStream(stream, &target); s) return s;
    std::shared_ptr<SimEvent> recorded;
    if (ptoError s = lookupEvent(event, &recorded); s) return s;
    Command command;
    command.kind = Command::Kind::kEventRecord;
    command.name = "event record";
    command.generation = recorded->nextGeneration();
    command.event = std::move(recorded);
    target->enqueue(std::move(command));
    return PTO_SUCCESS;
  }

  ptoError eventSynchronize(ptoEvent event) override {
    std::shared_ptr<SimEvent> target;
    if (ptoError s = lookupEvent(event, &target); s) return s;
    target->waitFor(target->recordedGeneration());
    return reportFailure(*target);
  }

  ptoError eventQuery(ptoEvent event) override {
    std::shared_ptr<SimEvent> target;
    if (ptoError s = lookupEvent(event, &target); s) return s;
    return target->isComplete() ? reportFailure(*target) : PTO_ERROR_NOT_READY;
  }

  ptoError eventElapsedTime(float* milliseconds, ptoEvent start, ptoEvent end) override {
    std::shared_ptr<SimEvent> first, last;
    if (ptoError s = lookupEvent(start, &first); s) return s;
    if (ptoError s = lookupEvent(end, &last); s) return s;
    SimEvent::Clock::time_point t0, t1;
    bool first_recorded = false, last_recorded = false;
    const bool first_done = first->completionTime(&t0, &first_recorded);
    const bool last_done = last->completionTime(&t1, &last_recorded);
    if (!first_recorded || !last_recorded) {
      return failf(PTO_ERROR_INVALID_HANDLE,
                   "ptoEventElapsedTime: both events must be recorded before measuring");
    }
    if (!first_done || !last_done) return PTO_ERROR_NOT_READY;
    *milliseconds = std::chrono::duration<float, std::milli>(t1 - t0).count();
    return PTO_SUCCESS;
  }

  ptoError launchHostFunc(ptoStream stream, ptoHostFn fn, void* user_data) override {
    return submit(stream, hostFuncCommand(fn, user_data));
  }

  ptoError loadProgram(int32_t device, std::shared_ptr<const isa::ScheduledProgram> program,
                       std::shared_ptr<DeviceProgram>* loaded) override {
    try {
      *loaded = std::make_shared<SimProgram>(std::move(program));
    } catch (const std::exception& error) {  // an at-load stage failed
      return failf(PTO_ERROR_INVALID_VALUE, "ptoProgramLoad: computing the program's constants: ", error.what());
    }
    return PTO_SUCCESS;
  }

  ptoError launchProgram(ptoStream stream, const std::shared_ptr<DeviceProgram>& loaded,
                         std::span<void* const> buffers, void* workspace) override {
    SimStream* target = nullptr;
    if (ptoError s = lookupStream(stream, &target); s) return s;
    auto program = std::static_pointer_cast<const SimProgram>(loaded);
    Command command;
    command.kind = Command::Kind::kProgram;
    command.name = program->name();
    command.buffers = program->bufferAddresses(buffers, workspace);
    command.program = std::move(program);
    command.injected_fault = faults_.strike(FaultSite::kLaunch);
    target->enqueue(std::move(command));
    return PTO_SUCCESS;
  }

  // A graph is its commands, made and checked once; a launch queues them as one command.
  ptoError instantiateGraph(int32_t device, const std::vector<GraphNode>& nodes,
                            std::shared_ptr<DeviceGraph>* graph) override {
    auto commands = std::make_shared<std::vector<Command>>();
    for (const GraphNode& node : nodes) {
      Command command;
      switch (node.kind) {
        case GraphNode::Kind::kProgram: {
          auto program = std::static_pointer_cast<const SimProgram>(node.program);
          command.kind = Command::Kind::kProgram;
          command.name = program->name();
          command.buffers = program->bufferAddresses(node.buffers, node.workspace);
          command.program = std::move(program);
          break;
        }
        case GraphNode::Kind::kMemcpy:
          if (ptoError s = memcpyCommand(node.dst, node.src, node.bytes, node.copy_kind, &command); s) return s;
          break;
        case GraphNode::Kind::kMemset:
          if (ptoError s = memsetCommand(node.dst, node.fill_value, node.bytes, &command); s) return s;
          break;
        case GraphNode::Kind::kHostFunc:
          command = hostFuncCommand(node.host_fn, node.user_data);
          break;
      }
      commands->push_back(std::move(command));
    }
    *graph = std::make_shared<SimGraph>(std::move(commands));
    return PTO_SUCCESS;
  }

  ptoError launchGraph(ptoStream stream, const std::shared_ptr<DeviceGraph>& graph) override {
    Command command;
    command.kind = Command::Kind::kGraph;
    command.name = "graph";
    command.graph = static_cast<const SimGraph&>(*graph).commands;
    return submit(stream, std::move(command));
  }

  ptoError deviceAttribute(int32_t device, ptoDeviceAttribute attribute, int64_t* value) override {
    switch (attribute) {
      case PTO_DEVICE_ATTR_CORE_COUNT: *value = static_cast<int64_t>(parallelism()); return PTO_SUCCESS;
      // Device memory is host memory, so programs reach plain host memory as well
      // (the compiled path binds CPU tensors in place).
      case PTO_DEVICE_ATTR_PAGEABLE_MEMORY_ACCESS: *value = 1; return PTO_SUCCESS;
      // ... and host code reaches device memory, unless strict mode closes it.
      case PTO_DEVICE_ATTR_HOST_ACCESS_TO_DEVICE_MEMORY: *value = memory_.strict() ? 0 : 1; return PTO_SUCCESS;
      case PTO_DEVICE_ATTR_BFLOAT16: *value = 1; return PTO_SUCCESS;
      case PTO_DEVICE_ATTR_TOTAL_MEMORY_BYTES: *value = static_cast<int64_t>(devices_[device].capacity); return PTO_SUCCESS;
      case PTO_DEVICE_ATTR_BUSY_NANOSECONDS: *value = static_cast<int64_t>(devices_[device].busy_ns.load()); return PTO_SUCCESS;
      case PTO_DEVICE_ATTR_VECTOR_ISA: *value = kernels::chosenVectorIsa(); return PTO_SUCCESS;
      case PTO_DEVICE_ATTR_TILE_ELEMENTS: *value = tileElements(); return PTO_SUCCESS;
      case PTO_DEVICE_ATTR_GEMM_TILE_ROWS: *value = kGemmTileRows; return PTO_SUCCESS;
      case PTO_DEVICE_ATTR_PARALLEL_GEMM_TILES: *value = kParallelGemmTiles; return PTO_SUCCESS;
      default: return Driver::deviceAttribute(device, attribute, value);
    }
  }

 private:
  // A completed event whose stream had failed before it reports that failure;
  // the stream keeps it too, until its own synchronization reports it.
  static ptoError reportFailure(SimEvent& event) {
    std::string message;
    const ptoError failure = event.failure(&message);
    return failure == PTO_SUCCESS ? PTO_SUCCESS : fail(failure, message);
  }

  // The device's streams, kept alive while the caller waits on them.
  std::vector<std::shared_ptr<SimStream>> streamsOf(int32_t device) {
    std::vector<std::shared_ptr<SimStream>> streams{
        std::shared_ptr<SimStream>(std::shared_ptr<SimStream>(), &defaultStreamOf(device))};
    std::lock_guard<std::mutex> lock(streams_mutex_);
    for (auto& [handle, stream] : streams_) {
      if (stream->device() == device) streams.push_back(stream);
    }
    return streams;
  }

  ptoError submit(ptoStream stream, Command command) {
    SimStream* target = nullptr;
    if (ptoError s = lookupStream(stream, &target); s) return s;
    target->enqueue(std::move(command));
    return PTO_SUCCESS;
  }

  SimStream& defaultStreamOf(int32_t device) {
    SimDevice& dev = devices_[device];
    std::call_once(dev.default_stream_once, [&] {
      dev.default_stream_owner = std::make_unique<SimStream>(device, memory_, dev.busy_ns);
      dev.default_stream.store(dev.default_stream_owner.get());
    });
    return *dev.default_stream.load();
  }

  ptoError lookupStream(ptoStream handle, SimStream** stream) {
    auto* candidate = reinterpret_cast<SimStream*>(handle);
    for (auto& device : devices_) {
      if (device.default_stream.load() == candidate) {
        *stream = candidate;
        return PTO_SUCCESS;
      }
    }
    std::lock_guard<std::mutex> lock(streams_mutex_);
    if (streams_.count(handle) == 0) {
      return failf(PTO_ERROR_INVALID_HANDLE, handle, " is not a live stream");
    }
    *stream = candidate;
    return PTO_SUCCESS;
  }

  ptoError lookupEvent(ptoEvent handle, std::shared_ptr<SimEvent>* event) {
    std::lock_guard<std::mutex> lock(events_mutex_);
    auto it = events_.find(handle);
    if (it == events_.end()) return failf(PTO_ERROR_INVALID_HANDLE, handle, " is not a live event");
    *event = it->second;
    return PTO_SUCCESS;
  }

  bool isOpened(const void* ptr) {
    std::lock_guard<std::mutex> lock(memory_mutex_);
    auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
    return it != allocations_.end() && it->second.opened;
  }

  const std::pair<const uintptr_t, Allocation>* findLocked(const void* ptr) const {
    const auto address = reinterpret_cast<uintptr_t>(ptr);
    auto it = allocations_.upper_bound(address);
    if (it == allocations_.begin()) return nullptr;
    --it;
    return address < it->first + it->second.size ? &*it : nullptr;
  }

  // Device-side ranges must lie inside one device allocation; host-side ranges
  // must not touch device memory (a host pointer bug caught at the call).
  ptoError checkRange(const char* op, const char* role, const void* ptr, size_t count,
                      bool on_device) {
    std::lock_guard<std::mutex> lock(memory_mutex_);
    const auto* found = findLocked(ptr);
    const bool is_device = found != nullptr && found->second.device >= 0;
    if (on_device) {
      if (!is_device) {
        return failf(PTO_ERROR_INVALID_VALUE, op, ": ", role, " ", ptr,
                     " is not device memory");
      }
      // Bytes left in the allocation from ptr (findLocked put ptr inside it), so
      // a huge count cannot wrap the end address around.
      const auto room = found->first + found->second.size - reinterpret_cast<uintptr_t>(ptr);
      if (count > room) {
        return failf(PTO_ERROR_INVALID_VALUE, op, ": ", role, " range of ", count,
                     " bytes at ", ptr, " overruns its ", found->second.size,
                     "-byte device allocation");
      }
    } else if (is_device) {
      return failf(PTO_ERROR_INVALID_VALUE, op, ": ", role, " ", ptr,
                   " is device memory, not host memory");
    }
    return PTO_SUCCESS;
  }

  DeviceMemory memory_;  // before the devices: their streams work on it
  std::vector<SimDevice> devices_;
  FaultInjector faults_;
  std::mutex memory_mutex_;
  std::map<uintptr_t, Allocation> allocations_;
  std::mutex streams_mutex_;
  std::unordered_map<ptoStream, std::shared_ptr<SimStream>> streams_;
  std::mutex events_mutex_;
  std::unordered_map<ptoEvent, std::shared_ptr<SimEvent>> events_;
};

}  // namespace
}  // namespace pto::rt::sim

namespace pto::rt::sim {
namespace {

// The simulated device is always there: the driver of lowest priority, run
// when no hardware driver finds a device.
const bool registered = registerDriver("sim", 0, [] {
  return std::unique_ptr<Driver>(std::make_unique<SimDriver>(readSimConfig()));
});

}  // namespace
}  // namespace pto::rt::sim
