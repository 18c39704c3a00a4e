// Every byte that crosses between host and pto goes through a runtime memcpy on
// the destination's (or source's) current stream. Layout or dtype changes happen
// on the side that has the data: on the host for host tensors, and on the device,
// as PTO instructions on the stream, for pto tensors.
//
// The conjugate and negative bits are resolved here, as aten's CPU and CUDA copies
// do: a copy writes src's value (its bits resolved), converted to dst's dtype, as
// dst's bits read it. Both are sign flips: the bytes are converted as they are
// stored, on either side, and the flips applied after (applyMathBits).
#include "copy.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/DeviceGuard.h>

#include "../pto_graph.h"
#include "../device.h"
#include "../dtype_map.h"
#include "../pto_check.h"
#include "../sync_debug.h"
#include "elementwise.h"
#include "instruction_launch.h"

namespace pto::torch_glue {
namespace {

using isa::Opcode;

bool isPto(const at::Tensor& t) { return t.device().type() == c10::kPrivateUse1; }

// The tensor's bytes form one run [data_ptr, data_ptr + nbytes) (any dimension order).
bool isDense(const at::Tensor& t) { return t.is_non_overlapping_and_dense(); }

bool sameLayout(const at::Tensor& a, const at::Tensor& b) {
  return a.dtype() == b.dtype() && isDense(a) && isDense(b) && a.strides() == b.strides();
}

bool sameMathBits(const at::Tensor& a, const at::Tensor& b) {
  return a.is_conj() == b.is_conj() && a.is_neg() == b.is_neg();
}

size_t byteCount(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.itemsize(); }

// A view of t's bytes as they are stored: its conjugate and negative bits cleared.
at::Tensor physical(const at::Tensor& t) {
  if (!t.is_conj() && !t.is_neg()) return t;
  at::Tensor view = at::alias(t);
  view._set_conj(false);
  view._set_neg(false);
  return view;
}

// A fresh tensor t that reads its bytes with the math bits of `bits`.
at::Tensor withMathBitsOf(const at::Tensor& t, const at::Tensor& bits) {
  t._set_conj(bits.is_conj());
  t._set_neg(bits.is_neg());
  return t;
}

// A host tensor with like's layout, of `dtype`, without math bits.
at::Tensor hostBuffer(const at::Tensor& like, at::ScalarType dtype) {
  return at::empty_strided(like.sizes(), like.strides(), like.options().device(at::kCPU).dtype(dtype));
}

// The real (0) or imaginary (1) parts of a complex tensor, as a real view.
at::Tensor part(const at::Tensor& complex, int64_t index) {
  return at::view_as_real(complex).select(-1, index);
}

// t viewed as the signed integer type of its width: the same bytes in a dtype PTO
// has, for moving a dtype it lacks (uint16/32/64, float8, complex32) unconverted.
at::Tensor asSignedOfWidth(const at::Tensor& t) {
  switch (t.itemsize()) {
    case 1: return t.view(at::kChar);
    case 2: return t.view(at::kShort);
    case 4: return t.view(at::kInt);
    default: return t.view(at::kLong);
  }
}

// dst <- src on one pto device, both without math bits, of any dtypes: PTO has no
// complex dtype, so complex tensors move as their real and imaginary parts, with
// CPU's conversions (a real part alone to a real type; nonzero when either part is).
// A real dtype PTO lacks moves as the integers of its width when nothing converts,
// and through the CPU's conversion when something does.
void convertOnDevice(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.numel() == 0) return;
  auto lacks = [](const at::Tensor& t) { return !t.is_complex() && !ptoDType(t.scalar_type()); };
  const bool foreign = lacks(dst) || lacks(src);
  if (foreign && dst.scalar_type() == src.scalar_type()) {
    copyOnDevice(asSignedOfWidth(dst), asSignedOfWidth(src));
  } else if (foreign) {
    dst.copy_(src.cpu().to(dst.scalar_type()));
  } else if (!dst.is_complex() && !src.is_complex()) {
    copyOnDevice(dst, src);
  } else if (dst.is_complex() && src.is_complex()) {
    copyOnDevice(part(dst, 0), part(src, 0));
    copyOnDevice(part(dst, 1), part(src, 1));
  } else if (dst.is_complex()) {
    copyOnDevice(part(dst, 0), src);
    at::Tensor imaginary = part(dst, 1);
    fill(imaginary, 0);
  } else if (dst.scalar_type() != at::kBool) {
    copyOnDevice(dst, part(src, 0));
  } else {
    const at::Tensor real = part(src, 0), imaginary = part(src, 1);
    const at::Tensor zero = at::zeros({}, real.options()).expand(dst.sizes());
    const at::Tensor imaginary_nonzero = at::empty(dst.sizes(), dst.options());
    launchInstruction(Opcode::kNe, dst, {real, zero});
    launchInstruction(Opcode::kNe, imaginary_nonzero, {imaginary, zero});
    launchInstruction(Opcode::kOr, dst, {dst, imaginary_nonzero});
  }
}

// Negates the parts of `bytes` (dst's bytes, holding src's stored bytes converted
// to dst's dtype, on the host or the device) that make them src's value stored as
// dst's bits read it. Negation and conjugation commute with every conversion,
// except that a real source's negation reaches only the real part of a complex
// destination, and none of a bool one: bool(-x) == bool(x). (CPU's own copy_
// converts first and negates after, and its float -> float16/bfloat16 path drops
// the negative bit.)
void applyMathBits(const at::Tensor& bytes, const at::Tensor& dst, const at::Tensor& src) {
  if (bytes.numel() == 0) return;
  const bool src_neg = src.is_neg() && dst.scalar_type() != at::kBool;
  const bool flip_real = src_neg != dst.is_neg();
  if (!dst.is_complex()) {
    if (flip_real) bytes.neg_();
    return;
  }
  const bool src_complex_neg = src.is_complex() && src_neg;
  const bool src_conj = src.is_complex() && src.is_conj();
  const bool flip_imaginary = (src_complex_neg != dst.is_neg()) != (src_conj != dst.is_conj());
  if (flip_real) part(bytes, 0).neg_();
  if (flip_imaginary) part(bytes, 1).neg_();
}

// dst <- src, both on the same pto device, on `stream` (the device's current one).
void copyWithinDevice(const at::Tensor& dst, const at::Tensor& src, c10::Stream stream) {
  if (sameLayout(dst, src) && sameMathBits(dst, src)) {
    PTO_CHECK(ptoMemcpyAsync(dst.data_ptr(), src.data_ptr(), byteCount(dst),
                             PTO_MEMCPY_DEVICE_TO_DEVICE, nativeStream(stream)));
    return;
  }
  const at::Tensor bytes = physical(dst);
  convertOnDevice(bytes, physical(src));
  applyMathBits(bytes, dst, src);
}

// src's bytes in one dense run on its own device, read with src's math bits: src
// itself, or a copy of its bytes.
at::Tensor denseOnItsDevice(const at::Tensor& src) {
  if (isDense(src)) return src;
  const c10::DeviceGuard guard(src.device());
  const at::Tensor dense = withMathBitsOf(at::empty(src.sizes(), src.options()), src);
  convertOnDevice(physical(dense), physical(src));
  return dense;
}

// Pinned host memory in flight on `stream` is not reused before the copy ran.
bool recordPinnedUse(const at::Tensor& host, c10::Stream stream) {
  if (!host.is_pinned()) return false;
  return at::getHostAllocator(at::kPrivateUse1)
      ->record_event(host.data_ptr(), host.storage().data_ptr().get_context(), stream);
}

// Whether the host waits for a copy from or into `host_buffer`: unless it is the
// caller's own pinned tensor and the copy is non_blocking. Asked before the copy is
// queued, so that sync debug mode "error" raises with nothing in flight.
bool hostWaits(const at::Tensor& host_buffer, bool buffer_is_user_tensor, bool non_blocking) {
  const bool waits = !(non_blocking && buffer_is_user_tensor && host_buffer.is_pinned());
  if (waits) warnOrErrorOnSync();
  return waits;
}

void finishHostCopy(const at::Tensor& host_buffer, bool host_waits, c10::Stream stream) {
  if (!host_waits && recordPinnedUse(host_buffer, stream)) return;
  // Pinned memory the host allocator does not know is waited for after all.
  if (!host_waits) warnOrErrorOnSync();
  PTO_CHECK(ptoStreamSynchronize(nativeStream(stream)));
}

void copyHostToDevice(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  const c10::DeviceGuard guard(dst.device());
  const c10::Stream stream = currentStream(dst.device().index());
  // Device tensor the bytes land in, read with dst's math bits: dst itself when its
  // memory is one dense run.
  const bool lands_in_dst = isDense(dst);
  const at::Tensor landing = lands_in_dst ? dst : withMathBitsOf(at::empty(dst.sizes(), dst.options()), dst);
  at::Tensor host = src;
  if (!sameLayout(landing, src) || !sameMathBits(landing, src)) {
    // Converted by CPU into the bytes landing stores.
    host = hostBuffer(landing, dst.scalar_type());
    host.copy_(physical(src));
    applyMathBits(host, landing, src);
  }
  const bool host_waits = hostWaits(host, host.is_same(src), non_blocking);
  PTO_CHECK(ptoMemcpyAsync(landing.data_ptr(), host.data_ptr(), byteCount(landing),
                           PTO_MEMCPY_HOST_TO_DEVICE, nativeStream(stream)));
  if (!lands_in_dst) copyWithinDevice(dst, landing, stream);
  finishHostCopy(host, host_waits, stream);
}

void copyDeviceToHost(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  const c10::DeviceGuard guard(src.device());
  const c10::Stream stream = currentStream(src.device().index());
  // Device tensor the bytes leave from: src's own when its memory is one dense run.
  const at::Tensor leaving = denseOnItsDevice(src);
  const bool direct = sameLayout(dst, leaving) && sameMathBits(dst, leaving);
  // Otherwise the CPU converts them into dst.
  const at::Tensor host = direct ? dst : hostBuffer(leaving, leaving.scalar_type());
  const bool host_waits = hostWaits(host, direct, non_blocking);
  PTO_CHECK(ptoMemcpyAsync(host.data_ptr(), leaving.data_ptr(), byteCount(leaving),
                           PTO_MEMCPY_DEVICE_TO_HOST, nativeStream(stream)));
  finishHostCopy(host, host_waits, stream);
  if (!direct) {
    const at::Tensor bytes = physical(dst);
    bytes.copy_(host);
    applyMathBits(bytes, dst, leaving);
  }
}

void copyDeviceToDevice(const at::Tensor& dst, const at::Tensor& src) {
  const c10::DeviceGuard guard(dst.device());
  const c10::Stream stream = currentStream(dst.device().index());
  if (src.device() == dst.device()) {
    copyWithinDevice(dst, src, stream);
    return;
  }
  // Across devices only bytes travel: made dense on src's device, landed in dst or
  // in a tensor of the same layout on dst's device, converted there.
  const c10::Stream src_stream = currentStream(src.device().index());
  const at::Tensor leaving = denseOnItsDevice(src);
  const bool lands_in_dst = sameLayout(dst, leaving) && sameMathBits(dst, leaving);
  const at::Tensor landing =
      lands_in_dst ? dst
                   : withMathBitsOf(at::empty_strided(leaving.sizes(), leaving.strides(),
                                                      dst.options().dtype(leaving.scalar_type())),
                                    leaving);
  // The bytes move on dst's stream after src's pending work.
  ptoEvent ready = nullptr;
  PTO_CHECK(ptoEventCreate(&ready));
  PTO_CHECK(ptoEventRecord(ready, nativeStream(src_stream)));
  PTO_CHECK(ptoStreamWaitEvent(nativeStream(stream), ready));
  PTO_CHECK(ptoEventDestroy(ready));
  PTO_CHECK(ptoMemcpyAsync(landing.data_ptr(), leaving.data_ptr(), byteCount(leaving),
                           PTO_MEMCPY_DEVICE_TO_DEVICE, nativeStream(stream)));
  if (!lands_in_dst) copyWithinDevice(dst, landing, stream);
  // src's device may reuse the memory once its own stream moves on: wait here.
  PTO_CHECK(ptoStreamSynchronize(nativeStream(stream)));
}

}  // namespace

