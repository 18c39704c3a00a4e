"""torch.compile's default backend, Inductor, on pto tensors: its kernels are PTO
programs (pypto_torch/compile/inductor), and the results match the CPU's eager ones.

Tolerances: each compared value is a float32 computation of a few dozen roundings
(a 16- or 32-term dot product, a row's mean and variance, a softmax); Inductor's
decompositions order them differently from the CPU's eager kernels, so the results
differ by a few ulps of the largest terms: assert_close's float32 default
(rtol 1.3e-6, atol 1e-5) holds on every host.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code
from torch.testing import assert_close

import pypto_torch
from error_bounds import chain_tolerance


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class Block(torch.nn.Module):
    """A transformer MLP block: layer norm, GELU, residual and a softmax."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x):
        return torch.softmax(self.down(F.gelu(self.up(self.norm(x)))) + x, -1)


def _twins(make):
    torch.manual_seed(22)
    cpu = make()
    pto = make().to("pto")
    pto.load_state_dict(cpu.state_dict())
    return cpu, pto


def _inputs(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_the_default_backend_runs_pto_programs_and_matches_the_cpu():
    cpu, pto = _twins(Block)
    x = _inputs(4, 5, 16)
    result, (code,) = run_and_get_code(torch.compile(pto), x.to("pto"))
    assert "InductorProgram(" in code and "pto_program_0(" in code
    assert result.device.type == "pto"
    assert_close(result.cpu(), cpu(x))


def test_a_training_step_matches_the_cpu():
    cpu, pto = _twins(Block)
    x, target = _inputs(4, 5, 16), torch.randint(0, 16, (4, 5), generator=torch.Generator().manual_seed(1))

    def step(model, x, target):
        loss = F.cross_entropy(model(x).reshape(-1, 16), target.reshape(-1))
        loss.backward()
        return loss

    expected = step(cpu, x, target)
    actual = torch.compile(step)(pto, x.to("pto"), target.to("pto"))
    assert_close(actual.cpu(), expected)
    for (name, p), q in zip(cpu.named_parameters(), pto.parameters()):
        assert_close(q.grad.cpu(), p.grad, msg=name)


class ConvNet(torch.nn.Module):
    """Two convolutions, a ReLU between them and a spatial sum."""

    def __init__(self):
        super().__init__()
        self.first = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.second = torch.nn.Conv2d(8, 4, 3, stride=2)

    def forward(self, x):
        return self.second(F.relu(self.first(x))).sum(dim=(2, 3))


def test_convolutions_are_extern_calls_and_a_training_step_matches_the_cpu():
    """Inductor calls aten.convolution and its backward as extern kernels, the Conv
    instructions on pto. Tolerance: the chain of accumulations a value went through,
    forward (27 + bias, 72 + bias, the 16-position sum) and backward (those and the
    weight gradients' batch x positions: 2 x 81, 2 x 16), from error_bounds."""
    cpu, pto = _twins(ConvNet)
    x = _inputs(2, 3, 9, 9)

    def step(model, x):
        loss = model(x).square().sum()
        loss.backward()
        return loss

    expected = step(cpu, x)
    before = pypto_torch.fallback_ops()
    actual = torch.compile(step)(pto, x.to("pto"))
    assert pypto_torch.fallback_ops() == before
    tolerance = chain_tolerance([28, 73, 16, 162, 32, 16])
    assert_close(actual.cpu(), expected, **tolerance)
    for (name, p), q in zip(cpu.named_parameters(), pto.parameters()):
        assert_close(q.grad.cpu(), p.grad, msg=name, **tolerance)


def test_row_ops_stay_whole_on_pto_and_are_decomposed_on_the_cpu():
    """Softmax, layer norm and GELU (and, in training, their gradients) are extern calls of
    pto's row kernels in pto's code; Inductor on the CPU still generates them."""
    cpu, pto = _twins(Block)
    x = _inputs(4, 5, 16)
    _, (code,) = run_and_get_code(torch.compile(pto), x.to("pto"))
    for op in ("aten._softmax", "aten.native_layer_norm", "aten.gelu"):
        assert f"torch.ops.{op}.default(" in code, op
    _, (cpu_code,) = run_and_get_code(torch.compile(cpu), x)
    assert "torch.ops.aten._softmax" not in cpu_code and "torch.ops.aten.native_layer_norm" not in cpu_code

    x.requires_grad_(True)
    _, codes = run_and_get_code(lambda t: torch.compile(pto)(t).sum().backward(), x.to("pto").detach().requires_grad_())
    backward = codes[-1]
    for op in ("aten._softmax_backward_data", "aten.native_layer_norm_backward", "aten.gelu_backward"):
        assert f"torch.ops.{op}.default(" in backward, op


def _written_out_softmax(x):
    exp = (x - x.amax(-1, keepdim=True)).exp()
    return exp / exp.sum(-1, keepdim=True)


def _written_out_tanh_gelu(x):
    """GPT-2's gelu_new as Hugging Face writes it."""
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))))


