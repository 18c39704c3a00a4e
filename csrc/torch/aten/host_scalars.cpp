#include "host_scalars.h"

#include <ATen/Dispatch.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/TypeCast.h>

#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "../device.h"
#include "../dtype_map.h"
#include "../pto_check.h"
#include "../pto_graph.h"
#include "elementwise.h"
#include "instruction_launch.h"

namespace pto::torch_glue {
namespace {

// Distinct values a (thread, stream) keeps; the least recently used one is refilled.
// An op asks for at most three (addcmul's), which are then the most recent.
constexpr size_t kSlots = 32;
// A slot holds an element of any dtype PTO has, complex128 the widest.
constexpr int64_t kSlotBytes = 16;

// A 0-dim tensor's one value with `shape` (strides 0).
at::Tensor broadcast(const at::Tensor& scalar, c10::IntArrayRef shape) {
  return at::native::as_strided_tensorimpl(scalar, shape, at::DimVector(shape.size(), 0), scalar.storage_offset());
}

struct Slot {
  at::ScalarType dtype = at::ScalarType::Undefined;
  uint64_t immediate_bits = 0;
  uint64_t last_use = 0;
  at::Tensor tensor;  // 0-dim, of dtype, over this slot's bytes
  at::Tensor shaped;  // the same broadcast to the shape last asked for (an op's shape repeats)

  // The slot's value with `shape`: every element the one value (strides 0).
  const at::Tensor& as(c10::IntArrayRef shape) {
    if (shape.empty()) return tensor;
    if (!shaped.defined() || shaped.sizes() != shape) shaped = broadcast(tensor, shape);
    return shaped;
  }
};

// The constants of one stream, in device memory of its own: never freed, since launches
// still queued may read it. A thread that ends hands its tables to the next thread that
// uses the stream (releasedTables), whose fills are ordered after those launches.
struct StreamConstants {
  c10::Stream stream;
  c10::Storage storage;
  std::array<Slot, kSlots> slots;
  uint64_t clock = 0;

  explicit StreamConstants(c10::Stream on) : stream(on) {
    const c10::DeviceGuard guard(on.device());
    void* memory = nullptr;
    PTO_CHECK(ptoMalloc(&memory, kSlots * kSlotBytes));
    storage = c10::Storage(c10::Storage::use_byte_size_t(), kSlots * kSlotBytes,
                           c10::DataPtr(memory, memory, [](void*) {}, on.device()), nullptr, false);
  }

  at::Tensor slotTensor(size_t slot, at::ScalarType dtype) const {
    at::Tensor tensor = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage),
                                                                 c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                                 caffe2::TypeMeta::fromScalarType(dtype));
    tensor.unsafeGetTensorImpl()->set_sizes_and_strides(c10::IntArrayRef{}, c10::IntArrayRef{});
    tensor.unsafeGetTensorImpl()->set_storage_offset(static_cast<int64_t>(slot) * kSlotBytes /
                                                     static_cast<int64_t>(c10::elementSize(dtype)));
    return tensor;
  }
};

std::mutex released_mutex;
std::vector<std::unique_ptr<StreamConstants>>& releasedTables() {
  static auto* tables = new std::vector<std::unique_ptr<StreamConstants>>();  // outlives every thread
  return *tables;
}

class ThreadTables {
 public:
  ~ThreadTables() {
    const std::lock_guard lock(released_mutex);
    for (auto& table : tables_) releasedTables().push_back(std::move(table));
  }

  StreamConstants& of(c10::Stream stream) {
    for (const auto& table : tables_) {
      if (table->stream == stream) return *table;
    }
    tables_.push_back(takeReleased(stream));
    return *tables_.back();
  }

 private:
  static std::unique_ptr<StreamConstants> takeReleased(c10::Stream stream) {
    {
      const std::lock_guard lock(released_mutex);
      auto& released = releasedTables();
      for (auto it = released.begin(); it != released.end(); ++it) {
        if ((*it)->stream != stream) continue;
        std::unique_ptr<StreamConstants> table = std::move(*it);
        released.erase(it);
        return table;
      }
    }
    return std::make_unique<StreamConstants>(stream);
  }

  std::vector<std::unique_ptr<StreamConstants>> tables_;
};

// `value` in `dtype` as TensorIterator casts a wrapped number to an op's dtype:
// unchecked (1e300 is inf in float32, 2^40 wraps in int32), unlike fill_.
at::Scalar castTo(const at::Scalar& value, at::ScalarType dtype) {
  at::Scalar cast;
  AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND4(at::kBool, at::kHalf, at::kBFloat16, at::kComplexHalf, dtype, "operand", [&] {
    if (value.isComplex()) cast = c10::convert<scalar_t>(value.toComplexDouble());
    else if (value.isFloatingPoint()) cast = c10::convert<scalar_t>(value.toDouble());
    else if (value.isBoolean()) cast = c10::convert<scalar_t>(value.toBool());
    else cast = c10::convert<scalar_t>(value.toLong());
  });
  return cast;
}

// fill_'s immediate for a value already of the dtype, where fill_ launches texpands.
std::optional<double> fillImmediate(const at::Scalar& cast) {
  if (cast.isComplex()) return std::nullopt;
  if (cast.isBoolean()) return static_cast<double>(cast.toBool());
  if (cast.isFloatingPoint()) return cast.toDouble();
  const int64_t integer = cast.toLong();
  const auto immediate = static_cast<double>(integer);
  if (static_cast<int64_t>(immediate) != integer) return std::nullopt;  // beyond 2^53
  return immediate;
}

at::Tensor freshScalar(const at::Scalar& value, at::ScalarType dtype, const c10::Device& device,
                       c10::IntArrayRef shape) {
  at::Tensor scalar = at::empty({}, at::TensorOptions().dtype(dtype).device(device));
  fill(scalar, value);
  return shape.empty() ? scalar : broadcast(scalar, shape);
}

}  // namespace

at::Tensor deviceScalar(const at::Scalar& value, at::ScalarType dtype, const c10::Device& device,
                        c10::IntArrayRef shape) {
  // The dtypes PTO lacks fill on the CPU (fill_ falls back), which casts them itself.
  if (!ptoDType(dtype)) return freshScalar(value, dtype, device, shape);
  const at::Scalar cast = castTo(value, dtype);
  const std::optional<double> immediate = fillImmediate(cast);
  if (!immediate || isCurrentStreamCapturing(device.index())) return freshScalar(cast, dtype, device, shape);
  thread_local ThreadTables tables;
  StreamConstants& constants = tables.of(currentStream(device.index()));
  uint64_t bits = 0;
  std::memcpy(&bits, &*immediate, sizeof bits);
  Slot* refill = &constants.slots[0];
  for (Slot& slot : constants.slots) {
    if (slot.dtype == dtype && slot.immediate_bits == bits) {
      slot.last_use = ++constants.clock;
      return slot.as(shape);
    }
    if (slot.last_use < refill->last_use) refill = &slot;
  }
  if (refill->dtype != dtype) {
    refill->tensor = constants.slotTensor(static_cast<size_t>(refill - constants.slots.data()), dtype);
    refill->shaped.reset();
  }
  // Marked taken only once filled, so that a fill that throws leaves the slot empty.
  refill->dtype = at::ScalarType::Undefined;
  launchInstruction(isa::Opcode::kFill, refill->tensor, {}, {*immediate, 0.0});
  refill->dtype = dtype;
  refill->immediate_bits = bits;
  refill->last_use = ++constants.clock;
  return refill->as(shape);
}

}  // namespace pto::torch_glue
