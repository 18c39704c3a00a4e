"""The compile cache on disk (pypto_torch/compile/disk_cache.py): a second process
compiling the same model loads what the first stored and computes the same results;
a different shape, dtype, model or option compiles anew; a damaged entry is
rebuilt with a warning; training and dynamic shapes compile as before.

Each case runs fresh interpreters (the `python` fixture) over a cache folder of its
own under tmp_path, so nothing is written to the user's home. The cases that start from
the default model's stored entry start from a copy of one folder (`stored_mlp`): each
fresh interpreter costs seconds."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from conftest import run_python

# Compiles `MODEL` (an expression over compile_models' names) on pto, runs it on the
# seeded input `INPUT`, and prints the pypto counters and the outputs (as lists) as JSON.
SCRIPT = """
    import json, sys, warnings
    sys.path.insert(0, {tests!r})
    import torch
    import torch._dynamo.utils
    import pypto_torch
    pypto_torch.set_fallback_mode("silent")
    from compile_models import MLP, TransformerBlock, on_device, seeded
    warnings.simplefilter("always")
    torch.manual_seed(0)
    model = on_device({model}, "pto")
    x = ({input}).to("pto")
    compiled = torch.compile(model, backend="pypto", **{compile_kwargs})
    with warnings.catch_warnings(record=True) as caught:
        {run}
    print(json.dumps({{"counters": dict(torch._dynamo.utils.counters["pypto"]),
                      "warnings": [str(w.message) for w in caught if "compile cache" in str(w.message)],
                      "outputs": [t.detach().cpu().double().flatten().tolist() for t in outputs]}}))
