"""How much of aten runs natively on pto: ``python -m pypto_torch.coverage``.

Every op without a native kernel still works on pto, through the CPU fallback, but
with its tensors copied to the CPU and back. This report says, from the dispatcher's
own tables (no op is run), which ops have a pto kernel and which common ones are
still falling back, so the next kernels to write are the ones that matter.

An aten operator is, for a PrivateUse1 (pto) tensor:
  native              a kernel registered for PrivateUse1 (for the dtypes its PTO
                      instructions accept; other dtypes take the fallback inside it);
  composite           CompositeImplicitAutograd: it decomposes into other ops, and is
                      native when its pieces are;
  composite explicit  a backend-agnostic kernel (CompositeExplicitAutograd[NonFunctional])
                      that calls other ops, e.g. cumsum -> cumsum.out;
  fallback            none of these: pto's boxed CPU fallback runs it;
  unsupported         the fallback would run it, but it has no CPU kernel either
                      (CUDA, MKLDNN, sparse or quantized only).
"""

import sys
import textwrap

import torch

import pypto_torch  # noqa: F401  (registers the pto kernels the dispatcher is asked about)

_has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key

# Common ops by family, named by the overload that does the work on a backend: where
# a functional op is a composite over its out= form, the out= form (cumsum ->
# cumsum.out); where torch.nn.functional composes, its pieces (cross_entropy ->
# _log_softmax, nll_loss_forward; conv2d -> convolution_overrideable).
COMMON = {
    "convolution & matmul": (
        "aten::convolution_overrideable", "aten::convolution_backward_overrideable",
        "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"),
    "normalization": (
        "aten::native_batch_norm", "aten::native_batch_norm_backward",
        "aten::native_layer_norm", "aten::native_layer_norm_backward"),
    "indexing": (
        "aten::index_select", "aten::index.Tensor_out", "aten::_index_put_impl_",
        "aten::gather.out", "aten::scatter.src_out", "aten::scatter_add.out",
        "aten::masked_fill_.Scalar", "aten::nonzero", "aten::embedding_dense_backward",
        "aten::masked_select", "aten::masked_scatter_", "aten::index_fill_.int_Scalar",
        "aten::index_copy.out", "aten::repeat_interleave.Tensor", "aten::_embedding_bag"),
    "shape & copy": (
        "aten::cat.out", "aten::flip", "aten::roll", "aten::tril.out", "aten::triu.out",
        "aten::im2col", "aten::reflection_pad2d"),
    "sort & scan": (
        "aten::cumsum.out", "aten::cumprod.out", "aten::sort.values_stable",
        "aten::topk.values", "aten::max.dim", "aten::argmax", "aten::kthvalue.values",
        "aten::median.dim_values", "aten::_unique2", "aten::searchsorted.Tensor"),
    "reductions": (
        "aten::sum.IntList_out", "aten::mean.out", "aten::amax.out", "aten::prod.int_out",
        "aten::var.correction", "aten::std.correction", "aten::linalg_vector_norm.out",
        "aten::var_mean.correction", "aten::nansum", "aten::count_nonzero.dim_IntList",
        "aten::bincount", "aten::trace"),
    "softmax & losses": (
        "aten::_softmax.out", "aten::_log_softmax.out", "aten::nll_loss_forward",
        "aten::nll_loss_backward", "aten::mse_loss.out",
        "aten::binary_cross_entropy", "aten::smooth_l1_loss.out"),
    "random": (
        "aten::native_dropout", "aten::native_dropout_backward", "aten::normal_",
        "aten::uniform_", "aten::bernoulli_.float", "aten::random_.from",
        "aten::randperm.generator_out", "aten::multinomial"),
    "elementwise": (
        "aten::add.out", "aten::sub.out", "aten::mul.out", "aten::div.out",
        "aten::div.out_mode", "aten::pow.Tensor_Tensor_out", "aten::pow.Tensor_Scalar_out",
        "aten::clamp.out", "aten::clamp_min.out", "aten::where.self_out", "aten::sqrt.out",
        "aten::exp.out", "aten::log.out", "aten::abs.out", "aten::remainder.Tensor_out",
        "aten::eq.Tensor_out", "aten::logical_not.out", "aten::floor_divide",
        "aten::bitwise_left_shift.Tensor_out", "aten::logaddexp.out"),
    "activations": (
        "aten::relu", "aten::gelu.out", "aten::silu.out", "aten::sigmoid.out", "aten::tanh.out",
        "aten::hardtanh", "aten::leaky_relu.out", "aten::threshold_backward.grad_input",
        "aten::gelu_backward.grad_input", "aten::hardtanh_backward.grad_input", "aten::elu.out",
        "aten::hardswish", "aten::mish.out", "aten::glu.out", "aten::_prelu_kernel", "aten::logit"),
    "pooling & resampling": (
        "aten::max_pool2d_with_indices.out", "aten::max_pool2d_with_indices_backward.grad_input",
        "aten::avg_pool2d.out", "aten::_adaptive_avg_pool2d", "aten::upsample_nearest2d.out",
        "aten::upsample_bilinear2d.out", "aten::grid_sampler_2d"),
    "factories": (
        "aten::arange.start_out", "aten::linspace.out", "aten::fill_.Scalar", "aten::zero_",
        "aten::empty.memory_format"),
}

