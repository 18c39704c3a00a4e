"""Running PyTorch's OpInfo samples on pto and on the CPU, and comparing."""

import re

import pytest
import torch
from torch.testing import assert_close

# One unit in the last place of float16/bfloat16 near 1: where pto rounds once and
# PyTorch's CPU kernels round an intermediate too, or the other way round.
ONE_ULP = {torch.float16: {"rtol": 2e-3, "atol": 2e-3}, torch.bfloat16: {"rtol": 1.6e-2, "atol": 1.6e-2}}


def to_device(value, device):
    """`value` with every tensor copied to `device` (keeping requires_grad): a copy even
    on the CPU, so that an op writing into its inputs leaves the sample as it was."""
    if isinstance(value, torch.Tensor):
        return value.detach().to(device, copy=True).requires_grad_(value.requires_grad)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value


def same_bytes(a, b):
    """Whether two CPU tensors of one shape and dtype hold the same bytes (NaNs too)."""
    return a.shape == b.shape and a.dtype == b.dtype and \
        torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


def assert_same_outcome(call):
    """call(device) gives the same bytes on both devices, or raises the CPU's error on pto."""
    try:
        expected = call("cpu")
    except RuntimeError as error:
        with pytest.raises(RuntimeError, match=re.escape(str(error))):
            call("pto")
        return
    assert same_bytes(expected, call("pto").cpu())


def assert_raises_as_cpu(call, kind=Exception):
    """call(device) raises `kind` on the CPU, and on pto the same exception type with the
    CPU's message."""
    with pytest.raises(kind) as on_cpu:
        call("cpu")
    with pytest.raises(on_cpu.type, match=re.escape(str(on_cpu.value))):
        call("pto")


def leaves(value) -> list:
    """The tensors that require grad in `value` (a tensor, or lists of them)."""
    if isinstance(value, torch.Tensor):
        return [value] if value.requires_grad else []
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in leaves(v)]
    return []


def to_cpu(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, (list, tuple)):
        return type(value)(to_cpu(v) for v in value)
    return value


def draws_random_numbers(sample) -> bool:
    """Whether the sample's result depends on the random generator (attention with
    dropout): pto's Philox draws differ from the CPU's Mersenne Twister by design, as
    CUDA's do, so such samples are compared in test_random.py by their statistics."""
    return sample.kwargs.get("dropout_p", 0.0) > 0


def widened(value, dtype):
    """`value` with every floating tensor converted to `dtype`."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(widened(v, dtype) for v in value)
    return value


def check_forward(op, dtype, reference_dtype=None, **tolerances) -> int:
    """Every CPU sample of `op` at `dtype`, run on pto, equals the CPU result. With
    `reference_dtype` the CPU computes at that dtype from the same inputs and its result
    is rounded to `dtype` once: for ops whose CPU kernels at `dtype` round differently
    from one machine to the next."""
    count = 0
    for sample in op.sample_inputs("cpu", dtype, requires_grad=False):
        if draws_random_numbers(sample):
            continue
        if reference_dtype is None:
            expected = op(to_device(sample.input, "cpu"), *to_device(sample.args, "cpu"), **sample.kwargs)
        else:
            expected = op(widened(sample.input, reference_dtype), *widened(sample.args, reference_dtype),
                          **sample.kwargs).to(dtype)
        actual = op(to_device(sample.input, "pto"), *to_device(sample.args, "pto"),
                    **to_device(sample.kwargs, "pto"))
        assert_close(to_cpu(actual), expected, equal_nan=True, **tolerances)
        count += 1
    return count


# A gradient chains several ops, each within an ulp or two of CPU's vectorised
# math (Sleef), so gradients get a little more room than forward results.
GRADIENT_TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


def check_gradients(op, **tolerances) -> int:
    """Gradients of every float32 sample of `op` on pto equal the CPU's."""
    tolerances = {**GRADIENT_TOLERANCE, **tolerances}
    count = 0
    for sample in op.sample_inputs("cpu", torch.float32, requires_grad=True):
        if draws_random_numbers(sample):
            continue
        expected = op(sample.input, *sample.args, **sample.kwargs)
        if isinstance(expected, (tuple, list)):
            expected = expected[0]
        if not isinstance(expected, torch.Tensor) or not expected.requires_grad:
            continue
        cpu_inputs = leaves([sample.input, *sample.args])
        pto_input, pto_args = to_device(sample.input, "pto"), to_device(sample.args, "pto")
        pto_inputs = leaves([pto_input, *pto_args])
        actual = op(pto_input, *pto_args, **to_device(sample.kwargs, "pto"))
        if isinstance(actual, (tuple, list)):
            actual = actual[0]
        grad = torch.randn_like(expected)
        expected_grads = torch.autograd.grad(expected, cpu_inputs, grad, allow_unused=True)
        actual_grads = torch.autograd.grad(actual, pto_inputs, grad.to("pto"), allow_unused=True)
        for want, got in zip(expected_grads, actual_grads):
            if want is not None:
                assert_close(to_cpu(got), want, equal_nan=True, **tolerances)
        count += 1
    return count


# What the sweeps compared in this session, for the summary conftest.py prints:
# forward samples per (op, dtype) and float32 gradient samples per op.
SWEPT = {"forward": {}, "gradient": {}}


