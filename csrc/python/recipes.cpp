// pypto_torch._C's recipes (csrc/recipes): the compiler's lowering asks for an aten
// op's steps over its own buffers and emits them. Conversion only.
#include <torch/csrc/utils/pybind.h>

#include <string>
#include <utility>
#include <vector>

#include "recipes/recipe.h"

namespace py = pybind11;
namespace recipes = pto::recipes;
namespace isa = pto::isa;

namespace {

recipes::View makeView(int32_t buffer, const std::string& dtype, std::vector<int64_t> shape,
                       std::vector<int64_t> strides, int64_t offset) {
  const std::optional<isa::DType> parsed = isa::parseDType(dtype);
  if (!parsed) throw py::value_error("no PTO dtype " + dtype);
  return {buffer, *parsed, std::move(shape), std::move(strides), offset};
}

// A Python argument value: None, bool, int, float, str, a view, or a list of ints or views.
recipes::Value valueOf(const py::handle& object) {
  if (object.is_none()) return {};
  if (py::isinstance<py::bool_>(object)) return object.cast<bool>();
  if (py::isinstance<py::int_>(object)) return object.cast<int64_t>();
  if (py::isinstance<py::float_>(object)) return object.cast<double>();
  if (py::isinstance<py::str>(object)) return object.cast<std::string>();
  if (py::isinstance<recipes::View>(object)) return object.cast<recipes::View>();
  const auto items = object.cast<py::sequence>();
  if (items.size() > 0 && py::isinstance<recipes::View>(items[0])) return object.cast<std::vector<recipes::View>>();
  return object.cast<std::vector<int64_t>>();
}

py::dict recipeSteps(const std::string& op, const std::vector<std::pair<std::string, py::object>>& arguments,
                     const std::vector<recipes::View>& results, int32_t caller_buffers) {
  std::vector<std::pair<std::string, recipes::Value>> named;
  for (const auto& [name, object] : arguments) named.emplace_back(name, valueOf(object));
  const recipes::Recipe recipe = recipes::build(op, recipes::Arguments(std::move(named), results), caller_buffers);
  py::list temporaries, steps;
  for (const recipes::Temporary& temporary : recipe.temporaries()) {
    temporaries.append(py::make_tuple(std::string(isa::dtypeName(temporary.dtype)), temporary.shape));
  }
  for (const recipes::Step& step : recipe.steps()) {
    const isa::InstructionInfo& info = isa::info(step.opcode);
    py::dict immediates;
    for (int i = 0; i < info.immediateCount(); ++i) immediates[py::str(std::string(info.immediates[i]))] = step.immediates[i];
    steps.append(py::make_tuple(std::string(info.name), step.operands, immediates, step.constant));
  }
  py::dict built;
  built["temporaries"] = temporaries;
  built["steps"] = steps;
  return built;
}

}  // namespace

void bindRecipes(py::module_& m) {
  py::class_<recipes::View>(m, "_RecipeView")
      .def(py::init(&makeView), py::arg("buffer"), py::arg("dtype"), py::arg("shape"), py::arg("strides"),
           py::arg("offset"))
      .def_readonly("buffer", &recipes::View::buffer)
      .def_property_readonly("dtype", [](const recipes::View& v) { return std::string(isa::dtypeName(v.dtype)); })
      .def_readonly("shape", &recipes::View::shape)
      .def_readonly("strides", &recipes::View::strides)
      .def_readonly("offset", &recipes::View::offset);
  py::register_exception<recipes::NotApplicable>(m, "RecipeNotApplicable");
  m.def("_recipe", &recipeSteps, py::arg("op"), py::arg("arguments"), py::arg("results"), py::arg("caller_buffers"));
  m.def("_recipes", &recipes::names);
}
