"""Copy fuzzer: random copies between CPU and pto, within pto and between pto
devices, each compared bit for bit with the same copy done on the CPU.

A case is drawn from (seed, index) alone, so any case can be rerun by itself:

    python3 tests/python/copy_fuzz.py --seed 7 --start 41233 --cases 1

Each case prints its description before it runs: when a case crashes the
process, the last line printed names it. Run as a script for long runs
(--cases 200000); tests/python/test_copy_fuzz.py runs chunks of it in CI.

What a case draws: a shape (0-dim, 0-size, up to 8-D), views on both sides
(permutes, sliced steps and offsets, expand, arbitrary as_strided reads, conj
and conj().imag views, flips), any two of the 12 dtypes, a direction (CPU ->
pto, pto -> CPU, pto -> pto, pto:0 <-> pto:1), copy_ / .to() / .contiguous(),
non_blocking with pinned or pageable host memory, and copies whose source and
destination share memory, which must raise exactly when the CPU raises.
"""

import argparse
import random
import sys
import time

import torch

import pypto_torch

pypto_torch.set_fallback_mode("silent")

DTYPES = [torch.complex64, torch.complex128, torch.float64, torch.float32, torch.float16, torch.bfloat16,
          torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool]
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_COMPLEX_OF = {torch.float32: torch.complex64, torch.float64: torch.complex128}


def _devices():
    count = torch.pto.device_count()
    return [f"pto:{i}" for i in range(count)]


def bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bits of a CPU tensor's values (math bits resolved), as integers."""
    t = t.resolve_conj().resolve_neg()
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.view(_BITS[t.element_size()])


def _nan_mask(t: torch.Tensor) -> torch.Tensor:
    t = t.resolve_conj().resolve_neg()
    if t.is_complex():
        return torch.isnan(torch.view_as_real(t))
    if t.is_floating_point():
        return torch.isnan(t)
    return torch.zeros(t.shape, dtype=torch.bool)


def same_bits(actual: torch.Tensor, expected: torch.Tensor, nan_payloads: bool = True) -> bool:
    """Bit-exact equality; with nan_payloads False, two NaNs count as equal whatever
    their sign and payload (a conversion's NaN bits are the compiler's choice, even
    between the CPU's own vectorised and scalar loops)."""
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return False
    equal = bits(actual) == bits(expected)
    if not nan_payloads:
        equal |= _nan_mask(actual) & _nan_mask(expected)
    return bool(equal.all())


# ---------------------------------------------------------------- drawing cases


def _draw_shape(rng: random.Random):
    rank = rng.choice([0, 1, 1, 2, 2, 2, 3, 3, 4, 5, 6, 7, 8])
    if rank == 0:
        return []
    if rng.random() < 0.03:  # large enough for the simulator's parallel, tiled paths
        shape = [1] * rank
        shape[rng.randrange(rank)] = rng.randint(2000, 20000)
        return shape
    limit = max(2, int(round(600 ** (1.0 / rank))))
    shape = [rng.randint(1, limit) for _ in range(rank)]
    if rng.random() < 0.08:
        shape[rng.randrange(rank)] = 0
    for d in range(rank):
        if rng.random() < 0.15:
            shape[d] = 1
    return shape


