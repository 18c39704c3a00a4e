"""Compiled graphs kept on disk, so that a second process compiling the same model
starts warm (as Inductor's FX graph and AOTAutograd caches do for it).

What a cold compile spends its backend time on, for a small GPT-2: AOTAutograd's
trace of the aten graph (about 80%), then the lowering and the compiler (the rest).
An entry keeps what both produce: the plan of the inference graph (its PTO-AS
programs, the bindings of their buffers, the eager steps between them, the
constants the graph reads), so that a hit skips AOTAutograd and the lowering, and
only recompiles each program's PTO-AS text.

The key hashes Dynamo's graph (its code and the targets it calls, the values of any
tensor it holds), the inputs' signature (dtype, shape, strides, storage offset,
device, requires_grad; parameters arrive as inputs, so their values are not in it),
grad mode, the backend's options, and the versions of what the plan depends on:
torch, Python, the built ``_C`` and the compile package's sources.

Only graphs AOTAutograd passes straight through are stored: inference (no
gradients), no input mutated in its metadata, every output a fresh tensor, the
compiled graph called with Dynamo's inputs themselves and its results returned as
they are. Training graphs (AOTAutograd's autograd.Function around a forward and a
backward), graphs with symbolic sizes and mode="reduce-overhead" compile as before.
(Torch's own AOTAutograd cache would cover training, but computing its key hashes
torch's sources once per process: about a second, more than it saves here.)

Where: ``$PTO_CACHE_DIR``, else ``$XDG_CACHE_HOME/pypto_torch``, else
``~/.cache/pypto_torch``. ``PTO_COMPILE_CACHE=0`` or ``config.enabled = False`` turns
it off; ``clear_cache()`` empties it. Entries are written to a temporary file and
renamed into place, so concurrent processes see whole entries or none; one that
cannot be read (truncated, corrupt, another format) is dropped with a warning and
rebuilt. ``torch._dynamo.utils.counters["pypto"]`` counts cache_hit, cache_miss,
cache_saved, cache_bypass and cache_corrupt.
"""
from __future__ import annotations

import hashlib
import io
import os
import pickle
import shutil
import sys
import tempfile
import time
import warnings
import weakref
from pathlib import Path

import torch
import torch.fx
from torch._dynamo.utils import compilation_time_metrics, counters

from pypto_torch import _C
from pypto_torch.compile.graph_runner import CompiledGraph, Plan, _signature, native_runner
from pypto_torch.compile.program_builder import ProgramStep

FORMAT = 1   # bump when an entry's layout changes: older entries then miss


class Config:
    """The cache's switch: ``PTO_COMPILE_CACHE=0`` in the environment, or ``enabled = False``."""

    def __init__(self):
        self.enabled = os.environ.get("PTO_COMPILE_CACHE", "1") not in ("0", "")


config = Config()


def cache_dir() -> Path:
    """The folder of the entries: $PTO_CACHE_DIR, else $XDG_CACHE_HOME/pypto_torch, else ~/.cache/pypto_torch."""
    if os.environ.get("PTO_CACHE_DIR"):
        root = Path(os.environ["PTO_CACHE_DIR"])
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pypto_torch"
    return root / "compiled"


def clear_cache() -> None:
    """Removes every stored compiled graph."""
    shutil.rmtree(cache_dir(), ignore_errors=True)


_versions: str | None = None


def _versions_hash() -> str:
    """torch, Python, the built _C and the compile package's sources: a change in any
    of them can change a plan. Computed once per process."""
    global _versions
    if _versions is None:
        digest = hashlib.blake2b(digest_size=16)
        digest.update(f"{FORMAT} {torch.__version__} {sys.version} {_extension_digest()}".encode())
        for path in sorted(Path(__file__).parent.glob("*.py")):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
        _versions = digest.hexdigest()
    return _versions


def _extension_digest() -> str:
    """The digest of the built _C (16 MiB: 30 ms to hash), kept in the cache folder beside
    the size and modification time it was taken at, so that only a rebuild rehashes it."""
    library = Path(_C.__file__)
    status = library.stat()
    stamp_path = cache_dir() / "extension-digest"
    stamp = f"{library.resolve()} {status.st_size} {status.st_mtime_ns}"
    try:
        kept_stamp, kept_digest = stamp_path.read_text().rsplit(" ", 1)
        if kept_stamp == stamp:
            return kept_digest
    except (OSError, ValueError):
        pass
    digest = hashlib.sha256(library.read_bytes()).hexdigest()
    _write_atomically(stamp_path, f"{stamp} {digest}".encode())
    return digest


