"""Plugin isolation: broken, incompatible, unavailable and clashing plugins are each reported for what they are,
never take the good backends down, and asking for one by name fails with the recorded reason."""
from __future__ import annotations

import itertools

import pytest
from plugin_dists import make_distribution, run_python

from tinygrad_core import cli, device, plugins
from tinygrad_core.device import BackendUnavailable
from tinygrad_core.plugins import BackendSpec, Registry, hookimpl

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
    register(BackendSpec(name="OLDAPI", load=load, api_version=(3, 0)))
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
    register(BackendSpec(name="TWIN", load=load, priority=50))
""")),
    "tinygrad-noload": ("noload_plugin", "noload", plugin("""
@hookimpl
def tinygrad_core_register_backends(register):
    register(BackendSpec(name="NOLOAD", load=lambda device: None, api_version=(2, 0), priority=1000))
""")),
    "aaa-fake-cpu": ("fake_cpu_plugin", "aaa_cpu", plugin("""
@hookimpl
def tinygrad_core_register_backends(register):
    register(BackendSpec(name="CPU", load=lambda device: None, priority=1000, describe=lambda: 1 / 0))
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
    assert "broken" in row and "incompatible backend API (3, 0)" in row


def test_failing_hook_is_listed_as_broken(backends_rows):
    (row,) = backends_rows["BADHOOK"]
    assert "broken" in row and "the hook itself fails" in row


def test_unavailable_probe_is_listed_with_its_reason(backends_rows):
    (row,) = backends_rows["NOPROBE"]
    assert "unavailable" in row and "no ACME accelerator found" in row and "plug in an ACME card" in row


def test_name_clash_keeps_one_and_reports_the_other(backends_rows):
    """twin-b has the higher priority and may come first on the path: the name still goes by distribution name."""
    holder, loser = backends_rows["TWIN"]
    assert "tinygrad-twin-a" in holder and " ok " in holder and "holds TWIN over tinygrad-twin-b" in holder
    assert "tinygrad-twin-b" in loser and " clash " in loser and "name clash: TWIN is held by tinygrad-twin-a" in loser
    assert "TINYGRAD_BACKEND_TWIN=tinygrad-twin-b picks this one" in loser


