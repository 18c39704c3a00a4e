"""torch.compile(..., backend="pypto", mode="reduce-overhead"): compiled forwards and
backwards replay captured PTOGraphs, as CUDA graphs do under that mode. Results are
compared with eager CPU runs; replays are counted by wrapping PTOGraph.replay. Each
case runs in a fresh interpreter, since capture state is process-wide."""

import os

import pytest

# Counts PTOGraph replays; the backend makes its graphs as torch.pto.PTOGraph. Forward
# results compare within error_bounds.sequential_bound (the two GEMM layers' bounds,
# 2 gamma_9 and 2 gamma_17 of sum|w||a|, the first's carried through the second's |W|).
COUNT_REPLAYS = """
    import copy
    import sys
    import warnings
    sys.path.insert(0, %r)
    import torch
    from error_bounds import Bound, assert_within_bound, sequential_bound
    replays = 0
    _replay = torch.pto.PTOGraph.replay

    def counting_replay(graph):
        global replays
        replays += 1
        return _replay(graph)

    torch.pto.PTOGraph.replay = counting_replay
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    model = copy.deepcopy(reference).to("pto")
    warnings.simplefilter("always")
""" % os.path.dirname(os.path.abspath(__file__))


def run_ok(python, code: str) -> str:
    result = python(COUNT_REPLAYS + code, PTO_FALLBACK="silent")
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune-no-cudagraphs", "default"])
def test_mlp_inference_replays_as_eager_cpu(python, mode):
    replaying = mode == "reduce-overhead"
    out = run_ok(python, f"""
    compiled = torch.compile(model, backend="pypto", mode="{mode}", dynamic=False)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        for step in range(8):
            batch = 5 if step % 2 else 3           # two signatures, a graph each
            x = torch.randn(batch, 8)
            x_pto = x.to("pto")
            before = replays
            y = compiled(x_pto)
            assert_within_bound(y.cpu(), reference(x), sequential_bound(reference, x))
            assert torch.equal(x_pto.cpu(), x), "the caller's input was written to"
            # Warm-up on a signature's first call, capture and replay on its second.
            assert replays - before == ({replaying} and step >= 2), (step, replays)
    print("warnings:", [str(w.message) for w in caught if "pypto" in str(w.message)])
    """)
    assert "warnings: []" in out, out
    # The backend has no autotuning: that mode is ignored, with AOTAutograd's warning, as before.
    assert ("ignoring extra kwargs" in out) == (mode == "max-autotune-no-cudagraphs"), out


def test_outputs_are_overwritten_by_the_next_replay_unless_cloned(python):
    run_ok(python, """
    compiled = torch.compile(model, backend="pypto", mode="reduce-overhead")
    xs = [torch.randn(5, 8) for _ in range(4)]
    with torch.no_grad():
        compiled(xs[0].to("pto"))
        first = compiled(xs[1].to("pto"))
        kept = first.clone()
        compiled(xs[2].to("pto"))
    assert replays == 2
    assert_within_bound(kept.cpu(), reference(xs[1]), sequential_bound(reference, xs[1]))
    assert_within_bound(first.cpu(), reference(xs[2]), sequential_bound(reference, xs[2]))
    """)


# (what the compiled function does, the eager CPU step of the reference)
TRAINING = {
    "step outside": ("""
    def forward(m, x, y):
        return torch.nn.functional.mse_loss(m(x), y)

    compiled = torch.compile(forward, backend="pypto", mode="reduce-overhead")

    def train(x, y):
        opt.zero_grad(set_to_none=True)
        loss = compiled(model, x, y)
        loss.backward()
        opt.step()
        return loss.detach()
    """, 2),   # forward and backward replay each step
    "step inside": ("""
    def train_step(m, o, x, y):
        o.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(m(x), y)
        loss.backward()
        o.step()
        return loss.detach()

    compiled = torch.compile(train_step, backend="pypto", mode="reduce-overhead")

    def train(x, y):
        return compiled(model, opt, x, y)
    """, 3),   # forward, backward and the optimizer step
}


