// Tensor creation and metadata-only ops on pto: memory from the caching device
// allocator, views that share it.
#pragma once

#include <ATen/ATen.h>

namespace pto::torch_glue {

at::Tensor empty(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                 std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                 std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format);
at::Tensor emptyStrided(c10::IntArrayRef size, c10::IntArrayRef stride,
                        std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                        std::optional<c10::Device> device, std::optional<bool> pin_memory);
at::Tensor asStrided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                     std::optional<c10::SymInt> storage_offset);
at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size);
at::Tensor reshapeAlias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride);
const at::Tensor& resize(const at::Tensor& self, c10::SymIntArrayRef size,
                         std::optional<c10::MemoryFormat> memory_format);
at::Tensor& setEmpty(at::Tensor& self);
at::Tensor& setTensor(at::Tensor& self, const at::Tensor& source);
at::Tensor& setStorage(at::Tensor& self, c10::Storage source);
at::Tensor& setStorageOffset(at::Tensor& self, c10::Storage source, c10::SymInt storage_offset,
                             c10::SymIntArrayRef size, c10::SymIntArrayRef stride);
void recordStream(at::Tensor& self, c10::Stream stream);

// Whether both view one storage at one offset with the same sizes and strides: metadata,
// never the CPU fallback (whose copies are set to nothing).
bool isSetTo(const at::Tensor& self, const at::Tensor& source);

// Whether `self` may take `from`'s data in place (Tensor.data = ..., module.to()):
// strided dense tensors of pto and the CPU may, as CPU and CUDA ones may. torch lists
// only its own devices, so a module moved to pto rebuilt its parameters, and a lazy
// module's UninitializedParameter lost its type (and its later materialisation).
bool hasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from);

}  // namespace pto::torch_glue