KINDS = ("native", "composite", "composite_explicit", "fallback", "unsupported")


def classify(name: str) -> str:
    """One of KINDS for an operator name such as "aten::add.Tensor" (see the module doc)."""
    if _has_kernel(name, "PrivateUse1"):
        return "native"
    if _has_kernel(name, "CompositeImplicitAutograd"):
        return "composite"
    if (_has_kernel(name, "CompositeExplicitAutograd")
            or _has_kernel(name, "CompositeExplicitAutogradNonFunctional")):
        return "composite_explicit"
    return "fallback" if _has_kernel(name, "CPU") else "unsupported"


def report() -> dict:
    """Every aten operator sorted into KINDS (one sorted list each), and the COMMON ops:
    native_common, fallback_common, composite_common (decompose, so neither) and common_kind (name -> kind)."""
    names = sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::"))
    result = {kind: [] for kind in KINDS}
    for name in names:
        result[classify(name)].append(name)
    common = [name for family in COMMON.values() for name in family]
    known = set(names)
    missing = [name for name in common if name not in known]
    if missing:
        raise ValueError(f"COMMON names operators this torch does not have: {missing}")
    kinds = {name: classify(name) for name in common}
    result.update(
        total=len(names),
        common_kind=kinds,
        native_common=[n for n in common if kinds[n] == "native"],
        fallback_common=[n for n in common if kinds[n] in ("fallback", "unsupported")],
        composite_common=[n for n in common if kinds[n] in ("composite", "composite_explicit")],
    )
    return result


def format_report(result: dict) -> str:
    """The report as text: counts over all of aten, then the common ops falling back."""
    count = {kind: len(result[kind]) for kind in KINDS}
    lines = [
        f"pto coverage: {result['total']} aten operators (torch {torch.__version__})",
        f"  native on pto          {count['native']:5d}  own PrivateUse1 kernel",
        f"  composite (implicit)   {count['composite']:5d}  decompose into other ops: "
        "native when their pieces are",
        f"  composite (explicit)   {count['composite_explicit']:5d}  backend-agnostic kernels "
        "that call other ops",
        f"  CPU fallback           {count['fallback']:5d}  copied to the CPU and back",
        f"  no kernel for pto/CPU  {count['unsupported']:5d}  CUDA, MKLDNN, sparse or quantized only",
        "",
    ]
    total_common = len(result["common_kind"])
    native = len(result["native_common"])
    lines.append(f"Common ops: {native} of {total_common} native on pto "
                 f"({100 * native / total_common:.0f}%), {len(result['fallback_common'])} "
                 "still on the CPU:")
    fallback = set(result["fallback_common"])
    for family, names in COMMON.items():
        slow = [name.removeprefix("aten::") for name in names if name in fallback]
        if slow:
            lines.append(textwrap.fill(", ".join(slow), width=100, break_on_hyphens=False,
                                       initial_indent=f"  {family + ':':23s}",
                                       subsequent_indent=" " * 25))
    if result["composite_common"]:
        lines.append("Common ops that decompose (native when their pieces are): "
                     + ", ".join(result["composite_common"]))
    return "\n".join(lines)


def main() -> int:
    """Print the report."""
    print(format_report(report()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
