// Indexing on pto: gather and index_select are one tgather each (embedding
// reaches index_select); index_add and embedding's backward are one tindexadd;
// tril/triu are one ttril/ttriu; arange is tiota, linspace two counts from its
// ends; nll_loss is a gather plus a few elementwise instructions. Indices out of
// range fail the tgather kernel, and the next synchronising call raises, naming it.
//
// index_fill_, index_copy, masked_scatter_, repeat_interleave, bincount and unique
// are a few native instructions around one scatter. Those whose output size depends
// on the data read it on the host first (a sync, as on CUDA), and check there what
// PyTorch's CPU kernels check.
#pragma once

#include <ATen/ATen.h>

namespace pto::torch_glue {

at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad);
at::Tensor& gatherOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad, at::Tensor& out);
at::Tensor& indexSelectOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out);
at::Tensor indexSelect(const at::Tensor& self, int64_t dim, const at::Tensor& index);
at::Tensor& arangeOut(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, at::Tensor& out);

// linspace as PyTorch's CPU kernel computes it: a step in the output's precision,
// the first half counted up from start and the second down from end, so that both
// ends are exact. float32 and float64 only: for float16/bfloat16 the CPU rounds the
// index itself to the dtype, a different sequence, which the fallback keeps.
at::Tensor& linspaceOut(const at::Scalar& start, const at::Scalar& end, int64_t steps, at::Tensor& out);
at::Tensor& eyeOut(int64_t n, int64_t m, at::Tensor& out);

// one_hot with the CPU's checks of the class values, made on the host (one read of
// their minimum and maximum): torch skips them for PrivateUse1 as for CUDA, whose
// scatter asserts on the device; a pto kernel error would surface at a later call.
at::Tensor oneHot(const at::Tensor& self, int64_t num_classes);
at::Tensor& eyeSquareOut(int64_t n, at::Tensor& out);
at::Tensor& indexAddOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                        const at::Scalar& alpha, at::Tensor& out);
at::Tensor indexAdd(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                    const at::Scalar& alpha);
at::Tensor& indexAddInplace(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                            const at::Scalar& alpha);

// embedding's gradient: each token's gradient row added into its weight row.
at::Tensor embeddingDenseBackward(const at::Tensor& grad_output, const at::Tensor& indices, c10::SymInt num_weights,
                                  c10::SymInt padding_idx, bool scale_grad_by_freq);
std::tuple<at::Tensor, at::Tensor> nllLossForward(const at::Tensor& self, const at::Tensor& target,
                                                  const std::optional<at::Tensor>& weight, int64_t reduction,
                                                  int64_t ignore_index);
at::Tensor nllLossBackward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                           const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                           const at::Tensor& total_weight);

// tril/triu: functional, out= and in place.
at::Tensor tril(const at::Tensor& self, int64_t diagonal);
at::Tensor& trilOut(const at::Tensor& self, int64_t diagonal, at::Tensor& out);
at::Tensor& trilInplace(at::Tensor& self, int64_t diagonal);
at::Tensor triu(const at::Tensor& self, int64_t diagonal);
at::Tensor& triuOut(const at::Tensor& self, int64_t diagonal, at::Tensor& out);
at::Tensor& triuInplace(at::Tensor& self, int64_t diagonal);

at::Tensor& indexFillScalar(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value);
at::Tensor& indexFillTensor(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& value);
at::Tensor& indexCopyInplace(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source);
at::Tensor& indexCopyOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                         at::Tensor& out);

// self[mask] = source's first elements, in row-major order.
at::Tensor& maskedScatter(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source);

// repeat_interleave(repeats): i repeated repeats[i] times. A 1 marks where each run
// starts (scatter_add: empty runs share a mark), and a running sum numbers them.
at::Tensor repeatInterleave(const at::Tensor& repeats, std::optional<int64_t> output_size);

// bincount: a scatter_add of ones (or the weights) into max + 1 bins.
at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights, int64_t minlength);

// torch.unique: one stable sort, a flag where each new value starts (NaNs are all
// distinct, as the CPU's != makes them), a running count numbering the groups, and
// scatters of the groups back to the input's positions (inverse) and of ones (counts).
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique(const at::Tensor& self, bool sorted, bool return_inverse,
                                                      bool return_counts);

}  // namespace pto::torch_glue
