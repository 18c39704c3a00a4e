// Every byte that crosses between host and pto goes through a runtime memcpy on
// the destination's (or source's) current stream. Layout or dtype changes happen
// on the side that has the data: on the host for host tensors, and on the device,
// as a PTO instruction (tmov/tcvt) on the stream, for pto tensors.
#include "copy.h"

#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/DeviceGuard.h>

#include "../device.h"
#include "../pto_check.h"
#include "elementwise.h"

namespace pto::backend {
namespace {

bool isPto(const at::Tensor& t) { return t.device().type() == c10::kPrivateUse1; }

// The tensor's bytes form one run [data_ptr, data_ptr + nbytes) (any dimension order).
bool isDense(const at::Tensor& t) { return t.is_non_overlapping_and_dense(); }

bool sameLayout(const at::Tensor& a, const at::Tensor& b) {
  return a.dtype() == b.dtype() && isDense(a) && isDense(b) && a.strides() == b.strides();
}

size_t byteCount(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.itemsize(); }

// dst <- src, both on the same pto device, on `stream` (the device's current one).
void copyWithinDevice(const at::Tensor& dst, const at::Tensor& src, c10::Stream stream) {
  if (sameLayout(dst, src)) {
    PTO_CHECK(ptoMemcpyAsync(dst.data_ptr(), src.data_ptr(), byteCount(dst),
                             PTO_MEMCPY_DEVICE_TO_DEVICE, nativeStream(stream)));
    return;
  }
  if (copyOnDevice(dst, src)) return;  // tmov / tcvt
  // A dtype PTO has no instruction for (complex ...): convert on the host.
  const at::Tensor host = src.cpu().to(dst.scalar_type());
  dst.copy_(host);
}

// Pinned host memory in flight on `stream` is not reused before the copy ran.
bool recordPinnedUse(const at::Tensor& host, c10::Stream stream) {
  if (!host.is_pinned()) return false;
  return at::getHostAllocator(at::kPrivateUse1)
      ->record_event(host.data_ptr(), host.storage().data_ptr().get_context(), stream);
}

void finishHostCopy(const at::Tensor& host_buffer, bool buffer_is_user_tensor, bool non_blocking,
                    c10::Stream stream) {
  if (non_blocking && buffer_is_user_tensor && recordPinnedUse(host_buffer, stream)) return;
  PTO_CHECK(ptoStreamSynchronize(nativeStream(stream)));
}

void copyHostToDevice(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  const c10::DeviceGuard guard(dst.device());
  const c10::Stream stream = currentStream(dst.device().index());
  // Device tensor the bytes land in: dst itself when its memory is one dense run.
  at::Tensor landing = isDense(dst) ? dst : at::empty(dst.sizes(), dst.options());
  at::Tensor host = src;
  if (!sameLayout(landing, src)) {
    host = at::empty_strided(landing.sizes(), landing.strides(), src.options().dtype(dst.dtype()));
    host.copy_(src);
  }
  PTO_CHECK(ptoMemcpyAsync(landing.data_ptr(), host.data_ptr(), byteCount(landing),
                           PTO_MEMCPY_HOST_TO_DEVICE, nativeStream(stream)));
  if (!landing.is_same(dst)) copyWithinDevice(dst, landing, stream);
  finishHostCopy(host, host.is_same(src), non_blocking, stream);
}

void copyDeviceToHost(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  const c10::DeviceGuard guard(src.device());
  const c10::Stream stream = currentStream(src.device().index());
  // Device tensor the bytes leave from: src itself when its memory is one dense run.
  at::Tensor leaving = src;
  if (!isDense(src)) {
    leaving = at::empty(src.sizes(), src.options());
    copyWithinDevice(leaving, src, stream);
  }
  const bool direct = sameLayout(dst, leaving);
  at::Tensor host = direct ? dst : at::empty_strided(leaving.sizes(), leaving.strides(),
                                                     leaving.options().device(at::kCPU));
  PTO_CHECK(ptoMemcpyAsync(host.data_ptr(), leaving.data_ptr(), byteCount(leaving),
                           PTO_MEMCPY_DEVICE_TO_HOST, nativeStream(stream)));
  finishHostCopy(host, direct, non_blocking && direct, stream);
  if (!direct) dst.copy_(host);
}

void copyDeviceToDevice(const at::Tensor& dst, const at::Tensor& src) {
  const c10::DeviceGuard guard(dst.device());
  const c10::Stream stream = currentStream(dst.device().index());
  if (src.device() == dst.device()) {
    copyWithinDevice(dst, src, stream);
    return;
  }
  // Across devices: the copy runs on dst's stream after src's pending work.
  const c10::Stream src_stream = currentStream(src.device().index());
  ptoEvent ready = nullptr;
  PTO_CHECK(ptoEventCreate(&ready));
  PTO_CHECK(ptoEventRecord(ready, nativeStream(src_stream)));
  PTO_CHECK(ptoStreamWaitEvent(nativeStream(stream), ready));
  PTO_CHECK(ptoEventDestroy(ready));
  copyWithinDevice(dst, src, stream);
  // src's device may reuse the memory once its own stream moves on: wait here.
  PTO_CHECK(ptoStreamSynchronize(nativeStream(stream)));
}

}  // namespace

at::Tensor copyFrom(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "copy_: undefined tensor");
  if (dst.numel() == 0) return dst;
  const at::Tensor src = self.sizes() == dst.sizes() ? self : self.expand_as(dst);
  if (isPto(dst) && isPto(src)) {
    copyDeviceToDevice(dst, src);
  } else if (isPto(dst)) {
    TORCH_CHECK(src.is_cpu(), "copy_: cannot copy from ", src.device(), " to ", dst.device());
    copyHostToDevice(dst, src, non_blocking);
  } else {
    TORCH_CHECK(dst.is_cpu(), "copy_: cannot copy from ", src.device(), " to ", dst.device());
    copyDeviceToHost(dst, src, non_blocking);
  }
  return dst;
}

at::Tensor copyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return copyFrom(self, dst, false);
}

at::Scalar localScalarDense(const at::Tensor& self) {
  at::Tensor host = at::empty({}, self.options().device(at::kCPU));
  copyDeviceToHost(host, self.reshape({}), false);
  return host.item();
}

}  // namespace pto::backend