at::Tensor copyFrom(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "copy_: undefined tensor");
  // A copy of a view onto itself does nothing, and aten's copy_ returns before its
  // checks (an expanded tensor may be copied onto itself).
  const bool same_data = dst.is_alias_of(self) && dst.storage_offset() == self.storage_offset() &&
                         dst.sizes() == self.sizes() && dst.strides() == self.strides() &&
                         dst.scalar_type() == self.scalar_type() && sameMathBits(dst, self);
  if (same_data) return dst;
  // The checks aten's TensorIterator makes before CPU's copy writes anything.
  at::assert_no_internal_overlap(dst);
  at::assert_no_partial_overlap(dst, self);
  if (dst.numel() == 0) return dst;
  const at::Tensor src = self.sizes() == dst.sizes() ? self : self.expand_as(dst);
  if (isPto(dst) && isPto(src)) {
    copyDeviceToDevice(dst, src);
  } else if (isPto(dst)) {
    TORCH_CHECK(src.is_cpu(), "copy_: cannot copy from ", src.device(), " to ", dst.device());
    try {
      copyHostToDevice(dst, src, non_blocking);
    } catch (const c10::Error& error) {
      rethrowNamingCapture(error, "Copying a CPU tensor to pto (torch.tensor(..., device='pto'), .to('pto'))");
    }
  } else {
    TORCH_CHECK(dst.is_cpu(), "copy_: cannot copy from ", src.device(), " to ", dst.device());
    try {
      copyDeviceToHost(dst, src, non_blocking);
    } catch (const c10::Error& error) {
      rethrowNamingCapture(error, "Reading a pto tensor on the host (.cpu(), .item(), .tolist(), printing)");
    }
  }
  return dst;
}

at::Tensor copyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return copyFrom(self, dst, false);
}

at::Scalar localScalarDense(const at::Tensor& self) {
  at::Tensor host = at::empty({}, self.options().device(at::kCPU));
  try {
    copyDeviceToHost(host, self.reshape({}), false);
  } catch (const c10::Error& error) {
    rethrowNamingCapture(error, "Reading a pto tensor on the host (.item(), printing)");
  }
  return host.item();
}

}  // namespace pto::torch_glue
