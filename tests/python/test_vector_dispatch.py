"""The kernels' run-time vector dispatch (csrc/runtime/sim/kernels/vector_target.h):
no wide-register code outside the per-target copies, and the elementwise ops match
CPU on every target below the host's own (PTO_SIM_VECTOR_ISA caps it there)."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import torch

import pypto_torch

# Functions allowed to use AVX2 (ymm) or AVX-512 (zmm) registers: Highway's per-target
# copies, named by their namespace (N_AVX2, N_AVX3, which their mangled names spell
# too), which dispatch enters only on a CPU that has the ISA.
WIDE_TARGETS = {"ymm": ("N_AVX2", "N_AVX3"), "zmm": ("N_AVX3",)}
# MKL, linked into _C as one object (cmake/mkl.cmake), chooses its kernels by CPUID
# itself: its functions are the ones that object defines.
MKL_OBJECT = pathlib.Path(__file__).parents[2] / "build" / "cmake" / "libpto_mkl.a"


def functions_using_wide_registers(disassembly: str) -> dict[str, set[str]]:
    """The (mangled) names of the functions whose code names each wide register file.
    Plain substring tests: the disassembly has millions of lines."""
    found = {register: set() for register in WIDE_TARGETS}
    current = ""
    for line in disassembly.splitlines():
        if line.endswith(">:"):
            current = line[line.index("<") + 1:-2]
            continue
        for register, functions in found.items():
            if "%" + register in line:
                functions.add(current)
    return found


@pytest.mark.skipif(shutil.which("objdump") is None or not torch.backends.cpu.get_cpu_capability().startswith("AVX"),
                    reason="needs objdump and an x86 host")
def test_wide_registers_appear_only_in_their_targets_code():
    if not MKL_OBJECT.exists():
        pytest.skip(f"{MKL_OBJECT} is not built here, so MKL's functions cannot be told from ours")
    library = pathlib.Path(pypto_torch._C.__file__)
    disassembly = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(library)],
                                 capture_output=True, text=True, check=True).stdout
    mkl_functions = set(subprocess.run(["nm", "--defined-only", "--format=just-symbols", str(MKL_OBJECT)],
                                       capture_output=True, text=True, check=True).stdout.split())
    for register, functions in functions_using_wide_registers(disassembly).items():
        strays = sorted(f for f in functions - mkl_functions if not any(a in f for a in WIDE_TARGETS[register]))
        if strays:
            named = subprocess.run(["c++filt"], input="\n".join(strays[:5]), capture_output=True, text=True).stdout
            pytest.fail(f"{register} registers outside their target's code (an ODR-merged copy?): "
                        f"{named.splitlines()}")


@pytest.mark.parametrize("cap", ["avx2", "sse4", "scalar"])
def test_elementwise_ops_match_cpu_on_each_capped_target(cap):
    if torch.pto.get_device_properties(0).vector_isa == cap:
        pytest.skip(f"{cap} is this host's own target, which every other test runs")
    root = pathlib.Path(__file__).parents[2]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-k", "opinfo_forward",
         "tests/python/test_elementwise.py"],
        capture_output=True, text=True, cwd=root, env={**os.environ, "PTO_SIM_VECTOR_ISA": cap})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
