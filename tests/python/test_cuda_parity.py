"""docs/TORCH_CUDA_PARITY.md says, for each public torch.cuda name, whether torch.pto has it
and why not; it must match torch.pto as it is (scripts/cuda_parity.py writes it)."""
import importlib.util
import pathlib

import torch

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "cuda_parity.py"


def load_script():
    spec = importlib.util.spec_from_file_location("cuda_parity", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_table_matches_torch_pto():
    parity = load_script()
    # render() also fails when a missing name has no reason or a present one still has one.
    assert parity.TABLE.read_text() == parity.render(), "docs/TORCH_CUDA_PARITY.md is stale: run python scripts/cuda_parity.py"


def test_the_table_covers_torch_cuda():
    parity = load_script()
    covered = {name for _, name in parity.cuda_names()}
    assert set(torch.cuda.__all__) <= covered
    assert set(torch.cuda.memory.__all__) <= covered
    assert {"get_device_properties", "caching_allocator_alloc", "utilization", "_snapshot"} <= covered
