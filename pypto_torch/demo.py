"""A short tour of the pto device: run it with ``python3 -m pypto_torch.demo``.

It shows the device, tensors moving between host and pto, a small model trained
on pto (and checked against the same training on the CPU), streams and events,
the caching allocator, torch.ops.pto, and which ops still run through the CPU fallback.
"""

import time

import torch

import pypto_torch

WIDTH = 72


def section(title: str) -> None:
    print()
    print(f"== {title} ".ljust(WIDTH, "="))


def row(label: str, value: object) -> None:
    print(f"  {label:<30} {value}")


def mib(count: int) -> str:
    return f"{count / 2**20:,.1f} MiB"


def show_device() -> None:
    section("(a) The device")
    free, total = torch.pto.mem_get_info()
    row("driver", torch.pto.get_device_name())
    row("device count", torch.pto.device_count())
    row("current device", f"pto:{torch.pto.current_device()}")
    row("capacity (mem_get_info)", f"{total / 2**30:.1f} GiB total, {free / 2**30:.1f} GiB free")


def show_tensors() -> None:
    section("(b) Tensors on pto")
    torch.pto.manual_seed(0)
    a = torch.randn(2, 3, device="pto")
    print(f"  torch.randn(2, 3, device='pto') -> device={a.device}, dtype={a.dtype}")
    host = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    on_pto = host.to("pto")                       # CPU -> pto
    result = (on_pto * 2 + a).sum(dim=0).cpu()    # compute on pto, then pto -> CPU
    expected = (host * 2 + a.cpu()).sum(dim=0)    # the same on the CPU
    row("(x * 2 + a).sum(0) on pto", [round(v, 4) for v in result.tolist()])
    row("same on CPU", [round(v, 4) for v in expected.tolist()])
    torch.testing.assert_close(result, expected)
    row("equal?", "yes (torch.testing.assert_close)")


def train(device: str, steps: int = 30) -> list[float]:
    """Fit a 2-layer MLP to a toy regression task; returns the loss of every step."""
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(256, 8, generator=gen)
    y = (x[:, :1] * 1.5 - x[:, 1:2].sin() + 0.1 * torch.randn(256, 1, generator=gen))
    torch.manual_seed(42)  # same initial weights for both runs (made on the CPU)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    model = model.to(device)
    x, y = x.to(device), y.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()  # mean squared error
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def show_training() -> None:
    section("(c) Training a small MLP on pto")
    print("  2-layer MLP (8 -> 32 -> 1), MSE loss, SGD lr=0.05, 256 samples")
    start = time.perf_counter()
    pto_losses = train("pto")
    seconds = time.perf_counter() - start
    cpu_losses = train("cpu")
    for step in range(0, 30, 10):
        print(f"  step {step + 10:>3}   loss pto {pto_losses[step + 9]:.5f}   cpu {cpu_losses[step + 9]:.5f}")
    torch.testing.assert_close(torch.tensor(pto_losses), torch.tensor(cpu_losses))
    row("pto training time", f"{seconds:.2f} s for 30 steps")
    row("final loss matches CPU?", "yes (torch.testing.assert_close)")


def show_streams() -> None:
    section("(d) Streams and events")
    s1, s2 = torch.pto.Stream(), torch.pto.Stream()
    row("current (default) stream", torch.pto.current_stream())
    row("two new streams", f"{s1}, {s2}")
    start, end = torch.pto.Event(enable_timing=True), torch.pto.Event(enable_timing=True)
    host = torch.randn(1024, 1024).pin_memory()      # 4 MiB, pinned for async copies
    with torch.pto.stream(s1):
        start.record()
        a = host.to("pto", non_blocking=True)         # queued on s1
        a.mul_(2)
        end.record()
    with torch.pto.stream(s2):
        s2.wait_stream(s1)                            # s2 runs after everything queued on s1
        b = a + 1                                     # ... so it sees a's final value
    s2.synchronize()
    torch.testing.assert_close(b.cpu(), host * 2 + 1)
    row("on s1", "4 MiB H2D copy + mul_, between two events")
    row("start.elapsed_time(end)", f"{start.elapsed_time(end):.3f} ms")
    row("on s2", "wait_stream(s1), then a + 1: matches the CPU")
    row("s1.query(), s2.query()", f"{s1.query()}, {s2.query()}  (True = all work done)")


