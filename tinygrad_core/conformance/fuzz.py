"""A differential fuzzer: random graphs of Tensor ops run on tinygrad_core devices and on PyTorch CPU, values and
gradients compared; a mismatch is shrunk to a small graph and printed as a Python snippet that reproduces it.

Usage: python -m tinygrad_core.conformance.fuzz --n 1000 --devices CPU,CL --seed 0
(PyTorch is needed: pip install torch)"""
from __future__ import annotations

import argparse
import itertools
import math
import random
import sys

import numpy as np

from tinygrad_core import Device, Tensor, dtypes

SPECIALS = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-45, -1e-40, 1.1754944e-38, 3.4e38, -3.4e38, 1e18, 1e7,
            45.0, -45.0, 0.5, 1.0, -1.0]
SIDES = [0, 1, 1, 2, 2, 3, 3, 4, 5]


def _torch():
    try:
        import torch
    except ImportError:
        raise SystemExit("the fuzzer compares against PyTorch, which is an optional dependency: pip install torch "
                         "(see requirements-dev.txt)") from None
    return torch


# ---- what a graph is made of: each op as the code both libraries run, and its parameters drawn from a shape --------
def _fresh(shape, dtype="float32", bound=0):
    return {}, (tuple(shape), dtype, bound)


def _broadcast_partner(rng, shape):
    return ({}, "self") if rng.random() < 0.2 else _fresh(1 if rng.random() < 0.3 else n
                                                          for n in shape[rng.randrange(len(shape) + 1):])


def _cat_partner(rng, shape):
    dim = rng.randrange(len(shape))
    return {"dim": dim}, _fresh(shape[:dim] + (rng.choice(SIDES),) + shape[dim + 1:])[1]


def _slices(rng, shape):
    starts = [rng.randrange(n + 1) for n in shape]
    return {"index": tuple(rng.randrange(n) if n and rng.random() < 0.25 else slice(start, rng.randrange(start, n + 1),
                           rng.choice([None, 1, 2])) for start, n in zip(starts, shape))}


def _pads(rng, shape):
    pads = tuple((rng.randrange(3), rng.randrange(3)) for _ in shape)
    return {"pads": pads, "flat": [n for pair in reversed(pads) for n in pair]}


def _gather_partner(rng, shape):
    dim = rng.randrange(len(shape))
    return None if 0 in shape else ({"dim": dim}, _fresh((rng.randint(1, n) for n in shape), "int64", shape[dim])[1])


def _reshape(rng, shape):
    merged = [(shape[0] * shape[1], *shape[2:])] if len(shape) > 1 else []
    return {"shape": rng.choice([(math.prod(shape),), tuple(reversed(shape)), (1, *shape)] + merged)}


def _axes(rng, shape, count):
    return tuple(rng.sample(range(len(shape)), count))


def _axis(rng, shape):
    return {"axis": rng.randrange(len(shape)), "keepdim": rng.random() < 0.3}


