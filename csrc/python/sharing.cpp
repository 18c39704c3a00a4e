// pypto_torch._C's storage sharing between processes (csrc/torch/storage_sharing.h).
#include <torch/csrc/utils/pybind.h>

#include "torch/storage_sharing.h"

namespace py = pybind11;

void bindSharing(py::module_& m) {
  m.def("_share_storage", [](const at::Tensor& storage_bytes) {
    auto [handle, offset] = pto::torch_glue::shareStorage(storage_bytes);
    return py::make_tuple(py::bytes(handle), offset);
  });
  m.def("_open_shared_storage", [](int64_t device, const py::bytes& handle, int64_t offset, int64_t nbytes,
                                   const at::Tensor& counter) {
    return pto::torch_glue::openSharedStorage(device, std::string(handle), offset, nbytes, counter);
  });
}
