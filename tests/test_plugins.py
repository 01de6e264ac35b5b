"""Plugin isolation: broken, incompatible, unavailable and clashing plugins are each reported for what they are,
never take the good backends down, and asking for one by name fails with the recorded reason."""
from __future__ import annotations

import pytest
from plugin_dists import make_distribution, run_python

GOOD_LOAD = """
def load(device):
    from tinygrad_python.backend import PythonBackend
    return PythonBackend(device)
"""


def plugin(body: str) -> str:
    return "from tinygrad_core.plugins import BackendSpec, hookimpl\n" + GOOD_LOAD + body


FIXTURES = {  # distribution -> (module name, entry point name, source)
    "tinygrad-badimport": ("badimport_plugin", "badimport", "raise RuntimeError('this plugin is broken on purpose')\n"),
    "tinygrad-oldapi": ("oldapi_plugin", "oldapi", plugin("""
@hookimpl
def tinygrad_core_register_backends(register):
    register(BackendSpec(name="OLDAPI", load=load, api_version=(2, 0)))
""")),
    "tinygrad-noprobe": ("noprobe_plugin", "noprobe", plugin("""
@hookimpl
def tinygrad_core_register_backends(register):
    register(BackendSpec(name="NOPROBE", load=load, priority=100, probe=lambda: "no ACME accelerator found",
                         install_hint="plug in an ACME card"))
""")),
    "tinygrad-badhook": ("badhook_plugin", "badhook", plugin("""
@hookimpl
def tinygrad_core_register_backends(register):
    raise ValueError("the hook itself fails")
""")),
    "tinygrad-twin-a": ("twin_a_plugin", "twin_a", plugin("""
@hookimpl
def tinygrad_core_register_backends(register):
    register(BackendSpec(name="TWIN", load=load))
""")),
    "tinygrad-twin-b": ("twin_b_plugin", "twin_b", plugin("""
@hookimpl
def tinygrad_core_register_backends(register):
    register(BackendSpec(name="TWIN", load=load))
""")),
}


@pytest.fixture(scope="module")
def plugins_path(tmp_path_factory):
    where = tmp_path_factory.mktemp("plugins")
    for dist, (module, entry, source) in FIXTURES.items():
        make_distribution(where, dist, {f"{module}.py": source}, {entry: module})
    return where


@pytest.fixture(scope="module")
def backends_rows(plugins_path) -> dict[str, list[str]]:
    done = run_python(["-m", "tinygrad_core.cli", "backends"], plugins_path)
    assert done.returncode == 0, done.stderr
    rows: dict[str, list[str]] = {}
    for line in done.stdout.splitlines()[1:]:
        if line.strip() and not line.startswith("default device"):
            rows.setdefault(line.split()[0], []).append(line)
    return rows


def test_import_failure_is_listed_as_broken(backends_rows):
    (row,) = backends_rows["BADIMPORT"]
    assert "tinygrad-badimport" in row and "broken" in row
    assert "RuntimeError: this plugin is broken on purpose" in row


def test_incompatible_api_is_listed_as_broken(backends_rows):
    (row,) = backends_rows["OLDAPI"]
    assert "broken" in row and "incompatible backend API (2, 0)" in row


def test_failing_hook_is_listed_as_broken(backends_rows):
    (row,) = backends_rows["BADHOOK"]
    assert "broken" in row and "the hook itself fails" in row


def test_unavailable_probe_is_listed_with_its_reason(backends_rows):
    (row,) = backends_rows["NOPROBE"]
    assert "unavailable" in row and "no ACME accelerator found" in row and "plug in an ACME card" in row


def test_name_clash_keeps_one_and_reports_the_other(backends_rows):
    rows = backends_rows["TWIN"]
    assert len(rows) == 2
    ok = [r for r in rows if " ok " in f"{r} "]
    clash = [r for r in rows if "broken" in r and "name clash: TWIN is already provided by tinygrad-twin-" in r]
    assert len(ok) == 1 and len(clash) == 1, rows


def test_good_backends_keep_working(plugins_path, backends_rows):
    assert any(" ok " in f"{r} " for r in backends_rows["PYTHON"])
    done = run_python("""
from tinygrad_core import Tensor, Device
print(Device.DEFAULT)
for device in ("PYTHON", "TWIN", None):
    print(device, (Tensor([1.0, 2.0], device=device) * 3).sum().item())
""", plugins_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] != "NOPROBE", "an unavailable backend must not become the default, whatever its priority"
    assert lines[1:] == ["PYTHON 9.0", "TWIN 9.0", "None 9.0"]


@pytest.mark.parametrize("name, reason", [
    ("BADIMPORT", "this plugin is broken on purpose"),
    ("oldapi", "incompatible backend API (2, 0)"),
    ("NoProbe", "no ACME accelerator found"),
    ("BADHOOK", "the hook itself fails"),
])
def test_selecting_a_broken_backend_raises_with_its_reason(plugins_path, name, reason):
    done = run_python("""
from tinygrad_core import Tensor
from tinygrad_core.device import BackendUnavailable
try:
    Tensor([1.0]).numpy()
except BackendUnavailable as e:
    print("raised:", e)
""", plugins_path, env={"TINYGRAD_DEVICE": name})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("raised:") and reason in done.stdout, done.stdout
