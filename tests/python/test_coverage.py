"""pypto_torch.coverage reads the dispatcher's tables; these tests check that what it
calls native, composite or fallback is what the dispatcher and the fallback really do."""

import torch
import torch.nn.functional as F

import pypto_torch
from pypto_torch import coverage


def _dispatches_to_fallback(name: str) -> bool:
    """Whether the dispatcher's computed PrivateUse1 entry for `name` is the boxed fallback."""
    for line in torch._C._dispatch_dump_table(name).splitlines():
        if line.startswith("PrivateUse1:"):
            return "[backend fallback]" in line
    return False


def test_report_sorts_ops():
    result = coverage.report()
    for op in ("aten::add.Tensor", "aten::mm", "aten::_softmax", "aten::sum"):
        assert op in result["native"], op
    assert "aten::histc" in result["fallback"]
    torch.histc(torch.ones(5, device="pto"))  # and it really does fall back
    assert "aten::histc" in pypto_torch.fallback_ops()
    assert "aten::_embedding_bag" in result["fallback_common"]
    assert "aten::multinomial" in result["native_common"]
    assert "aten::sort.values_stable" in result["native_common"]
    assert "aten::mm" in result["native_common"]
    assert "aten::conv2d" in result["composite"]
    assert "aten::cumsum" in result["composite_explicit"]
    assert sum(len(result[kind]) for kind in coverage.KINDS) == result["total"]


def test_common_kinds_match_the_dispatch_table():
    result = coverage.report()
    for name, kind in result["common_kind"].items():
        falls_back = kind in ("fallback", "unsupported")
        assert _dispatches_to_fallback(name) == falls_back, (name, kind)
    common = set(result["common_kind"])
    assert set(result["native_common"]) | set(result["fallback_common"]) | \
        set(result["composite_common"]) == common


def test_main_prints_the_report(capsys):
    assert coverage.main() == 0
    out = capsys.readouterr().out
    assert "native on pto" in out and "Common ops:" in out
    assert "_embedding_bag" in out
