"""Writes docs/TORCH_CUDA_PARITY.md: each public name of torch.cuda (``torch.cuda.__all__``,
``torch.cuda.memory.__all__`` and the memory-history functions that torch.cuda._memory_viz
works with) against torch.pto: present, or why not.

    python scripts/cuda_parity.py          # rewrite the table
    python scripts/cuda_parity.py --check  # exit 1 when the table and torch.pto disagree

tests/python/test_cuda_parity.py runs the check.
"""
import argparse
import pathlib
import sys

import torch
import torch.cuda.memory

TABLE = pathlib.Path(__file__).resolve().parent.parent / "docs" / "TORCH_CUDA_PARITY.md"

# The private functions of the memory-snapshot workflow (torch.cuda.memory's documentation
# shows them to users): kept in the table beside the public names.
MEMORY_HISTORY = ["_record_memory_history", "_snapshot", "_dump_snapshot"]

# A torch.pto name for a torch.cuda one that is spelled differently.
EQUIVALENTS = {"CUDAGraph": "PTOGraph", "CUDAPluggableAllocator": "PTOPluggableAllocator"}

LEGACY_TYPES = "legacy typed tensor class; use `torch.tensor(..., device=\"pto\")`"

# Why torch.pto has no such name. A name torch.pto lacks must be here; one it has must not.
REASONS = {
    **{name: LEGACY_TYPES for name in (
        "BFloat16Tensor", "BoolTensor", "ByteTensor", "CharTensor", "DoubleTensor", "FloatTensor", "HalfTensor",
        "IntTensor", "LongTensor", "ShortTensor")},
    "get_allocator_backend": "one allocator backend only, the native caching allocator",
    "caching_allocator_enable": "the caching allocator cannot be turned off",
    "caching_allocator_disabled": "the caching allocator cannot be turned off",
    "memory_stats_as_nested_dict": "`memory_stats()` gives the same numbers, flat",
    "memory_cached": "deprecated in torch.cuda: `memory_reserved`",
    "max_memory_cached": "deprecated in torch.cuda: `max_memory_reserved`",
    "reset_max_memory_allocated": "deprecated in torch.cuda: `reset_peak_memory_stats`",
    "reset_max_memory_cached": "deprecated in torch.cuda: `reset_peak_memory_stats`",
    "list_gpu_processes": "NVML: the runtime does not know other processes",
    "device_memory_used": "NVML: `mem_get_info` gives this process's view",
    "memory_usage": "NVML: `utilization` gives the busy time; there is no memory-bus counter",
    "power_draw": "NVML: a simulated device has no sensors",
    "temperature": "NVML: a simulated device has no sensors",
    "clock_rate": "NVML: a simulated device has no clock",
    "CudaError": "CUDA's error type; runtime errors are `RuntimeError` naming the call (and `torch.OutOfMemoryError`)",
    "DeferredCudaCallError": "CUDA's lazy-initialisation error; pto initialises without deferred calls",
    "check_error": "CUDA error codes; every runtime call is checked in C++ (`PTO_CHECK`)",
    "cudaStatus": "CUDA error codes",
    "cudart": "CUDA runtime bindings; the pto runtime is C++ only (`csrc/runtime/pto_runtime.h`)",
    "StreamContext": "`torch.pto.stream` is the context-manager class itself",
    "GreenContext": "no partitioning of a device's cores",
    "can_device_access_peer": "simulated devices copy between each other through the runtime only",
    "current_blas_handle": "no cuBLAS: matmul is a PTO instruction",
    "current_solver_handle": "no cuSOLVER: linear algebra falls back to the CPU",
    "default_generators": "`torch.pto.get_rng_state` and `manual_seed` reach the generators",
    "get_arch_list": "no compiled device architectures: PTO programs are built at run time",
    "get_gencode_flags": "no compiled device architectures: PTO programs are built at run time",
    "has_half": "a torch.cuda flag for old GPUs; pto always has float16",
    "has_magma": "no MAGMA",
    "is_tf32_supported": "no TF32: float32 matmul runs in float32",
    "jiterator": "CUDA's runtime-compiled elementwise kernels; `@pypto.kernel` compiles Python to PTO",
    "nccl": "the distributed backend is `pccl` (`torch.distributed.init_process_group(\"pccl\")`)",
    "nvtx": "NVIDIA tools ranges; `torch.profiler` records pto activity",
    "profiler": "CUDA's profiler start/stop; `torch.profiler` and `pypto.Profiler` record pto activity",
    "sparse": "no sparse kernels",
    "tunable": "no tunable GEMM: the compiler picks the tiles",
}


def cuda_names() -> list[tuple[str, str]]:
    """(module, name) for every name the table covers, torch.cuda's first."""
    names = [("torch.cuda", name) for name in sorted(set(torch.cuda.__all__))]
    memory_only = sorted(set(torch.cuda.memory.__all__) - set(torch.cuda.__all__))
    names += [("torch.cuda.memory", name) for name in memory_only + MEMORY_HISTORY]
    return names


def pto_name(module: str, name: str) -> str | None:
    """Where torch.pto has `name` (or its equivalent), or None."""
    pto_module = torch.pto.memory if module == "torch.cuda.memory" else torch.pto
    prefix = "torch.pto.memory" if module == "torch.cuda.memory" else "torch.pto"
    own = EQUIVALENTS.get(name, name)
    return f"`{prefix}.{own}`" if hasattr(pto_module, own) else None


def render() -> str:
    rows = []
    problems = []
    for module, name in cuda_names():
        present = pto_name(module, name)
        reason = REASONS.get(name)
        if present is None and reason is None:
            problems.append(f"{module}.{name}: torch.pto lacks it and REASONS does not say why")
        if present is not None and reason is not None:
            problems.append(f"{module}.{name}: torch.pto has it now; drop it from REASONS")
        rows.append(f"| `{module}.{name}` | {present or '—'} | {reason or ''} |")
    if problems:
        raise SystemExit("scripts/cuda_parity.py:\n  " + "\n  ".join(problems))
    have = sum(1 for row in rows if "| — |" not in row)
    return "\n".join([
        "# torch.cuda on torch.pto",
        "",
        "Every public name of `torch.cuda` and `torch.cuda.memory` (and the memory-snapshot",
        "functions `torch.cuda._memory_viz` works with) against `torch.pto`. Generated by",
        "`python scripts/cuda_parity.py` from the installed torch "
        f"({torch.__version__.split('+')[0]}); `tests/python/test_cuda_parity.py` fails when it is stale.",
        "",
        f"torch.pto has {have} of the {len(rows)} names.",
        "",
        "| torch.cuda | torch.pto | why not |",
        "|---|---|---|",
        *rows,
        "",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the table instead of writing it")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not TABLE.exists() or TABLE.read_text() != text:
            print(f"{TABLE} is stale: run python scripts/cuda_parity.py", file=sys.stderr)
            return 1
        return 0
    TABLE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
