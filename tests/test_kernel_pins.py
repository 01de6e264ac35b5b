"""The kernels of the example models' training steps, pinned: how many, and each one's name and opts.

A change to the scheduler, the codegen passes or the heuristics that is meant to keep behaviour must keep this list;
one that is meant to change it regenerates the pins (`python tests/test_kernel_pins.py --write`) and says why in its
commit. The step is the examples' own (forward, loss, backward, Adam update, realized as one schedule). The CPU
backend's choices follow the host's vector width, so the pins are of an AVX-512 renderer on whatever host runs them
(LLVM splits the wider vectors where the host's are narrower: the kernels still run and train)."""
import dataclasses
import json
import os
import subprocess
import sys
import numpy as np
import pytest
from tinygrad_core import Tensor, Device
from tinygrad_core.engine import realize
from tinygrad_core.nn.optim import Adam
from tinygrad_core.nn.state import get_parameters

HERE = os.path.dirname(os.path.abspath(__file__))
PINS = os.path.join(HERE, "kernel_pins.json")
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
from training import make_train_step  # noqa: E402
from mnist_mlp import TinyMLP  # noqa: E402
from mnist_cnn import MnistCNN  # noqa: E402
from cifar_cnn import TinyCNN  # noqa: E402

MODELS = {"mnist_mlp": (TinyMLP, (128, 1, 28, 28)), "mnist_cnn": (MnistCNN, (128, 1, 28, 28)),
          "seed_cnn": (TinyCNN, (64, 3, 32, 32))}


def opts_text(runner) -> str:
    """The opts that differ from the defaults, as `field=value` (a copy has none)."""
    if not hasattr(runner, "opts"):
        return ""
    defaults = type(runner.opts)()
    return " ".join(f"{f.name}={getattr(runner.opts, f.name)}" for f in dataclasses.fields(runner.opts)
                    if getattr(runner.opts, f.name) != getattr(defaults, f.name))


def use_the_pinned_renderer():
    """The CPU backend's heuristics as on an AVX-512 host (64-byte vectors, 32 registers)."""
    if Device.DEFAULT == "CPU":
        from tinygrad_cpu.renderer import LLVMRenderer
        Device["CPU"].renderer = LLVMRenderer(simd_width=64)


def kernels_of_a_step(model_name: str) -> list[str]:
    """`name opts` for every kernel the second training step launches (the first compiles; they are the same)."""
    make, shape = MODELS[model_name]
    Tensor.manual_seed(0)
    model = make()
    step = make_train_step(model, Adam(get_parameters(model), lr=1e-3), jit=False)
    rng = np.random.default_rng(0)

    def batch():   # new tensors per step, as in training (a graph on the same tensors may find parts computed)
        return Tensor(rng.standard_normal(shape).astype(np.float32)), Tensor(rng.integers(0, 10, shape[0]).astype(np.int32))
    step(*batch())
    launched, runner_for = [], realize.runner_for

    def spy(item):
        runner = runner_for(item)
        launched.append(f"{runner.name} {opts_text(runner)}".strip())
        return runner
    realize.runner_for = spy
    try:
        step(*batch())
    finally:
        realize.runner_for = runner_for
    return launched


@pytest.fixture(scope="module")
def launched_now():
    # in a fresh process: a graph may find parts already computed by earlier tests (equal constants are one node)
    done = subprocess.run([sys.executable, __file__, "--write", "-"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.skipif(Device.DEFAULT != "CPU", reason="the pins are the CPU backend's kernels")
@pytest.mark.parametrize("model_name", list(MODELS))
def test_the_example_models_launch_the_pinned_kernels(model_name, launched_now):
    with open(PINS) as f:
        pinned = json.load(f)[model_name]
    launched = launched_now[model_name]
    assert len(launched) == len(pinned), f"{model_name}: {len(launched)} kernels, pinned {len(pinned)}"
    assert launched == pinned


def test_a_step_launches_the_same_kernels_every_time():
    # the schedule once followed the memory addresses of the live tensors joining it: 38 to 41 kernels for one model
    assert kernels_of_a_step("mnist_mlp") == kernels_of_a_step("mnist_mlp")


if __name__ == "__main__":
    if sys.argv[1:2] != ["--write"]:
        sys.exit("usage: python tests/test_kernel_pins.py --write [PATH or -]  (regenerates the pins)")
    path = sys.argv[2] if len(sys.argv) > 2 else PINS
    use_the_pinned_renderer()
    text = json.dumps({name: kernels_of_a_step(name) for name in MODELS}, indent=1) + "\n"
    if path == "-":
        sys.stdout.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)
        print(f"wrote {path}")