REDUCE = "{a}.NAME({axis}, keepdim={keepdim})"
# name: (tinygrad_core code, torch code or None when it's the same, parameters: None, or (rng, shape) -> params or
# (params, partner); raising or None when the op doesn't apply). A partner, {b} in the code, is "self" or a fresh
# input's (shape, dtype, bound for int64 indices).
OPS = {
    **{name: (f"{{a}}.{name}()", None, None) for name in ("exp", "log", "sin", "sqrt", "relu", "sigmoid", "tanh", "abs",
                                                          "reciprocal", "floor", "square")},
    "neg": ("(-{a})", None, None),
    "gelu": ("{a}.gelu()", "torch.nn.functional.gelu({a}, approximate='tanh')", None),
    "half": ("{a}.half().float()", "{a}.half().to({a}.dtype)", None),
    "nonzero": ("({a} != 0).float()", "({a} != 0).to({a}.dtype)", None),
    **{name: (f"({{a}} {symbol} {{b}})", None, _broadcast_partner) for name, symbol in
       (("add", "+"), ("sub", "-"), ("mul", "*"), ("div", "/"))},
    "maximum": ("{a}.maximum({b})", "torch.maximum({a}, {b})", _broadcast_partner),
    "logaddexp": ("{a}.logaddexp({b})", "torch.logaddexp({a}, {b})", _broadcast_partner),
    "copysign": ("{a}.copysign({b})", "torch.copysign({a}, {b})", _broadcast_partner),
    "softplus": ("{a}.softplus(2.0, 3.0)", "torch.nn.functional.softplus({a}, 2.0, 3.0)", None),
    "where_lt": ("({a} < {b}).where({a}, {b})", "torch.where({a} < {b}, {a}, {b})", _broadcast_partner),
    "matmul": ("({a} @ {b})", None, lambda rng, shape: _fresh((shape[-1], rng.choice(SIDES)))),
    "cat": ("{a}.cat({b}, dim={dim})", "torch.cat([{a}, {b}], {dim})", _cat_partner),
    "stack": ("{a}.stack({a}, dim={axis})", "torch.stack([{a}, {a}], {axis})", _axis),
    **{name: (REDUCE.replace("NAME", name), None, _axis) for name in ("sum", "mean", "logsumexp")},
    "max": (REDUCE.replace("NAME", "max"), REDUCE.replace("NAME", "amax"), _axis),
    "softmax": ("{a}.softmax({axis})", None, _axis),
    "cumsum": ("{a}.cumsum({axis})", None, _axis),
    "permute": ("{a}.permute({order})", None, lambda rng, shape: {"order": _axes(rng, shape, len(shape))}),
    "reshape": ("{a}.reshape({shape})", None, _reshape),
    "expand": ("{a}.unsqueeze(0).expand({shape})", None, lambda rng, shape: {"shape": (rng.choice([0, 1, 3]), *shape)}),
    "flip": ("{a}.flip({axes})", None, lambda rng, shape: {"axes": _axes(rng, shape, rng.randrange(len(shape) + 1))}),
    "pad": ("{a}.pad({pads})", "torch.nn.functional.pad({a}, {flat})", _pads),
    "getitem": ("{a}[{index}]", None, _slices),
    "gather": ("{a}.gather({dim}, {b})", None, _gather_partner),
}


# ---- graphs: a list of nodes, each an input (shape, dtype, values) or an op on earlier nodes; the last is the output -
def _input(rng, shape, dtype="float32", bound=0):
    values = [rng.randrange(bound) if dtype == "int64" else rng.choice(SPECIALS) if rng.random() < 0.15 else
              round(rng.gauss(0, 2), 3) for _ in range(math.prod(shape))]
    return {"op": "input", "shape": tuple(shape), "dtype": dtype, "values": values}


def generate(seed: int, min_ops: int = 3, max_ops: int = 12) -> list[dict]:
    """A random graph that PyTorch accepts, the same for the same seed."""
    rng = random.Random(seed)
    nodes = [_input(rng, [rng.choice(SIDES) for _ in range(rng.randrange(4))])]
    shapes, wanted = [nodes[0]["shape"]], rng.randint(min_ops, max_ops)
    # ops that don't fit the drawn shape are skipped, so this tries a few times the ops wanted (B023: the lambda reads
    # the graph as it grows)
    for _ in itertools.takewhile(lambda _: sum(n["op"] != "input" for n in nodes) < wanted, range(wanted * 4)):  # noqa
        name = rng.choice(sorted(OPS))
        floats = [i for i, n in enumerate(nodes) if n.get("dtype") != "int64"]
        a = len(nodes) - 1 if rng.random() < 0.8 else rng.choice(floats)
        if (drawn := _attempt(OPS[name][2] or (lambda rng, shape: {}), rng, shapes[a])) is None:
            continue
        params, partner = drawn if isinstance(drawn, tuple) else (drawn, None)
        candidate, args = list(nodes), [a]
        if partner is not None:
            candidate += [] if partner == "self" else [_input(rng, *partner)]
            args.append(a if partner == "self" else len(candidate) - 1)
        candidate.append({"op": name, "args": args, "params": params})
        if (outputs := _attempt(run, candidate, "torch", "float32")) is not None:
            shapes += [tuple(n["shape"]) for n in candidate[len(nodes):-1]] + [tuple(outputs[0].shape)]
            nodes = candidate
    return nodes


def render(nodes: list[dict], lib: str, device: str = "CPU") -> list[str]:
    """The graph as lines of Python; `lib` is "tiny" or "torch"."""
    return [f"v{i} = " + _code(node, lib, device) for i, node in enumerate(nodes)]


