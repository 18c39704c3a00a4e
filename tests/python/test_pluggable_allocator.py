"""torch.pto.memory.PTOPluggableAllocator: an allocator from a shared library (built here with
the system's C++ compiler) as torch.pto's allocator, or as a MemPool's. Its alloc calls the runtime's
ptoMalloc, so its memory is device memory the runtime knows; it counts its calls."""

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

ALLOCATOR_SOURCE = r"""
#include <cstddef>
#include "runtime/pto_runtime.h"

static long allocs, frees, live_bytes;

extern "C" {

void* counted_alloc(size_t size, int device, void* stream) {
  void* ptr = nullptr;
  if (ptoMalloc(&ptr, size) != PTO_SUCCESS) return nullptr;
  ++allocs;
  live_bytes += (long)size;
  return ptr;
}

void counted_free(void* ptr, size_t size, int device, void* stream) {
  ptoFree(ptr);
  ++frees;
  live_bytes -= (long)size;
}

long alloc_calls(void) { return allocs; }
long free_calls(void) { return frees; }
long live(void) { return live_bytes; }
}
"""

# The library's counters: (alloc calls, free calls, live bytes), read once PTOPluggableAllocator
# has loaded it (its ptoMalloc resolves in pypto_torch._C only then).
COUNTERS = """
import ctypes
def counters():
    library = ctypes.CDLL(LIBRARY)
    return tuple(ctypes.cast(getattr(library, name), ctypes.CFUNCTYPE(ctypes.c_long))()
                 for name in ("alloc_calls", "free_calls", "live"))
"""


@pytest.fixture(scope="module")
def allocator_library(tmp_path_factory) -> str:
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler to build the allocator library")
    folder = tmp_path_factory.mktemp("allocator")
    (folder / "counted_allocator.cpp").write_text(ALLOCATOR_SOURCE)
    library = folder / "libcounted_allocator.so"
    # ptoMalloc stays undefined: it resolves in pypto_torch._C when the library loads.
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", f"-I{ROOT / 'csrc'}", str(folder / "counted_allocator.cpp"),
                    "-o", str(library)], check=True)
    return str(library)


def run_with_library(python, library: str, body: str, **env: str):
    result = python(f"LIBRARY = {library!r}\n" + COUNTERS + body, PTO_FALLBACK="silent", **env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_current_allocator_serves_every_tensor(python, allocator_library):
    out = run_with_library(python, allocator_library, """
import torch
allocator = torch.pto.memory.PTOPluggableAllocator(LIBRARY, "counted_alloc", "counted_free")
torch.pto.memory.change_current_allocator(allocator)
torch.manual_seed(0)
a, b = torch.randn(64, 48), torch.randn(48, 32)
x, y = a.to("pto"), b.to("pto")
z = torch.relu(x @ y) + 1
print("values:", torch.allclose(z.cpu(), torch.relu(a @ b) + 1, atol=1e-5))
allocs, frees, live = counters()
print("live:", allocs - frees == 3, live == 64 * 48 * 4 + 48 * 32 * 4 + 64 * 32 * 4,
      torch.pto.memory_allocated() == live, torch.pto.memory_reserved() == live)
del x, y, z
allocs, frees, live = counters()
print("freed:", allocs == frees, live == 0, torch.pto.memory_allocated() == 0)
try:
    torch.pto.memory.change_current_allocator(allocator)
except RuntimeError as error:
    print("swap:", error)
try:
    with torch.pto.use_mem_pool(torch.pto.MemPool()):
        pass
except RuntimeError as error:
    print("pool:", error)
""")
    assert "values: True" in out
    assert "live: True True True True" in out
    assert "freed: True True True" in out
    assert "swap: Can't swap an already initialized allocator" in out
    assert "pool: PTOPluggableAllocator does not yet support beginAllocateToPool" in out


def test_allocator_cannot_change_after_the_first_allocation(python, allocator_library):
    out = run_with_library(python, allocator_library, """
import torch
x = torch.ones(4, device="pto")
allocator = torch.pto.memory.PTOPluggableAllocator(LIBRARY, "counted_alloc", "counted_free")
try:
    torch.pto.memory.change_current_allocator(allocator)
except RuntimeError as error:
    print("refused:", error)
y = x + 1
print("caching allocator:", counters() == (0, 0, 0), y.sum().item())
""")
    assert "refused: Can't swap an already initialized allocator" in out
    assert "caching allocator: True 8.0" in out


@pytest.mark.parametrize("strict", ["0", "1"])
def test_mem_pool_takes_its_segments_from_the_allocator(python, allocator_library, strict):
    out = run_with_library(python, allocator_library, """
import torch
allocator = torch.pto.memory.PTOPluggableAllocator(LIBRARY, "counted_alloc", "counted_free")
pool = torch.pto.MemPool(allocator.allocator())
torch.manual_seed(0)
a = torch.randn(256, 256)
outside = torch.ones(8, device="pto")
print("outside:", counters() == (0, 0, 0))
with torch.pto.use_mem_pool(pool):
    x = a.to("pto")
    y = (x * 3).sum(dim=1)
print("values:", torch.allclose(y.cpu(), (a * 3).sum(dim=1), rtol=1e-5, atol=1e-4))
allocs, frees, live = counters()
segments = pool.snapshot()
print("segments:", allocs == len(segments) > 0, frees == 0, live == sum(s["total_size"] for s in segments))
torch.pto.empty_cache()
print("kept:", counters() == (allocs, 0, live))
del x, y, pool
allocs, frees, live = counters()
print("returned:", allocs == frees, live == 0, outside.sum().item())
""", PTO_SIM_STRICT=strict)
    assert "outside: True" in out
    assert "values: True" in out
    assert "segments: True True True" in out
    assert "kept: True" in out
    assert "returned: True True 8.0" in out
