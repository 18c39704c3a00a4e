#include "storage_sharing.h"

#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Storage.h>
#include <unistd.h>

#include <cstring>

#include "pto_check.h"
#include "runtime/pto_runtime.h"

namespace pto::torch_glue {
namespace {

// What an opened storage's DataPtr owns.
struct OpenedMemory {
  void* base;             // the mapping ptoIpcOpenMemHandle gave
  c10::Storage counter;   // keeps the send's counter mapped
  int32_t* count;         // the counter, inside it
};

void closeOpenedMemory(void* context) {
  auto* opened = static_cast<OpenedMemory*>(context);
  // A deleter cannot throw; a close fails only for a driver already gone at exit,
  // when the mapping goes with the process.
  ptoIpcCloseMemHandle(opened->base);
  __atomic_store_n(opened->count, 0, __ATOMIC_RELEASE);
  delete opened;
}

}  // namespace

std::pair<std::string, int64_t> shareStorage(const at::Tensor& storage_bytes) {
  const c10::DeviceGuard guard(storage_bytes.device());
  // The consumer reads the memory at once, on its own streams: everything this
  // process queued on the device runs first (CUDA records an event instead).
  PTO_CHECK(ptoDeviceSynchronize());
  void* data = storage_bytes.storage().mutable_data();
  ptoPointerAttributes attributes{};
  PTO_CHECK(ptoPointerGetAttributes(data, &attributes));
  ptoIpcMemHandle handle{};
  PTO_CHECK(ptoIpcGetMemHandle(&handle, attributes.base));
  return {std::string(handle.reserved, sizeof handle.reserved),
          static_cast<char*>(data) - static_cast<char*>(attributes.base)};
}

at::Tensor openSharedStorage(int64_t device, const std::string& handle, int64_t offset_bytes, int64_t nbytes,
                             const at::Tensor& counter) {
  TORCH_CHECK(handle.size() == sizeof(ptoIpcMemHandle), "a pto memory handle has ", sizeof(ptoIpcMemHandle),
              " bytes, not ", handle.size());
  TORCH_CHECK(counter.device().is_cpu() && counter.scalar_type() == at::kInt && counter.numel() == 1,
              "the counter of a shared pto storage is one int32 in CPU memory");
  const c10::Device pto(c10::kPrivateUse1, static_cast<c10::DeviceIndex>(device));
  const c10::DeviceGuard guard(pto);
  ptoIpcMemHandle native{};
  std::memcpy(native.reserved, handle.data(), sizeof native.reserved);
  void* base = nullptr;
  PTO_CHECK(ptoIpcOpenMemHandle(&base, native, 0));
  ptoPointerAttributes attributes{};
  PTO_CHECK(ptoPointerGetAttributes(base, &attributes));
  if (offset_bytes < 0 || nbytes < 0 || static_cast<uint64_t>(offset_bytes) + static_cast<uint64_t>(nbytes) >
                                           attributes.size) {
    ptoIpcCloseMemHandle(base);
    TORCH_CHECK(false, "a shared pto storage of ", nbytes, " bytes at offset ", offset_bytes,
                " does not fit in the ", attributes.size, "-byte allocation its handle opens");
  }
  auto* opened = new OpenedMemory{base, counter.storage(), counter.data_ptr<int32_t>()};
  __atomic_store_n(opened->count, static_cast<int32_t>(getpid()), __ATOMIC_RELEASE);
  c10::DataPtr data(static_cast<char*>(base) + offset_bytes, opened, &closeOpenedMemory, pto);
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, std::move(data), nullptr, /*resizable=*/false);
  return at::empty({0}, at::TensorOptions().dtype(at::kByte).device(pto)).set_(storage, 0, {nbytes}, {1});
}

}  // namespace pto::torch_glue
