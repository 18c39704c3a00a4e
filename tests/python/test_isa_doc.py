"""docs/ISA.md is generated from csrc/isa/instructions.def; these tests keep the two
from drifting apart: change the table, and the suite fails until the doc is regenerated
(`python -m pypto_torch.isa_doc`)."""

from pypto_torch import _C, isa_doc


def test_isa_doc_is_up_to_date():
    problem = isa_doc.check()
    assert problem == "", problem


def test_every_instruction_is_documented():
    text = isa_doc.render()
    for row in _C._isa_table():
        assert f"| `{row['mnemonic']}` |" in text, row


def test_isa_table_rows():
    table = {row["mnemonic"]: row for row in _C._isa_table()}
    assert table["tadd"] == {"mnemonic": "tadd", "group": "Binary", "inputs": 2,
                             "dtypes": ["u8", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"],
                             "output": "Same", "immediates": ["alpha"],
                             "properties": ["Elementwise", "SameShape", "Tileable", "TypedImmediates"]}
    assert table["tmatmul"]["immediates"] == ["alpha", "beta"]
    assert table["tmatmul"]["properties"] == ["Gemm", "Tileable", "ReadsOutput"]
    assert "Tileable" not in table["tgather"]["properties"]
    assert table["targmax"]["output"] == "Index"
    assert table["tany"]["dtypes"] == ["bool"]


def test_check_reports_a_stale_doc(tmp_path):
    stale = tmp_path / "ISA.md"
    stale.write_text(isa_doc.render().replace("tadd", "tplus"))
    problem = isa_doc.check(stale)
    assert "differs from the instruction table" in problem and "tplus" in problem
    assert isa_doc.main(["--check", "--output", str(stale)]) == 1
    assert isa_doc.main(["--output", str(stale)]) == 0
    assert isa_doc.check(stale) == ""
