"""The distributions as users get them: wheels built from each pyproject.toml, inspected, and the core's wheel
installed outside the checkout, where `tinygrad-core train` must still find its example and its data."""
from __future__ import annotations

import importlib.metadata
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest
from plugin_dists import ROOT

pytestmark = pytest.mark.slow      # (a quick run deselects it: -m 'not slow')

# distribution folder -> (package, entry point group, entry name) it must declare
DISTRIBUTIONS = {
    ".": ("tinygrad_core", "console_scripts", "tinygrad-core"),
    "tinygrad_cpu": ("tinygrad_cpu", "tinygrad_core.backends", "cpu"),
    "tinygrad_opencl": ("tinygrad_opencl", "tinygrad_core.backends", "cl"),
    "tinygrad_cuda": ("tinygrad_cuda", "tinygrad_core.backends", "cuda"),
    "plugins/tinygrad_python": ("tinygrad_python", "tinygrad_core.backends", "python"),
}
# what a build needs that isn't its own source (the checkout's caches and data stay behind)
NOT_SOURCE = shutil.ignore_patterns("__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis", ".ruff_cache",
                                    "build", "dist", ".venv", ".git", "data", "bench", "tests", "plugins", "docs",
                                    "tinygrad_cpu", "tinygrad_opencl", "tinygrad_cuda", ".ci")


def build_wheel(folder: str, where: pathlib.Path) -> pathlib.Path:
    """`pip wheel` of a copy of the distribution's folder (pip builds in the tree it is given: not in ours)."""
    source = where / "src" / (pathlib.Path(folder).name or "core")
    shutil.copytree(ROOT / folder, source, ignore=NOT_SOURCE)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-w", str(where / "wheels"), str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    name = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]["name"].replace("-", "_")
    return next((where / "wheels").glob(f"{name}-*.whl"))


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, pathlib.Path]:
    where = tmp_path_factory.mktemp("wheels")
    return {folder: build_wheel(folder, where) for folder in DISTRIBUTIONS}


