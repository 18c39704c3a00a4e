"""Mixed precision on pto: autocast applies CUDA's cast policies, GradScaler runs on the device.

CPU autocast's op lists differ from CUDA's, so the CPU references here apply CUDA's
policy by hand: every op's inputs cast explicitly to the dtype CUDA's autocast would
give them, then the op run on CPU with autocast off.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import pypto_torch
from error_bounds import (Bound, assert_within_bound, chain_tolerance, gamma, matmul_bound, multilinear_bound,
                          softmax_bound, through_elementwise, unit_roundoff, without_additive_term)

LOW = "lower_precision_fp"
FP32 = "fp32"
FP32_SET_OPT_DTYPE = "fp32_set_opt_dtype"
FP32_APPEND_DTYPE = "fp32_append_dtype"
PROMOTE = "promote"

# bfloat16's unit roundoff is 2**-8: a result rounded once more or less on one side
# differs by that much relative to its size.
BF16_EPS = 2.0**-8


def _randn(*shape):
    return lambda: torch.randn(*shape)


def _positive(*shape):
    return lambda: torch.rand(*shape) + 0.5


# Stands for the autocast dtype of the run in a row of POLICY_TABLE.
LOWP = "autocast dtype"

# (op, the list of ATen/autocast_mode.h it is on, function, inputs, their dtypes on
# entry: None for all float32, LOWP for all in the autocast dtype, or one per input).
# Inputs given in the low dtype show the fp32 lists widen them.
POLICY_TABLE = [
    ("mm", LOW, torch.mm, [_randn(4, 8), _randn(8, 3)], None),
    ("matmul", LOW, torch.matmul, [_randn(2, 4, 8), _randn(8, 3)], None),
    ("addmm", LOW, torch.addmm, [_randn(3), _randn(4, 8), _randn(8, 3)], None),
    ("bmm", LOW, torch.bmm, [_randn(2, 4, 8), _randn(2, 8, 3)], None),
    ("baddbmm", LOW, torch.baddbmm, [_randn(2, 4, 3), _randn(2, 4, 8), _randn(2, 8, 3)], None),
    ("linear", LOW, F.linear, [_randn(4, 8), _randn(3, 8), _randn(3)], None),
    ("mv", LOW, torch.mv, [_randn(4, 8), _randn(8)], None),
    ("addmv", LOW, torch.addmv, [_randn(4), _randn(4, 8), _randn(8)], None),
    ("addr", LOW, torch.addr, [_randn(4, 3), _randn(4), _randn(3)], None),
    ("einsum", LOW, lambda a, b: torch.einsum("ij,jk->ik", a, b), [_randn(4, 8), _randn(8, 3)], None),
    ("conv2d", LOW, F.conv2d, [_randn(1, 2, 6, 6), _randn(3, 2, 3, 3)], None),
    ("prelu", LOW, F.prelu, [_randn(2, 3), _randn(3)], None),
    ("scaled_dot_product_attention", LOW, F.scaled_dot_product_attention,
     [_randn(1, 2, 4, 8), _randn(1, 2, 4, 8), _randn(1, 2, 4, 8)], None),
    ("exp", FP32, torch.exp, [_randn(4, 8)], LOWP),
    ("log", FP32, torch.log, [_positive(4, 8)], LOWP),
    ("rsqrt", FP32, torch.rsqrt, [_positive(4, 8)], LOWP),
    ("reciprocal", FP32, torch.reciprocal, [_positive(4, 8)], LOWP),
    ("pow.Tensor_Scalar", FP32, lambda x: torch.pow(x, 2.5), [_positive(4, 8)], LOWP),
    ("softplus", FP32, F.softplus, [_randn(4, 8)], LOWP),
    ("layer_norm", FP32, lambda x: F.layer_norm(x, (8,)), [_randn(4, 8)], LOWP),
    ("group_norm", FP32, lambda x: F.group_norm(x, 2), [_randn(2, 4, 3)], LOWP),
    ("mse_loss", FP32, F.mse_loss, [_randn(4, 8), _randn(4, 8)], LOWP),
    ("l1_loss", FP32, F.l1_loss, [_randn(4, 8), _randn(4, 8)], LOWP),
    ("smooth_l1_loss", FP32, F.smooth_l1_loss, [_randn(4, 8), _randn(4, 8)], LOWP),
    ("binary_cross_entropy_with_logits", FP32, F.binary_cross_entropy_with_logits,
     [_randn(4, 8), lambda: torch.rand(4, 8)], LOWP),
    ("cosine_similarity", FP32, F.cosine_similarity, [_randn(4, 8), _randn(4, 8)], LOWP),
    ("logsumexp", FP32, lambda x: torch.logsumexp(x, -1), [_randn(4, 8)], LOWP),
    ("softmax", FP32_SET_OPT_DTYPE, lambda x: torch.softmax(x, -1), [_randn(4, 8)], LOWP),
    ("log_softmax", FP32_SET_OPT_DTYPE, lambda x: torch.log_softmax(x, -1), [_randn(4, 8)], LOWP),
    ("sum", FP32_SET_OPT_DTYPE, torch.sum, [_randn(4, 8)], LOWP),
    ("sum.dim_IntList", FP32_SET_OPT_DTYPE, lambda x: torch.sum(x, [1]), [_randn(4, 8)], LOWP),
    ("cumsum", FP32_SET_OPT_DTYPE, lambda x: torch.cumsum(x, 1), [_randn(4, 8)], LOWP),
    ("prod", FP32_SET_OPT_DTYPE, lambda x: torch.prod(x, 1), [_positive(4, 8)], LOWP),
    ("norm.Scalar", FP32_APPEND_DTYPE, torch.norm, [_randn(4, 8)], LOWP),
    ("norm.ScalarOpt_dim", FP32_APPEND_DTYPE, lambda x: torch.norm(x, 2, [1]), [_randn(4, 8)], LOWP),
    ("addcmul", PROMOTE, torch.addcmul, [_randn(4, 8), _randn(4, 8), _randn(4, 8)],
     [torch.float32, LOWP, LOWP]),
    ("addcdiv", PROMOTE, torch.addcdiv, [_randn(4, 8), _randn(4, 8), _positive(4, 8)],
     [LOWP, torch.float32, LOWP]),
    ("atan2", PROMOTE, torch.atan2, [_randn(4, 8), _randn(4, 8)], [LOWP, torch.float32]),
    ("dot", PROMOTE, torch.dot, [_randn(8), _randn(8)], [torch.float32, LOWP]),
    ("cross", PROMOTE, lambda a, b: torch.cross(a, b, dim=1), [_randn(4, 3), _randn(4, 3)],
     [LOWP, torch.float32]),
    ("scatter_add", PROMOTE, lambda x, src: torch.scatter_add(x, 1, torch.tensor([[0, 1], [2, 0]]).to(x.device), src),
     [_randn(2, 3), _randn(2, 2)], [LOWP, torch.float32]),
]


def _entry_dtypes(entry, count, autocast_dtype):
    dtypes = entry if isinstance(entry, list) else [entry or torch.float32] * count
    return [autocast_dtype if dtype == LOWP else dtype for dtype in dtypes]


def _cuda_policy_dtype(policy, inputs, autocast_dtype):
    """The dtype CUDA's autocast casts the floating inputs of an op on `policy` to."""
    if policy == LOW:
        return autocast_dtype
    if policy == PROMOTE:
        widest = inputs[0].dtype
        for t in inputs[1:]:
            widest = torch.promote_types(widest, t.dtype)
        return widest
    return torch.float32