# Training steps keep a tolerance, no per-element bound following a run. To first order
# (a parameter's difference fed back into later gradients left out): a step's gradients
# are GEMMs over the batch (5) and the widths (16, 4), within 2 gamma_16 sum|g||a|, ~2e-6 x
# sum|g||a| (below 1 for this MSE on 5 x 4 outputs); SGD with momentum 0.9 and lr 0.1 sums
# six of them into the parameters as lr x 6 x 2e-6 / (1 - 0.9) ~ 1.2e-5, within atol 1e-5
# plus rtol 1e-4 of parameters of size 0.1 to 0.5; the losses' within it likewise.
@pytest.mark.parametrize("case", list(TRAINING))
def test_training_loop_replays_as_eager_cpu(python, case):
    train, per_step = TRAINING[case]
    out = run_ok(python, f"""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    reference_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    {train}
    with warnings.catch_warnings(record=True) as caught:
        for step in range(6):
            x, y = torch.randn(5, 8), torch.randn(5, 4)
            reference_opt.zero_grad(set_to_none=True)
            want = torch.nn.functional.mse_loss(reference(x), y)
            want.backward()
            reference_opt.step()
            before = replays
            loss = train(x.to("pto"), y.to("pto"))
            torch.testing.assert_close(loss.cpu(), want.detach(), rtol=1e-4, atol=1e-5)
    # Each step after the warm-up replays its graphs.
    assert replays - before >= {per_step}, (replays, before)
    for got, want in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-4, atol=1e-5)
    assert not [w for w in caught if "pypto" in str(w.message)], [str(w.message) for w in caught]
    """)
    assert "ignoring extra kwargs" not in out, out


def test_two_forwards_before_one_backward_keep_their_saved_tensors(python):
    run_ok(python, """
    def loss_of(m, x):
        return m(x).square().mean()

    compiled = torch.compile(loss_of, backend="pypto", mode="reduce-overhead")
    for step in range(4):
        xs = [torch.randn(5, 8) for _ in range(2)]
        model.zero_grad(set_to_none=True)
        reference.zero_grad(set_to_none=True)
        # The second forward must not replay over the saved tensors the first one's backward reads.
        (compiled(model, xs[0].to("pto")) + compiled(model, xs[1].to("pto"))).backward()
        (loss_of(reference, xs[0]) + loss_of(reference, xs[1])).backward()
        for x in xs:   # and gradients accumulated over separate backward calls
            compiled(model, x.to("pto")).backward()
            loss_of(reference, x).backward()
        # Gradients of squares' means: GEMMs over the batch (5) and widths (16, 4) of the
        # forward's errors (sequential_bound, ~1e-6 here) and their own roundings,
        # 2 gamma_16 ~ 2e-6 of sum|g||a| < 1: within rtol 1e-4 plus atol 1e-5.
        for got, want in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(got.grad.cpu(), want.grad, rtol=1e-4, atol=1e-5)
    assert replays > 0
    """)


def test_uncapturable_op_falls_back_with_one_warning(python):
    out = run_ok(python, """
    def fn(x):   # erfinv has no native pto kernel: it runs on the CPU, which no capture records
        return torch.special.erfinv(torch.tanh(model(x)) * 0.5) + 1

    def on_cpu(x):
        return torch.special.erfinv(torch.tanh(reference(x)) * 0.5) + 1

    compiled = torch.compile(fn, backend="pypto", mode="reduce-overhead")
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        for step in range(5):
            x = torch.randn(5, 8)
            # The model's sequential_bound, through tanh (1-Lipschitz), x 0.5 and erfinv
            # (slope at most 1.11 on [-0.5, 0.5]), and each side's few ulps of erfinv and
            # tanh (8 u |y|, y in [0.5, 1.5]).
            bound = sequential_bound(reference, x).value * 0.5 * 1.11 + 16 * 2 ** -24 * on_cpu(x).double().abs()
            assert_within_bound(compiled(x.to("pto")).cpu(), on_cpu(x), Bound(bound, "through tanh, erfinv"))
    assert replays == 0
    messages = [str(w.message) for w in caught if "reduce-overhead" in str(w.message)]
    print("warnings:", messages)
    """)
    assert out.count("without graph replay") == 1, out
    assert "erfinv" in out, out
