"""Copy and view bugs that once crashed or diverged from the CPU, each in a fresh
interpreter: a crash (the complex copies recursed until SIGSEGV) fails only its test."""

import textwrap

import pytest

# Every snippet defines the same computation on the CPU and on pto (`on(device)`),
# and `check` compares them bit for bit.
PRELUDE = """
import torch

def bits(t):
    t = t.detach().cpu().resolve_conj().resolve_neg()
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])

def check(on):
    torch.manual_seed(0)
    expected = on("cpu")
    torch.manual_seed(0)
    actual = on("pto")
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual, expected)
    assert torch.equal(bits(actual), bits(expected)), (actual, expected)
    print("ok")

def outcome(fn):
    try:
        fn()
        return "ok"
    except RuntimeError as error:
        return str(error).split(".")[0]

def check_raises(on):
    expected, actual = outcome(lambda: on("cpu")), outcome(lambda: on("pto"))
    assert expected == actual, (expected, actual)
    assert expected.startswith("unsupported operation"), expected
    print("ok")
"""

COMPLEX_VIEWS = {
    "conj_to_cpu": """
        def on(device):
            z = torch.randn(4, 6, dtype=torch.cfloat).to(device)
            return z.conj().cpu()
        check(on)""",
    "strided_complex_to_cpu": """
        def on(device):
            return torch.randn(4, 6, dtype=torch.cfloat).to(device)[:, ::2].cpu()
        check(on)""",
    "complex_into_strided_view": """
        def on(device):
            z = torch.zeros(2, 6, dtype=torch.cfloat, device=device)
            z[:, :3] = torch.randn(2, 3, dtype=torch.cfloat).to(device)
            return z
        check(on)""",
    "pad_complex": """
        def on(device):
            return torch.nn.functional.pad(torch.randn(2, 3, dtype=torch.cfloat).to(device), (0, 3))
        check(on)""",
    "fft2_with_padding": """
        def on(device):
            return torch.fft.fft2(torch.randn(5, 6, 7).to(device), s=(3, 10), dim=(1, 2))
        check(on)""",
    "float_into_strided_complex": """
        def on(device):
            z = torch.zeros(3, 8, dtype=torch.cdouble, device=device)
            z[:, 1::2] = torch.randn(3, 4).to(device)
            return z
        check(on)""",
    "conj_imag_to_half": """
        def on(device):
            neg = torch.randn(5, dtype=torch.cfloat).to(device).conj().imag
            out = torch.empty(5, dtype=torch.float16, device=device)
            # The CPU's own copy_ drops the negative bit on this path (it gives +imag):
            # its reference resolves it first.
            return out.copy_(neg.resolve_neg() if device == "cpu" else neg)
        check(on)""",
    "complex_to_bool_on_device": """
        def on(device):
            z = torch.tensor([0j, 1j, 1 + 0j, complex("nan")]).to(device)
            out = torch.empty(8, dtype=torch.bool, device=device)[::2]
            return out.copy_(z)
        check(on)""",
}

ACROSS_DEVICES = {
    "strided_to_other_device": """
        def on(device):
            x = torch.randn(4, 6).to(device)
            target = "pto:1" if device == "pto" else "cpu"
            return x[:, ::2].to(target)
        check(on)""",
    "converting_to_other_device": """
        def on(device):
            x = torch.randn(4, 6).to(device)
            return x.to("pto:1" if device == "pto" else "cpu", torch.float64)
        check(on)""",
    "conj_complex_to_other_device": """
        def on(device):
            z = torch.randn(3, 4, dtype=torch.cdouble).to(device)
            return z.conj().t().to("pto:1" if device == "pto" else "cpu", torch.cfloat)
        check(on)""",
    "other_device_into_strided_view": """
        def on(device):
            target = torch.zeros(4, 6, dtype=torch.float16, device="pto:1" if device == "pto" else "cpu")
            target[:, 1::2].copy_(torch.randn(3, 4).to(device).t())
            return target
        check(on)""",
}

