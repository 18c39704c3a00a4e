"""The caching allocator: statistics, cache control, capacity and out-of-memory."""

import gc

import torch


def test_allocation_statistics_follow_tensors():
    gc.collect()  # tensors of earlier tests caught in reference cycles go now, not mid-test
    torch.pto.empty_cache()
    before = torch.pto.memory_allocated()
    torch.pto.reset_peak_memory_stats()
    x = torch.empty(1 << 20, dtype=torch.uint8, device="pto")
    assert torch.pto.memory_allocated() == before + (1 << 20)
    assert torch.pto.max_memory_allocated() >= before + (1 << 20)
    assert torch.pto.memory_reserved() >= torch.pto.memory_allocated()
    del x
    assert torch.pto.memory_allocated() == before
    assert torch.pto.max_memory_allocated() >= before + (1 << 20)
    stats = torch.pto.memory_stats()
    assert stats["allocation.all.current"] >= 0
    assert {"allocated_bytes.all.peak", "reserved_bytes.large_pool.current", "num_ooms"} <= set(stats)


def test_freed_blocks_are_reused_without_new_device_allocations():
    sizes = [512, 4096, 100_000, 3 << 20]
    for size in sizes:
        torch.empty(size, dtype=torch.uint8, device="pto")
    device_allocations = torch.pto.memory_stats()["num_device_alloc"]
    for _ in range(20):
        for size in sizes:
            torch.empty(size, dtype=torch.uint8, device="pto")
    assert torch.pto.memory_stats()["num_device_alloc"] == device_allocations


def test_empty_cache_returns_memory_to_the_device():
    x = torch.empty(64 << 20, dtype=torch.uint8, device="pto")
    del x
    reserved = torch.pto.memory_reserved()
    free_before, total = torch.pto.mem_get_info()
    torch.pto.empty_cache()
    free_after, _ = torch.pto.mem_get_info()
    assert torch.pto.memory_reserved() <= reserved - (64 << 20)
    assert free_after >= free_before + (64 << 20)
    assert total == 16 << 30


def test_devices_account_separately():
    torch.pto.empty_cache()
    free0 = torch.pto.mem_get_info(0)[0]
    x = torch.empty(32 << 20, dtype=torch.uint8, device="pto:1")
    assert torch.pto.mem_get_info(0)[0] == free0
    assert torch.pto.memory_allocated(1) >= 32 << 20
    del x


def test_memory_summary_is_readable():
    summary = torch.pto.memory_summary()
    assert "pto:0 memory summary" in summary and "Allocated memory" in summary


def test_out_of_memory_is_reported_and_recoverable(python):
    result = python("""
        import torch
        x = torch.ones(1000, device="pto")
        before = torch.pto.memory_allocated()
        try:
            torch.empty(300 * 1024 * 1024, dtype=torch.uint8, device="pto")
        except torch.OutOfMemoryError as error:
            print("OOM:", error)
        big = torch.empty(100 * 1024 * 1024, dtype=torch.uint8, device="pto")
        del big
        torch.pto.empty_cache()
        print("after:", torch.pto.memory_allocated() == before, x.sum().item())
    """, PTO_SIM_MEMORY="256M", PTO_FALLBACK="silent")
    assert result.returncode == 0, result.stderr
    assert "Tried to allocate 300.00 MiB" in result.stdout
    assert "total capacity of 256.00 MiB" in result.stdout
    assert "allocated by PyTorch" in result.stdout
    assert "after: True 1000.0" in result.stdout


def test_invalid_memory_setting_is_a_clear_error(python):
    result = python("import torch; torch.empty(1, device='pto')", PTO_SIM_MEMORY="lots")
    assert result.returncode != 0
    assert "PTO_SIM_MEMORY='lots' is not a memory size" in result.stderr