def _written_out_rms_norm(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


def test_written_out_softmax_tanh_gelu_and_rms_norm_become_row_ops():
    """A softmax, a tanh GELU and an RMS norm written op by op become one extern call each of
    pto's row kernels (the pypto backend's rewrites, compile/patterns.py), where Inductor's
    fused kernel would make a pass per reduction and compute the exponentials twice; the
    CPU's composites in the same graph stay Inductor's own code. The results are the CPU's
    within float32's default tolerance (the module's note)."""
    def model(x, weight, y):
        row = _written_out_tanh_gelu(_written_out_softmax(x) * 4.0)
        return _written_out_rms_norm(row, weight), _written_out_softmax(y)

    x, weight, y = _inputs(64, 48), _inputs(48, seed=2), _inputs(8, 48, seed=1)
    (on_pto, on_cpu), (code,) = run_and_get_code(torch.compile(model), x.to("pto"), weight.to("pto"), y)
    assert code.count("torch.ops.aten._softmax.default(") == 1
    assert code.count("torch.ops.aten.gelu.default(") == 1 and "approximate='tanh'" in code
    assert code.count("torch.ops.aten._fused_rms_norm.default(") == 1
    expected_pto, expected_cpu = model(x, weight, y)
    assert on_pto.device.type == "pto" and on_cpu.device.type == "cpu"
    assert_close(on_pto.cpu(), expected_pto)
    assert_close(on_cpu, expected_cpu)


def test_attention_with_a_fully_masked_row_gives_zeros_as_the_cpu_does():
    """scaled_dot_product_attention's math form guards rows that are all -inf
    (aten._safe_softmax); on pto that is one tsoftmax whose masked rows give 0."""
    q, k, v = (_inputs(2, 3, 6, 8, seed=s) for s in range(3))
    mask = torch.rand(6, 6, generator=torch.Generator().manual_seed(3)) > 0.5
    mask[2] = False  # a query that may attend to nothing
    attend = lambda q, k, v, mask: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # noqa: E731
    expected = attend(q, k, v, mask)
    actual, (code,) = run_and_get_code(torch.compile(attend), *(t.to("pto") for t in (q, k, v, mask)))
    assert "torch.ops.aten._safe_softmax.default(" in code
    assert expected[:, :, 2].eq(0).all()
    assert_close(actual.cpu(), expected)


@pytest.mark.parametrize("how", ["dynamic=True", "automatic", "reduce-overhead", "max-autotune"])
def test_varying_batch_sizes_and_modes(how):
    def mlp():
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))

    cpu, pto = _twins(mlp)
    options = {"dynamic=True": {"dynamic": True}, "automatic": {}}.get(how, {"mode": how})
    compiled = torch.compile(pto, **options)
    for batch in (2, 3, 5, 7):
        x = _inputs(batch, 8, seed=batch)
        assert_close(compiled(x.to("pto")).cpu(), cpu(x))


def test_a_graph_break_splits_the_graph_and_both_halves_run_on_pto():
    def f(x):
        y = torch.sigmoid(x) * 2
        if y.sum().item() > 0:  # a graph break: the host reads a value
            return y - 1
        return y + 1

    x = _inputs(6, 7)
    assert_close(torch.compile(f)(x.to("pto")).cpu(), f(x))