"""

INFERENCE = """with torch.no_grad():
            outputs = [compiled(x), compiled(x)]"""
TRAINING = """out = compiled(x)
        out.sum().backward()
        outputs = [out] + [p.grad for p in model.parameters()]"""


def compile_in_fresh_process(python, tmp_path, model="seeded(MLP, sizes=(16, 32, 8)).eval()",
                             input_="torch.randn(4, 16)", run=INFERENCE, compile_kwargs=None, **env) -> dict:
    tests = str(Path(__file__).parent)
    code = SCRIPT.format(tests=tests, model=model, input=input_, run=run, compile_kwargs=compile_kwargs or {})
    result = python(code, PTO_CACHE_DIR=str(tmp_path / "cache"), **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def stored_mlp(tmp_path_factory):
    """The first process's result compiling the default MLP, and the folder it stored
    its entry in."""
    folder = tmp_path_factory.mktemp("stored_mlp")
    first = compile_in_fresh_process(run_python, folder)
    assert first["counters"] == {"cache_miss": 1, "cache_saved": 1}
    assert len(entries(folder)) == 1
    return first, folder


@pytest.fixture
def after_first(stored_mlp, tmp_path) -> dict:
    """tmp_path's cache as the first process left it; that process's result."""
    first, folder = stored_mlp
    shutil.copytree(folder / "cache", tmp_path / "cache")
    return first


def entries(tmp_path) -> list:
    return sorted(p for p in (tmp_path / "cache" / "compiled").glob("??/*") if not p.name.startswith("."))


def seeded_cpu(model: str):
    """The model of the expression `model` (over compile_models' names) as the script builds
    it, on the CPU; torch's generator left where the script's is when it draws the input."""
    from compile_models import MLP, TransformerBlock, seeded  # noqa: F401: named by `model`
    torch.manual_seed(0)
    return eval(model)


def cpu_reference(model, x) -> torch.Tensor:
    with torch.no_grad():
        return model(x)


def test_second_process_loads_the_entry_and_computes_the_same(python, tmp_path, after_first):
    second = compile_in_fresh_process(python, tmp_path)
    assert second["counters"] == {"cache_hit": 1}
    assert second["outputs"] == after_first["outputs"]   # bit for bit, both calls
    expected = cpu_reference(seeded_cpu("seeded(MLP, sizes=(16, 32, 8)).eval()"), torch.randn(4, 16))
    torch.testing.assert_close(torch.tensor(second["outputs"][0], dtype=torch.float64), expected.double().flatten(),
                               rtol=1e-4, atol=1e-4)


def test_second_process_loads_a_transformer_block(python, tmp_path):
    model, input_ = "seeded(TransformerBlock, dim=32, heads=4, hidden=64).eval()", "torch.randn(2, 8, 32)"
    first = compile_in_fresh_process(python, tmp_path, model, input_)
    assert first["counters"] == {"cache_miss": 1, "cache_saved": 1}
    assert len(entries(tmp_path)) == 1
    second = compile_in_fresh_process(python, tmp_path, model, input_)
    assert second["counters"] == {"cache_hit": 1}
    assert second["outputs"] == first["outputs"]   # bit for bit, both calls

    expected = cpu_reference(seeded_cpu(model), eval(input_)).double().flatten()
    torch.testing.assert_close(torch.tensor(second["outputs"][0], dtype=torch.float64), expected,
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("change", [
    {"input_": "torch.randn(5, 16)"},                                  # shape
    {"input_": "torch.randn(4, 16, dtype=torch.float64)",
     "model": "seeded(MLP, sizes=(16, 32, 8)).double().eval()"},      # dtype
    {"model": "seeded(MLP, sizes=(16, 24, 8)).eval()"},               # model
    {"compile_kwargs": {"mode": "max-autotune-no-cudagraphs"}},       # option
])
def test_a_change_of_shape_dtype_model_or_option_misses(python, tmp_path, after_first, change):
    changed = compile_in_fresh_process(python, tmp_path, **change)
    assert changed["counters"] == {"cache_miss": 1, "cache_saved": 1}
    assert len(entries(tmp_path)) == 2


@pytest.mark.parametrize("damage", [b"", b"not a pickle", None])
def test_a_damaged_entry_is_rebuilt_with_a_warning(python, tmp_path, after_first, damage):
    first = after_first
    [entry] = entries(tmp_path)
    data = entry.read_bytes()
    entry.write_bytes(data[:len(data) // 2] if damage is None else damage)   # None: truncated
    rebuilt = compile_in_fresh_process(python, tmp_path)
    assert rebuilt["counters"] == {"cache_corrupt": 1, "cache_miss": 1, "cache_saved": 1}
    assert any("dropping unreadable entry" in message for message in rebuilt["warnings"])
    assert rebuilt["outputs"] == first["outputs"]
    assert compile_in_fresh_process(python, tmp_path)["counters"] == {"cache_hit": 1}


def test_training_compiles_as_before_and_stores_nothing(python, tmp_path):
    """AOTAutograd wraps a forward and a backward in an autograd.Function: not stored."""
    first = compile_in_fresh_process(python, tmp_path, model="seeded(MLP, sizes=(16, 32, 8))", run=TRAINING)
    second = compile_in_fresh_process(python, tmp_path, model="seeded(MLP, sizes=(16, 32, 8))", run=TRAINING)
    assert entries(tmp_path) == []
    assert "cache_hit" not in second["counters"]
    assert second["outputs"] == first["outputs"]

    from compile_models import MLP, seeded
    torch.manual_seed(0)
    model = seeded(MLP, sizes=(16, 32, 8))
    x = torch.randn(4, 16)
    out = model(x)
    out.sum().backward()
    for got, expected in zip(second["outputs"], [out] + [p.grad for p in model.parameters()]):
        torch.testing.assert_close(torch.tensor(got, dtype=torch.float64), expected.detach().double().flatten(),
                                   rtol=1e-4, atol=1e-4)


def test_dynamic_shapes_compile_as_before_and_store_nothing(python, tmp_path):
    first = compile_in_fresh_process(python, tmp_path, compile_kwargs={"dynamic": True})
    second = compile_in_fresh_process(python, tmp_path, compile_kwargs={"dynamic": True})
    assert entries(tmp_path) == []
    assert second["outputs"] == first["outputs"]


def test_switched_off_by_the_environment(python, tmp_path):
    result = compile_in_fresh_process(python, tmp_path, PTO_COMPILE_CACHE="0")
    assert result["counters"] == {}
    assert entries(tmp_path) == []


def test_clear_cache_empties_the_folder(python, tmp_path, after_first):
    assert entries(tmp_path)
    result = python("import pypto_torch.compile; pypto_torch.compile.clear_cache()",
                    PTO_CACHE_DIR=str(tmp_path / "cache"))
    assert result.returncode == 0, result.stderr
    assert entries(tmp_path) == []


def test_the_folder_follows_pto_cache_dir_then_xdg(monkeypatch, tmp_path):
    from pypto_torch.compile import disk_cache

    monkeypatch.setenv("PTO_CACHE_DIR", str(tmp_path / "pto"))
    assert disk_cache.cache_dir() == tmp_path / "pto" / "compiled"
    monkeypatch.delenv("PTO_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert disk_cache.cache_dir() == tmp_path / "xdg" / "pypto_torch" / "compiled"


def test_switched_off_by_the_config_flag(python, tmp_path):
    script = """
        import torch
        import pypto_torch.compile
        from pypto_torch.compile import disk_cache
        disk_cache.config.enabled = False
        with torch.no_grad():
            torch.compile(torch.nn.Linear(4, 2).to("pto"), backend="pypto")(torch.randn(3, 4, device="pto"))
    """
    result = python(script, PTO_CACHE_DIR=str(tmp_path / "cache"))
    assert result.returncode == 0, result.stderr
    assert entries(tmp_path) == []


def test_processes_storing_the_same_entry_at_once(python, tmp_path):
    """Each writes a temporary file and renames it into place: both succeed, one entry
    stays, whole, and a third process loads it."""
    tests = str(Path(__file__).parent)
    code = textwrap.dedent(SCRIPT.format(tests=tests, model="seeded(MLP, sizes=(16, 32, 8)).eval()",
                                         input="torch.randn(4, 16)", run=INFERENCE, compile_kwargs={}))
    env = {**os.environ, "PTO_CACHE_DIR": str(tmp_path / "cache")}
    processes = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [process.communicate(timeout=300) + (process.returncode,) for process in processes]
    assert all(returncode == 0 for _, _, returncode in results), [stderr for _, stderr, _ in results]
    outputs = [json.loads(stdout.strip().splitlines()[-1])["outputs"] for stdout, _, _ in results]
    assert outputs[0] == outputs[1]
    assert len(entries(tmp_path)) == 1
    assert not [p for p in (tmp_path / "cache" / "compiled").glob("??/.*")]   # no temporary file left
    assert compile_in_fresh_process(python, tmp_path)["counters"] == {"cache_hit": 1}


def test_a_cold_compile_runs_its_stored_plan_after_the_first_call(monkeypatch, tmp_path):
    """The first call goes through AOTAutograd's function and stores the plan; the later
    calls run that plan as a second process would, without the wrapper, and compute the
    same as the first call and the CPU, as does an input at another storage offset
    (which Dynamo's guards let through)."""
    import torch._dynamo
    from pypto_torch import _C
    from pypto_torch.compile import disk_cache
    from pypto_torch.compile.backend import pypto_backend

    monkeypatch.setenv("PTO_CACHE_DIR", str(tmp_path / "cache"))
    returned = []

    def keeping(gm, example_inputs):
        returned.append(pypto_backend(gm, example_inputs))
        return returned[-1]

    def tiny(x):
        return torch.relu(x * 2 + 1).sum(-1)

    torch._dynamo.reset()
    torch.manual_seed(0)
    x = torch.randn(4, 16)
    compiled = torch.compile(tiny, backend=keeping)
    with torch.no_grad():
        first = compiled(x.to("pto")).cpu()
        [callable_] = returned
        # After the call that stored the plan, Dynamo's callable runs it natively and
        # keeps the stored graph for other signatures.
        assert isinstance(callable_, _C._CompiledCall)
        assert isinstance(callable_.target, disk_cache.StoredGraph)
        assert callable_.target.runner is not None
        later = [compiled(x.to("pto")).cpu() for _ in range(2)]
        y = torch.randn(4, 16)
        at_offset = compiled(torch.cat([torch.zeros(1), y.flatten()]).to("pto")[1:].view(4, 16)).cpu()
    torch._dynamo.reset()
    assert len(returned) == 1   # no recompile
    torch.testing.assert_close(at_offset, tiny(y))
    assert len(entries(tmp_path)) == 1
    for out in later:
        assert torch.equal(out, first)
    torch.testing.assert_close(first, tiny(x))