def op_id(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def opinfo_tests(ops, dtypes, tolerance=lambda op, dtype: {}, gradient_tolerance=None,
                 reference_dtype=lambda op, dtype: None):
    """The two tests every OpInfo sweep runs, for a test module to bind to its names:

        test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = opinfo_tests(OPS, DTYPES)

    `tolerance(op, dtype)` gives assert_close's tolerances for a forward check, and
    `reference_dtype(op, dtype)` the dtype its CPU reference computes at (check_forward).
    """

    @pytest.mark.parametrize("dtype", dtypes, ids=str)
    @pytest.mark.parametrize("op", ops, ids=op_id)
    def forward(op, dtype):
        if dtype not in op.supported_dtypes("cpu"):
            pytest.skip(f"{op.name} does not support {dtype} on CPU either")
        count = check_forward(op, dtype, reference_dtype(op, dtype), **tolerance(op, dtype))
        assert count > 0
        SWEPT["forward"][(op_id(op), str(dtype))] = count

    @pytest.mark.parametrize("op", [op for op in ops if op.supports_autograd], ids=op_id)
    def gradients(op):
        if torch.float32 not in op.supported_dtypes("cpu"):
            pytest.skip(f"{op.name} takes no float32 on CPU either: nothing to differentiate")
        SWEPT["gradient"][op_id(op)] = check_gradients(op, **(gradient_tolerance or {}))

    return forward, gradients


def evenly_spaced(items: list, cap: int | None) -> list:
    """At most `cap` of `items` (all when `cap` is None), spread evenly from the first
    to the last: a bounded subset that is the same on every run and still reaches the
    large and extremal inputs OpInfo lists after its small ones."""
    if cap is None or len(items) <= cap:
        return list(items)
    if cap <= 1:
        return list(items[:cap])
    return [items[round(i * (len(items) - 1) / (cap - 1))] for i in range(cap)]


def opinfo_tolerance(op, dtype, test_names, device_types=(None, "cpu")) -> dict:
    """The tolerances (assert_close's rtol/atol) that `op`'s own OpInfo entry sets for
    `dtype` in PyTorch's device-generic tests named `test_names` (TestCommon's
    test_noncontiguous_samples, test_out ...), through toleranceOverride or
    precisionOverride decorators for any device or for the CPU; {} (assert_close's
    defaults for the dtype) where it sets none. The largest wins when several apply."""
    from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride

    found = {}
    for info in op.decorators:
        if not hasattr(info, "is_active"):  # a bare decorator: every test of the op takes it
            decorators = [info]
        elif any(info.is_active("TestCommon", name, device, dtype, {})
                 for name in test_names for device in device_types):
            decorators = info.decorators
        else:
            continue
        for decorator in decorators:
            if isinstance(decorator, toleranceOverride) and dtype in decorator.d:
                atol, rtol = decorator.d[dtype].atol, decorator.d[dtype].rtol
            elif isinstance(decorator, precisionOverride) and dtype in decorator.d:
                atol, rtol = decorator.d[dtype], 0.0
            else:
                continue
            found = {"atol": max(atol, found.get("atol", 0.0)), "rtol": max(rtol, found.get("rtol", 0.0))}
    if found:
        # assert_close takes both or neither: the default of the other where one is 0.
        from torch.testing._comparison import default_tolerances
        default_rtol, default_atol = default_tolerances(torch.empty(0, dtype=dtype))
        found = {"rtol": max(found["rtol"], default_rtol), "atol": max(found["atol"], default_atol)}
    return found


def opinfo_skip(op, dtype, test_names) -> str | None:
    """The reason `op`'s own OpInfo entry gives for skipping PyTorch's device-generic
    TestCommon tests named `test_names` at `dtype` on every device (a unittest.skip
    decorator with no device type, or pto's, privateuse1), or None where it skips none
    of them: what PyTorch's suite does not check, the sweep does not check either."""
    import inspect

    for info in op.decorators:
        if not hasattr(info, "is_active") or not any(
                info.is_active("TestCommon", name, "privateuse1", dtype, {}) for name in test_names):
            continue
        for decorator in info.decorators:
            if getattr(decorator, "__qualname__", "").startswith("skip."):
                return str(inspect.getclosurevars(decorator).nonlocals.get("reason", "skipped"))
    return None


def copy_like(value, device, _memo=None):
    """`value` with every tensor copied to `device` as it lies in memory: each storage
    copied once, whole, and each tensor made again as the same view of it (sizes,
    strides, offset). Views, expanded (overlapping) tensors and tensors that share
    memory stay so, where a plain `.to()` makes each tensor a dense copy of its own
    (OpInfo's error inputs pass an out= that overlaps an input; non-contiguous samples
    stay non-contiguous). A copy on the CPU too: ops may write into their inputs.
    Factory kwargs (`device="cpu"`) are pointed at `device`."""
    memo = {} if _memo is None else _memo
    if isinstance(value, torch.Tensor):
        t = value.detach()
        if t.device.type != "cpu":  # meta tensors (error inputs): left as they are
            return t
        if t.layout != torch.strided or t.is_conj() or t.is_neg() or t.is_quantized \
                or t.untyped_storage().nbytes() % t.element_size():
            return t.clone() if device == "cpu" else t.to(device)
        storage = t.untyped_storage()
        if not storage.nbytes():  # nothing to share: a fresh empty tensor of the same shape
            return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=device)
        key = (storage.data_ptr(), storage.nbytes(), t.dtype)
        if key not in memo:
            whole = torch.empty(0, dtype=t.dtype).set_(storage, 0, (storage.nbytes() // t.element_size(),), (1,))
            memo[key] = whole.clone() if device == "cpu" else whole.to(device)
        return memo[key].as_strided(t.size(), t.stride(), t.storage_offset())
    if isinstance(value, torch.Size):
        return value
    if isinstance(value, (list, tuple)):
        items = [copy_like(v, device, memo) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return {k: (device if k == "device" else copy_like(v, device, memo)) for k, v in value.items()}
    return value