# The table's products, by the name error_bounds.without_additive_term knows them by.
MULTILINEAR = {"mm": "mm", "matmul": "matmul", "addmm": "addmm", "bmm": "bmm", "baddbmm": "baddbmm",
               "linear": "nn.functional.linear", "mv": "mv", "addmv": "addmv", "addr": "addr", "einsum": "einsum",
               "conv2d": "nn.functional.conv2d"}


@pytest.mark.parametrize("autocast_dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("name,policy,fn,makers,entry", POLICY_TABLE, ids=[row[0] for row in POLICY_TABLE])
def test_output_dtype_follows_cuda_policy(name, policy, fn, makers, entry, autocast_dtype):
    torch.manual_seed(0)
    inputs = [make().to(dtype) for make, dtype in zip(makers, _entry_dtypes(entry, len(makers), autocast_dtype))]
    with torch.autocast("pto", dtype=autocast_dtype):
        result = fn(*[t.to("pto") for t in inputs])
    expected_dtype = _cuda_policy_dtype(policy, inputs, autocast_dtype)
    assert result.device.type == "pto"
    assert result.dtype == expected_dtype, f"{name} under {autocast_dtype} autocast gave {result.dtype}"
    # The same op on CPU with its inputs cast as CUDA's policy casts them: the products
    # within their error_bounds.multilinear_bound (2 gamma_K sum|a||b| in float32, each
    # side's final rounding, and the CPU's rounding of the product before the bias or
    # beta C). The rest -- elementwise ops, and sums, norms and softmax over at most 8
    # values in float32 (2 gamma_9 sum|x| < 1e-5 here) -- round a result (2**-8 relative
    # for bfloat16) once each, and sdpa four times (scores, probabilities, P v, each at
    # most 8 terms): within 4 * 2**-8 (the tolerance's rtol) of the result's size.
    cast = [t.to(expected_dtype) for t in inputs]
    expected = fn(*cast)
    if name in MULTILINEAR:
        bound = multilinear_bound(fn, cast, {}, result.cpu(), expected,
                                  partial=without_additive_term(MULTILINEAR[name], cast, {}))
        assert_within_bound(result.cpu(), expected, bound, name)
    else:
        assert_close(result.cpu(), expected, atol=4 * BF16_EPS, rtol=4 * BF16_EPS)


@pytest.mark.parametrize("autocast_dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
def test_ops_on_no_list_keep_their_dtypes(autocast_dtype):
    x32, x16 = torch.randn(4, 8, device="pto"), torch.randn(4, 8, device="pto").to(autocast_dtype)
    with torch.autocast("pto", dtype=autocast_dtype):
        assert torch.relu(x32).dtype == torch.float32
        assert torch.relu(x16).dtype == autocast_dtype
        assert (x32 + x16).dtype == torch.float32  # ordinary type promotion
        assert torch.mm(x32.int(), x32.int().T).dtype == torch.int32  # only floating tensors are cast


def test_cpu_tensors_are_not_cast_by_pto_autocast():
    a = torch.randn(4, 4)
    with torch.autocast("pto", dtype=torch.bfloat16):
        assert (a @ a).dtype == torch.float32


def test_autocast_state_nesting_and_disabled_regions():
    x = torch.randn(4, 4, device="pto")
    assert not torch.is_autocast_enabled("pto")
    assert torch.get_autocast_dtype("pto") == torch.float16  # cuda's default too
    with torch.autocast("pto", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("pto") and torch.get_autocast_dtype("pto") == torch.bfloat16
        assert (x @ x).dtype == torch.bfloat16
        with torch.autocast("pto", dtype=torch.float16):
            assert (x @ x).dtype == torch.float16
        assert (x @ x).dtype == torch.bfloat16
        with torch.autocast("pto", enabled=False):
            assert not torch.is_autocast_enabled("pto")
            assert (x @ x).dtype == torch.float32
        assert (x @ x).dtype == torch.bfloat16
    assert not torch.is_autocast_enabled("pto")
    assert (x @ x).dtype == torch.float32


def test_pto_amp_module():
    x = torch.randn(4, 4, device="pto")
    assert torch.pto.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.pto.is_bf16_supported()
    with torch.pto.amp.autocast(dtype=torch.bfloat16):
        assert (x @ x).dtype == torch.bfloat16
    with torch.pto.amp.autocast():
        assert (x @ x).dtype == torch.float16

    @torch.pto.amp.autocast(dtype=torch.bfloat16)
    def decorated(a):
        return a @ a

    assert decorated(x).dtype == torch.bfloat16
    scaler = torch.pto.amp.GradScaler(init_scale=8.0)
    assert isinstance(scaler, torch.amp.GradScaler) and scaler._device == "pto"


def test_unsupported_autocast_dtype_is_an_error():
    with pytest.raises(ValueError, match=r"torch.pto.amp.autocast: dtype torch.float64 is not supported"):
        torch.pto.amp.autocast(dtype=torch.float64)
    # torch.autocast itself warns and turns autocast off, for pto as for every backend.
    x = torch.randn(4, 4, device="pto")
    with pytest.warns(UserWarning, match="pto Autocast only supports dtypes of torch.float16, torch.bfloat16"):
        region = torch.autocast("pto", dtype=torch.float64)
    with region:
        assert (x @ x).dtype == torch.float32


def test_binary_cross_entropy_is_banned_as_on_cuda():
    probabilities, targets = torch.rand(4, 3, device="pto"), torch.rand(4, 3, device="pto")
    with torch.autocast("pto", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
            F.binary_cross_entropy(probabilities, targets)
    assert_close(F.binary_cross_entropy(probabilities, targets).cpu(),
                 F.binary_cross_entropy(probabilities.cpu(), targets.cpu()))


# --- GradScaler's kernels ---------------------------------------------------------


@pytest.mark.parametrize("poisoned", [1, 2, 3], ids=["float32", "float16", "strided"])
@pytest.mark.parametrize("poison", [None, math.inf, -math.inf, math.nan], ids=["finite", "inf", "-inf", "nan"])
def test_unscale_kernel_matches_cpu(poison, poisoned):
    torch.manual_seed(0)
    grads = [torch.randn(5, 3), torch.randn(7), torch.randn(2, 2).half(), torch.randn(4, 4)[:, ::2]]
    if poison is not None:
        grads[poisoned][1] = poison
    results = {}
    for device in ("cpu", "pto"):
        device_grads = [g.to(device, copy=True) for g in grads]
        found_inf = torch.zeros(1, device=device)
        inv_scale = torch.full((1,), 0.125, device=device)
        with pypto_torch.fallback_mode("error"):
            torch._amp_foreach_non_finite_check_and_unscale_(device_grads, found_inf, inv_scale)
        results[device] = [found_inf.cpu()] + [g.cpu() for g in device_grads]
    assert results["pto"][0].item() == (0.0 if poison is None else 1.0)
    for pto_value, cpu_value in zip(results["pto"], results["cpu"]):
        assert_close(pto_value, cpu_value, atol=0, rtol=0, equal_nan=True)


def test_unscale_kernel_never_clears_found_inf():
    found_inf = torch.ones(1, device="pto")
    torch._amp_foreach_non_finite_check_and_unscale_([torch.ones(3, device="pto")], found_inf,
                                                     torch.ones(1, device="pto"))
    assert found_inf.item() == 1.0


def test_update_scale_kernel_matches_cpu_over_a_sequence():
    found_infs = [0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0]
    states = {}
    for device in ("cpu", "pto"):
        scale = torch.full((1,), 2.0**15, device=device)
        growth_tracker = torch.zeros(1, dtype=torch.int32, device=device)
        history = []
        for found in found_infs:
            with pypto_torch.fallback_mode("error"):
                torch._amp_update_scale_(scale, growth_tracker, torch.full((1,), float(found), device=device),
                                         2.0, 0.5, 3)
            history.append((scale.item(), growth_tracker.item()))
        states[device] = history
    assert states["pto"] == states["cpu"]


def test_update_scale_keeps_the_scale_when_growing_would_overflow():
    scale = torch.full((1,), 3.0e38, device="pto")
    growth_tracker = torch.zeros(1, dtype=torch.int32, device="pto")
    torch._amp_update_scale_(scale, growth_tracker, torch.zeros(1, device="pto"), 2.0, 0.5, 1)
    assert scale.item() == pytest.approx(3.0e38) and growth_tracker.item() == 0


def test_grad_scaler_kernels_never_wait_for_the_device():
    grads = [torch.randn(16, 8, device="pto") for _ in range(4)]
    grads[2][3, 1] = math.inf
    found_inf, inv_scale = torch.zeros(1, device="pto"), torch.full((1,), 0.5, device="pto")
    scale, growth_tracker = torch.full((1,), 2.0, device="pto"), torch.zeros(1, dtype=torch.int32, device="pto")
    with torch.profiler.profile() as profile:
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
        torch._amp_update_scale_(scale, growth_tracker, found_inf, 2.0, 0.5, 10)
    names = {event.name for event in profile.events()}
    assert "ptoProgramLaunch" in names
    assert "memcpy device-to-host" not in names  # what .item() or a CPU fallback would show
    assert (found_inf.item(), scale.item(), growth_tracker.item()) == (1.0, 1.0, 0)


def test_grad_scaler_kernels_reject_bad_bookkeeping_tensors():
    grads = [torch.randn(3, device="pto")]
    with pytest.raises(RuntimeError, match=r"_amp_foreach_non_finite_check_and_unscale_: inv_scale must be a "
                                           r"1-element tensor, got shape \[2\]"):
        torch._amp_foreach_non_finite_check_and_unscale_(grads, torch.zeros(1, device="pto"),
                                                         torch.ones(2, device="pto"))
    with pytest.raises(RuntimeError, match="found_inf must be a pto tensor"):
        torch._amp_foreach_non_finite_check_and_unscale_(grads, torch.zeros(1), torch.ones(1, device="pto"))
    with pytest.raises(RuntimeError, match="gradients must be floating point, got Int"):
        torch._amp_foreach_non_finite_check_and_unscale_([torch.ones(3, dtype=torch.int32, device="pto")],
                                                         torch.zeros(1, device="pto"), torch.ones(1, device="pto"))
    with pytest.raises(RuntimeError, match="_amp_update_scale_: growth_tracker must be a Int tensor, got Float"):
        torch._amp_update_scale_(torch.ones(1, device="pto"), torch.zeros(1, device="pto"),
                                 torch.zeros(1, device="pto"), 2.0, 0.5, 10)
    assert_close((grads[0] * 2).cpu(), grads[0].cpu() * 2)  # the device is still usable


# --- training -----------------------------------------------------------------------


class Autocast:
    """Casts nothing: torch.autocast("pto") applies CUDA's policy itself."""

    def low(self, *tensors):
        return tensors

    def fp32(self, *tensors):
        return tensors


class CudaPolicyByHand:
    """CUDA's autocast policy done explicitly, for the CPU reference runs: inputs of ops
    on the lower-precision list cast to `dtype`, those of the fp32 lists to float32."""

    def __init__(self, dtype):
        self.dtype = dtype

    def low(self, *tensors):
        return [t.to(self.dtype) for t in tensors]

    def fp32(self, *tensors):
        return [t.float() for t in tensors]


def mlp_loss(params, x, target, cast):
    w1, b1, w2, b2 = params
    h = F.gelu(F.linear(*cast.low(x, w1, b1)))
    return F.mse_loss(*cast.fp32(F.linear(*cast.low(h, w2, b2)), target))


def transformer_block_loss(params, x, target, cast, heads=2):
    """Pre-norm attention + MLP block, written with the ops autocast sees."""
    ln1_w, ln1_b, w_qkv, b_qkv, w_out, b_out, ln2_w, ln2_b, w_up, b_up, w_down, b_down = params
    batch, seq, width = x.shape
    h = F.layer_norm(*cast.fp32(x), (width,), *cast.fp32(ln1_w, ln1_b))
    q, k, v = F.linear(*cast.low(h, w_qkv, b_qkv)).split(width, dim=-1)
    q, k, v = (t.reshape(batch, seq, heads, width // heads).transpose(1, 2) for t in (q, k, v))
    scores = torch.matmul(*cast.low(q, k.transpose(-2, -1))) * (width // heads) ** -0.5
    attention = torch.softmax(*cast.fp32(scores), -1)
    mixed = torch.matmul(*cast.low(attention, v)).transpose(1, 2).reshape(batch, seq, width)
    x = x + F.linear(*cast.low(mixed, w_out, b_out))
    h = F.layer_norm(*cast.fp32(x), (width,), *cast.fp32(ln2_w, ln2_b))
    x = x + F.linear(*cast.low(F.gelu(F.linear(*cast.low(h, w_up, b_up))), w_down, b_down))
    return F.mse_loss(*cast.fp32(x, target))


def mlp_problem():
    torch.manual_seed(0)
    params = [torch.randn(64, 32) * 0.2, torch.zeros(64), torch.randn(8, 64) * 0.1, torch.zeros(8)]
    return mlp_loss, params, torch.randn(128, 32), torch.randn(128, 8)


def transformer_problem(width=32, seq=16, batch=4):
    torch.manual_seed(0)
    params = [torch.ones(width), torch.zeros(width),
              torch.randn(3 * width, width) * width**-0.5, torch.zeros(3 * width),
              torch.randn(width, width) * width**-0.5, torch.zeros(width),
              torch.ones(width), torch.zeros(width),
              torch.randn(4 * width, width) * width**-0.5, torch.zeros(4 * width),
              torch.randn(width, 4 * width) * (4 * width) ** -0.5, torch.zeros(width)]
    return transformer_block_loss, params, torch.randn(batch, seq, width), torch.randn(batch, seq, width)


def train(problem, device, cast, autocast_dtype=None, steps=50, lr=0.05):
    """`steps` steps of SGD with momentum; float32 master weights. Returns the losses and the weights."""
    loss_fn, params, x, target = problem()
    params = [p.to(device).requires_grad_() for p in params]
    optimizer = torch.optim.SGD(params, lr=lr, momentum=0.9)
    x, target = x.to(device), target.to(device)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        with torch.autocast(device, dtype=autocast_dtype or torch.bfloat16, enabled=autocast_dtype is not None):
            loss = loss_fn(params, x, target, cast)
        assert loss.dtype == torch.float32
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).cpu(), [p.detach().cpu() for p in params]


@pytest.mark.parametrize("problem", [mlp_problem, transformer_problem], ids=["mlp", "transformer_block"])
def test_bf16_training_tracks_float32_and_cpu(problem):
    with pypto_torch.fallback_mode("error"):
        pto_losses, pto_params = train(problem, "pto", Autocast(), torch.bfloat16)
        fp32_losses, fp32_params = train(problem, "pto", Autocast())
    cpu_losses, cpu_params = train(problem, "cpu", CudaPolicyByHand(torch.bfloat16))
    assert pto_losses[-1] < 0.9 * pto_losses[0]
    # Against float32: bf16 operands of every matmul are rounded by up to 2**-8
    # relative; the float32 master weights take each step's update, so over 50 steps
    # losses and weights stay within twice that (measured: 3e-4 and 1e-3).
    assert_close(pto_losses, fp32_losses, rtol=2 * BF16_EPS, atol=2 * BF16_EPS)
    for pto_param, fp32_param in zip(pto_params, fp32_params):
        assert_close(pto_param, fp32_param, rtol=2 * BF16_EPS, atol=2 * BF16_EPS)
    # Against the same bf16 run on CPU: the same casts, so only the order of the
    # float32 accumulation inside each matmul differs, and with it which way a bf16
    # result rounds, by 2**-8 of that one value; the steps scale it by the learning
    # rate into the weights, so the runs stay within one bf16 rounding (measured: 3e-4).
    assert_close(pto_losses, cpu_losses, rtol=BF16_EPS, atol=BF16_EPS)
    for pto_param, cpu_param in zip(pto_params, cpu_params):
        assert_close(pto_param, cpu_param, rtol=BF16_EPS, atol=BF16_EPS)


def scaled_fp16_training(device, cast, overflow_step, steps=8):
    """float16 autocast with GradScaler; an inf is written into one gradient at `overflow_step`.
    Returns (scale, growth tracker, whether the weights moved) per step and the final weights."""
    loss_fn, params, x, target = mlp_problem()
    params = [p.to(device).requires_grad_() for p in params]
    optimizer = torch.optim.SGD(params, lr=0.05)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**12, growth_interval=3)
    x, target = x.to(device), target.to(device)
    history = []
    for step in range(steps):
        optimizer.zero_grad()
        with torch.autocast(device, dtype=torch.float16, enabled=isinstance(cast, Autocast)):
            loss = loss_fn(params, x, target, cast)
        scaler.scale(loss).backward()
        if step == overflow_step:
            params[2].grad[1, 5] = math.inf
        before = params[0].detach().clone()
        scaler.step(optimizer)
        scaler.update()
        moved = not torch.equal(before.cpu(), params[0].cpu())
        history.append((scaler.get_scale(), scaler._growth_tracker.item(), moved))
    return history, [p.detach().cpu() for p in params]


def test_float16_grad_scaler_recovers_from_an_overflow_as_on_cpu():
    with pypto_torch.fallback_mode("error"):
        pto_history, pto_params = scaled_fp16_training("pto", Autocast(), overflow_step=2)
    cpu_history, cpu_params = scaled_fp16_training("cpu", CudaPolicyByHand(torch.float16), overflow_step=2)
    assert pto_history == cpu_history
    scales = [scale for scale, _, _ in pto_history]
    moved = [step_taken for _, _, step_taken in pto_history]
    assert moved == [True, True, False, True, True, True, True, True]  # the overflowing step is skipped
    assert scales[2] == 2.0**11  # halved at the overflow
    assert scales[5] == 2.0**12  # grown after growth_interval (3) clean steps
    for pto_param, cpu_param in zip(pto_params, cpu_params):
        assert_close(pto_param, cpu_param, rtol=2e-3, atol=2e-3)


def test_grad_scaler_scale_stays_on_the_device():
    scaler = torch.pto.amp.GradScaler()
    weight = torch.randn(3, device="pto", requires_grad=True)
    optimizer = torch.optim.SGD([weight], lr=0.1)
    scaler.scale((weight * 2).sum()).backward()
    scaler.step(optimizer)
    scaler.update()
    assert scaler._scale.device.type == "pto" and scaler._growth_tracker.device.type == "pto"


# --- torch.compile --------------------------------------------------------------------


def _autocast_block(x, w1, b1, w2):
    with torch.autocast("pto", dtype=torch.bfloat16):
        h = F.gelu(F.linear(x, w1, b1))
        y = h @ w2.T
        probabilities = torch.softmax(y, -1)
        with torch.autocast("pto", enabled=False):
            plain = y.float() @ y.float().T
    return h, y, probabilities, plain


def _autocast_block_bounds(inputs, eager, compiled):
    """The bounds of _autocast_block's four results, compiled against eager (a compiled
    graph may keep in float32 what eager rounds to bfloat16): z = x W1^T + b1 within its
    multilinear_bound at bfloat16 (the product rounded before the bias on either side);
    h = GELU(z) through_elementwise (1.13-Lipschitz), rounded to bfloat16 on each side;
    y = h W2^T: h's difference carried through |W2| plus its matmul_bound; softmax's
    probabilities (float32): dP <= P (|dy| + max |dy|) plus softmax_bound; plain =
    y y^T in float32: |dy| |y|^T + |y| |dy|^T plus its matmul_bound."""
    x, w1, b1, w2 = (t.cpu() for t in inputs)
    x16, w16, b16, w2_16 = (t.to(torch.bfloat16) for t in (x, w1, b1, w2))
    h1, h2 = eager[0].cpu(), compiled[0].cpu()
    y1, y2 = eager[1].cpu(), compiled[1].cpu()
    u16 = unit_roundoff(torch.bfloat16)
    z = F.linear(x16.double(), w16.double(), b16.double())
    z_bound = multilinear_bound(F.linear, (x16, w16, b16), {}, z.to(torch.bfloat16), z.to(torch.bfloat16),
                                partial=((x16, w16, None), {}))
    # the final rounding of z above taken at z's size, on both sides
    # GELU's own error on each side: torch's formula within 6.3u |z|, pto's fit within 4u |z|
    h_bound = through_elementwise(z_bound, z, F.gelu(z), 1.13, 6.5, "GELU").value \
        + u16 * (h1.double().abs() + h2.double().abs())
    y_bound = (1 + gamma(32)) * (h_bound @ w2_16.double().abs().t()) \
        + matmul_bound(h1, w2_16.t(), y1, y2).value
    y = y1.double()
    p = torch.softmax(y, -1)
    p_bound = p * (y_bound + y_bound.amax(-1, keepdim=True)) + softmax_bound(y1.float(), -1).value
    yf = y1.float()
    plain_bound = (1 + gamma(8)) * (y_bound @ y.abs().t() + y.abs() @ y_bound.t() + y_bound @ y_bound.t()) \
        + matmul_bound(yf, yf.t()).value
    return [Bound(b, what) for b, what in ((h_bound, "z's bound through GELU + rounding"),
                                           (y_bound, "h's carried through |W2| + matmul_bound"),
                                           (p_bound, "y's through softmax + softmax_bound"),
                                           (plain_bound, "y's through y y^T + matmul_bound"))]


def test_autocast_inside_a_compiled_graph_matches_eager():
    torch.manual_seed(0)
    inputs = [t.to("pto") for t in (torch.randn(4, 16), torch.randn(32, 16), torch.randn(32), torch.randn(8, 32))]
    eager = _autocast_block(*inputs)
    compiled = torch.compile(_autocast_block, backend="pypto")(*inputs)
    assert [t.dtype for t in eager] == [torch.bfloat16, torch.bfloat16, torch.float32, torch.float32]
    for compiled_value, eager_value in zip(compiled, eager):
        assert compiled_value.dtype == eager_value.dtype
    for bound, got, want, what in zip(_autocast_block_bounds(inputs, eager, compiled), compiled, eager,
                                      ("h", "y", "probabilities", "plain")):
        assert_within_bound(got.cpu(), want.cpu(), bound, what)
    explanation = pypto_torch.explain(_autocast_block, *inputs)
    assert explanation.fallback_nodes == []


def test_pto_amp_autocast_compiles_into_one_graph():
    x, w = torch.randn(4, 8, device="pto"), torch.randn(8, 8, device="pto")

    def block(x, w):
        with torch.pto.amp.autocast(dtype=torch.bfloat16):
            return torch.softmax(x @ w, -1), x @ w

    compiled = torch.compile(block, backend="pypto", fullgraph=True)(x, w)
    eager = block(x, w)
    # x @ w within matmul_bound at bfloat16; softmax (float32, of the bfloat16 products)
    # carries their difference, P (|dz| + max |dz|), plus its own softmax_bound.
    x16, w16 = x.cpu().to(torch.bfloat16), w.cpu().to(torch.bfloat16)
    z_bound = matmul_bound(x16, w16, compiled[1].cpu(), eager[1].cpu()).value
    p = torch.softmax(eager[1].cpu().double(), -1)
    bounds = (Bound(p * (z_bound + z_bound.amax(-1, keepdim=True)) + softmax_bound(eager[1].cpu().float(), -1).value,
                    "x @ w's through softmax + softmax_bound"), Bound(z_bound, "matmul_bound"))
    for compiled_value, eager_value, bound in zip(compiled, eager, bounds):
        assert compiled_value.dtype == eager_value.dtype
        assert_within_bound(compiled_value.cpu(), eager_value.cpu(), bound)


def test_compiled_graph_under_an_outer_autocast_trains_like_eager():
    torch.manual_seed(0)
    _, params, x, target = mlp_problem()
    params = [p.to("pto").requires_grad_() for p in params]
    x, target = x.to("pto"), target.to("pto")
    compiled = torch.compile(mlp_loss, backend="pypto")
    grads = []
    for fn in (compiled, mlp_loss):
        with torch.autocast("pto", dtype=torch.bfloat16):
            loss = fn(params, x, target, Autocast())
        grads.append(torch.autograd.grad(loss, params))
    # No per-element bound follows the loss's backward through bfloat16 GEMMs; error_bounds.
    # chain_tolerance of its accumulation lengths (the forward's 33 and 65, the loss's mean
    # over 1024, the backward's 8 and 64 and the batch's 128 twice), and 2 u_bf16 for each of
    # the six bfloat16 intermediates (the products, their biases, the GELU, the output's
    # gradient) one side may round where the other keeps float32, first order; not below
    # 2 * 2**-8.
    tolerance = chain_tolerance((33, 65, 1024, 8, 64, 128, 128), torch.bfloat16, roundings=6)
    tolerance = {key: max(2 * BF16_EPS, value) for key, value in tolerance.items()}
    for compiled_grad, eager_grad in zip(*grads):
        assert_close(compiled_grad.cpu(), eager_grad.cpu(), **tolerance)
