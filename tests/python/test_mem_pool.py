"""torch.pto.MemPool and use_mem_pool: a thread's allocations routed to a private pool of the
caching allocator, its use count, its snapshot, its memory kept by empty_cache while it lives
and returned when it dies."""

import gc
import threading

import pytest
import torch


@pytest.fixture(autouse=True)
def settled_allocator():
    gc.collect()  # tensors of earlier tests caught in reference cycles go now, not mid-test
    torch.pto.synchronize()
    torch.pto.empty_cache()


def pool_bytes(pool: torch.pto.MemPool) -> int:
    return sum(segment["total_size"] for segment in pool.snapshot())


def test_allocations_inside_use_mem_pool_come_from_the_pool():
    torch.manual_seed(0)
    a, b = torch.randn(300, 200), torch.randn(200, 100)
    pool = torch.pto.MemPool()
    assert pool.use_count() == 1
    outside = torch.randn(1000, device="pto")
    with torch.pto.use_mem_pool(pool):
        assert pool.use_count() == 2
        x, y = a.to("pto"), b.to("pto")
        z = torch.tanh(x @ y)
    assert pool.use_count() == 1
    torch.testing.assert_close(z.cpu(), torch.tanh(a @ b), rtol=1e-5, atol=1e-5)
    segments = pool.snapshot()
    assert segments and all(segment["segment_pool_id"] == pool.id for segment in segments)
    in_pool = {block["address"] for segment in segments for block in segment["blocks"]
               if block["state"] == "active_allocated"}
    assert {x.data_ptr(), y.data_ptr(), z.data_ptr()} <= in_pool
    assert outside.data_ptr() not in in_pool
    after = torch.randn(10, device="pto")  # outside the context: the shared cache again
    assert after.data_ptr() not in in_pool


def test_pool_memory_survives_empty_cache_and_returns_when_the_pool_dies():
    reserved_before = torch.pto.memory_reserved()
    pool = torch.pto.MemPool()
    with torch.pto.use_mem_pool(pool):
        x = torch.ones(3 << 20, device="pto")  # 12 MiB: a large segment of its own
    reserved = pool_bytes(pool)
    assert reserved >= x.nbytes
    assert torch.pto.memory_reserved() == reserved_before + reserved
    del x
    torch.pto.empty_cache()  # the pool lives: its cached blocks stay its own
    assert pool_bytes(pool) == reserved
    assert torch.pto.memory_reserved() == reserved_before + reserved
    with torch.pto.use_mem_pool(pool):
        y = torch.full((1 << 20,), 2.0, device="pto")  # reuses the pool's cached segment
    assert pool_bytes(pool) == reserved and y.sum().item() == 2.0 * (1 << 20)
    torch.pto.empty_cache()  # the sum's block, from the shared cache
    device_allocations = torch.pto.memory_stats()["num_device_alloc"]
    del pool  # the pool's last user but y: its memory goes back once y does
    assert torch.pto.memory_reserved() == reserved_before + reserved
    del y
    assert torch.pto.memory_reserved() == reserved_before
    assert torch.pto.memory_stats()["num_device_alloc"] == device_allocations


def test_pools_do_not_share_blocks():
    first, second = torch.pto.MemPool(), torch.pto.MemPool()
    assert first.id != second.id
    with torch.pto.use_mem_pool(first):
        x = torch.empty(1000, device="pto")
    del x  # a cached block in the first pool
    with torch.pto.use_mem_pool(second):
        y = torch.empty(1000, device="pto")
    assert not first.snapshot()[0]["blocks"][0]["state"] == "active_allocated"
    assert y.data_ptr() in {block["address"] for segment in second.snapshot() for block in segment["blocks"]}


def test_nested_use_mem_pool_routes_to_the_inner_pool():
    outer, inner = torch.pto.MemPool(), torch.pto.MemPool()
    with torch.pto.use_mem_pool(outer):
        with torch.pto.use_mem_pool(inner):
            x = torch.empty(100, device="pto")
        y = torch.empty(100, device="pto")
    assert [s["segment_pool_id"] for s in inner.snapshot()] == [inner.id]
    assert x.data_ptr() == inner.snapshot()[0]["address"]
    assert y.data_ptr() == outer.snapshot()[0]["address"]


def test_other_threads_allocate_outside_the_pool():
    pool = torch.pto.MemPool()
    seen = {}
    with torch.pto.use_mem_pool(pool):
        here = torch.empty(100, device="pto")
        thread = threading.Thread(target=lambda: seen.setdefault("x", torch.empty(100, device="pto")))
        thread.start()
        thread.join()
    pool_addresses = {block["address"] for segment in pool.snapshot() for block in segment["blocks"]}
    assert here.data_ptr() in pool_addresses
    assert seen["x"].data_ptr() not in pool_addresses


def test_no_split_gives_each_block_its_own_segment():
    pool = torch.pto.MemPool(no_split=True)
    with torch.pto.use_mem_pool(pool):
        tensors = [torch.empty(n, dtype=torch.uint8, device="pto") for n in (512, 4096, 100_000)]
    assert sorted(len(segment["blocks"]) for segment in pool.snapshot()) == [1, 1, 1]
    assert sorted(segment["total_size"] for segment in pool.snapshot()) == [512, 4096, 100_352]
    del tensors


def test_a_graph_captures_into_a_mem_pool():
    pool = torch.pto.MemPool()
    x = torch.arange(16.0, device="pto")
    graph = torch.pto.PTOGraph()
    with torch.pto.graph(graph, pool=pool.id):
        y = x * 2 + 1
    assert pool.use_count() == 2  # the pool and the graph
    x.copy_(torch.arange(16.0, 32.0))
    graph.replay()
    torch.testing.assert_close(y.cpu(), torch.arange(16.0, 32.0) * 2 + 1)
    assert y.data_ptr() in {block["address"] for segment in pool.snapshot() for block in segment["blocks"]}
    graph.reset()
    assert pool.use_count() == 1


def test_a_use_on_oom_pool_is_the_last_resort(python):
    result = python("""
        import torch
        MiB = 2**20

        def served_beside_a_cached_pool_block(use_on_oom):
            pool = torch.pto.MemPool(use_on_oom=use_on_oom)
            with torch.pto.use_mem_pool(pool):
                held = torch.empty(100 * MiB, dtype=torch.uint8, device="pto")
            del held  # cached in the pool, which lives on
            x = torch.ones(25 * MiB, device="pto")  # 200 of 256 MiB reserved
            try:
                y = torch.full((15 * MiB,), 2.0, device="pto")  # room only in the pool's block
                served = torch.equal(y.cpu(), torch.full((15 * MiB,), 2.0))
            except torch.OutOfMemoryError:
                served = False
            return served

        print("use_on_oom:", served_beside_a_cached_pool_block(True), served_beside_a_cached_pool_block(False))
    """, PTO_SIM_MEMORY="256M")
    assert result.returncode == 0, result.stderr
    assert "use_on_oom: True False" in result.stdout
