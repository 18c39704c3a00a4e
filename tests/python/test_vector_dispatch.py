"""The kernels' run-time vector dispatch (csrc/runtime/sim/kernels/vector_target.h):
no wide-register code outside the per-target copies, and the elementwise ops match
CPU on every target an AVX-512 host can be capped to (PTO_SIM_VECTOR_ISA)."""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import torch

import pypto_torch

# Functions allowed to use AVX2 (ymm) or AVX-512 (zmm) registers: Highway's per-target
# copies, named by their namespace (N_AVX2, N_AVX3), which dispatch enters only on a
# CPU that has the ISA.
WIDE_TARGETS = {"ymm": ("N_AVX2", "N_AVX3"), "zmm": ("N_AVX3",)}
# MKL, linked into _C as one object (cmake/mkl.cmake), chooses its kernels by CPUID
# itself: its functions are the ones that object defines.
MKL_OBJECT = pathlib.Path(__file__).parents[2] / "build" / "cmake" / "libpto_gemm_mkl.a"
FUNCTION_LABEL = re.compile(r"^[0-9a-f]+ <(.*)>:$")


def functions_using(disassembly: str, register: str) -> set[str]:
    used = re.compile(rf"%{register}\d")
    found, current = set(), ""
    for line in disassembly.splitlines():
        label = FUNCTION_LABEL.match(line)
        if label:
            current = label.group(1)
        elif used.search(line):
            found.add(current)
    return found


@pytest.mark.skipif(shutil.which("objdump") is None or not torch.backends.cpu.get_cpu_capability().startswith("AVX"),
                    reason="needs objdump and an x86 host")
def test_wide_registers_appear_only_in_their_targets_code():
    if not MKL_OBJECT.exists():
        pytest.skip(f"{MKL_OBJECT} is not built here, so MKL's functions cannot be told from ours")
    library = pathlib.Path(pypto_torch._C.__file__)
    disassembly = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", str(library)],
                                 capture_output=True, text=True, check=True).stdout
    mkl_functions = set(subprocess.run(["nm", "--defined-only", "--format=just-symbols", str(MKL_OBJECT)],
                                       capture_output=True, text=True, check=True).stdout.split())
    for register, allowed in WIDE_TARGETS.items():
        strays = sorted(f for f in functions_using(disassembly, register) - mkl_functions
                        if not any(a in f for a in allowed))
        assert not strays, f"{register} registers outside their target's code (an ODR-merged copy?): {strays[:5]}"


@pytest.mark.parametrize("cap", ["avx2", "sse4", "scalar"])
def test_elementwise_ops_match_cpu_on_each_capped_target(cap):
    root = pathlib.Path(__file__).parents[2]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-k", "opinfo_forward",
         "tests/python/test_elementwise.py"],
        capture_output=True, text=True, cwd=root, env={**os.environ, "PTO_SIM_VECTOR_ISA": cap})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