def _code(node: dict, lib: str, device: str) -> str:
    if node["op"] == "input":
        values = ", ".join(f"float('{v}')" if not math.isfinite(v) else repr(v) for v in node["values"])
        array, grad = f"np.array([{values}], np.{node['dtype']}).reshape({node['shape']})", node["dtype"] == "float32"
        make = f"Tensor({array}, device={device!r})" if lib == "tiny" else f"torch.tensor({array})" + ".to(DTYPE)"*grad
        return make + ".requires_grad_()" * grad
    code = OPS[node["op"]][0] if lib == "tiny" or OPS[node["op"]][1] is None else OPS[node["op"]][1]
    names = {"a": f"v{node['args'][0]}", "b": f"v{node['args'][-1]}"}
    return code.format(**names, **{k: repr(v) for k, v in node["params"].items()})


def run(nodes: list[dict], lib: str, torch_dtype: str = "float32", device: str = "CPU") -> list[np.ndarray]:
    """The output and the gradient of every float input, as numpy arrays (the output gradient is fixed weights)."""
    torch = _torch()
    scope = {"np": np, "Tensor": Tensor, "dtypes": dtypes, "torch": torch, "DTYPE": getattr(torch, torch_dtype)}
    exec("\n".join(render(nodes, lib, device)), scope)   # noqa: S102 -- the graph is held as the code it runs
    out = scope[f"v{len(nodes) - 1}"]
    w = np.resize(np.array([1.0, -0.5, 2.0, 0.25], np.float32), tuple(out.shape))
    leaves = [scope[f"v{i}"] for i, n in enumerate(nodes) if n["op"] == "input" and n["dtype"] == "float32"]
    out.backward(Tensor(w, device=device).cast(out.dtype) if lib == "tiny" else torch.from_numpy(w).to(out.dtype))
    arrays = [t if t is None or lib == "tiny" else t.detach() for t in [out] + [leaf.grad for leaf in leaves]]
    return [t.numpy() if t is not None else np.zeros(leaf.shape, np.float32) for t, leaf in zip(arrays, [out] + leaves)]


def compare(got: np.ndarray, want: np.ndarray, exact: np.ndarray, atol=1e-4, rtol=1e-3) -> str | None:
    """Where torch in float32 and in float64 agree on NaN and infinity, tinygrad must too; finite values may be off by
    the tolerance plus four times torch's own float32 error (so ill-conditioned graphs don't read as bugs)."""
    if got.shape != want.shape:
        return f"shape {got.shape}, torch {want.shape}"
    got, want, exact = (np.asarray(x, np.float64) for x in (got, want, exact))
    judged = (np.isnan(want) == np.isnan(exact)) & (np.isinf(want) == np.isinf(exact))
    with np.errstate(invalid="ignore"):
        slack = atol + rtol * np.abs(want) + 4 * np.abs(want - exact)
        close = (got == want) | np.isfinite(want) & (np.abs(got - want) <= slack) | np.isnan(got) & np.isnan(want)
        bad = judged & ~close
    at = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.any() else None
    return None if at is None else f"{int(bad.sum())} of {bad.size} differ; at {at}: {got[at]!r}, torch {want[at]!r}"


def check(nodes: list[dict], device: str) -> str | None:
    """What differs between the device and torch on this graph (None when nothing does)."""
    want, exact = run(nodes, "torch", "float32"), run(nodes, "torch", "float64")
    try:
        got = run(nodes, "tiny", device=device)
    except Exception as e:   # noqa: BLE001 -- whatever tinygrad_core raises where torch answers is a finding
        return f"raised {type(e).__name__}: {str(e)[:200]}"
    problems = [("output: " if n == 0 else f"gradient of input {n - 1}: ") + problem
                for n, arrays in enumerate(zip(got, want, exact)) if (problem := compare(*arrays)) is not None]
    return problems[0] if problems else None


def _prune(nodes: list[dict]) -> list[dict]:
    """Keep only what the last node depends on, renumbered."""
    keep = {len(nodes) - 1}
    for i in reversed(range(len(nodes))):     # a node's arguments always come before it
        keep |= set(nodes[i].get("args", [])) if i in keep else set()
    new = {old: new for new, old in enumerate(sorted(keep))}
    return [{**n, "args": [new[a] for a in n["args"]]} if "args" in n else n for i, n in enumerate(nodes) if i in keep]


