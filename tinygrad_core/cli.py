"""The `tinygrad-core` command: list backends, run the conformance suite, train the MNIST example, benchmark.

Each subcommand is a thin front for code that lives elsewhere in the package (or in examples/ and bench/)."""
from __future__ import annotations
import argparse
import pathlib
import runpy
import sys


def cmd_backends(args) -> int:
    from tinygrad_core.plugins import registry
    rows = [("NAME", "DISTRIBUTION", "VERSION", "STATUS", "REASON")]
    default = None
    for backend in registry.all():
        rows.append((backend.name, backend.distribution, backend.version, backend.status, backend.reason or ""))
        if default is None and backend.status == "ok":
            default = backend.name
    widths = [max(len(str(r[i])) for r in rows) for i in range(4)]
    for row in rows:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row[:4], widths)) + "  " + row[4])
    try:
        from tinygrad_core.device import Device
        print(f"\ndefault device: {Device.DEFAULT}")
    except Exception as e:          # no usable backend: say so, the table above says why
        print(f"\ndefault device: none ({e})")
    for backend in registry.all():
        if backend.status == "ok" and backend.spec.describe is not None:
            try:
                print(f"{backend.name} devices: {backend.spec.describe()}")
            except Exception as e:          # describing is a nicety: never fail the listing over it
                print(f"{backend.name} devices: (describe() failed: {type(e).__name__}: {e})")
    return 0


def cmd_conformance(args) -> int:
    from tinygrad_core.conformance.runner import run_from_args
    return run_from_args(args)


def _repo_file(*parts) -> pathlib.Path:
    """examples/ and bench/ ship beside the package in a source checkout."""
    return pathlib.Path(__file__).resolve().parent.parent.joinpath(*parts)


def cmd_train(args) -> int:
    script = _repo_file("examples", f"{args.model}.py")
    if not script.exists():
        print(f"{script.name} not found: `tinygrad-core train` runs the examples of a source checkout "
              f"(git clone the repository, then pip install -e .)", file=sys.stderr)
        return 2
    sys.argv = [str(script)] + args.script_args
    runpy.run_path(str(script), run_name="__main__")
    return 0


def cmd_bench(args) -> int:
    script = _repo_file("bench", f"{args.name}.py")
    if not script.exists():
        print(f"bench/{args.name}.py not found (benchmarks ship with a source checkout)", file=sys.stderr)
        return 2
    sys.argv = [str(script)] + args.script_args
    runpy.run_path(str(script), run_name="__main__")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="tinygrad-core", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("backends", help="list installed backends, their status and why any can't be used")
    p.set_defaults(func=cmd_backends)
    p = sub.add_parser("conformance", help="run the backend conformance suite on one backend")
    from tinygrad_core.conformance.runner import add_arguments
    add_arguments(p)
    p.set_defaults(func=cmd_conformance)
    p = sub.add_parser("train", help="train an example model (default: the MNIST MLP)")
    p.add_argument("model", nargs="?", default="mnist_mlp", help="mnist_mlp, mnist_cnn, cifar_cnn")
    p.add_argument("script_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("bench", help="run a benchmark script from bench/")
    p.add_argument("name", nargs="?", default="bench_cpu")
    p.add_argument("script_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_bench)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
