#include "compiled_program.h"

#include <ATen/EmptyTensor.h>

#include <stdexcept>
#include <string_view>

#include "compiler/program_launch.h"
#include "device.h"
#include "pto_check.h"

namespace pto::backend {

CompiledGraphProgram::CompiledGraphProgram(const std::string& pto_as, bool debug, bool fuse) {
  isa::ParseResult parsed = isa::parse(pto_as);
  if (!parsed.error.empty()) throw std::invalid_argument("PTO-AS " + parsed.error);
  compiled_ = std::make_shared<const compiler::CompiledProgram>(
      compiler::compile(std::move(parsed.program), compiler::CompileOptions{.debug = debug, .fuse = fuse}));
}

std::vector<std::string> CompiledGraphProgram::bufferKinds() const {
  std::vector<std::string> kinds;
  for (const isa::Buffer& buffer : compiled_->program.buffers) kinds.emplace_back(isa::kindName(buffer.kind));
  return kinds;
}

void CompiledGraphProgram::run(const std::vector<std::optional<at::Tensor>>& buffers, c10::DeviceIndex device) const {
  const isa::Program& program = compiled_->program;
  TORCH_CHECK(buffers.size() == program.buffers.size(), "compiled program: expected ", program.buffers.size(),
              " buffers, got ", buffers.size());
  const bool host_memory_is_device_memory = std::string_view(ptoGetDriverName()) == "sim";
  std::vector<void*> addresses(buffers.size(), nullptr);
  std::vector<uint64_t> sizes(buffers.size(), 0);
  for (size_t b = 0; b < buffers.size(); ++b) {
    if (!buffers[b] || !buffers[b]->defined()) continue;
    const at::Tensor& tensor = *buffers[b];
    const c10::Device where = tensor.device();
    TORCH_CHECK(where == c10::Device(c10::DeviceType::PrivateUse1, device) || (where.is_cpu() && host_memory_is_device_memory),
                "compiled program: buffer %", b, " is a tensor on ", where, ", expected pto:", static_cast<int>(device),
                host_memory_is_device_memory ? " or cpu" : "");
    addresses[b] = tensor.data_ptr();
    // From its first element to its last, not to the end of its storage, whose other
    // bytes may belong to other views (big[16:32] must not let a program write big[32:64]).
    sizes[b] = at::detail::computeStorageNbytes(tensor.sizes(), tensor.strides(), tensor.element_size());
  }
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  at::Tensor arena;
  if (compiled_->arena_bytes > 0) {
    // Freed when this returns: the caching allocator hands the block out again only
    // to work queued after this launch on the same stream.
    arena = at::empty({static_cast<int64_t>(compiled_->arena_bytes)},
                      at::TensorOptions().dtype(at::kByte).device(c10::DeviceType::PrivateUse1, device));
  }
  const ptoStream stream = nativeStream(currentStream(device));
  PTO_CHECK(compiler::launchProgram(stream, compiled_, addresses, sizes, arena.defined() ? arena.data_ptr() : nullptr));
}

}  // namespace pto::backend
