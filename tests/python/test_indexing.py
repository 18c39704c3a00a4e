"""Indexing on pto: gather, index_select, index_add, embedding (and its
backward), arange, tril/triu and nll_loss / cross_entropy run natively; an index out of range raises at the next
synchronising call, naming tgather, and the device stays usable."""

import pytest
import torch
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db

import pypto_torch
from opinfo_sweep import ONE_ULP, opinfo_tests

NAMES = {"gather", "index_select", "index_add", "nn.functional.embedding", "nn.functional.nll_loss",
         "nn.functional.cross_entropy", "tril", "triu"}
OPS = [op for op in op_db if op.name in NAMES and op.variant_test_name == ""]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]


test_opinfo_forward_matches_cpu, test_opinfo_gradients_match_cpu = opinfo_tests(
    OPS, DTYPES, tolerance=lambda op, dtype: ONE_ULP.get(dtype, {}),
    gradient_tolerance={"rtol": 1e-4, "atol": 1e-4})


# Fractional bounds: an int64 range counts from them truncated, an int32 one from the doubles.
@pytest.mark.parametrize("start,end,step,dtype", [(0, 10, 1, torch.int64), (2, 11, 3, torch.int32),
                                                  (0.0, 1.0, 0.1, torch.float32), (5, -5, -2, torch.int64),
                                                  (0.0, -8.000001, -4.0, torch.int64), (2.1, -2.9, -1.0, torch.int64),
                                                  (2.1, -2.9, -1.0, torch.int32), (-0.9, 2.1, 2.0, torch.int64)])
def test_arange(start, end, step, dtype):
    assert_close(torch.arange(start, end, step, dtype=dtype, device="pto").cpu(),
                 torch.arange(start, end, step, dtype=dtype))


def test_classifier_training_step_is_native():
    model = torch.nn.Sequential(torch.nn.Embedding(20, 8), torch.nn.Flatten(), torch.nn.Linear(24, 5)).to("pto")
    tokens = torch.randint(0, 20, (4, 3), device="pto")
    labels = torch.tensor([0, 4, -100, 2], device="pto")
    before = pypto_torch.fallback_ops()
    torch.nn.functional.cross_entropy(model(tokens), labels).backward()
    assert pypto_torch.fallback_ops() == before


def test_out_of_range_index_raises_at_the_next_sync(fails_at_next_sync):
    out = fails_at_next_sync('x.gather(1, torch.full((3, 1), 9, device="pto"))')
    assert "tgather failed" in out and "index 9 is out of bounds for dimension 1 with size 4" in out


def test_causal_mask_is_native():
    scores = torch.randn(2, 5, 5).to("pto")
    before = pypto_torch.fallback_ops()
    mask = torch.ones(5, 5, device="pto", dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, float("-inf")).triu(-2)
    assert pypto_torch.fallback_ops() == before
    reference = torch.ones(5, 5, dtype=torch.bool).tril()
    assert torch.equal(mask.cpu(), reference)
    assert torch.isfinite(scores.cpu()).sum() > 0
