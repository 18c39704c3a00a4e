"""A node's loop body as data: the ``V.ops`` calls it makes, recorded once at compile
time, replayed through TileOps (tiles.py) at concrete sizes.

Inductor's sizes may be symbols (dynamic shapes: ``s0`` for a batch), while a PTO
program has concrete shapes, strides and immediates. So a program keeps its bodies as
traces in the generated wrapper (a Python literal: names, sympy expressions as text,
dtypes as names) and builds its program for each new set of sizes at run time.

A trace is a list of calls ``(result, op, args)``: `result` numbers the value the call
returns, an argument ``("value", n)`` is an earlier result (``("value", n, i)`` its
i-th part), ``("expr", text)`` a sympy expression (``srepr``: exact, assumptions included), ``("dtype", name)`` a dtype and
``("body", calls, result)`` the body of ops.masked.
"""
from __future__ import annotations

import sympy
import torch
from torch._inductor.ops_handler import DefaultHandler
from torch._inductor.utils import sympy_index_symbol
from torch.utils._sympy import functions as index_functions

# torch's index functions (FloorDiv, ModularIndexing ...), for reading expressions back.
_SYMPY_NAMES = {name: value for name, value in vars(index_functions).items()
                if isinstance(value, type) and issubclass(value, sympy.Basic)}


class _Body:
    """The calls of ops.masked's body, already encoded, and what it returns."""

    def __init__(self, calls: list, result):
        self.encoded = ("body", tuple(calls), result)


class Value:
    """What a recorded call returns: a number in the trace (and a part of a tuple)."""

    def __init__(self, number: int, part: int | None = None):
        self.number = number
        self.part = part

    def __getitem__(self, part: int) -> "Value":
        return Value(self.number, part)

    def encoded(self) -> tuple:
        return ("value", self.number) if self.part is None else ("value", self.number, self.part)


class RecordingOps(DefaultHandler):
    """Records the calls of one loop body; `real_name` says which buffer a name stands
    for (a mutated buffer's new name is the buffer itself)."""

    def __init__(self, real_name=lambda name: name):
        self.real_name = real_name
        self.calls: list = []
        self.count = 0
        self.indirect = 0
        self.buffer_names: list[str] = []  # the buffers it loads and stores, in order
        self.symbols: set = set()          # the symbols its expressions mention

    def _record(self, op: str, args: tuple) -> Value:
        result = Value(self.count)
        self.count += 1
        self.calls.append((result.number, op, tuple(self._encode(a) for a in args)))
        return result

    def _encode(self, value):
        if isinstance(value, Value):
            return value.encoded()
        if isinstance(value, _Body):
            return value.encoded
        if isinstance(value, sympy.Expr):
            self.symbols |= value.free_symbols
            return ("expr", sympy.srepr(value))
        if isinstance(value, torch.dtype):
            return ("dtype", str(value).removeprefix("torch."))
        if isinstance(value, (list, tuple)):
            return ("tuple", tuple(self._encode(v) for v in value))
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise TypeError(f"a loop body argument of type {type(value).__name__}")

    def _default(self, name: str, args: tuple, kwargs: dict):
        if name in ("load", "store", "store_reduction"):
            args = (self.real_name(args[0]), *args[1:])
            if args[0] not in self.buffer_names:
                self.buffer_names.append(args[0])
        if kwargs:
            args = args + tuple(kwargs.values())
        return self._record(name, args)

    def masked(self, mask, body, other):
        outer, self.calls = self.calls, []
        result = body()
        inner, self.calls = self.calls, outer
        return self._record("masked", (mask, _Body(inner, self._encode(result)), other))

    def indirect_indexing(self, x, size, check=True, wrap_neg=True):
        symbol = sympy_index_symbol(f"indirect{self.indirect}")
        self.indirect += 1
        self._record("indirect_indexing", (x, size, check, wrap_neg, str(symbol)))
        return symbol


def replay(calls, ops, sizes: dict) -> None:
    """Runs recorded `calls` through `ops` with the size symbols bound to `sizes`."""
    values: dict[int, object] = {}

    def decode(argument):
        if isinstance(argument, tuple) and argument:
            kind = argument[0]
            if kind == "value":
                value = values[argument[1]]
                return value if len(argument) == 2 else value[argument[2]]
            if kind == "expr":
                return expression(argument[1], sizes)
            if kind == "dtype":
                return getattr(torch, argument[1])
            if kind == "tuple":
                return tuple(decode(a) for a in argument[1])
            if kind == "body":
                return lambda: (replay_into(argument[1]), decode(argument[2]))[1]
        return argument

    def replay_into(body_calls):
        for number, op, args in body_calls:
            decoded = [decode(a) for a in args]
            if op == "indirect_indexing":
                values[number] = ops.indirect_indexing(*decoded[:4], symbol=decoded[4])
            else:
                values[number] = getattr(ops, op)(*decoded)

    replay_into(calls)


def expression(text: str, sizes: dict) -> sympy.Expr:
    """An index or size expression of a trace, its size symbols replaced by `sizes`."""
    parsed = sympy.sympify(text, locals=_SYMPY_NAMES)
    bound = {symbol: sizes[symbol.name] for symbol in parsed.free_symbols if symbol.name in sizes}
    return parsed.xreplace(bound) if bound else parsed
