"""Graph capture: torch.pto.PTOGraph, torch.pto.graph, graph_pool_handle and
make_graphed_callables, as torch.cuda's. Replays are compared with eager CPU
runs; each capture runs in a fresh interpreter (a capture that went wrong could
leave a process unusable, which is what the refusal tests check it does not)."""

import os
import textwrap

import pytest

# The interpreters import error_bounds from here: forward results compare within
# error_bounds.sequential_bound / sum_bound.
TESTS = os.path.dirname(os.path.abspath(__file__))


def run_ok(python, code: str) -> str:
    code = f"import sys\nsys.path.insert(0, {TESTS!r})\n" + textwrap.dedent(code)
    result = python(code, PTO_FALLBACK="silent")
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_replay_reruns_the_captured_ops_on_new_inputs(python):
    run_ok(python, """
        import torch
        from error_bounds import assert_within_bound, sum_bound
        static_x = torch.zeros(4, 16, device="pto")
        g = torch.pto.PTOGraph()
        with torch.pto.graph(g):
            static_y = torch.relu(static_x * 2 + 1).sum(dim=1)
        for seed in range(3):
            x = torch.randn(4, 16, generator=torch.Generator().manual_seed(seed))
            static_x.copy_(x)
            g.replay()
            terms = torch.relu(x * 2 + 1)  # the same on both sides: one correctly rounded add
            assert_within_bound(static_y.cpu(), terms.sum(dim=1), sum_bound(terms, 1))
    """)


def test_capture_runs_nothing_until_replayed(python):
    run_ok(python, """
        import torch
        counter = torch.zeros(16, device="pto")
        g = torch.pto.PTOGraph()
        with torch.pto.graph(g):
            counter.add_(1)
        assert counter.sum().item() == 0
        for _ in range(5):
            g.replay()
        assert counter.cpu().tolist() == [5.0] * 16
        assert not torch.pto.is_current_stream_capturing()
    """)


# (the pto model's optimizer, the CPU reference's): Adam updates its step count on
# the device only when capturable, which CPU's Adam does not take.
OPTIMIZERS = {
    "sgd": ("SGD(model.parameters(), lr=0.1)", "SGD(reference.parameters(), lr=0.1)"),
    "sgd-momentum": ("SGD(model.parameters(), lr=0.1, momentum=0.9)",
                     "SGD(reference.parameters(), lr=0.1, momentum=0.9)"),
    "adam": ("Adam(model.parameters(), lr=0.01, capturable=True)", "Adam(reference.parameters(), lr=0.01)"),
}


# Training steps keep a tolerance, no per-element bound following a run. To first order (a
# parameter's difference fed back into later gradients left out): a step's gradients are
# GEMMs over the batch (5) and the widths (8, 16, 4), within 2 gamma_16 ~ 2e-6 of
# sum|g||a| (below 1 for this MSE on 5 x 4 outputs); SGD (momentum 0.9: up to 10 times
# a step's) or Adam (lr 0.01 per step, its update's size bounded by lr whatever the
# gradient) carry four of them into parameters of size 0.1 to 0.5 by about
# 0.1 x 4 x 2e-6 x 10 = 8e-6: within atol 1e-5 plus rtol 1e-4; the losses' likewise.
@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("optimize", [False, True])
def test_mlp_training_step_replays_as_eager_cpu(python, optimizer, optimize):
    on_pto, on_cpu = OPTIMIZERS[optimizer]
    run_ok(python, f"""
        import copy
        import torch
        torch.manual_seed(0)
        reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        model = copy.deepcopy(reference).to("pto")
        reference_opt = torch.optim.{on_cpu}
        opt = torch.optim.{on_pto}
        loss_fn = torch.nn.MSELoss()
        batches = [(torch.randn(5, 8), torch.randn(5, 4)) for _ in range(7)]
        static_x = torch.zeros(5, 8, device="pto")
        static_y = torch.zeros(5, 4, device="pto")

        def eager_step(x, y):
            reference_opt.zero_grad(set_to_none=True)
            loss = loss_fn(reference(x), y)
            loss.backward()
            reference_opt.step()
            return loss.detach()

        # Warm-up on a side stream (lazy state, momentum and moment buffers), as with CUDA graphs.
        side = torch.pto.Stream()
        side.wait_stream(torch.pto.current_stream())
        with torch.pto.stream(side):
            for x, y in batches[:3]:
                static_x.copy_(x)
                static_y.copy_(y)
                opt.zero_grad(set_to_none=True)
                loss_fn(model(static_x), static_y).backward()
                opt.step()
        torch.pto.current_stream().wait_stream(side)
        for x, y in batches[:3]:
            eager_step(x, y)

        g = torch.pto.PTOGraph(optimize={optimize})
        opt.zero_grad(set_to_none=True)
        with torch.pto.graph(g):
            static_loss = loss_fn(model(static_x), static_y)
            static_loss.backward()
            opt.step()
        for x, y in batches[3:]:
            static_x.copy_(x)
            static_y.copy_(y)
            g.replay()
            torch.testing.assert_close(static_loss.cpu(), eager_step(x, y), rtol=1e-4, atol=1e-5)
        for mine, theirs in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(mine.detach().cpu(), theirs.detach(), rtol=1e-4, atol=1e-5)
    """)