def _draw_view(rng: random.Random, shape, writable: bool):
    """A recipe for a view of `shape` over a fresh storage: the storage's length and
    the view's sizes, strides and offset (_decorate adds math bits and flips)."""
    rank = len(shape)
    numel = 1
    for s in shape:
        numel *= s
    if not writable and rank > 0 and rng.random() < 0.2:
        # Arbitrary strides, 0 and repeats included: a source may read an element twice.
        strides = [rng.randint(0, 4) * rng.choice([1, 1, 3]) for _ in range(rank)]
        offset = rng.randint(0, 5)
        span = sum((s - 1) * st for s, st in zip(shape, strides)) if numel else 0
        return {"storage": offset + span + 1 + rng.randint(0, 3), "sizes": list(shape), "strides": strides,
                "offset": offset}
    # A dense base in a random dimension order, sliced with random starts and steps,
    # some dimensions broadcast from one element (read-only views only).
    order = list(range(rank))
    if rng.random() < 0.5:
        rng.shuffle(order)
    steps = [rng.choice([1, 1, 1, 2, 3]) for _ in range(rank)]
    starts = [rng.choice([0, 0, 1, 2]) for _ in range(rank)]
    expanded = [not writable and shape[d] != 1 and rng.random() < 0.15 for d in range(rank)]
    base_sizes = {}
    for d in range(rank):
        if expanded[d]:
            base_sizes[d] = 1
            starts[d] = 0
        else:
            used = starts[d] + (shape[d] - 1) * steps[d] + 1 if shape[d] > 0 else starts[d]
            base_sizes[d] = used + rng.choice([0, 0, 1])
    # Strides of the base, its last dimension in `order` innermost.
    base_strides = {}
    running = 1
    for d in reversed(order):
        base_strides[d] = running
        running *= max(base_sizes[d], 1)
    storage_extent = 1
    for d in range(rank):
        storage_extent += (base_sizes[d] - 1) * base_strides[d] if base_sizes[d] > 0 else 0
    lead = rng.choice([0, 0, 1, 3])
    offset = lead + sum(starts[d] * base_strides[d] for d in range(rank))
    strides = [0 if expanded[d] else base_strides[d] * steps[d] for d in range(rank)]
    return {"storage": lead + storage_extent + rng.randint(0, 2), "sizes": list(shape), "strides": strides,
            "offset": offset}


def _decorate(rng: random.Random, recipe, dtype, writable: bool):
    """Math bits and flips on top of a view recipe; the storage dtype may differ
    (a float view taken as conj().imag of a complex storage)."""
    recipe["dtype"] = dtype
    recipe["storage_dtype"] = dtype
    recipe["math"] = None
    if dtype.is_complex and rng.random() < 0.3:
        recipe["math"] = "conj"
    elif dtype in _COMPLEX_OF and rng.random() < 0.2:
        recipe["math"] = rng.choice(["conj.imag", "real", "imag"])
        recipe["storage_dtype"] = _COMPLEX_OF[dtype]
    recipe["flip"] = None
    if not writable and recipe["sizes"] and rng.random() < 0.1:
        rank = len(recipe["sizes"])
        recipe["flip"] = sorted(rng.sample(range(rank), rng.randint(1, rank)))
    return recipe


def _describe_view(recipe) -> str:
    text = (f"{str(recipe['dtype']).replace('torch.', '')}{recipe['sizes']} strides={recipe['strides']} "
            f"offset={recipe['offset']} storage={recipe['storage']}")
    if recipe["math"]:
        text += f" .{recipe['math']}"
    if recipe["flip"]:
        text += f" flip{recipe['flip']}"
    return text


def _values(rng: random.Random, gen: torch.Generator, dtype, count: int, fit_into) -> torch.Tensor:
    """count values of dtype on the CPU: random bits (NaN payloads, subnormals,
    infinities), or values inside fit_into's range where a float source meets an
    integer destination (out-of-range float-to-integer casts are undefined in C++
    and in PyTorch)."""
    if dtype == torch.bool:
        return torch.randint(0, 2, (count,), generator=gen, dtype=torch.uint8).bool()
    if fit_into is not None and (dtype.is_floating_point or dtype.is_complex):
        real = torch.float64
        if fit_into == torch.uint8:
            low, high = -300.0, 300.0  # through int64, as PyTorch casts to uint8: wraps
        else:
            info = torch.iinfo(fit_into)
            high = float(min(info.max, 2 ** 24 if dtype in (torch.float32, torch.complex64) else 2 ** 53))
            low = -high if info.min < 0 else 0.0
        if dtype in (torch.float16, torch.bfloat16):
            high = min(high, 60000.0 if dtype == torch.float16 else 3.0e38)
            low = max(low, -high)
        scale = rng.choice([1.0, 1e-3, 1e-6])
        parts = 2 if dtype.is_complex else 1
        values = (torch.rand((count, parts), generator=gen, dtype=real) * (high - low) + low) * scale
        if dtype.is_complex:
            return torch.view_as_complex(values.contiguous()).to(dtype)
        return values.reshape(count).to(dtype)
    size = torch.empty((), dtype=dtype).element_size()
    raw = torch.randint(0, 256, (count * size,), generator=gen, dtype=torch.uint8)
    return raw.view(dtype)


