#include "recipe.h"

#include <algorithm>
#include <set>

namespace pto::recipes {

int64_t View::numel() const {
  int64_t n = 1;
  for (int64_t size : shape) n *= size;
  return n;
}

bool View::contiguous() const {
  if (numel() <= 1) return true;
  const std::vector<int64_t> expected = contiguousStrides(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != 1 && strides[d] != expected[d]) return false;
  }
  return true;
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t running = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = running;
    running *= std::max<int64_t>(shape[d], 1);
  }
  return strides;
}

// -- arguments ------------------------------------------------------------------------------
namespace {

const Value kNone{};

std::string described(std::string_view name) { return "argument '" + std::string(name) + "'"; }

// A number argument (aten's Scalar, int or bool) as a double, or nothing.
std::optional<double> numberOf(const Value& value) {
  if (const double* d = std::get_if<double>(&value)) return *d;
  if (const int64_t* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  if (const bool* b = std::get_if<bool>(&value)) return *b ? 1.0 : 0.0;
  return std::nullopt;
}

}  // namespace

const Value& Arguments::operator[](std::string_view name) const {
  for (const auto& [key, value] : named_) {
    if (key == name) return value;
  }
  return kNone;
}

bool Arguments::has(std::string_view name) const {
  return !std::holds_alternative<std::monostate>((*this)[name]);
}

View Arguments::tensor(std::string_view name) const {
  if (const View* view = std::get_if<View>(&(*this)[name])) return *view;
  throw NotApplicable(described(name) + " is not a tensor");
}

std::optional<View> Arguments::optionalTensor(std::string_view name) const {
  if (!has(name)) return std::nullopt;
  return tensor(name);
}

std::vector<View> Arguments::tensors(std::string_view name) const {
  if (const auto* views = std::get_if<std::vector<View>>(&(*this)[name])) return *views;
  throw NotApplicable(described(name) + " is not a list of tensors");
}

Operand Arguments::operand(std::string_view name) const {
  const Value& value = (*this)[name];
  if (const View* view = std::get_if<View>(&value)) return *view;
  return number(name);
}

double Arguments::number(std::string_view name, std::optional<double> absent) const {
  const Value& value = (*this)[name];
  if (const std::optional<double> number = numberOf(value)) return *number;
  if (absent && std::holds_alternative<std::monostate>(value)) return *absent;
  throw NotApplicable(described(name) + " is not a number");
}

int64_t Arguments::integer(std::string_view name, std::optional<int64_t> absent) const {
  const Value& value = (*this)[name];
  if (const int64_t* i = std::get_if<int64_t>(&value)) return *i;
  if (const bool* b = std::get_if<bool>(&value)) return *b ? 1 : 0;
  if (absent && std::holds_alternative<std::monostate>(value)) return *absent;
  throw NotApplicable(described(name) + " is not an integer");
}

bool Arguments::flag(std::string_view name, bool absent) const {
  const Value& value = (*this)[name];
  if (const bool* b = std::get_if<bool>(&value)) return *b;
  if (const int64_t* i = std::get_if<int64_t>(&value)) return *i != 0;
  return absent;
}

std::optional<std::vector<int64_t>> Arguments::dims(std::string_view name) const {
  const Value& value = (*this)[name];
  if (const auto* list = std::get_if<std::vector<int64_t>>(&value)) return *list;
  if (const int64_t* i = std::get_if<int64_t>(&value)) return std::vector<int64_t>{*i};
  if (std::holds_alternative<std::monostate>(value)) return std::nullopt;
  throw NotApplicable(described(name) + " is not a list of dims");
}

std::optional<std::string> Arguments::text(std::string_view name) const {
  if (const std::string* s = std::get_if<std::string>(&(*this)[name])) return *s;
  return std::nullopt;
}

std::vector<Operand> Arguments::operands() const {
  std::vector<Operand> operands;
  for (const auto& [key, value] : named_) {
    if (const View* view = std::get_if<View>(&value)) operands.emplace_back(*view);
    else if (const std::optional<double> number = numberOf(value)) operands.emplace_back(*number);
  }
  return operands;
}

const View& Arguments::result(size_t index) const {
  if (index >= results_.size()) throw std::invalid_argument("the op has no result " + std::to_string(index));
  return results_[index];
}

// -- building ---------------------------------------------------------------------------------
View Recipe::temporary(isa::DType dtype, std::vector<int64_t> shape) {
  View view;
  view.buffer = caller_buffers_ + static_cast<int32_t>(temporaries_.size());
  view.dtype = dtype;
  view.strides = contiguousStrides(shape);
  view.shape = shape;
  temporaries_.push_back({dtype, std::move(shape)});
  return view;
}

View Recipe::emit(isa::Opcode opcode, const View& out, const std::vector<View>& inputs,
                  std::array<double, isa::kMaxImmediates> immediates) {
  const isa::InstructionInfo& info = isa::info(opcode);
  // tcvt takes every dtype to every other; an index input is the group's rule, not the dtypes'.
  if (opcode != isa::Opcode::kConvert) {
    std::vector<View> checked(inputs);
    if (info.has(isa::Property::IndexInput) && !checked.empty()) checked.pop_back();
    if (inputs.size() == 0) checked.push_back(out);
    for (const View& view : checked) {
      if (!info.dtypes.contains(view.dtype)) {
        throw NotApplicable(std::string(info.name) + " does not take " + std::string(isa::dtypeName(view.dtype)));
      }
    }
  }
  Step step{opcode, {out}, immediates, false};
  step.operands.insert(step.operands.end(), inputs.begin(), inputs.end());
  steps_.push_back(std::move(step));
  return out;
}

View Recipe::scalar(double value, isa::DType dtype) {
  View view = temporary(dtype, {});
  emit(isa::Opcode::kFill, view, {}, {value});
  steps_.back().constant = true;
  return view;
}

View Recipe::cast(const View& view, isa::DType dtype) {
  if (view.dtype == dtype) return view;
  return emit(isa::Opcode::kConvert, temporary(dtype, view.shape), {view});
}

View Recipe::contiguous(const View& view) {
  if (view.contiguous()) return view;
  return emit(isa::Opcode::kMove, temporary(view.dtype, view.shape), {view});
}

View Recipe::reshape(const View& view, const std::vector<int64_t>& shape) {
  if (std::optional<View> viewed = viewAs(view, shape)) return *viewed;
  return *viewAs(contiguous(view), shape);
}

View Recipe::operand(const Operand& operand, isa::DType dtype, const std::vector<int64_t>& shape) {
  const View view = std::holds_alternative<View>(operand) ? std::get<View>(operand)
                                                          : scalar(std::get<double>(operand), dtype);
  return expand(cast(view, dtype), shape);
}

View Recipe::copy(const View& dst, const View& src) {
  return emit(dst.dtype == src.dtype ? isa::Opcode::kMove : isa::Opcode::kConvert, dst, {src});
}

View Recipe::resultIn(const View& result, isa::DType dtype) {
  return result.dtype == dtype ? result : temporary(dtype, result.shape);
}

void Recipe::settle(const View& result, const View& computed) {
  if (computed.buffer != result.buffer) copy(result, computed);
}

isa::DType widened(isa::DType dtype) {
  return dtype == isa::DType::kFloat16 || dtype == isa::DType::kBFloat16 ? isa::DType::kFloat32 : dtype;
}

// -- views --------------------------------------------------------------------------------------
View expand(const View& view, const std::vector<int64_t>& shape) {
  if (view.shape == shape) return view;
  const int64_t lead = static_cast<int64_t>(shape.size()) - view.rank();
  auto fail = [&] { return NotApplicable("cannot broadcast a view to another shape"); };
  if (lead < 0) throw fail();
  View out = view;
  out.shape = shape;
  out.strides.assign(static_cast<size_t>(lead), 0);
  for (int64_t d = 0; d < view.rank(); ++d) {
    const int64_t want = shape[static_cast<size_t>(lead + d)];
    if (view.shape[d] == want) out.strides.push_back(view.strides[d]);
    else if (view.shape[d] == 1) out.strides.push_back(0);
    else throw fail();
  }
  return out;
}

View permute(const View& view, const std::vector<int64_t>& dims) {
  View out = view;
  for (size_t i = 0; i < dims.size(); ++i) {
    out.shape[i] = view.shape[static_cast<size_t>(dims[i])];
    out.strides[i] = view.strides[static_cast<size_t>(dims[i])];
  }
  return out;
}

namespace {

int64_t wrapped(int64_t dim, int64_t rank) {
  const int64_t extent = std::max<int64_t>(rank, 1);
  return ((dim % extent) + extent) % extent;
}

}  // namespace

View moveLast(const View& view, int64_t dim) {
  if (view.rank() == 0) return view;
  const int64_t moved = wrapped(dim, view.rank());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < view.rank(); ++d) {
    if (d != moved) dims.push_back(d);
  }
  dims.push_back(moved);
  return permute(view, dims);
}