def test_make_graphed_callables_forward_and_backward_as_eager_cpu(python):
    run_ok(python, """
        import copy
        import torch
        from error_bounds import assert_within_bound, sequential_bound
        torch.manual_seed(0)
        reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
        module = copy.deepcopy(reference).to("pto")
        sample = torch.randn(4, 8, device="pto", requires_grad=True)
        graphed = torch.pto.make_graphed_callables(module, (sample,))
        for seed in range(3):
            x = torch.randn(4, 8, generator=torch.Generator().manual_seed(seed))
            mine = x.to("pto").requires_grad_()
            theirs = x.clone().requires_grad_()
            out = graphed(mine)
            expected = reference(theirs)
            assert_within_bound(out.cpu().detach(), expected.detach(), sequential_bound(reference, x))
            # Gradients: 2 out (the forward's bound, ~1e-6) through GEMMs of 3 to 16 terms,
            # 2 gamma_16 ~ 2e-6 of sum|g||a| (~1 here), and tanh's derivative (1 - t^2, a
            # few ulps): to first order ~1e-5 at most, within atol 1e-5 plus rtol 1e-4.
            out.square().sum().backward()
            expected.square().sum().backward()
            torch.testing.assert_close(mine.grad.cpu(), theirs.grad, rtol=1e-4, atol=1e-5)
            for p, q in zip(module.parameters(), reference.parameters()):
                torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5)
                p.grad = None
                q.grad = None
        module.eval()  # a module in another training mode runs eagerly
        host = sample.detach().cpu()
        assert_within_bound(module(sample).detach().cpu(), reference(host).detach(), sequential_bound(reference, host))
    """)