def _storage(rng, gen, recipe, fit_into, device, pinned=False) -> torch.Tensor:
    values = _values(rng, gen, recipe["storage_dtype"], recipe["storage"], fit_into)
    if pinned:
        values = values.pin_memory()
    return values if device == "cpu" else values.to(device)


def _view(storage: torch.Tensor, recipe) -> torch.Tensor:
    view = storage.as_strided(recipe["sizes"], recipe["strides"], recipe["offset"])
    math = recipe["math"]
    if math == "conj":
        view = view.conj()
    elif math == "conj.imag":
        view = view.conj().imag
    elif math == "real":
        view = view.real
    elif math == "imag":
        view = view.imag
    if recipe["flip"]:
        view = torch.flip(view, recipe["flip"])
    return view


class Case:
    """One drawn case: run() does it on pto and on the CPU and compares."""

    def __init__(self, seed: int, index: int):
        self.seed, self.index = seed, index
        rng = random.Random(seed * 1_000_003 + index)
        self.torch_seed = rng.getrandbits(62)
        devices = _devices()
        directions = ["h2d", "d2h", "d2d"] + (["x01", "x10"] if len(devices) > 1 else [])
        self.form = rng.choice(["copy_"] * 5 + ["to"] * 2 + ["contiguous", "alias", "alias"])
        self.direction = rng.choice(directions)
        if self.form == "contiguous":
            self.direction = "d2d"
        if self.form == "alias":
            self.direction = "alias"
        self.src_dtype = rng.choice(DTYPES)
        self.dst_dtype = self.src_dtype if rng.random() < 0.45 else rng.choice(DTYPES)
        if self.form == "contiguous":
            self.dst_dtype = self.src_dtype
        self.non_blocking = rng.random() < 0.4
        self.pinned = rng.random() < 0.5
        self.dst_shape = _draw_shape(rng)
        self.src_shape = self._broadcastable(rng, self.dst_shape) if self.form in ("copy_", "alias") \
            else list(self.dst_shape)
        self.src = _decorate(rng, _draw_view(rng, self.src_shape, writable=False), self.src_dtype, False)
        self.dst = _decorate(rng, _draw_view(rng, self.dst_shape, writable=self.form != "alias" or
                                             rng.random() < 0.9), self.dst_dtype, True)
        if self.form == "alias":
            self._share_storage(rng)

    @staticmethod
    def _broadcastable(rng, shape):
        """A shape that broadcasts to `shape`: leading dimensions dropped, some set to 1."""
        src = list(shape)
        if src and rng.random() < 0.3:
            src = src[rng.randint(1, len(src)):]
        return [1 if s != 0 and rng.random() < 0.2 else s for s in src]

    def _share_storage(self, rng):
        """Source and destination as views of one storage (of the destination's dtype)."""
        self.src_dtype = self.dst_dtype
        self.src["dtype"] = self.dst["dtype"]
        self.src["storage_dtype"] = self.dst["storage_dtype"]
        self.src["math"] = self.dst["math"] if rng.random() < 0.7 else None
        if self.src["math"] is None and self.src["storage_dtype"] != self.src["dtype"]:
            self.src["math"] = "real"
        if self.src["storage_dtype"] == self.src["dtype"] and self.src["math"] in ("conj.imag", "real", "imag"):
            self.src["math"] = None
        if rng.random() < 0.3:  # the very same view: a no-op, or a raise when dst overlaps itself
            self.src = dict(self.dst, flip=None)
            self.src_shape = list(self.dst_shape)
        self.dst["storage"] = self.src["storage"] = max(self.dst["storage"], self.src["storage"])

    def describe(self) -> str:
        return (f"case seed={self.seed} index={self.index}: {self.form} {self.direction} "
                f"non_blocking={self.non_blocking} pinned={self.pinned} "
                f"src {_describe_view(self.src)} -> dst {_describe_view(self.dst)}")

    # ------------------------------------------------------------ running

    def _devices(self):
        devices = _devices()
        return {
            "h2d": ("cpu", devices[0]), "d2h": (devices[0], "cpu"), "d2d": (devices[-1], devices[-1]),
            "x01": (devices[0], devices[1]), "x10": (devices[-1], devices[0]), "alias": (devices[0], devices[0]),
        }[self.direction]

    def _fit(self):
        """The integer dtype float sources must fit into, if any."""
        integral = not self.dst_dtype.is_floating_point and not self.dst_dtype.is_complex
        return self.dst_dtype if integral and self.dst_dtype != torch.bool else None

    def _build(self, device_src, device_dst):
        """(src storage, dst storage) on the given devices, from the case's torch seed."""
        gen = torch.Generator().manual_seed(self.torch_seed)
        rng = random.Random(self.torch_seed)
        pin_src = device_src == "cpu" and self.pinned and device_dst != "cpu"
        pin_dst = device_dst == "cpu" and self.pinned and device_src != "cpu"
        src_storage = _storage(rng, gen, self.src, self._fit(), device_src, pin_src)
        if self.form == "alias":
            return src_storage, src_storage
        if self.form in ("to", "contiguous"):
            return src_storage, None
        dst_storage = _storage(rng, gen, self.dst, None, device_dst, pin_dst)
        return src_storage, dst_storage

    def _apply(self, src_storage, dst_storage, device_dst):
        """The case's operation; returns the tensor to compare."""
        src = _view(src_storage, self.src)
        if self.form == "to":
            return src.to(device_dst, self.dst_dtype, non_blocking=self.non_blocking)
        if self.form == "contiguous":
            return src.contiguous()
        dst = _view(dst_storage, self.dst)
        dst.copy_(src, non_blocking=self.non_blocking)
        return dst_storage

    def _reference(self, src_storage, dst_storage):
        """The same copy on the CPU. Outside the aliasing cases the source's value is
        converted first, then written with copy_ in one dtype: the CPU's own
        converting copy_ drops a source's negative bit on its float -> float16 /
        bfloat16 path, and negates complex numbers as 0 - z or -z by loop."""
        if self.form == "alias":
            return self._apply(src_storage, dst_storage, "cpu")
        src = _view(src_storage, self.src)
        value = src.resolve_conj().resolve_neg().to(self.dst_dtype)
        if self.form in ("to", "contiguous"):
            return value
        _view(dst_storage, self.dst).copy_(value)
        return dst_storage

    @staticmethod
    def _outcome(fn):
        try:
            return fn(), None
        except Exception as error:  # compared with the CPU's
            return None, error

    def _touched(self, recipe):
        """Storage elements a view reaches (in the storage's dtype)."""
        sizes, strides = recipe["sizes"], recipe["strides"]
        positions = torch.full((), recipe["offset"], dtype=torch.int64)
        for size, stride in zip(sizes, strides):
            positions = positions.unsqueeze(-1) + torch.arange(size) * stride
        return positions.reshape(-1)

    def run(self):
        device_src, device_dst = self._devices()
        pto_src, pto_dst = self._build(device_src, device_dst)
        cpu_src, cpu_dst = self._build("cpu", "cpu")
        actual, pto_error = self._outcome(lambda: self._apply(pto_src, pto_dst, device_dst))
        for device in {device_src, device_dst} - {"cpu"}:
            torch.pto.synchronize(device)
        expected, cpu_error = self._outcome(lambda: self._reference(cpu_src, cpu_dst))
        if (pto_error is None) != (cpu_error is None) or (
                pto_error is not None and type(pto_error) is not type(cpu_error)):
            raise AssertionError(f"{self.describe()}\n  pto raised: {pto_error!r}\n  CPU raised: {cpu_error!r}")
        if pto_error is not None:
            cpu_overlap = str(cpu_error).startswith("unsupported operation")
            assert cpu_overlap == str(pto_error).startswith("unsupported operation"), (
                f"{self.describe()}\n  pto raised: {pto_error!r}\n  CPU raised: {cpu_error!r}")
            return
        if self.form == "alias":
            src_hits = torch.bincount(self._touched(self.src), minlength=self.src["storage"])
            dst_hits = torch.bincount(self._touched(self.dst), minlength=self.dst["storage"])
            if bool(((src_hits > 0) & (dst_hits > 0)).any()) or bool((dst_hits > 1).any()):
                return  # shared elements the CPU does not reject: its result depends on its loop order
        self._compare(actual, expected, device_dst)

    def _strides_of_to(self):
        """The strides .to() gives on the CPU: within one device it may return its
        input; across devices it allocates as empty_like(preserve_format) does."""
        cpu_src, _ = self._build("cpu", "cpu")
        result = _view(cpu_src, self.src).to(self.dst_dtype)
        if self.direction != "d2d":
            result = torch.empty_like(result, memory_format=torch.preserve_format)
        return result.stride()

    def _compare(self, actual, expected, device_dst):
        if self.form in ("to", "contiguous"):
            assert str(actual.device) == (device_dst if self.form == "to" else str(actual.device)), (
                f"{self.describe()}\n  result on {actual.device}")
            assert actual.dtype == expected.dtype and actual.shape == expected.shape, (
                f"{self.describe()}\n  result {actual.dtype}{list(actual.shape)}, CPU {expected.dtype}"
                f"{list(expected.shape)}")
            if self.form == "to" and expected.numel() > 1:
                strides = self._strides_of_to()
                assert actual.stride() == strides, f"{self.describe()}\n  strides {actual.stride()}, CPU {strides}"
        on_cpu = actual.cpu()
        converted = self.src_dtype != self.dst_dtype
        if not same_bits(on_cpu, expected, nan_payloads=not converted):
            diff = (bits(on_cpu) != bits(expected)).reshape(-1).nonzero()[:4].reshape(-1).tolist()
            flat_a, flat_e = on_cpu.reshape(-1), expected.reshape(-1)
            detail = ", ".join(f"[{i}] {flat_a[i // 2 if on_cpu.is_complex() else i].item()!r} vs "
                               f"{flat_e[i // 2 if on_cpu.is_complex() else i].item()!r}" for i in diff)
            raise AssertionError(f"{self.describe()}\n  differs from the CPU at {detail}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="index of the first case")
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--quiet", action="store_true", help="print a case only when it fails")
    parser.add_argument("--keep-going", action="store_true", help="report every failing case, not the first")
    args = parser.parse_args(argv)
    began = time.monotonic()
    failures = 0
    for index in range(args.start, args.start + args.cases):
        case = Case(args.seed, index)
        if not args.quiet:
            print(case.describe(), flush=True)
        try:
            case.run()
        except AssertionError as error:
            failures += 1
            print(f"FAIL {error}", flush=True)
            if not args.keep_going:
                break
    elapsed = time.monotonic() - began
    print(f"{args.cases} cases from index {args.start} of seed {args.seed}: {failures} failed, "
          f"{elapsed:.1f} s", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
