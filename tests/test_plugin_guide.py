"""docs/PLUGINS.md, tested as a newcomer would use it: the guide's own `file=` code blocks become a throwaway
distribution, which the core discovers through its entry point and which passes the conformance suite."""
from __future__ import annotations

import re
import tomllib

import pytest
from plugin_dists import ROOT, conformance, make_distribution, run_python

GUIDE = ROOT / "docs" / "PLUGINS.md"
BLOCK = re.compile(r"^```\w+ file=(\S+)\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def guide_files() -> dict[str, str]:
    """Every block marked file=PATH, concatenated per path in the order the guide shows them."""
    files: dict[str, str] = {}
    for path, body in BLOCK.findall(GUIDE.read_text()):
        files[path] = files[path] + "\n\n" + body if path in files else body
    return files


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    files = guide_files()
    project = tomllib.loads(files.pop("pyproject.toml"))["project"]
    entry_points = project["entry-points"]["tinygrad_core.backends"]
    return make_distribution(tmp_path_factory.mktemp("toy"), project["name"], files, entry_points, project["version"])


def test_guide_has_a_complete_plugin():
    files = guide_files()
    assert {"pyproject.toml", "tinygrad_toy/__init__.py", "tinygrad_toy/backend.py"} <= set(files)
    compile(files["tinygrad_toy/backend.py"], "backend.py", "exec")


def test_guide_plugin_is_discovered(toy):
    done = run_python(["-m", "tinygrad_core.cli", "backends"], toy)
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("TOY "))
    assert "tinygrad-toy" in row and " ok " in f"{row} ", row


def test_guide_plugin_computes(toy):
    done = run_python("from tinygrad_core import Tensor; print((Tensor([1., 2.]) * 3).max().item())", toy,
                      env={"TINYGRAD_DEVICE": "TOY"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "6.0"


def test_guide_plugin_passes_the_first_sections(toy):
    done, report = conformance("TOY", toy, "--sections", "1,2,3,4,7")
    assert done.returncode == 0, done.stdout[-4000:]
    assert report["backend"] == "TOY" and report["distribution"] == "tinygrad-toy" and report["passed"]
    for section in ("1", "2", "3", "4", "7"):
        counts = report["sections"][section]
        assert counts["failed"] == 0 and counts["passed"] > 0, (section, counts)
    # what TOY doesn't declare is skipped, and says why
    skipped = [t for t in report["tests"] if t["outcome"] == "skipped"]
    assert skipped and all("declares" in t["message"] for t in skipped)
    assert set(report["capabilities"]["dtypes"]) == {"bool", "int", "float"}