# Each refusal names what was attempted; the capture ends with nothing kept, and
# the device runs eager work and new captures as before.
REFUSALS = {
    "item": ("y.sum().item()", "Reading a pto tensor on the host"),
    "cpu": ("y.cpu()", "Reading a pto tensor on the host"),
    "print": ("print(y)", "Reading a pto tensor on the host"),
    "device synchronize": ("torch.pto.synchronize()", "ptoDeviceSynchronize is not permitted"),
    "stream synchronize": ("torch.pto.current_stream().synchronize()", "ptoStreamSynchronize is not permitted"),
    "event synchronize": ("e = torch.pto.Event(); e.record(); e.synchronize()",
                          "ptoEventSynchronize of an event recorded inside the capture"),
    "host to device copy": ("torch.tensor([1.0, 2.0], device='pto')", "Copying a CPU tensor to pto"),
    "cpu fallback": ("torch.special.zeta(y, y)", "aten::special_zeta.out, which has no native pto kernel"),
    "random draw": ("torch.nn.functional.dropout(y, 0.5)", "Drawing random numbers (tbernoulli) cannot be captured"),
    "allocation outside the pool": ("with torch.pto.stream(torch.pto.Stream()): torch.empty(64, device='pto')",
                                    "would come from outside the graph's memory pool"),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_uncapturable_work_is_refused_by_name_and_the_device_stays_usable(python, name):
    statement, message = REFUSALS[name]
    out = run_ok(python, f"""
        import torch
        x = torch.randn(16, device="pto")
        g = torch.pto.PTOGraph()
        try:
            with torch.pto.graph(g):
                y = x * 2
                {statement}
        except RuntimeError as error:
            print("REFUSED:", str(error).replace("\\n", " "))
        assert not torch.pto.is_current_stream_capturing()
        assert torch.pto.current_stream() == torch.pto.default_stream()
        torch.pto.synchronize()
        torch.testing.assert_close((x + 1).cpu(), x.cpu() + 1)
        with torch.pto.graph(g):
            z = x * 3
        g.replay()
        torch.testing.assert_close(z.cpu(), x.cpu() * 3)
    """)
    assert "REFUSED:" in out and message in out, out
    if name not in ("allocation outside the pool", "random draw"):
        assert "invalidated" in out, out


def test_bad_capture_calls_are_clear_errors(python):
    out = run_ok(python, """
        import torch
        g = torch.pto.PTOGraph()
        for attempt in (g.replay, g.capture_end, g.pool,
                        lambda: g.capture_begin(capture_error_mode="sometimes"),
                        g.capture_begin):  # the default stream cannot capture
            try:
                attempt()
            except (RuntimeError, ValueError) as error:
                print("ERROR:", str(error).splitlines()[0])
    """)
    assert "nothing was captured" in out
    assert "no capture is running" in out
    assert "the graph has no pool" in out
    assert "capture_error_mode must be 'global', 'thread_local' or 'relaxed'" in out
    assert "default stream, which cannot capture" in out


def test_relaxed_mode_lets_other_streams_synchronize_and_allocate(python):
    run_ok(python, """
        import torch
        x = torch.randn(16, device="pto")
        other = torch.pto.Stream()
        g = torch.pto.PTOGraph()
        with torch.pto.graph(g, capture_error_mode="relaxed"):
            y = x + 1
            with torch.pto.stream(other):
                z = torch.ones(16, device="pto")
                other.synchronize()
        g.replay()
        torch.testing.assert_close(y.cpu(), x.cpu() + 1)
    """)


def test_pool_memory_returns_when_the_graph_goes(python):
    run_ok(python, """
        import gc
        import torch
        x = torch.randn(256, 256, device="pto")
        torch.pto.synchronize()
        allocated, reserved = torch.pto.memory_allocated(), torch.pto.memory_reserved()

        def capture():
            g = torch.pto.PTOGraph()
            with torch.pto.graph(g):
                y = (x @ x).relu() + 1  # temporaries freed inside the capture stay in the pool
            g.replay()
            return g, y

        g, y = capture()
        assert torch.pto.memory_reserved() > reserved
        del y
        g.reset()
        assert (torch.pto.memory_allocated(), torch.pto.memory_reserved()) == (allocated, reserved)

        g, y = capture()  # garbage collection releases it too, output freed after the graph
        del g
        gc.collect()
        assert torch.pto.memory_reserved() > reserved  # y still lives in the pool
        del y
        assert (torch.pto.memory_allocated(), torch.pto.memory_reserved()) == (allocated, reserved)
    """)


def test_graphs_share_a_pool(python):
    run_ok(python, """
        import torch
        x = torch.randn(64, device="pto")
        reserved = torch.pto.memory_reserved()
        pool = torch.pto.graph_pool_handle()
        first, second = torch.pto.PTOGraph(), torch.pto.PTOGraph()
        with torch.pto.graph(first, pool=pool):
            a = x * 2
        with torch.pto.graph(second, pool=first.pool()):
            b = a + 1
        assert first.pool() == second.pool() == pool
        grown = torch.pto.memory_reserved()
        assert grown == reserved + 2 * 1024 * 1024  # one small segment for both
        x.fill_(1.0)
        first.replay()
        second.replay()
        assert b.cpu().tolist() == [3.0] * 64
        del a, b
        first.reset()
        assert torch.pto.memory_reserved() == grown  # the second graph still uses the pool
        second.reset()
        assert torch.pto.memory_reserved() == reserved
    """)


def test_program_is_the_captured_work_in_pto_as_and_optimize_replays_it(python):
    out = run_ok(python, """
        import torch
        import pypto_torch
        x = torch.randn(4, 16, device="pto")
        for optimize in (False, True):
            g = torch.pto.PTOGraph(optimize=optimize)
            with torch.pto.graph(g):
                y = torch.relu(x * 2 + 1).exp()
                y.add_(1)
                z = torch.zeros(8, device="pto")
                z.copy_(y[0, :8])
            text = g.program()
            for mnemonic in ("tmul", "tadd", "trelu", "texp", "tmov"):
                assert mnemonic in text, text
            for seed in range(2):
                fresh = torch.randn(4, 16, generator=torch.Generator().manual_seed(seed))
                x.copy_(fresh)
                g.replay()
                expected = torch.relu(fresh * 2 + 1).exp() + 1
                torch.testing.assert_close(y.cpu(), expected)
                torch.testing.assert_close(z.cpu(), expected[0, :8])
        pinned = torch.ones(16).pin_memory()
        g = torch.pto.PTOGraph()
        with torch.pto.graph(g):
            x.view(-1)[:16].copy_(pinned, non_blocking=True)
        try:
            g.program()
        except RuntimeError as error:
            print("NO PROGRAM:", str(error).splitlines()[0])
    """)
    assert "copies between host and device memory, which no program expresses" in out, out


def test_make_graphed_callables_of_several_modules_share_a_pool(python):
    run_ok(python, """
        import copy
        import torch
        from error_bounds import assert_within_bound, sequential_bound
        torch.manual_seed(0)
        reference = (torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
        first, second = (copy.deepcopy(m).to("pto") for m in reference)
        samples = ((torch.randn(3, 8, device="pto", requires_grad=True),),
                   (torch.randn(3, 8, device="pto", requires_grad=True),))
        first, second = torch.pto.make_graphed_callables((first, second), samples)
        x = torch.randn(3, 8)
        out = second(first(x.to("pto").requires_grad_()).relu())
        expected = reference[1](reference[0](x).relu())
        stack = torch.nn.Sequential(reference[0], torch.nn.ReLU(), reference[1])
        assert_within_bound(out.cpu().detach(), expected.detach(), sequential_bound(stack, x))
        # The weights' gradients: column sums over the batch (3) of ones and of relu(h),
        # h within the first layer's bound: within atol 1e-5 plus rtol 1e-4.
        out.sum().backward()
        expected.sum().backward()
        for graphed, eager in ((first, reference[0]), (second, reference[1])):
            torch.testing.assert_close(graphed.weight.grad.cpu(), eager.weight.grad, rtol=1e-4, atol=1e-5)
    """)