REDUCTIONS = {
    "sum": lambda x: x.sum(1),
    "amax": lambda x: x.amax(-1, keepdim=True),
    "argmax": lambda x: x.argmax(0),
    "var_mean": lambda x: torch.var_mean(x, 1, correction=0),
    "log_softmax": lambda x: F.log_softmax(x * 3, 0),
    "prod": lambda x: (x / 4 + 1).prod(1),
    "any": lambda x: (x > 2).any(1),
}


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions(name):
    x = _inputs(5, 9)
    f = REDUCTIONS[name]
    assert_close(pytree_cpu(torch.compile(f)(x.to("pto"))), f(x))


INDEXING = {
    # Indirect loads: the index comes from a tensor (tgather).
    "embedding": lambda w, i, x: F.embedding(i, w) * 2,
    "index": lambda w, i, x: w[i].sum(-1),
    # Masked loads: positions outside the input read `other` (a constant pad).
    "pad": lambda w, i, x: F.pad(x, (2, 1, 0, 3), value=-1.5) + 1,
    # Views that Inductor indexes with floor division and modulo.
    "transposed reshape": lambda w, i, x: (x.t().reshape(3, -1) * 2).exp(),
    "iota": lambda w, i, x: x + torch.arange(x.shape[-1], device=x.device),
}


@pytest.mark.parametrize("name", INDEXING)
def test_indexing(name):
    w, x = _inputs(10, 4), _inputs(6, 5, seed=1)
    i = torch.tensor([[1, 9, 0], [3, 3, 7]])
    f = INDEXING[name]
    assert_close(torch.compile(f)(w.to("pto"), i.to("pto"), x.to("pto")).cpu(), f(w, i, x))


def test_float16_computes_as_inductor_upcasts_it():
    x = _inputs(8, 12).half()

    def f(x):
        return (torch.softmax(x, -1) * x).sum(0)

    # Both sides upcast to float32 inside and round once to float16 at the end: one
    # float16 rounding apart at most (rtol 1e-3 covers 2^-11 relative).
    assert_close(torch.compile(f)(x.to("pto")).cpu(), f(x.float()).half(), rtol=1e-3, atol=1e-3)


def test_cpp_wrapper_is_refused_with_a_clear_error():
    with torch._inductor.config.patch(cpp_wrapper=True):
        with pytest.raises(Exception, match="Python wrapper only"):
            torch.compile(lambda x: x + 1)(torch.ones(3, device="pto"))


def test_compiled_models_run_in_strict_mode():
    """No generated host code touches device memory: the training step passes with
    device memory closed to the host (in its own process: strict mode is read once)."""
    script = textwrap.dedent("""
        import torch, torch.nn.functional as F, pypto_torch
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.LayerNorm(16), torch.nn.Linear(16, 16), torch.nn.GELU())
        twin = torch.nn.Sequential(torch.nn.LayerNorm(16), torch.nn.Linear(16, 16), torch.nn.GELU()).to("pto")
        twin.load_state_dict(model.state_dict())
        x = torch.randn(6, 16)
        def step(m, x):
            loss = m(x).square().mean()
            loss.backward()
            return loss
        torch.testing.assert_close(torch.compile(step)(twin, x.to("pto")).cpu(), step(model, x))
        for p, q in zip(model.parameters(), twin.parameters()):
            torch.testing.assert_close(q.grad.cpu(), p.grad)
        print("strict ok")
    """)
    env = dict(os.environ, PTO_SIM_STRICT="1")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "strict ok" in done.stdout, done.stderr[-3000:]


def pytree_cpu(value):
    return tuple(v.cpu() for v in value) if isinstance(value, tuple) else value.cpu()