def _write_atomically(path: Path, data: bytes) -> bool:
    """Writes `path` through a temporary file in its folder and a rename: readers in other
    processes see the old file or the new one, never a part. False where it could not."""
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
        return True
    except OSError as error:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
        warnings.warn(f"pypto compile cache: cannot write {path} ({error})", stacklevel=3)
        return False


def _target_name(target) -> str:
    if isinstance(target, str):
        return target
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', repr(target))}"


def graph_key(gm: torch.fx.GraphModule, example_inputs, options: dict) -> str | None:
    """The entry's name for this graph, inputs and options; None where the graph is not
    stored (symbolic sizes, inputs other than tensors and numbers, a module called whole:
    its parameters would reach the plan without being inputs or in the key)."""
    digest = hashlib.blake2b(digest_size=20)
    digest.update(_versions_hash().encode())
    digest.update(gm.code.encode())
    for node in gm.graph.nodes:
        if node.op == "call_module":
            return None
        if node.op in ("call_function", "call_method"):
            digest.update(_target_name(node.target).encode())
        elif node.op == "get_attr":
            value = getattr(gm, node.target, None)
            if isinstance(value, torch.Tensor):
                digest.update(repr(_tensor_signature(value)).encode())
                digest.update(value.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    for value in example_inputs:
        if isinstance(value, torch.Tensor):
            if any(isinstance(n, torch.SymInt) for n in (*value.shape, *value.stride())):
                return None
            digest.update(repr(_tensor_signature(value)).encode())
        elif isinstance(value, (int, float, bool)) and not isinstance(value, torch.SymInt):
            digest.update(repr((type(value).__name__, value)).encode())
        else:
            return None
    digest.update(repr(sorted((k, repr(v)) for k, v in options.items())).encode())
    digest.update(repr(torch.is_grad_enabled()).encode())
    return digest.hexdigest()


def _tensor_signature(tensor: torch.Tensor) -> tuple:
    return (tensor.dtype, tuple(tensor.shape), tuple(tensor.stride()), tensor.storage_offset(), str(tensor.device),
            tensor.requires_grad)


class _PlanPickler(pickle.Pickler):
    """Pickles a plan: aten ops by name, programs as their PTO-AS text."""

    def reducer_override(self, obj):
        if isinstance(obj, torch._ops.OpOverload):
            return _op_overload, (obj._schema.name, obj._overloadname)
        if isinstance(obj, torch._ops.OpOverloadPacket):
            return _op_packet, (obj._qualified_op_name,)
        if isinstance(obj, ProgramStep):
            return _program_step, (obj.source, obj.bindings)
        return NotImplemented


def _op_packet(qualified_name: str):
    namespace, name = qualified_name.split("::")
    return getattr(getattr(torch.ops, namespace), name)


def _op_overload(qualified_name: str, overload: str):
    return getattr(_op_packet(qualified_name), overload or "default")


_loading_options: dict = {}   # debug and fuse of the programs being unpickled


def _program_step(source: str, bindings: list) -> ProgramStep:
    return ProgramStep(_C._BoundProgram(source, _loading_options["debug"], _loading_options["fuse"]), bindings,
                       source)


class StoredGraph:
    """A compiled graph's plan for the one input signature it was stored with. Dynamo's
    guards keep other signatures away; should one come, it goes to `other_signatures`:
    Dynamo's graph, run eagerly, after a load from disk; AOTAutograd's function, which
    plans it, in the process that compiled the graph."""

    def __init__(self, other_signatures, signature: tuple, plan: Plan, returns_list: bool):
        self.other_signatures = other_signatures
        self.signature = signature
        self.plan = plan
        self.returns_list = returns_list
        self.runner = native_runner(plan, signature)

    def __call__(self, *args):
        """A call the native runner did not take (as_call): another signature, or a plan
        it cannot run."""
        if _signature(args) != self.signature:
            return self.other_signatures(*args)
        outputs = self.plan.run(args)
        return outputs if self.returns_list else tuple(outputs)

    def as_call(self) -> _C._CompiledCall:
        """What Dynamo calls: the plan's runner natively, this object for the rest."""
        return _C._CompiledCall(self, self.runner, self.returns_list)


def load(key: str, gm: torch.fx.GraphModule, debug: bool, fuse: bool) -> StoredGraph | None:
    """The stored graph under `key`, or None (a miss; an unreadable entry is removed)."""
    path = cache_dir() / key[:2] / key
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        _loading_options.update(debug=debug, fuse=fuse)
        entry = pickle.loads(data)
        if entry["format"] != FORMAT:
            raise ValueError(f"format {entry['format']}, not {FORMAT}")
        plan = entry["plan"]
        plan.constants = {slot: tensor.to(device) for slot, (tensor, device) in entry["constants"].items()}
        return StoredGraph(gm, entry["signature"], plan, entry["returns_list"])
    except Exception as error:  # noqa: BLE001: whatever is wrong with the file, compile anew
        counters["pypto"]["cache_corrupt"] += 1
        warnings.warn(f"pypto compile cache: dropping unreadable entry {path} "
                      f"({type(error).__name__}: {error}); compiling anew", stacklevel=2)
        path.unlink(missing_ok=True)
        return None


def store(key: str, signature: tuple, plan: Plan, returns_list: bool) -> None:
    """Writes the entry atomically: a temporary file in the same folder, then a rename."""
    constants = {slot: (tensor.detach().cpu(), str(tensor.device)) for slot, tensor in plan.constants.items()}
    kept = Plan(plan.steps, plan.slot_count, {}, plan.outputs, plan.lowered_nodes, plan.fallback_nodes,
                plan.host_bound)
    entry = {"format": FORMAT, "signature": signature, "plan": kept, "constants": constants,
             "returns_list": returns_list}
    buffer = io.BytesIO()
    try:
        _PlanPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(entry)
    except (pickle.PicklingError, TypeError, AttributeError) as error:
        counters["pypto"]["cache_bypass"] += 1
        warnings.warn(f"pypto compile cache: cannot store a graph ({type(error).__name__}: {error})", stacklevel=2)
        return
    if not _write_atomically(cache_dir() / key[:2] / key, buffer.getvalue()):
        counters["pypto"]["cache_bypass"] += 1
        return
    counters["pypto"]["cache_saved"] += 1


class RecordedGraph(CompiledGraph):
    """A CompiledGraph that, while `recording`, remembers its call's arguments and results
    (so that the backend can see whether AOTAutograd's wrapper passed them straight
    through), and times each lowering in torch._dynamo.utils.compilation_time_metrics
    under "pypto.lowering" (it runs at a signature's first call, after Dynamo's)."""

    recording = True
    recorded_call: tuple | None = None

    def plan_for(self, args):
        planned = len(self.plans)
        start = time.perf_counter()
        plan = super().plan_for(args)
        if len(self.plans) > planned:
            compilation_time_metrics.setdefault("pypto.lowering", []).append(time.perf_counter() - start)
        return plan

    def __call__(self, *args):
        result = super().__call__(*args)
        if self.recording:
            self.recorded_call = (args, result)
        return result


class StoringOnFirstCall:
    """What the backend returns on a miss: runs AOTAutograd's function and, on the first
    call, stores the plan if that function passed inputs and results straight through.
    Then its wrapper does nothing a later call needs: those calls run the plan as a
    second process would after a hit, without it (a 16-float graph: 16-21 -> 7-10 us a
    call on the slow AVX2 EPYC)."""

    def __init__(self, compiled, key: str, graphs: list, metadata_mutations: bool):
        self.compiled = compiled
        self.key = key
        self.graphs = graphs
        self.pending = not metadata_mutations
        self.call = None   # a weak reference to what Dynamo calls (as_call)
        if not self.pending:
            self._stop_recording()

    def as_call(self) -> _C._CompiledCall:
        """What Dynamo calls: this object until the plan is stored, then the stored
        graph's (StoredGraph.as_call), with no Python frame of this one left on the way."""
        call = _C._CompiledCall(self)
        self.call = weakref.ref(call)
        return call

    def __call__(self, *args):
        result = self.compiled(*args)
        if self.pending:
            self.pending = False
            self._store_if_passed_through(args, result)
        return result

    def _stop_recording(self) -> list:
        """The graphs' recorded calls, forgotten by the graphs (they hold tensors)."""
        calls = []
        for graph in self.graphs:
            calls.append(graph.recorded_call)
            graph.recording, graph.recorded_call = False, None
        return calls

    def _store_if_passed_through(self, args, result) -> None:
        calls = self._stop_recording()
        call = calls[0] if len(calls) == 1 else None
        passed = (call is not None and isinstance(result, (list, tuple)) and len(call[0]) == len(args)
                  and all(a is b for a, b in zip(call[0], args)) and len(call[1]) == len(result)
                  and all(a is b for a, b in zip(call[1], result)))
        plan = self.graphs[0].plans.get(_signature(args)) if passed else None
        if plan is None:
            counters["pypto"]["cache_bypass"] += 1
            return
        store(self.key, _signature(args), plan, isinstance(result, list))
        self.compiled = StoredGraph(self.compiled, _signature(args), plan, isinstance(result, list))
        self.graphs = []
        call = self.call() if self.call is not None else None
        if call is not None:
            call.retarget(self.compiled, self.compiled.runner, self.compiled.returns_list)
