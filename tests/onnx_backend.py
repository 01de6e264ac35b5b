"""The ONNX project's backend test suite (`onnx.backend.test`) run through tinygrad_core.nn.onnx.

TinygradBackend is the adapter the suite's runner expects (prepare -> rep.run(inputs) -> outputs). run_case runs
one test case the way onnx's runner does (Runner.assert_similar_outputs compares), and says why it failed:
  python -m tests.onnx_report --device CPU       (all cases; see tests/onnx_report.py)"""
from __future__ import annotations

import functools
import os
import warnings

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep
from onnx.backend.test.loader import load_model_tests
from onnx.backend.test.runner import Runner

from tinygrad_core.dtype import dtypes
from tinygrad_core.nn.onnx import OnnxRunner

# the suite's cases with data in the onnx wheel: generated node tests, then small models stored as files
MODEL_KINDS = ("simple", "pytorch-converted", "pytorch-operator")


class TinygradRep(BackendRep):
    def __init__(self, model: onnx.ModelProto, device: str):
        self.runner = OnnxRunner(model).to(device)

    def run(self, inputs, **kwargs):
        inputs = dict(zip(self.runner.inputs, inputs))
        return [_numpy(t) for t in self.runner(inputs).values()]


def _numpy(t):
    """bfloat16 comes back as float32 (numpy has none); the suite compares dtypes, so give it ml_dtypes' one."""
    return t.numpy().astype(onnx.helper.tensor_dtype_to_np_dtype(16)) if t.dtype == dtypes.bfloat16 else t.numpy()


class TinygradBackend(Backend):
    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        return TinygradRep(model, device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return True


@functools.cache
def cases() -> dict:
    """{test name: onnx TestCase}: the node tests first, then the model tests stored in the wheel."""
    with warnings.catch_warnings():          # (generating some cases overflows numpy casts on purpose)
        warnings.simplefilter("ignore")
        found = {c.name: c for c in load_model_tests(kind="node")}
    for kind in MODEL_KINDS:
        found.update({c.name: c for c in load_model_tests(kind=kind) if c.model_dir})
    return found


def model_of(case) -> onnx.ModelProto:
    return case.model if case.model is not None else onnx.load(os.path.join(case.model_dir, "model.onnx"))


def data_sets(case):
    if case.data_sets is not None:
        return [([_array(t) for t in ins], [_array(t) for t in outs]) for ins, outs in case.data_sets]
    sets = []
    for d in sorted(os.listdir(case.model_dir)):
        if d.startswith("test_data_set"):
            files = sorted(os.listdir(path := os.path.join(case.model_dir, d)))
            sets.append(tuple([_load_pb(os.path.join(path, f)) for f in files if f.startswith(kind)]
                              for kind in ("input_", "output_")))
    return sets


def _array(t):
    return onnx.numpy_helper.to_array(t) if isinstance(t, onnx.TensorProto) else t


def _load_pb(path):
    proto = onnx.TensorProto()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    return onnx.numpy_helper.to_array(proto)


def ops_of(case) -> list[str]:
    """The op types of a case's graph (the op under test is the last one of an expanded node test)."""
    return [n.op_type for n in model_of(case).graph.node]


def run_case(case, device: str) -> None:
    """Raises what the suite's own runner would: NotImplementedError (op / dtype not supported) or a mismatch."""
    rep = TinygradBackend.prepare(model_of(case), device)
    for inputs, outputs in data_sets(case):
        with np.errstate(all="ignore"):
            Runner.assert_similar_outputs(outputs, rep.run(inputs), rtol=case.rtol, atol=case.atol,
                                          model_dir=case.model_dir)


def outcome(case, device: str) -> tuple[str, str]:
    """('pass' | 'fail' | 'unsupported', reason)."""
    try:
        run_case(case, device)
        return "pass", ""
    except NotImplementedError as e:
        return "unsupported", str(e).split("\n")[0][:160]
    except Exception as e:                 # noqa: BLE001 (a report: every failure is recorded)
        return "fail", f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:160]
