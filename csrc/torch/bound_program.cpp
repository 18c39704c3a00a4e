#include "bound_program.h"

#include <ATen/EmptyTensor.h>
#include <c10/util/SmallVector.h>

#include <stdexcept>

#include "compile_options.h"
#include "device.h"
#include "pto_check.h"
#include "runtime/program.h"

namespace pto::torch_glue {

BoundProgram::BoundProgram(const std::string& pto_as, bool debug, bool fuse)
    : device_count_(deviceCount()), loaded_(std::make_unique<Loaded[]>(static_cast<size_t>(device_count_))) {
  isa::ParseResult parsed = isa::parse(pto_as);
  if (!parsed.error.empty()) throw std::invalid_argument("PTO-AS " + parsed.error);
  compiler::CompileOptions options = compileOptionsFor(currentDevice());
  options.debug = debug;
  options.fuse = fuse;
  scheduled_ = std::make_shared<const isa::ScheduledProgram>(compiler::compile(std::move(parsed.program), options));
}

BoundProgram::~BoundProgram() {
  for (c10::DeviceIndex d = 0; d < device_count_; ++d) {
    ptoProgramRelease(loaded_[d].program.load());  // launches already queued still run
  }
}

std::vector<std::string> BoundProgram::bufferKinds() const {
  std::vector<std::string> kinds;
  for (const isa::Buffer& buffer : scheduled_->program.buffers) kinds.emplace_back(isa::kindName(buffer.kind));
  return kinds;
}

const BoundProgram::Loaded& BoundProgram::loadedOn(c10::DeviceIndex device) {
  if (device < 0 || device >= device_count_) checkDeviceIndex(device);  // throws, naming the devices there are
  Loaded& loaded = loaded_[device];
  if (loaded.program.load(std::memory_order_acquire) != nullptr) return loaded;
  std::lock_guard<std::mutex> lock(load_mutex_);
  if (loaded.program.load(std::memory_order_relaxed) == nullptr) {
    loaded.binds_host_memory = deviceAttribute(device, PTO_DEVICE_ATTR_PAGEABLE_MEMORY_ACCESS) != 0;
    const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));  // loads on the current device
    ptoProgram program = nullptr;
    PTO_CHECK(rt::loadProgram(scheduled_, &program));
    loaded.program.store(program, std::memory_order_release);
  }
  return loaded;
}

void BoundProgram::run(const std::vector<std::optional<at::Tensor>>& buffers, c10::DeviceIndex device) {
  const isa::Program& program = scheduled_->program;
  TORCH_CHECK(buffers.size() == program.buffers.size(), "bound program: expected ", program.buffers.size(),
              " buffers, got ", buffers.size());
  const Loaded& loaded = loadedOn(device);
  c10::SmallVector<void*, 8> addresses(buffers.size(), nullptr);
  c10::SmallVector<uint64_t, 8> sizes(buffers.size(), 0);
  for (size_t b = 0; b < buffers.size(); ++b) {
    if (!buffers[b] || !buffers[b]->defined()) continue;
    const at::Tensor& tensor = *buffers[b];
    const c10::Device where = tensor.device();
    TORCH_CHECK(where == c10::Device(c10::DeviceType::PrivateUse1, device) || (where.is_cpu() && loaded.binds_host_memory),
                "bound program: buffer %", b, " is a tensor on ", where, ", expected pto:", static_cast<int>(device),
                loaded.binds_host_memory ? " or cpu" : "");
    addresses[b] = tensor.data_ptr();
    // From its first element to its last, not to the end of its storage, whose other
    // bytes may belong to other views (big[16:32] must not let a program write big[32:64]).
    sizes[b] = at::detail::computeStorageNbytes(tensor.sizes(), tensor.strides(), tensor.element_size());
  }
  // Memory of the device's allocator, not a tensor (a call's fixed cost: a tensor is
  // made and destroyed through the dispatcher). Freed when this returns: the caching
  // allocator hands the block out again only to work queued after this launch on the
  // same stream.
  c10::DataPtr workspace;
  if (scheduled_->workspace_bytes > 0) {
    const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));  // the allocator's device
    workspace = c10::GetAllocator(c10::DeviceType::PrivateUse1)->allocate(scheduled_->workspace_bytes);
  }
  PTO_CHECK(ptoProgramLaunch(loaded.program.load(std::memory_order_relaxed), currentNativeStream(device),
                             addresses.data(), sizes.data(), addresses.size(), workspace.get()));
}

}  // namespace pto::torch_glue
