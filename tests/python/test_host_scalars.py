"""Python numbers and CPU scalars as operands of pto ops (csrc/torch/aten/host_scalars.cpp).

A thread keeps the values it used on a stream in a table of device constants, refilled
least recently used first. Each test asks for more distinct values than the table holds
without synchronising, so that slots are refilled while launches that read their old
values are still queued, and checks every result against the CPU's."""

import threading

import pytest
import torch

import pypto_torch  # noqa: F401

TABLE_SLOTS = 32


def scalar_chain(x: torch.Tensor, values) -> torch.Tensor:
    """x through one op per value, each with the value as a Python number; one result per step."""
    steps = []
    for i, value in enumerate(values):
        x = x.mul(value) if i % 3 == 0 else (x + value if i % 3 == 1 else x - value)
        steps.append(x)
    return torch.stack(steps)


def test_values_beyond_the_table_match_cpu_without_synchronising():
    torch.manual_seed(0)
    x = torch.randn(64)
    values = [0.5 + (i % (3 * TABLE_SLOTS)) / 7 for i in range(10 * TABLE_SLOTS)]
    expected = scalar_chain(x, values)
    got = scalar_chain(x.to("pto"), values).cpu()
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool, torch.float64])
def test_one_value_in_several_dtypes(dtype):
    x = torch.arange(12).reshape(3, 4).to(dtype)
    xp = x.to("pto")
    for value in (1, 2, True, 3.5 if dtype.is_floating_point else 3):
        torch.testing.assert_close((xp + value).cpu(), x + value, rtol=0, atol=0)
        torch.testing.assert_close((xp * value).cpu(), x * value, rtol=0, atol=0)


def test_in_place_updates_keep_their_order():
    x = torch.zeros(16)
    xp = x.to("pto")
    for i in range(5 * TABLE_SLOTS):
        x.add_(i)
        xp.add_(i)
        x.mul_(0.5)
        xp.mul_(0.5)
    torch.testing.assert_close(xp.cpu(), x, rtol=0, atol=0)


def test_one_value_for_ops_of_changing_shapes():
    """A kept value comes broadcast to the op's shape, a view remade when the shape
    changes: ops of several shapes and ranks take the same values in turn, unsynchronised,
    where a where() also reads them."""
    torch.manual_seed(0)
    shapes = [(16,), (4, 4), (3,), (2, 3, 5), (16,), (1,), ()]
    inputs = [torch.randn(shape) for shape in shapes]
    expected, got = [], []
    for step in range(4 * TABLE_SLOTS):
        x = inputs[step % len(inputs)]
        value = 0.25 * (step % (TABLE_SLOTS + 3))
        expected.append(torch.where(x > 0, x, value) * value + 1)
        got.append(torch.where(x.to("pto") > 0, x.to("pto"), value) * value + 1)
    for e, g in zip(expected, got):
        assert g.shape == e.shape
        torch.testing.assert_close(g.cpu(), e, rtol=0, atol=0)


def test_two_streams_and_two_threads_keep_their_own_values():
    torch.manual_seed(0)
    x = torch.randn(256)
    values = [1 + i / 3 for i in range(4 * TABLE_SLOTS)]
    expected = scalar_chain(x, values)
    results = {}

    def run(name, stream):
        with torch.pto.stream(stream):
            results[name] = scalar_chain(x.to("pto"), values)
        stream.synchronize()

    streams = [torch.pto.Stream() for _ in range(2)]
    threads = [threading.Thread(target=run, args=(f"thread {i}", streams[i])) for i in range(2)]
    for t in threads:
        t.start()
    run("main, default stream", torch.pto.current_stream())
    for t in threads:
        t.join()
    for name, got in results.items():
        torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0, msg=name)


def test_a_thread_that_ended_leaves_its_values_to_the_next():
    x = torch.ones(8)
    for round_ in range(3):
        got = {}
        t = threading.Thread(target=lambda: got.setdefault("y", scalar_chain(x.to("pto"), range(2, 50)).cpu()))
        t.start()
        t.join()
        torch.testing.assert_close(got["y"], scalar_chain(x, range(2, 50)), rtol=0, atol=0, msg=f"round {round_}")


def test_a_captured_graph_keeps_its_values_after_the_table_moved_on():
    x = torch.randn(32, device="pto")
    y = x * 3.0 + 1.0  # the values in the table before the capture
    graph = torch.pto.PTOGraph()
    with torch.pto.graph(graph):
        out = x * 3.0 + 1.0
    for i in range(3 * TABLE_SLOTS):  # every slot refilled with other values
        y = y + i
    x.copy_(torch.arange(32.0))
    graph.replay()
    torch.testing.assert_close(out.cpu(), torch.arange(32.0) * 3.0 + 1.0, rtol=0, atol=0)


def test_scalar_operands_take_no_memory_of_the_allocator():
    x = torch.randn(8, device="pto")
    torch.pto.synchronize()
    before = torch.pto.memory_allocated()
    y = x
    for i in range(3 * TABLE_SLOTS):
        y = y * (1 + i / 100)
    del y
    torch.pto.synchronize()
    assert torch.pto.memory_allocated() == before


@pytest.mark.parametrize("dtype, value", [(torch.float16, 70000.0), (torch.float16, 1e300), (torch.float32, 1e300),
                                          (torch.bfloat16, -1e300), (torch.int32, 2**40 + 3), (torch.int8, 300),
                                          (torch.uint8, -1), (torch.int64, 2**62 + 1)])
def test_a_value_the_dtype_cannot_hold_is_cast_as_the_cpu_casts_it(dtype, value):
    """TensorIterator casts a wrapped number to the op's dtype unchecked (inf, wrapping), unlike fill_."""
    x = torch.arange(4).to(dtype)
    for op in (torch.add, torch.sub, torch.mul):
        expected = op(x, value)
        torch.testing.assert_close(op(x.to("pto"), value).cpu(), expected, rtol=0, atol=0, equal_nan=True)
