// pypto_torch._C._init_distributed(): binds the pccl backend. Called from
// pypto_torch/distributed.py once torch.distributed has registered c10d's
// Python types, which the binding derives from.
#include <torch/csrc/utils/pybind.h>

#include "distributed/process_group_pccl.h"

namespace py = pybind11;

void bindDistributed(py::module_& m) {
  using pto::distributed::ProcessGroupPCCL;
  m.def("_init_distributed", [m]() mutable {
    if (py::hasattr(m, "_ProcessGroupPCCL")) return;
    py::class_<ProcessGroupPCCL, c10d::Backend, c10::intrusive_ptr<ProcessGroupPCCL>>(m, "_ProcessGroupPCCL")
        .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         c10::intrusive_ptr<c10d::Backend> gloo,
                         const py::function& transport_gloo, int64_t timeout_ms, const std::string& group_name,
                         const std::string& transport, std::optional<int> bound_device) {
               ProcessGroupPCCL::Config config{std::chrono::milliseconds(timeout_ms), group_name, transport,
                                               std::nullopt};
               if (bound_device) config.bound_device = static_cast<c10::DeviceIndex>(*bound_device);
               // Called (if at all) inside the constructor, while the binding's
               // argument still holds the function.
               const auto make_transport_gloo = [&transport_gloo] {
                 py::gil_scoped_acquire gil;
                 return transport_gloo().cast<c10::intrusive_ptr<c10d::Backend>>();
               };
               return c10::make_intrusive<ProcessGroupPCCL>(store, rank, size, std::move(gloo), make_transport_gloo,
                                                            std::move(config));
             }),
             py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("gloo"), py::arg("transport_gloo"),
             py::arg("timeout_ms"), py::arg("group_name"), py::arg("transport"), py::arg("bound_device"),
             py::call_guard<py::gil_scoped_release>())
        .def_property_readonly("transport", &ProcessGroupPCCL::transportName);
  });
}