def test_a_second_process_loads_the_programs_from_inductors_fx_graph_cache(tmp_path):
    """Inductor's FX graph cache keeps the wrapper, its Inductor programs included; its key has the
    pto backend's source hash (ComposedRowOps), so other sources would miss."""
    script = textwrap.dedent("""
        import torch, pypto_torch
        from torch._dynamo.utils import counters
        x = torch.arange(12.0).reshape(3, 4)
        y = torch.compile(lambda x: torch.softmax(x, -1) * 2)(x.to("pto"))
        torch.testing.assert_close(y.cpu(), torch.softmax(x, -1) * 2)
        print("hits", counters["inductor"]["fxgraph_cache_hit"], "misses", counters["inductor"]["fxgraph_cache_miss"])
    """)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path), TORCHINDUCTOR_FX_GRAPH_CACHE="1")
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
            for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    assert "hits 0 misses 1" in runs[0].stdout
    assert "hits 1 misses 0" in runs[1].stdout


HF_SCRIPT = textwrap.dedent("""
    import sys, torch, transformers, pypto_torch
    from torch.testing import assert_close
    name = sys.argv[1]
    configs = {
        "gpt2": (transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=64),
                 transformers.AutoModelForCausalLM),
        "llama": (transformers.LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                           hidden_size=32, intermediate_size=64, vocab_size=100),
                  transformers.AutoModelForCausalLM),
        "bert": (transformers.BertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
                                         intermediate_size=64, vocab_size=100), transformers.AutoModelForMaskedLM),
    }
    config, auto = configs[name]
    config.attn_implementation = "eager"
    torch.manual_seed(0)
    cpu = auto.from_config(config)
    pto = auto.from_config(config).to("pto")
    pto.load_state_dict(cpu.state_dict())
    ids = torch.randint(3, 100, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        cpu.eval(), pto.eval()
        assert_close(torch.compile(pto)(input_ids=ids.to("pto")).logits.cpu(), cpu(input_ids=ids).logits)
    cpu.train(), pto.train()
    for model in (cpu, pto):  # no dropout: both sides draw no random numbers
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
    expected = cpu(input_ids=ids, labels=ids).loss
    expected.backward()
    actual = torch.compile(pto)(input_ids=ids.to("pto"), labels=ids.to("pto")).loss
    actual.backward()
    assert_close(actual.cpu(), expected)
    for (parameter, p), q in zip(cpu.named_parameters(), pto.parameters()):
        if p.grad is not None:
            assert_close(q.grad.cpu(), p.grad, msg=parameter)
    print("model ok")
""")


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert"])
def test_hugging_face_models_in_eval_and_training(name):
    """Each in its own interpreter, so that a crash fails its case only."""
    done = subprocess.run([sys.executable, "-c", HF_SCRIPT, name], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and "model ok" in done.stdout, done.stderr[-3000:]


def test_inverse_trigonometric_hyperbolic_and_gamma_ops_run_as_pto_instructions():
    """Inductor's ops.asin ... ops.lgamma, copysign and hypot lower to their PTO
    instructions: one program, no aten calls, the CPU's values within the functions'
    few ulps."""
    from torch._dynamo.utils import counters
    counters.clear()
    x = torch.rand(5, 6, generator=torch.Generator().manual_seed(1)) * 0.9 + 0.05

    def f(x):
        inverse = torch.asin(x) + torch.acos(x) + torch.atan(x) + torch.atanh(x) + torch.log10(x)
        hyperbolic = torch.sinh(x) + torch.cosh(x) + torch.asinh(x) + torch.acosh(x + 1)
        return inverse * hyperbolic + torch.lgamma(x) + torch.copysign(x, -x) + torch.hypot(x, 2 * x)

    assert_close(torch.compile(f)(x.to("pto")).cpu(), f(x))
    assert counters["pto_inductor"]["eager_programs"] == 0


def test_what_pto_cannot_express_runs_as_counted_aten_calls():
    """digamma has no PTO instruction: its program runs its loop body as aten calls on the
    pto tensors (the eager form), counted with the reason; the values are the CPU's."""
    from torch._dynamo.utils import counters
    counters.clear()
    x = _inputs(5, 6).abs() + 0.5

    def f(x):
        return torch.digamma(x) * 2 + 1

    result = torch.compile(f)(x.to("pto"))  # eager pto's digamma is its CPU fallback
    assert_close(result.cpu(), f(x))
    assert counters["pto_inductor"]["eager_programs"] == 1
    assert counters["pto_inductor"]["eager: Inductor's ops.digamma"] == 1