def test_an_impostor_cpu_leaves_the_real_one_the_default(plugins_path, backends_rows):
    holder, impostor = backends_rows["CPU"]
    assert "tinygrad-cpu" in holder and "holds CPU over aaa-fake-cpu" in holder
    assert "aaa-fake-cpu" in impostor and "name clash: CPU is held by tinygrad-cpu" in impostor
    if " ok " not in holder:
        pytest.skip(f"tinygrad-cpu is not usable here: {holder}")
    done = run_python("""
from tinygrad_core import Tensor, Device
print(Device.DEFAULT, Device.backend("cpu").distribution, (Tensor([1.0, 2.0]) * 3).sum().item())
""", plugins_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["CPU", "tinygrad-cpu", "9.0"]


def test_a_backend_that_fails_to_load_is_listed_broken_and_never_the_default(plugins_path, backends_rows):
    (row,) = backends_rows["NOLOAD"]
    assert " broken " in row and "load('NOLOAD') failed: TypeError" in row and "returned NoneType" in row
    done = run_python("""
from tinygrad_core import Tensor, Device
print(Device.DEFAULT, (Tensor([1.0, 2.0]) * 3).sum().item())
""", plugins_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] != "NOLOAD" and done.stdout.split()[1] == "9.0"


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
    ("oldapi", "incompatible backend API (3, 0)"),
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


# ---- the registry itself, on fresh Registry() objects with plugins added by hand (nothing global is touched)

class FakePlugin:
    def __init__(self, *specs: BackendSpec):
        self.specs = specs

    @hookimpl
    def tinygrad_core_register_backends(self, register):
        for spec in self.specs:
            register(spec)


def fresh_registry(*plugins_and_distributions) -> Registry:
    registry = Registry()
    registry.discovered = True          # only the plugins given here, not the installed ones
    for plugin, distribution in plugins_and_distributions:
        registry.add_plugin(plugin, distribution)
    return registry


def claim(name: str, priority: int = 0, **fields) -> FakePlugin:
    return FakePlugin(BackendSpec(name=name, load=lambda device: None, priority=priority, **fields))


@pytest.mark.parametrize("name, first_party", [("CPU", "tinygrad-cpu"), ("CL", "tinygrad-opencl"),
                                               ("CUDA", "tinygrad-cuda"), ("PYTHON", "tinygrad-python")])
@pytest.mark.parametrize("impostor_first", [True, False])
def test_first_party_keeps_its_name_and_stays_the_default(name, first_party, impostor_first):
    plugins = [(claim(name.lower(), priority=1000), "aaa-impostor"), (claim(name, priority=1), first_party)]
    registry = fresh_registry(*(plugins if impostor_first else plugins[::-1]))
    holder, impostor = [b for b in registry.all() if b.name == name]
    assert registry.backends[name] is holder and holder.distribution == first_party and holder.status == "ok"
    assert [b.distribution for b in registry.usable()] == [first_party]
    assert impostor.distribution == "aaa-impostor" and impostor.status == "clash"
    assert impostor.reason == f"name clash: {name} is held by {first_party}"
    assert holder.clash == f"holds {name} over aaa-impostor; TINYGRAD_BACKEND_{name}=<distribution> picks another"
    assert impostor.clash == f"TINYGRAD_BACKEND_{name}=aaa-impostor picks this one"


def third_parties(priorities=(0, 0, 0)) -> list[tuple[FakePlugin, str]]:
    distributions = ("tinygrad-zeta", "tinygrad-alpha", "tinygrad-mid")
    return [(claim("TWIN", priority), dist) for dist, priority in zip(distributions, priorities)]


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_third_party_clash_goes_by_distribution_name_not_order_or_priority(order):
    plugins = third_parties(priorities=(100, 0, 50))
    registry = fresh_registry(*(plugins[i] for i in order))
    holder, *losers = [(b.distribution, b.status) for b in registry.all()]
    assert holder == ("tinygrad-alpha", "ok")
    assert sorted(losers) == [("tinygrad-mid", "clash"), ("tinygrad-zeta", "clash")]
    assert registry.backends["TWIN"].clash.startswith("holds TWIN over tinygrad-mid, tinygrad-zeta;")
    assert all(b.reason == "name clash: TWIN is held by tinygrad-alpha" for b in registry.all()[1:])


@pytest.mark.parametrize("chosen", ["tinygrad-zeta", "tinygrad-mid"])
def test_environment_variable_picks_the_holder(monkeypatch, chosen):
    monkeypatch.setenv("TINYGRAD_BACKEND_TWIN", chosen)
    registry = fresh_registry(*third_parties())
    assert registry.backends["TWIN"].distribution == chosen
    assert [b.distribution for b in registry.usable()] == [chosen]
    assert {b.reason for b in registry.all()[1:]} == {f"name clash: TWIN is held by {chosen}"}


def test_environment_variable_can_pick_over_a_first_party(monkeypatch):
    monkeypatch.setenv("TINYGRAD_BACKEND_CPU", "tinygrad-mine")
    registry = fresh_registry((claim("CPU"), "tinygrad-cpu"), (claim("CPU"), "tinygrad-mine"))
    assert registry.backends["CPU"].distribution == "tinygrad-mine"
    assert registry.all()[1].reason == "name clash: CPU is held by tinygrad-mine"


@pytest.mark.parametrize("unusable", [{"probe": lambda: "no ACME card"}, {"api_version": (3, 0)}])
def test_a_clash_never_makes_a_working_backend_unavailable(unusable):
    registry = fresh_registry((claim("TWIN", **unusable), "tinygrad-alpha"), (claim("TWIN"), "tinygrad-beta"))
    holder, loser = registry.all()
    assert (holder.distribution, holder.status) == ("tinygrad-beta", "ok")
    assert loser.distribution == "tinygrad-alpha" and loser.status in ("clash", "broken")
    assert [b.distribution for b in registry.usable()] == ["tinygrad-beta"]


@pytest.fixture
def isolated_device(monkeypatch):
    """A Device over a fresh registry: the global one is put back afterwards."""
    def make(*plugins_and_distributions):
        registry = fresh_registry(*plugins_and_distributions)
        monkeypatch.setattr(device, "registry", registry)
        monkeypatch.setattr(plugins, "registry", registry)
        monkeypatch.delenv("TINYGRAD_DEVICE", raising=False)
        monkeypatch.delenv("DEV", raising=False)
        monkeypatch.setattr(device, "Device", fresh := device._Device())    # (the one the command line asks)
        return fresh
    return make


@pytest.mark.parametrize("returned, type_name", [(None, "NoneType"), ("CPU", "str"), (object(), "object")])
def test_load_returning_something_else_than_a_compiled_is_backend_unavailable(isolated_device, returned, type_name):
    fake = isolated_device((FakePlugin(BackendSpec(name="ODD", load=lambda device: returned)), "tinygrad-odd"))
    with pytest.raises(BackendUnavailable, match=rf"backend ODD \(tinygrad-odd 0\) failed to load: TypeError: "
                                                 rf"load\('ODD'\) returned {type_name}, not a Compiled"):
        fake["odd"]


def test_load_that_raises_is_backend_unavailable_naming_the_plugin(isolated_device):
    def load(device):
        raise OSError("libacme.so: cannot open shared object file")
    fake = isolated_device((FakePlugin(BackendSpec(name="ACME", load=load)), "tinygrad-acme"))
    with pytest.raises(BackendUnavailable, match=r"backend ACME \(tinygrad-acme 0\) failed to load: OSError: "
                                                 r"libacme.so: cannot open"):
        fake["ACME"]


def test_backends_table_is_printed_whatever_the_impostors_do(isolated_device, capsys):
    isolated_device(
        (claim("NONE", priority=100, describe=lambda: 1 / 0), "tinygrad-none"),
        (claim("ODDPROBE", probe=lambda: 42, install_hint="install acme"), "tinygrad-oddprobe"),
        (FakePlugin(BackendSpec(name="BADPRIORITY", load=lambda device: None, priority="high")), "tinygrad-badprio"),
        (claim("gpu"), "tinygrad-gpuname"),     # the alias of the best GPU backend: a backend by that name is unreachable
        (claim("CPU", priority=1000), "aaa-impostor"), (claim("CPU"), "tinygrad-cpu"))
    assert cli.cmd_backends(None) == 0
    out = capsys.readouterr().out
    table = {line.split()[1]: line for line in out.splitlines()[1:] if len(line.split()) > 3}
    # (every claim here loads None: listed broken once it fails to load, never ok, never the default)
    assert " broken " in table["tinygrad-none"] and "returned NoneType, not a Compiled" in table["tinygrad-none"]
    assert " unavailable " in table["tinygrad-oddprobe"] and "42 (install acme)" in table["tinygrad-oddprobe"]
    assert " broken " in table["tinygrad-badprio"] and "an int priority" in table["tinygrad-badprio"]
    assert " broken " in table["tinygrad-gpuname"] and "other than GPU" in table["tinygrad-gpuname"]
    assert " clash " in table["aaa-impostor"] and " broken " in table["tinygrad-cpu"]
    assert "default device: none" in out and "NONE devices" not in out
