"""Running PyTorch's OpInfo samples on pto and on the CPU, and comparing."""

import torch
from torch.testing import assert_close


def to_device(value, device):
    """`value` with every tensor moved to `device` (keeping requires_grad)."""
    if isinstance(value, torch.Tensor):
        return value.detach().to(device).requires_grad_(value.requires_grad)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value


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


def check_forward(op, dtype, **tolerances) -> int:
    """Every CPU sample of `op` at `dtype`, run on pto, equals the CPU result."""
    count = 0
    for sample in op.sample_inputs("cpu", dtype, requires_grad=False):
        expected = op(to_device(sample.input, "cpu"), *sample.args, **sample.kwargs)  # a copy: ops may be in-place
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