def show_memory() -> None:
    section("(e) Memory and the caching allocator")
    torch.pto.synchronize()
    row("before", f"allocated {mib(torch.pto.memory_allocated())}, "
                  f"reserved {mib(torch.pto.memory_reserved())}")
    big = torch.empty(256, 2**20, dtype=torch.uint8, device="pto")   # 256 MiB
    row("with a 256 MiB tensor", f"allocated {mib(torch.pto.memory_allocated())}, "
                                 f"reserved {mib(torch.pto.memory_reserved())}")
    del big
    row("after del", f"allocated {mib(torch.pto.memory_allocated())}, "
                     f"reserved {mib(torch.pto.memory_reserved())}  (kept in the cache)")
    torch.pto.empty_cache()
    row("after empty_cache()", f"allocated {mib(torch.pto.memory_allocated())}, "
                               f"reserved {mib(torch.pto.memory_reserved())}")
    print("  torch.pto.memory_summary(), first lines:")
    for line in torch.pto.memory_summary().splitlines()[:9]:
        print("  " + line)


def show_pto_ops() -> None:
    section("(f) torch.ops.pto: the operators of the project's origin")
    x = torch.randn(4, 8, device="pto")
    by_hand = torch.ops.pto.exp(x - torch.ops.pto.reduce_max(x, 1, True))
    by_hand = by_hand / torch.ops.pto.reduce_sum(by_hand, 1, True)
    fused = torch.ops.pto.softmax(x, 1)
    torch.testing.assert_close(by_hand, fused)
    row("by hand == pto.softmax?", "yes: reduce_max, sub, exp, reduce_sum, div vs one tsoftmax")
    row("pto.softmax on a CPU tensor", f"works too: {torch.ops.pto.softmax(x.cpu(), 1).device}")


def softmax_by_hand(x: torch.Tensor) -> torch.Tensor:
    """The project's origin's softmax: max, subtract, exp, sum, divide."""
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def show_compile() -> None:
    section("(g) torch.compile(backend=\"pypto\"): one fused PTO program")
    x = torch.randn(2048, 2048, device="pto")
    compiled = torch.compile(softmax_by_hand, backend="pypto")
    torch.testing.assert_close(compiled(x), torch.softmax(x, -1))
    report = pypto_torch.explain(softmax_by_hand, x)
    row("aten nodes lowered", len(report.lowered_nodes))
    row("nodes run eagerly", len(report.fallback_nodes))
    row("fused stages", f"{report.fused_stages} (one pass over each tile of rows)")
    row("workspace of temporaries", f"{report.workspace_bytes} bytes: they live in tile scratch")

    def best_ms(fn, tensor) -> float:
        """The best of 20 calls, each waited for (the device runs asynchronously)."""
        times = []
        for _ in range(20):
            torch.pto.synchronize()
            start = time.perf_counter()
            fn(tensor)
            torch.pto.synchronize()
            times.append((time.perf_counter() - start) * 1e3)
        return min(times)

    row("by hand, compiled, on pto", f"{best_ms(compiled, x):.1f} ms")
    row("by hand, eager, on pto", f"{best_ms(softmax_by_hand, x):.1f} ms")
    row("torch.softmax on the CPU", f"{best_ms(lambda t: torch.softmax(t, -1), x.cpu()):.1f} ms")


def show_fallback() -> None:
    section("(h) Ops that ran through the CPU fallback")
    ops = pypto_torch.fallback_ops()
    row("distinct ops", len(ops))
    row("calls in total", sum(ops.values()))
    print("  most called:")
    for name, count in sorted(ops.items(), key=lambda item: -item[1])[:6]:
        print(f"    {name:<40} {count:>6}")
    print("  Everything above ran as PTO instructions on the device except these ops,")
    print("  which copied their tensors to the CPU and back (python -m pypto_torch.coverage")
    print("  lists what is native).")


def main() -> None:
    pypto_torch.set_fallback_mode("silent")
    print("pypto_torch demo: PyTorch on the 'pto' device")
    print("(CPU-fallback warnings are silenced: pypto_torch.set_fallback_mode('silent'))")
    start = time.perf_counter()
    show_device()
    show_tensors()
    show_training()
    show_streams()
    show_memory()
    show_pto_ops()
    show_compile()
    show_fallback()
    print()
    print(f"Done in {time.perf_counter() - start:.1f} s.")


if __name__ == "__main__":
    main()
