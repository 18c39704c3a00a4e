"""PYTORCH_ALLOC_CONF (and the older PYTORCH_CUDA_ALLOC_CONF) as the caching allocator reads it
through torch's AcceleratorAllocatorConfig: max_split_size_mb, garbage_collection_threshold,
expandable_segments, and torch's errors for keys and values it does not accept. Each case runs
in a fresh interpreter: torch reads the setting once."""

import pytest

MiB = 2**20


def run(python, conf: str, code: str, variable: str = "PYTORCH_ALLOC_CONF", **env: str) -> str:
    result = python("import torch\nMiB = 2**20\n" + code, **{variable: conf}, PTO_FALLBACK="silent", **env)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("conf, message", [
    ("foo:1", "Unrecognized key 'foo' in Accelerator allocator config."),
    ("max_split_size_mb:1", "CachingAllocator option max_split_size_mb too small, must be >= 20"),
    ("garbage_collection_threshold:1.5", "garbage_collect_threshold is invalid, set it in (0.0, 1.0)"),
    ("expandable_segments:yes", "Expected 'True' or 'False'"),
])
def test_bad_settings_are_torchs_errors(python, conf, message):
    out = run(python, conf, """
try:
    torch.ones(3, device="pto")
except ValueError as error:
    print("ValueError:", str(error).splitlines()[0])
""")
    assert f"ValueError: {message}" in out


# 30 MiB allocated and freed (one segment of its own, cached), then 40 MiB: by default the new
# segment comes beside the cached one; with expandable segments the cached one, which cannot
# grow here, goes back first, so reserved memory follows what is allocated.
SEGMENT_REUSE = """
torch.manual_seed(0)
a = torch.randn(30 * MiB // 4)
x = a.to("pto")
print("first:", torch.equal(x.cpu(), a))
del x
b = torch.randn(40 * MiB // 4)
y = b.to("pto") * 2
print("second:", torch.equal(y.cpu(), b * 2))
print("reserved MiB:", torch.pto.memory_reserved() // MiB, "allocated MiB:", torch.pto.memory_allocated() // MiB)
"""


def test_expandable_segments_give_back_what_cannot_grow(python):
    default = run(python, "", SEGMENT_REUSE)
    expandable = run(python, "expandable_segments:True", SEGMENT_REUSE)
    for out in (default, expandable):
        assert "first: True" in out and "second: True" in out
    # 30 cached + 40 (b's copy on pto) + 40 (y); the 2 lives in device constants of its own
    # (csrc/torch/aten/host_scalars.h), not in a segment
    assert "reserved MiB: 110 allocated MiB: 40" in default
    assert "reserved MiB: 80 allocated MiB: 40" in expandable  # the 30 MiB segment went back


def test_the_older_cuda_variable_is_read_too(python):
    out = run(python, "expandable_segments:True", SEGMENT_REUSE, variable="PYTORCH_CUDA_ALLOC_CONF")
    assert "reserved MiB: 80 allocated MiB: 40" in out


def test_max_split_size_keeps_large_blocks_whole(python):
    code = """
x = torch.empty(30 * MiB, dtype=torch.uint8, device="pto")
del x  # a cached 30 MiB block: oversize with max_split_size_mb:20
before = torch.pto.memory_stats()["num_device_alloc"]
small = torch.empty(4 * MiB, dtype=torch.uint8, device="pto")
stats = torch.pto.memory_stats()
print("small took a segment:", stats["num_device_alloc"] - before)
close = torch.empty(28 * MiB, dtype=torch.uint8, device="pto")
stats = torch.pto.memory_stats()
print("close took a segment:", stats["num_device_alloc"] - before - 1,
      "allocated MiB:", torch.pto.memory_allocated() // MiB,
      "oversize:", stats["oversize_allocations.current"], stats["oversize_segments.current"])
"""
    default = run(python, "", code)
    limited = run(python, "max_split_size_mb:20", code)
    assert "small took a segment: 0" in default  # split off the cached block
    assert "small took a segment: 1" in limited  # an oversize block serves no small request
    # 28 MiB takes the 30 MiB block whole; segments of 20 MiB and more are oversize
    assert "close took a segment: 0 allocated MiB: 34 oversize: 1 2" in limited


def test_garbage_collection_returns_old_cached_segments(python):
    code = """
x = torch.empty(100 * MiB, dtype=torch.uint8, device="pto")
del x  # cached: 100 MiB reserved of the 256 MiB device
y = torch.ones(30 * MiB, device="pto")  # 120 MiB: does not fit the cached block
stats = torch.pto.memory_stats()
print("reserved MiB:", torch.pto.memory_reserved() // MiB, "retries:", stats["num_alloc_retries"],
      "values:", torch.equal(y.cpu(), torch.ones(30 * MiB)))
"""
    default = run(python, "", code, PTO_SIM_MEMORY="256M")
    collecting = run(python, "garbage_collection_threshold:0.3", code, PTO_SIM_MEMORY="256M")
    assert "reserved MiB: 220 retries: 0 values: True" in default
    assert "reserved MiB: 120 retries: 0 values: True" in collecting  # over 77 MiB: the old 100 MiB went back
