// Host scalars (Python numbers, CPU 0-dim tensors) as device operands of pto's ops.
//
// `x.add_(1)` takes its 1 as a wrapped CPU scalar; a pto instruction reads operands
// from device memory only. Filling a new 0-dim tensor for it costs an allocation and
// a second launch per op, so the values a thread uses on a stream are kept, filled
// once, in a small table of device constants of that (thread, stream): a fill
// overwriting one of them is ordered, on that stream, after every launch of that
// thread that read the old value, so no launch can read a value it did not ask for.
#pragma once

#include <ATen/ATen.h>

namespace pto::torch_glue {

// A 0-dim pto tensor of `dtype` on `device` holding `value` (as fill_ would store it),
// valid for launches on the current stream of that device until this thread asks for
// a value that displaces it: an operand of the launch that follows, not a tensor to
// hand to the user. While the stream captures a graph the tensor is a new one, kept by
// the graph's pool as any captured allocation. With a `shape`, the value comes
// broadcast to it (strides 0); a kept value's view is kept with it (an op's shape
// repeats), so that an op's scalar operand costs no tensor made per call.
at::Tensor deviceScalar(const at::Scalar& value, at::ScalarType dtype, const c10::Device& device,
                        c10::IntArrayRef shape = {});

}  // namespace pto::torch_glue
