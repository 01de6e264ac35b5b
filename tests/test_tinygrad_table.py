"""docs/TINYGRAD.md says, name by name, what of tinygrad 0.14's Tensor exists here: hold it to the code."""
import pathlib
import re
import pytest
from tinygrad_core import Tensor

DOC = pathlib.Path(__file__).parent.parent / "docs" / "TINYGRAD.md"


def tensor_rows() -> dict[str, str]:
    section = DOC.read_text().split("## Tensor")[1].split("\n## ")[0]
    rows = re.finditer(r"^\| `(\w+)` \| (same|differs|not provided) \|", section, re.M)
    return {m.group(1): m.group(2) for m in rows}


def test_every_row_says_what_the_code_has():
    rows, t = tensor_rows(), Tensor([1.0])
    assert len(rows) > 200
    wrong = [(name, status) for name, status in rows.items() if hasattr(t, name) != (status != "not provided")]
    assert not wrong, f"docs/TINYGRAD.md is out of date for {wrong}"


def test_every_public_name_of_tinygrads_tensor_has_a_row():
    tinygrad = pytest.importorskip("tinygrad")
    missing = sorted(n for n in dir(tinygrad.Tensor) if not n.startswith("_") and n not in tensor_rows())
    assert not missing, f"add rows to docs/TINYGRAD.md for {missing}"