def entry_points(wheel: zipfile.ZipFile) -> dict[str, set[str]]:
    text = wheel.read(next(n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt"))).decode()
    groups: dict[str, set[str]] = {}
    for line in text.splitlines():
        if line.startswith("["):
            group = groups.setdefault(line.strip("[]"), set())
        elif "=" in line:
            group.add(line.split("=")[0].strip())
    return groups


@pytest.mark.parametrize("folder", DISTRIBUTIONS)
def test_wheel_ships_license_typed_marker_and_entry_point(wheels, folder):
    package, group, entry = DISTRIBUTIONS[folder]
    with zipfile.ZipFile(wheels[folder]) as wheel:
        names = wheel.namelist()
        licenses = [n for n in names if ".dist-info/" in n and n.endswith("LICENSE")]
        assert licenses, f"{wheels[folder].name} has no LICENSE: {names}"
        assert wheel.read(licenses[0]) == (ROOT / "LICENSE").read_bytes()
        assert "License-Expression: MIT" in wheel.read(next(n for n in names if n.endswith("METADATA"))).decode()
        assert f"{package}/py.typed" in names and f"{package}/__init__.py" in names
        assert entry in entry_points(wheel).get(group, set()), entry_points(wheel)
        assert not any("/tests/" in n or n.startswith("tests/") for n in names), "tests don't belong in a wheel"


@pytest.mark.parametrize("folder", DISTRIBUTIONS)
def test_every_distribution_has_the_one_version_in_VERSION(wheels, folder):
    # one number for all of them, read from one file: each folder's VERSION is a link to the repository's
    version = (ROOT / "VERSION").read_text().strip()
    assert (ROOT / folder / "VERSION").resolve() == (ROOT / "VERSION").resolve()
    project = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    with zipfile.ZipFile(wheels[folder]) as wheel:
        metadata = wheel.read(next(n for n in wheel.namelist() if n.endswith("METADATA"))).decode()
    assert f"\nVersion: {version}\n" in metadata and wheels[folder].name.split("-")[1] == version
    if folder == ".":
        import tinygrad_core
        assert tinygrad_core.__version__ == version


def test_core_wheel_holds_every_package_and_the_examples(wheels):
    """The root pyproject lists its packages by hand (to map examples/ in): one forgotten would be missing from the
    wheel, so every folder of tinygrad_core/ holding Python must be in it, and every example."""
    with zipfile.ZipFile(wheels["."]) as wheel:
        names = set(wheel.namelist())
    for module in (ROOT / "tinygrad_core").rglob("*.py"):
        assert module.relative_to(ROOT).as_posix() in names, f"{module.relative_to(ROOT)} is not in the wheel"
    for example in (ROOT / "examples").glob("*.py"):
        assert f"tinygrad_core/examples/{example.name}" in names
    # (the conformance plugin is no pytest11 entry point: it loads where asked for, not into every pytest run)
    assert set(entry_points(zipfile.ZipFile(wheels["."]))) == {"console_scripts"}


@pytest.fixture(scope="module")
def installed_core(wheels, tmp_path_factory) -> pathlib.Path:
    """The core's wheel installed into a folder of its own, to be put first on PYTHONPATH (the backends and the
    other dependencies still come from this environment)."""
    target = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target",
                           str(target), str(wheels["."])], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return target


def run_cli(site: pathlib.Path, cwd: pathlib.Path, *args: str, env: dict | None = None):
    environment = {k: v for k, v in os.environ.items() if k not in ("TINYGRAD_DATA", "TINYGRAD_DEVICE", "DEV")}
    environment.update(PYTHONPATH=str(site), **(env or {}))
    # from the installed copy: fail loudly if the checkout's package were imported instead
    code = (f"import sys, tinygrad_core; assert tinygrad_core.__file__.startswith({str(site)!r}), "
            f"tinygrad_core.__file__; from tinygrad_core.cli import main; sys.exit(main({list(args)!r}))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, cwd=cwd,
                          env=environment)


def test_train_runs_from_the_wheel_with_its_data_in_the_cache(installed_core, tmp_path):
    """Outside a checkout the MNIST files are looked for (and would be downloaded) in the cache's datasets folder,
    and the command says where; here they are put there first, so nothing is downloaded."""
    mnist = tmp_path / "cache" / "datasets" / "mnist"
    mnist.mkdir(parents=True)
    for file in (ROOT / "data" / "mnist").iterdir():
        (mnist / file.name).symlink_to(file)
    done = run_cli(installed_core, tmp_path, "train", "--epochs", "1", "--train-limit", "1000",     # (mnist_mlp: default)
                   "--test-limit", "500", "--batch-size", "100", env={"TINYGRAD_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"reading MNIST from {mnist}" in done.stdout, done.stdout
    accuracy = float(done.stdout.strip().splitlines()[-1].removeprefix("test accuracy: ").rstrip("%"))
    assert accuracy > 50, done.stdout        # chance is 10%: the example really trained


def test_train_names_an_unknown_example(installed_core, tmp_path):
    done = run_cli(installed_core, tmp_path, "train", "resnet")
    assert done.returncode == 2 and "resnet" in done.stderr and "mnist_mlp" in done.stderr, done.stderr


def test_the_command_says_its_version_whole_description_and_runs_as_a_module():
    version = subprocess.run([sys.executable, "-m", "tinygrad_core", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.split() == ["tinygrad-core", importlib.metadata.version(
        "tinygrad-core")], version.stdout + version.stderr
    helped = subprocess.run([sys.executable, "-m", "tinygrad_core", "--help"], capture_output=True, text=True)
    # (the docstring's whole first paragraph, not its first line)
    assert helped.returncode == 0 and "benchmark." in " ".join(helped.stdout.split()), helped.stdout
    train = subprocess.run([sys.executable, "-m", "tinygrad_core", "train", "--help"], capture_output=True, text=True)
    assert "--epochs" in train.stdout and "mnist_mlp" in train.stdout, train.stdout


def test_an_uninstalled_first_party_device_names_its_distribution(monkeypatch):
    from tinygrad_core import Device
    from tinygrad_core.device import BackendUnavailable
    from tinygrad_core.plugins import registry
    registry.discover()
    for name, distribution in (("CL", "tinygrad-opencl[pocl]"), ("CUDA", "tinygrad-cuda"),
                               ("PYTHON", "tinygrad_python")):
        monkeypatch.setattr(registry, "backends", {k: v for k, v in registry.backends.items() if k != name})
        monkeypatch.setattr(registry, "broken", [b for b in registry.broken if b.name != name])
        with pytest.raises(BackendUnavailable, match=re.escape(distribution)) as error:
            Device.backend(name)
        assert "tinygrad-cpu" not in str(error.value).split("known backends")[1].split(".", 1)[1]


def test_bench_from_the_wheel_says_it_needs_a_checkout(installed_core, tmp_path):
    done = run_cli(installed_core, tmp_path, "bench")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "source checkout" in done.stderr and "bench_cpu" in done.stderr, done.stderr


def test_data_dir_of_an_installed_package_is_in_the_cache(tmp_path, monkeypatch):
    """Installed, the package's grandparent is site-packages: a data/ folder there (some distribution's) is not the
    repository's, so the datasets go to the cache folder."""
    from tinygrad_core.nn import datasets
    site = tmp_path / "site-packages"
    (site / "data" / "mnist").mkdir(parents=True)
    monkeypatch.setattr(datasets, "__file__", str(site / "tinygrad_core" / "nn" / "datasets.py"))
    monkeypatch.delenv("TINYGRAD_DATA", raising=False)
    monkeypatch.setenv("TINYGRAD_CACHE_DIR", str(tmp_path / "cache"))
    assert datasets.data_dir() == tmp_path / "cache" / "datasets"
    (site / "pyproject.toml").write_text("")               # a checkout's root: its data/ is the one
    assert datasets.data_dir() == site / "data"
