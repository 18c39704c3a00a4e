// Advanced indexing on pto. x[indices] is one tgather and x[indices] = values
// (index_put_) one tscatter / tscatteradd, along the indexed dimension, or over the
// element offsets of several (see AdvancedIndex); take and put_ are the same over
// the flattened tensor. Boolean masks become indices through tnonzero, whose row
// count is read on the host: a sync, as on CUDA. An index out of range fails the
// kernel that meets it, and the next synchronising call raises, naming it (as CUDA
// asserts on the device); an index the host holds (a CPU tensor, a Python list) is
// checked at the call instead, with the CPU's IndexError.
#pragma once

#include <ATen/ATen.h>

namespace pto::torch_glue {

// The CPU's IndexError where the host can tell: any index into a dimension of size 0,
// and a value outside [-size, size) of an index tensor on the host (one pass over it).
// The values of an index on the device are the kernel's to check, as on CUDA.
void checkIndexOnHost(const at::Tensor& index, int64_t dim, int64_t size);

// The coordinates of self's nonzero elements, counted first on the host.
at::Tensor& nonzeroOut(const at::Tensor& self, at::Tensor& out);
at::Tensor nonzero(const at::Tensor& self);
at::Tensor indexGather(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices);
at::Tensor& indexOut(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, at::Tensor& out);

// self[indices] = values (+= with accumulate); values broadcast to the selection's shape.
at::Tensor& indexPut(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, const at::Tensor& values,
                     bool accumulate, bool unsafe);

// take: self[index] over self flattened, negative indices counting from the end.
at::Tensor takeFlat(const at::Tensor& self, const at::Tensor& index);
at::Tensor& takeOut(const at::Tensor& self, const at::Tensor& index, at::Tensor& out);

// put_: self flattened, then index_put_ (a view: self must be contiguous).
at::Tensor& putFlat(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate);

// masked_select: self[mask] over their broadcast shape (a native nonzero and gather).
at::Tensor maskedSelect(const at::Tensor& self, const at::Tensor& mask);
at::Tensor& maskedSelectOut(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out);

}  // namespace pto::torch_glue
