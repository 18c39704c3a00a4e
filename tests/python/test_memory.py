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


def test_memory_fraction_limits_the_allocator(python):
    result = python("""
        import torch
        print("default:", torch.pto.get_per_process_memory_fraction())
        torch.pto.set_per_process_memory_fraction(0.25)  # 64 MiB of 256
        print("set:", torch.pto.get_per_process_memory_fraction(), torch.pto.get_per_process_memory_fraction(1))
        torch.manual_seed(0)
        a = torch.randn(10 << 20)  # 40 MiB
        x = a.to("pto")
        del x  # cached: 40 MiB reserved
        b = torch.randn(12 << 20)  # 48 MiB: fits once the cache is emptied
        y = b.to("pto")
        stats = torch.pto.memory_stats()
        print("retried:", stats["num_alloc_retries"], torch.pto.memory_reserved() == 48 << 20,
              torch.equal(y.cpu(), b))
        try:
            torch.empty(20 << 20, dtype=torch.uint8, device="pto")  # 48 + 20 > 64 MiB
        except torch.OutOfMemoryError as error:
            print("OOM:", error)
        del y
        z = torch.empty(60 << 20, dtype=torch.uint8, device="pto")
        print("after:", torch.pto.memory_allocated() == 60 << 20)
        for bad in (1, 1.5, -0.5):
            try:
                torch.pto.set_per_process_memory_fraction(bad)
            except (TypeError, ValueError) as error:
                print(type(error).__name__ + ":", error)
    """, PTO_SIM_MEMORY="256M")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "default: 1.0" in out
    assert "set: 0.25 1.0" in out
    assert "retried: 1 True True" in out
    assert "Tried to allocate 20.00 MiB" in out
    assert "64.00 MiB is allowed to this process (set_per_process_memory_fraction)" in out
    assert "after: True" in out
    assert "TypeError: Invalid type for fraction argument, must be `float`" in out
    assert "ValueError: Invalid fraction value: 1.5. Allowed range: 0~1" in out
    assert "ValueError: Invalid fraction value: -0.5. Allowed range: 0~1" in out


def test_pinned_host_statistics():
    torch.pto.synchronize()
    torch.accelerator.memory.empty_host_cache()
    torch.pto.reset_accumulated_host_memory_stats()
    torch.pto.reset_peak_host_memory_stats()
    assert torch.pto.host_memory_stats()["allocations.current"] == 0
    torch.manual_seed(0)
    values = torch.randn(3000)  # 12000 bytes: a 16 KiB block
    pinned = values.pin_memory()
    stats = torch.pto.host_memory_stats()
    assert stats["active_requests.current"] == 1 and stats["active_bytes.current"] == 16384
    assert stats["allocations.current"] == 1 and stats["allocated_bytes.current"] == 16384
    assert stats["num_host_alloc"] == 1 and stats["host_alloc_time.count"] == 1
    on_device = pinned.to("pto", non_blocking=True)
    torch.pto.synchronize()
    assert torch.equal(on_device.cpu(), values)
    del pinned
    again = values.pin_memory()  # the cached block again: no new host allocation
    stats = torch.pto.host_memory_stats()
    assert stats["num_host_alloc"] == 1 and stats["active_requests.allocated"] == 2
    assert stats["active_requests.peak"] == 1
    del again
    torch.accelerator.memory.empty_host_cache()
    stats = torch.pto.host_memory_stats()
    assert stats["allocations.current"] == 0 and stats["num_host_free"] == 1 and stats["host_free_time.count"] == 1
    nested = torch.pto.host_memory_stats_as_nested_dict()
    assert nested["allocated_bytes"] == {"current": 0, "peak": 16384, "allocated": 16384, "freed": 16384}
    assert set(nested) == {"num_host_alloc", "num_host_free", "allocations", "allocated_bytes", "active_requests",
                           "active_bytes", "host_alloc_time", "host_free_time"}
    torch.pto.reset_peak_host_memory_stats()
    assert torch.pto.host_memory_stats()["allocated_bytes.peak"] == 0
    torch.pto.reset_accumulated_host_memory_stats()
    stats = torch.pto.host_memory_stats()
    assert stats["num_host_alloc"] == 0 and stats["allocated_bytes.allocated"] == 0
