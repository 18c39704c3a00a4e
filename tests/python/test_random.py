"""Random numbers on pto: native Philox draws (tuniform, tnormal, trandint,
tbernoulli, texponential; multinomial from them), seeded per device and reproducible
under torch.pto.manual_seed whatever the cores do. As on CUDA, the values differ from the CPU generator's, so the tests
check reproducibility, ranges and moments rather than equality with the CPU."""

import pytest
import torch
import torch.utils.checkpoint
from torch.testing import assert_close

import pypto_torch
from opinfo_sweep import assert_raises_as_cpu


def test_manual_seed_makes_draws_reproducible():
    torch.pto.manual_seed(123)
    first = torch.randn(100, device="pto")
    torch.pto.manual_seed(123)
    assert torch.equal(torch.randn(100, device="pto").cpu(), first.cpu())
    assert torch.pto.initial_seed() == 123


def test_draws_use_the_pto_generator_not_the_cpu_one():
    torch.pto.manual_seed(7)
    torch.default_generator.manual_seed(99)
    x = torch.rand(10, device="pto")
    torch.pto.manual_seed(7)
    torch.default_generator.manual_seed(1)  # the CPU generator alone changes nothing
    assert torch.equal(torch.rand(10, device="pto").cpu(), x.cpu())
    torch.pto.manual_seed(8)
    assert not torch.equal(torch.rand(10, device="pto").cpu(), x.cpu())


def test_successive_draws_differ_and_replay_in_order():
    torch.pto.manual_seed(3)
    first, second = torch.randn(1001, device="pto"), torch.randn(7, device="pto")
    torch.pto.manual_seed(3)
    assert torch.equal(torch.randn(1001, device="pto").cpu(), first.cpu())
    assert torch.equal(torch.randn(7, device="pto").cpu(), second.cpu())
    assert not torch.equal(second.cpu(), first[:7].cpu())


def test_the_same_seed_draws_the_same_on_every_device():
    torch.pto.manual_seed_all(11)
    on_zero = torch.randn(100, device="pto:0")
    on_one = torch.randn(100, device="pto:1")
    assert torch.equal(on_zero.cpu(), on_one.cpu())


def test_rng_state_is_seed_and_offset():
    torch.pto.manual_seed(5)
    state = torch.pto.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    assert int.from_bytes(bytes(state[:8].tolist()), "little") == 5
    torch.rand(10, device="pto")
    assert torch.pto.get_rng_state()[8:].tolist() != state[8:].tolist()  # the offset moved on
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.pto.set_rng_state(torch.zeros(5, dtype=torch.uint8))


def test_rng_state_round_trip():
    state = torch.pto.get_rng_state()
    a = torch.randn(8, device="pto")
    torch.pto.set_rng_state(state)
    assert torch.equal(torch.randn(8, device="pto").cpu(), a.cpu())
    states = torch.pto.get_rng_state_all()
    assert len(states) == torch.pto.device_count()
    torch.pto.set_rng_state_all(states)


def test_generator_objects_on_pto():
    generator = torch.Generator(device="pto").manual_seed(5)
    assert generator.device.type == "pto"
    a = torch.randn(4, device="pto", generator=generator)
    generator.manual_seed(5)
    assert torch.equal(torch.randn(4, device="pto", generator=generator).cpu(), a.cpu())


def test_devices_have_their_own_generators():
    torch.pto.manual_seed_all(1)
    with torch.pto.device(1):
        torch.pto.manual_seed(2)
    assert torch.pto.initial_seed() == 1
    with torch.pto.device(1):
        assert torch.pto.initial_seed() == 2


