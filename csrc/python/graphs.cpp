// pypto_torch._C's graph capture: torch.pto.PTOGraph's native half (csrc/torch/pto_graph.h).
#include <torch/csrc/utils/pybind.h>

#include "torch/pto_graph.h"
#include "torch/device.h"

namespace py = pybind11;
using pto::torch_glue::PTOGraph;

void bindGraphs(py::module_& m) {
  py::class_<PTOGraph>(m, "_PTOGraph")
      .def(py::init<bool>(), py::arg("optimize") = false)
      .def("capture_begin", &PTOGraph::captureBegin, py::arg("pool") = std::nullopt,
           py::arg("capture_error_mode") = "global")
      .def("capture_end", &PTOGraph::captureEnd)
      .def("_abort_capture", &PTOGraph::abortCapture)
      .def("replay", &PTOGraph::replay, py::call_guard<py::gil_scoped_release>())
      .def("reset", &PTOGraph::reset)
      .def("pool", &PTOGraph::pool)
      .def("program", &PTOGraph::program)
      .def("_node_count", &PTOGraph::nodeCount);
  m.def("_graph_pool_handle", &pto::torch_glue::graphPoolHandle);
  m.def("_is_current_stream_capturing", [] {
    return pto::torch_glue::isCurrentStreamCapturing(pto::torch_glue::currentDevice());
  });
}