View unsqueeze(const View& view, int64_t dim) {
  const int64_t at = wrapped(dim, view.rank() + 1);
  const int64_t stride = at < view.rank() ? view.strides[at] * view.shape[at] : 1;
  View out = view;
  out.shape.insert(out.shape.begin() + at, 1);
  out.strides.insert(out.strides.begin() + at, stride);
  return out;
}

View sliced(const View& view, int64_t dim, int64_t start, int64_t end, int64_t step) {
  const int64_t d = wrapped(dim, view.rank());
  const int64_t n = view.shape[d];
  start = std::clamp(start < 0 ? start + n : start, int64_t{0}, n);
  end = std::clamp(end < 0 ? end + n : end, start, n);
  View out = view;
  out.shape[d] = (end - start + step - 1) / step;
  out.strides[d] = view.strides[d] * step;
  out.offset = view.offset + start * view.strides[d];
  return out;
}

std::optional<View> viewAs(const View& view, const std::vector<int64_t>& shape) {
  View out = view;
  out.shape = shape;
  if (view.rank() == 0 || view.numel() == 0) {
    out.strides = contiguousStrides(shape);
    return out;
  }
  // aten's rule (computeStride): each run of dimensions that is contiguous in memory
  // may be split or merged into new dimensions of the same number of elements.
  out.strides.assign(shape.size(), 0);
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = view.strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = view.rank() - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= view.shape[tensor_d];
    const bool chunk_ends = tensor_d == 0 || (view.shape[tensor_d - 1] != 1 &&
                                              view.strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
      out.strides[view_d] = view_numel * chunk_base_stride;
      view_numel *= shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (tensor_d > 0) {
      chunk_base_stride = view.strides[tensor_d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

std::vector<int64_t> reducedDims(const View& view, const std::optional<std::vector<int64_t>>& dims) {
  std::set<int64_t> wrapped_dims;
  if (view.rank() == 0) return {};  // a scalar: nothing to reduce, whatever dim names it
  if (!dims || dims->empty()) {
    for (int64_t d = 0; d < view.rank(); ++d) wrapped_dims.insert(d);
  } else {
    for (int64_t d : *dims) wrapped_dims.insert(wrapped(d, view.rank()));
  }
  return {wrapped_dims.begin(), wrapped_dims.end()};
}

View spread(const View& kept, const std::vector<int64_t>& input_shape, const std::vector<int64_t>& dims) {
  const auto rank = static_cast<int64_t>(input_shape.size());
  const bool keepdim = kept.rank() == rank;
  View out = kept;
  out.shape = input_shape;
  out.strides.assign(input_shape.size(), 0);
  for (int64_t d = 0, j = 0; d < rank; ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) out.strides[d] = kept.strides[j];
    if (!reduced || keepdim) ++j;
  }
  return out;
}

// -- the table ------------------------------------------------------------------------------------
Recipe build(std::string_view name, const Arguments& arguments, int32_t caller_buffers) {
  const RecipeFunction* recipe = find(name);
  if (recipe == nullptr) throw std::invalid_argument("no recipe for " + std::string(name));
  Recipe built(caller_buffers);
  (*recipe)(built, arguments);
  return built;
}

}  // namespace pto::recipes