def _smaller(nodes: list[dict]):
    """Candidate graphs one simplification away: an earlier output, the graph cut below an op (its torch value made
    an input), an axis halved, runs of values set to 0 or 1."""
    for i in range(len(nodes) - 1):
        yield _prune(nodes[:i + 1])
    for i, node in enumerate(nodes[:-1]):
        if node["op"] != "input":
            value = run(_prune(nodes[:i + 1]), "torch", "float32")[0]
            yield _prune(nodes[:i] + [{"op": "input", "shape": value.shape, "dtype": "float32",
                                       "values": value.ravel().tolist()}] + nodes[i + 1:])
    for i, node in enumerate(nodes):
        if node["op"] != "input" or node["dtype"] != "float32":
            continue
        for d, side in enumerate(node["shape"]):
            for half in (range(side // 2), range(side // 2, side)) if side > 1 else ():
                values = np.array(node["values"]).reshape(node["shape"]).take(half, axis=d)
                yield nodes[:i] + [{**node, "shape": values.shape, "values": values.ravel().tolist()}] + nodes[i + 1:]
        values, size = node["values"], len(node["values"])
        while size >= 1:
            for start, simple in itertools.product(range(0, len(values), size), (0.0, 1.0)):
                if (changed := [simple if start <= j < start + size else v for j, v in enumerate(values)]) != values:
                    yield nodes[:i] + [{**node, "values": changed}] + nodes[i + 1:]
            size //= 2


def shrink(nodes: list[dict], device: str, budget: int = 400, interesting=None) -> list[dict]:
    """The smallest graph found that still mismatches (or that interesting(nodes) holds for), trying simplifications
    greedily."""
    interesting, tries = interesting or (lambda candidate: check(candidate, device) is not None), itertools.count()
    within_budget = itertools.takewhile(lambda _: next(tries) < budget, _smaller(nodes))
    while (smaller := next((c for c in within_budget if _attempt(interesting, c)), None)) is not None:
        nodes, within_budget = smaller, itertools.takewhile(lambda _: next(tries) < budget, _smaller(smaller))
    return nodes


def _attempt(fn, *args):
    """fn(*args), or None where it raises (torch rejects an op drawn for a shape, or a simplified graph)."""
    try:
        return fn(*args)
    except Exception:   # noqa: BLE001
        return None


def reproduction(nodes: list[dict], device: str, problem: str) -> str:
    body, reference = "\n".join(render(nodes, "tiny", device)), "\n".join("# " + x for x in render(nodes, "torch"))
    return (f"# {device} differs from torch: {problem}\nimport numpy as np\nfrom tinygrad_core import Tensor, dtypes\n"
            f"{body}\nprint(v{len(nodes) - 1}.numpy())\n# torch (DTYPE = torch.float32):\n{reference}\n")


def fuzz(n: int, devices: list[str], seed: int = 0, do_shrink: bool = True, out=sys.stdout) -> dict:
    """Run n graphs (seeds seed..seed+n-1) on each device; returns {device: [mismatch, ...]}, each mismatch a dict
    of the graph's seed, the problem and the (shrunk) graph."""
    report = {device: [] for device in devices}
    for graph_seed in range(seed, seed + n):
        nodes = generate(graph_seed)
        for device in devices:
            if (problem := check(nodes, device)) is not None:
                small = shrink(nodes, device) if do_shrink else nodes
                report[device].append({"seed": graph_seed, "problem": problem, "nodes": small})
                print(f"\n# seed {graph_seed}\n" + reproduction(small, device, check(small, device) or problem),
                      file=out)
    for device, mismatches in report.items():
        print(f"{device}: {n - len(mismatches)} of {n} graphs clean, {len(mismatches)} mismatched", file=out)
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="how many graphs")
    parser.add_argument("--devices", default=None, help="comma-separated, default: the default device")
    parser.add_argument("--seed", type=int, default=0, help="the first graph's seed (graph k has seed + k)")
    args, _ = parser.parse_args(argv), _torch()
    report = fuzz(args.n, args.devices.split(",") if args.devices else [Device.DEFAULT], args.seed)
    return 1 if any(report.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