OVERLAPS = {
    "copy_shifted_onto_itself": "lambda d: (lambda x: x[1:].copy_(x[:-1]))(torch.randn(6, device=d))",
    "copy_into_expanded": "lambda d: torch.randn(4, device=d).expand(3, 4).copy_(torch.randn(3, 4, device=d))",
    "index_add_source_aliases_self": """lambda d: (lambda x: x.index_add_(
        0, torch.tensor([0, 1], device=d), x[1:3]))(torch.randn(5, 3, device=d))""",
    "gather_out_is_input": """lambda d: (lambda x: torch.gather(
        x, 1, torch.tensor([[0, 1], [1, 0]], device=d), out=x))(torch.randn(2, 2, device=d))""",
    "index_select_out_is_input": """lambda d: (lambda x: torch.index_select(
        x, 0, torch.tensor([1, 0], device=d), out=x))(torch.randn(2, 3, device=d))""",
    "index_put_values_alias_self": """lambda d: (lambda x: x.index_put_(
        (torch.tensor([0, 1], device=d),), x[1:3]))(torch.randn(5, device=d))""",
    "index_put_index_aliases_self": """lambda d: (lambda x: x.index_put_(
        (x[:2],), torch.ones(2, dtype=torch.long, device=d)))(torch.zeros(5, dtype=torch.long, device=d))""",
    "take_out_is_input": """lambda d: (lambda x: torch.take(
        x, torch.tensor([1, 0], device=d), out=x))(torch.randn(2, device=d))""",
    "put_source_aliases_self": """lambda d: (lambda x: x.put_(
        torch.tensor([0, 1], device=d), x[1:3]))(torch.randn(5, device=d))""",
    "masked_scatter_into_expanded": """lambda d: torch.randn(4, device=d).expand(3, 4).masked_scatter_(
        torch.ones(3, 4, dtype=torch.bool, device=d), torch.randn(12, device=d))""",
    "masked_select_out_is_input": """lambda d: (lambda x: torch.masked_select(
        x, x > 0, out=x))(torch.randn(5, device=d))""",
    "cat_out_overlaps_inputs": """lambda d: (lambda x: torch.cat(
        [x[:2], x[2:4]], out=x[2:]))(torch.randn(6, 3, device=d))""",
    "cat_out_expanded": """lambda d: torch.cat(
        [torch.randn(1, 3, device=d)] * 2, out=torch.randn(1, 3, device=d).expand(2, 3))""",
    "stack_out_is_input": """lambda d: (lambda x: torch.stack([x[0], x[1]], out=x))(torch.randn(2, 3, device=d))""",
    "sort_values_overlap_input": """lambda d: (lambda x: torch.sort(
        x[:4], out=(x[1:], torch.empty(4, dtype=torch.long, device=d))))(torch.randn(5, device=d))""",
    "topk_values_overlap_input": """lambda d: (lambda x: torch.topk(
        x, 2, out=(x[:2], torch.empty(2, dtype=torch.long, device=d))))(torch.randn(5, device=d))""",
    "cumsum_out_overlaps_input": "lambda d: (lambda x: torch.cumsum(x[:4], 0, out=x[1:]))(torch.randn(5, device=d))",
    "clamp_out_overlaps_input": "lambda d: (lambda x: torch.clamp(x[:4], 0, 1, out=x[1:]))(torch.randn(5, device=d))",
    "addcmul_out_overlaps_input": """lambda d: (lambda x: torch.addcmul(
        x[:4], x[:4], x[:4], out=x[1:]))(torch.randn(5, device=d))""",
    "index_fill_index_aliases_self": """lambda d: (lambda x: x.index_fill_(
        0, x[:2], 1))(torch.zeros(5, dtype=torch.long, device=d))""",
    "index_copy_index_aliases_self": """lambda d: (lambda x: x.index_copy_(
        0, x[:2], torch.zeros(2, dtype=torch.long, device=d)))(torch.zeros(5, dtype=torch.long, device=d))""",
    "masked_fill_mask_overlaps_self": """lambda d: (lambda x: x[1:].masked_fill_(
        x[:-1], True))(torch.zeros(5, dtype=torch.bool, device=d))""",
}


def _run(python, body: str):
    result = python(PRELUDE + textwrap.dedent(body), PTO_FALLBACK="silent")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("ok"), result.stdout + result.stderr


@pytest.mark.parametrize("name", COMPLEX_VIEWS)
def test_complex_and_math_bit_copies(python, name):
    _run(python, COMPLEX_VIEWS[name])


@pytest.mark.parametrize("name", ACROSS_DEVICES)
def test_copies_between_pto_devices(python, name):
    _run(python, ACROSS_DEVICES[name])


@pytest.mark.parametrize("name", OVERLAPS)
def test_overlapping_writes_raise_as_on_cpu(python, name):
    _run(python, f"check_raises({OVERLAPS[name]})")


def test_fill_of_an_expanded_tensor(python):
    _run(python, """
        def on(device):
            base = torch.zeros(4, device=device)
            base.expand(3, 4).fill_(2.5)
            base[None].expand(5, 4).zero_()
            return base
        check(on)""")


def test_copy_of_a_view_onto_itself_is_a_no_op(python):
    _run(python, """
        def on(device):
            x = torch.randn(3, 1).to(device)
            view = x.expand(3, 4)
            view.copy_(view)
            return x
        check(on)""")