def test_dropout_and_fork_rng():
    with torch.random.fork_rng(devices=[0], device_type="pto"):
        torch.pto.manual_seed(0)
        mask = torch.nn.functional.dropout(torch.ones(1000, device="pto"), 0.5)
    kept = (mask.cpu() > 0).float().mean().item()
    assert kept == pytest.approx(0.5, abs=0.1)


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_recomputes_dropout_with_the_forwards_masks(use_reentrant):
    """torch.utils.checkpoint saves the pto generator's state for the recomputation where
    torch.pto._initialized says the device is in use (as torch.cuda's): the backward's
    dropout then draws the forward's masks, and the gradients are those of the plain
    run. Before torch.pto had that flag, the masks differed and so did the gradients."""
    torch.manual_seed(0)
    w = torch.randn(64, 64, device="pto", requires_grad=True)
    x = torch.randn(32, 64, device="pto", requires_grad=True)

    def layer(x):
        return torch.nn.functional.dropout(x @ w, 0.5, training=True)

    assert torch.pto._initialized and torch.pto.is_initialized()
    grads = []
    for checkpointed in (True, False):
        torch.pto.manual_seed(1)
        out = torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=use_reentrant) if checkpointed else layer(x)
        out.sum().backward()
        grads.append((w.grad.cpu(), x.grad.cpu()))
        w.grad = x.grad = None
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])


FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


@pytest.mark.parametrize("dtype", FLOATS)
def test_uniform_and_normal_have_their_range_and_moments(dtype):
    x = torch.empty(200_000, device="pto", dtype=dtype).uniform_(-1, 3).cpu().double()
    assert x.min() >= -1 and x.max() <= 3
    assert x.mean().item() == pytest.approx(1.0, abs=0.02)
    assert x.var().item() == pytest.approx(16 / 12, abs=0.03)
    y = torch.empty(200_000, device="pto", dtype=dtype).normal_(2, 0.5).cpu().double()
    assert y.mean().item() == pytest.approx(2.0, abs=0.01)
    assert y.std().item() == pytest.approx(0.5, abs=0.01)


def test_rand_randn_randint_and_bernoulli_draw_on_the_device():
    before = pypto_torch.fallback_ops()
    u = torch.rand(4, 5, device="pto")
    n = torch.randn(3, 3, device="pto", dtype=torch.bfloat16)
    i = torch.randint(-3, 4, (10_000,), device="pto")
    b = torch.bernoulli(torch.full((10_000,), 0.25, device="pto"))
    coin = torch.empty(10_000, device="pto").bernoulli_(0.75)
    m = torch.normal(torch.zeros(100, device="pto"), torch.ones(100, device="pto"))
    assert pypto_torch.fallback_ops() == before
    assert u.device.type == n.device.type == "pto" and n.dtype == torch.bfloat16
    assert set(i.unique().cpu().tolist()) == set(range(-3, 4))
    assert b.mean().item() == pytest.approx(0.25, abs=0.02)
    assert coin.mean().item() == pytest.approx(0.75, abs=0.02)
    assert m.shape == (100,)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                                   torch.bool, torch.float16, torch.float32])
def test_random_fills_the_dtype_range(dtype):
    x = torch.empty(20_000, device="pto", dtype=dtype).random_().cpu()
    digits = {torch.float16: 11, torch.float32: 24}.get(dtype)  # PyTorch draws [0, 2^digits] for floats
    high = 2 ** digits + 1 if digits else (2 if dtype == torch.bool else torch.iinfo(dtype).max + 1)
    values = x.double()
    assert values.min() >= 0 and values.max() < high and values.max() >= (high - 1) * 0.9
    assert torch.equal(values, values.floor())
    y = torch.empty(20_000, device="pto", dtype=dtype).random_(0, 2).cpu()
    assert set(y.double().unique().tolist()) == {0.0, 1.0}


def test_strided_outputs_receive_draws():
    torch.pto.manual_seed(2)
    flat = torch.empty(20, device="pto").normal_()
    torch.pto.manual_seed(2)
    transposed = torch.empty(5, 4, device="pto").t().normal_()  # row-major positions as flat
    assert torch.equal(transposed.cpu().reshape(-1), flat.cpu())


