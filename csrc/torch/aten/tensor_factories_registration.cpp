// Registers tensor_factories.h's kernels for the aten ops they implement on pto.
#include <torch/library.h>

#include "tensor_factories.h"

namespace pto::torch_glue {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty));
  m.impl("empty_strided", TORCH_FN(emptyStrided));
  m.impl("as_strided", TORCH_FN(asStrided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshapeAlias));
  m.impl("resize_", TORCH_FN(resize));
  m.impl("set_", TORCH_FN(setEmpty));
  m.impl("set_.source_Tensor", TORCH_FN(setTensor));
  m.impl("set_.source_Storage", TORCH_FN(setStorage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(setStorageOffset));
  m.impl("record_stream", TORCH_FN(recordStream));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(hasCompatibleShallowCopyType));
  m.impl("is_set_to", TORCH_FN(isSetTo));
}

}  // namespace pto::torch_glue
