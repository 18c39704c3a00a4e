#include "tensor_factories.h"

#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/native/TensorShape.h>
#include <ATen/ops/is_set_to_native.h>
#include <c10/core/DeviceGuard.h>

#include "../device.h"
#include "../pluggable_allocator.h"

namespace pto::torch_glue {
namespace {

constexpr c10::DispatchKeySet kPtoKeys(c10::DispatchKey::PrivateUse1);

c10::Device checkedDevice(std::optional<c10::Device> device, std::optional<c10::Layout> layout,
                          std::optional<bool> pin_memory) {
  const c10::Device target = c10::device_or_default(device);
  TORCH_CHECK(target.type() == c10::kPrivateUse1, "expected a pto device, got ", target);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "pto supports only strided tensors, got layout ", c10::layout_or_default(layout));
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory),
              "only CPU tensors can be pinned; pto tensors live in device memory");
  if (target.has_index()) checkDeviceIndex(target.index());
  return target;
}

// torch.use_deterministic_algorithms(True) (with fill_uninitialized_memory, its
// default): new memory holds NaN (floating, complex) or the dtype's largest value,
// as the CPU and CUDA fill it.
bool fillsUninitializedMemory() {
  const at::Context& context = at::globalContext();
  return context.deterministicAlgorithms() && context.deterministicFillUninitializedMemory();
}

}  // namespace

at::Tensor empty(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                 std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                 std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  const c10::DeviceGuard guard(checkedDevice(device, layout, pin_memory));
  at::Tensor result = at::detail::empty_generic(size, &currentDeviceAllocator(), kPtoKeys,
                                                c10::dtype_or_default(dtype), memory_format);
  if (fillsUninitializedMemory()) at::native::fill_empty_deterministic_(result);
  return result;
}

at::Tensor emptyStrided(c10::IntArrayRef size, c10::IntArrayRef stride,
                        std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                        std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  const c10::DeviceGuard guard(checkedDevice(device, layout, pin_memory));
  at::Tensor result = at::detail::empty_strided_generic(size, stride, &currentDeviceAllocator(), kPtoKeys,
                                                        c10::dtype_or_default(dtype));
  if (fillsUninitializedMemory()) at::native::fill_empty_deterministic_(result);
  return result;
}

at::Tensor asStrided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                     std::optional<c10::SymInt> storage_offset) {
  std::optional<int64_t> offset;
  if (storage_offset) offset = storage_offset->expect_int();
  return at::native::as_strided_tensorimpl(self, C10_AS_INTARRAYREF_SLOW(size),
                                           C10_AS_INTARRAYREF_SLOW(stride), offset);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshapeAlias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size),
                                    C10_AS_INTARRAYREF_SLOW(stride));
}

// Metadata as the CPU resize_ sets it: a tensor already of the size keeps its strides
// (an out= view written in place stays that view), any other becomes contiguous.
// Growing the storage goes through the PrivateUse1 hooks, so new memory comes from
// the pto allocator.
const at::Tensor& resize(const at::Tensor& self, c10::SymIntArrayRef size,
                         std::optional<c10::MemoryFormat> memory_format) {
  const auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  at::TensorImpl* impl = self.unsafeGetTensorImpl();
  at::native::resize_impl_cpu_(impl, sizes, /*stride=*/std::nullopt, /*resize_storage=*/false);
  const size_t needed = (impl->numel() + impl->storage_offset()) * self.itemsize();
  const auto old_nbytes = static_cast<int64_t>(self.storage().nbytes());
  if (impl->numel() > 0 && needed > self.storage().nbytes()) {
    at::native::resize_bytes_nocuda(self.storage(), c10::SymInt(static_cast<int64_t>(needed)));
    if (fillsUninitializedMemory()) at::native::fill_resize_deterministic_(self, old_nbytes);
  }
  if (memory_format) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve,
                "unsupported memory format ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& setEmpty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, &currentDeviceAllocator(), true);
  return self.set_(storage, 0, {0}, {});
}

at::Tensor& setTensor(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}

at::Tensor& setStorage(at::Tensor& self, c10::Storage source) {
  const int64_t elements = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return self.set_(std::move(source), 0, {elements}, {});
}

at::Tensor& setStorageOffset(at::Tensor& self, c10::Storage source, c10::SymInt storage_offset,
                             c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  const int64_t offset = storage_offset.expect_int();
  const auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  const auto strides = C10_AS_INTARRAYREF_SLOW(stride);
  at::native::checkSetStorage(self, source, offset, sizes, strides);
  self.unsafeGetTensorImpl()->set_storage_offset(offset);
  const at::OptionalIntArrayRef stride_opt =
      stride.data() != nullptr ? at::OptionalIntArrayRef(strides) : std::nullopt;
  at::native::resize_impl_cpu_(self.unsafeGetTensorImpl(), sizes, stride_opt,
                               /*resize_storage=*/false);
  return self;
}

bool isSetTo(const at::Tensor& self, const at::Tensor& source) { return at::native::is_set_to(self, source); }

bool hasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == c10::kStrided && !t.is_quantized() &&
           (t.device().type() == c10::kPrivateUse1 || t.device().type() == c10::kCPU);
  };
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) ||
         (dense(self) && dense(from));
}

void recordStream(at::Tensor& self, c10::Stream stream) {
  currentDeviceAllocator().recordStream(self.storage().data_ptr(), stream);
}

}  // namespace pto::torch_glue