def test_dropout_trains_natively_and_its_gradient_is_the_mask():
    x = torch.randn(64, 100, device="pto", requires_grad=True)
    before = pypto_torch.fallback_ops()
    y = torch.nn.functional.dropout(x, 0.3, training=True)
    y.sum().backward()
    assert pypto_torch.fallback_ops() == before
    kept = y.detach().cpu() != 0
    assert kept.float().mean().item() == pytest.approx(0.7, abs=0.03)
    assert_close(y.detach().cpu()[kept], x.detach().cpu()[kept] / 0.7)
    assert_close(x.grad.cpu(), kept.float() / 0.7)
    assert torch.equal(torch.nn.functional.dropout(x, 0.3, training=False).cpu(), x.detach().cpu())
    assert torch.equal(torch.nn.functional.dropout(x, 1.0).cpu(), torch.zeros(64, 100))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int64, torch.bool, torch.float16], ids=str)
def test_dropout_backward_promotes_as_the_cpu_does(dtype):
    """grad * mask * scale: integer and bool gradients give float results, not an error."""
    grad, mask = torch.arange(6).to(dtype), torch.tensor([True, False, True, True, False, True])
    want = torch.ops.aten.native_dropout_backward(grad, mask, 1.25)
    got = torch.ops.aten.native_dropout_backward(grad.to("pto"), mask.to("pto"), 1.25)
    assert got.dtype == want.dtype
    assert_close(got.cpu(), want)


def test_randperm_is_a_native_reproducible_permutation():
    before = pypto_torch.fallback_ops()
    torch.pto.manual_seed(4)
    first = torch.randperm(50, device="pto")
    torch.pto.manual_seed(4)
    assert torch.equal(torch.randperm(50, device="pto").cpu(), first.cpu())
    assert sorted(first.cpu().tolist()) == list(range(50)) and first.cpu().tolist() != list(range(50))
    assert torch.randperm(7, device="pto", dtype=torch.int32).dtype == torch.int32
    assert pypto_torch.fallback_ops() == before


def test_fallback_random_ops_are_reproducible_too():
    torch.pto.manual_seed(4)
    first = torch.empty(20, device="pto").log_normal_()
    torch.pto.manual_seed(4)
    assert torch.equal(torch.empty(20, device="pto").log_normal_().cpu(), first.cpu())


@pytest.mark.parametrize("dtype", FLOATS)
def test_exponential_has_its_moments_and_is_never_zero(dtype):
    """Mean 1/lambd and variance 1/lambd^2, every draw positive (a uniform of 0 counts as
    the draw's step, as CUDA avoids 0), reproducible, native, in place on strided views."""
    before = pypto_torch.fallback_ops()
    torch.pto.manual_seed(11)
    x = torch.empty(200_000, device="pto", dtype=dtype).exponential_(4.0)
    torch.pto.manual_seed(11)
    assert torch.equal(torch.empty(200_000, device="pto", dtype=dtype).exponential_(4.0).cpu(), x.cpu())
    values = x.cpu().double()
    assert values.min() > 0
    assert values.mean().item() == pytest.approx(0.25, abs=0.005)
    assert values.var().item() == pytest.approx(1 / 16, abs=0.004)
    strided = torch.zeros(100, 6, device="pto", dtype=dtype)[:, ::2].exponential_()
    assert (strided.cpu() > 0).all()
    assert pypto_torch.fallback_ops() == before


def test_argmax_and_argmin_out_run_natively():
    x = torch.randn(7, 9)
    before = pypto_torch.fallback_ops()
    for op in (torch.argmax, torch.argmin):
        for dim, keepdim in ((None, False), (1, True), (0, False)):
            out = torch.empty(0, dtype=torch.long, device="pto")
            op(x.to("pto"), dim, keepdim, out=out)
            assert torch.equal(out.cpu(), op(x, dim, keepdim))
    assert pypto_torch.fallback_ops() == before


