// pypto_torch._C's graph capture: torch.pto.PTOGraph's native half (csrc/torch/captured_graph.h).
#include <torch/csrc/utils/pybind.h>

#include "torch/captured_graph.h"
#include "torch/device.h"

namespace py = pybind11;
using pto::backend::CapturedGraph;

void bindGraphs(py::module_& m) {
  py::class_<CapturedGraph>(m, "_PTOGraph")
      .def(py::init<bool>(), py::arg("optimize") = false)
      .def("capture_begin", &CapturedGraph::captureBegin, py::arg("pool") = std::nullopt,
           py::arg("capture_error_mode") = "global")
      .def("capture_end", &CapturedGraph::captureEnd)
      .def("_abort_capture", &CapturedGraph::abortCapture)
      .def("replay", &CapturedGraph::replay, py::call_guard<py::gil_scoped_release>())
      .def("reset", &CapturedGraph::reset)
      .def("pool", &CapturedGraph::pool)
      .def("program", &CapturedGraph::program)
      .def("_node_count", &CapturedGraph::nodeCount);
  m.def("_graph_pool_handle", &pto::backend::graphPoolHandle);
  m.def("_is_current_stream_capturing", [] {
    return pto::backend::isCurrentStreamCapturing(pto::backend::currentDevice());
  });
}