@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_multinomial_draws_each_category_by_its_probability(replacement, dtype):
    """Rows of weights (not normalised; zeros never drawn): with replacement, 40k draws per
    row follow the weights within 5 standard errors; without, every row's draws are
    distinct, and the first draws of many rows follow the weights. Native, reproducible."""
    weights = torch.tensor([[1.0, 0.0, 3.0, 4.0, 2.0], [0.0, 5.0, 0.0, 5.0, 10.0]])
    probabilities = weights / weights.sum(-1, keepdim=True)
    before = pypto_torch.fallback_ops()
    torch.pto.manual_seed(21)
    if replacement:
        draws = torch.multinomial(weights.to("pto", dtype), 40_000, replacement=True)
        torch.pto.manual_seed(21)
        assert torch.equal(torch.multinomial(weights.to("pto", dtype), 40_000, replacement=True).cpu(), draws.cpu())
        counts = torch.stack([torch.bincount(row, minlength=5) for row in draws.cpu()]).double()
        trials = 40_000
    else:
        many = weights.repeat(10_000, 1).to("pto", dtype)
        draws = torch.multinomial(many, 2)
        firsts = draws.cpu()[:, 0].view(10_000, 2).t()
        assert (draws.cpu()[:, 0] != draws.cpu()[:, 1]).all()
        counts = torch.stack([torch.bincount(row, minlength=5) for row in firsts]).double()
        trials = 10_000
    error = (probabilities * (1 - probabilities) / trials).sqrt()
    assert ((counts / trials - probabilities).abs() <= 5 * error + 1e-12).all(), counts
    assert (counts[weights == 0] == 0).all()
    assert pypto_torch.fallback_ops() == before


@pytest.mark.parametrize("shape", [(6000,), (8, 6000)], ids=str)
def test_multinomial_of_long_rows_follows_the_weights(shape):
    """Rows long enough to be split over the cores (each row's cumulative sums divided by
    its total): 200k draws per row, counted in ten bins of categories, against the
    weights' share of each bin within 5 standard errors."""
    weights = torch.arange(1, shape[-1] + 1, dtype=torch.float32).expand(shape).contiguous()
    before = pypto_torch.fallback_ops()
    torch.pto.manual_seed(5)
    draws = torch.multinomial(weights.to("pto"), 200_000, replacement=True).cpu().view(-1, 200_000)
    assert pypto_torch.fallback_ops() == before
    bins = weights[..., :].view(-1, shape[-1])[0].view(10, -1).sum(-1).double()
    share = bins / bins.sum()
    error = (share * (1 - share) / 200_000).sqrt()
    for row in draws:
        counts = torch.bincount(row // (shape[-1] // 10), minlength=10).double() / 200_000
        assert ((counts - share).abs() <= 5 * error).all(), counts


BAD_DISTRIBUTIONS = {
    "a negative entry": torch.tensor([[1.0, 2.0], [1.0, -1.0]]),
    "a NaN entry": torch.tensor([1.0, float("nan"), 2.0]),
    "an infinite entry": torch.tensor([float("inf"), 1.0]),
    "an infinity before a negative": torch.tensor([[1.0, float("inf"), -1.0]]),
    "a row of zeros": torch.tensor([[1.0, 1.0], [0.0, 0.0]]),
    "a 3-d tensor": torch.ones(2, 2, 2),
    "an integer tensor": torch.ones(3, dtype=torch.long),
}


@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("probabilities", BAD_DISTRIBUTIONS.values(), ids=BAD_DISTRIBUTIONS.keys())
def test_multinomial_refuses_what_the_cpu_refuses(probabilities, replacement):
    """The CPU's exception and message, for bad weights and bad counts alike."""
    for samples in (1, 3, 0, 9):
        assert_raises_as_cpu(lambda d: torch.multinomial(probabilities.to(d), samples, replacement=replacement),
                             RuntimeError)
    assert torch.multinomial(torch.ones(4, device="pto"), 2).shape == (2,)


@pytest.mark.parametrize("call,message", [
    (lambda x: x.uniform_(2, 1), "uniform_ expects to return a \\[from, to\\) range"),
    (lambda x: x.normal_(0, -1), "normal expects std >= 0.0"),
    (lambda x: x.bernoulli_(1.5), "bernoulli_ expects p to be in \\[0, 1\\]"),
    (lambda x: x.random_(5, 5), "random_ expects 'from' to be less than 'to'"),
    (lambda x: torch.ops.aten.native_dropout(x, 1.5, True), "dropout probability has to be between 0 and 1"),
])
def test_bad_parameters_raise_pytorchs_message(call, message):
    x = torch.empty(8, device="pto")
    with pytest.raises(RuntimeError, match=message):
        call(x)
    assert torch.rand(3, device="pto").cpu().max() < 1  # still usable
