"""The `tinygrad-core` command: list backends, run the conformance suite, start a new backend, train the MNIST
example, export it as C, run a language model, benchmark.

Each subcommand is a thin front for code that lives elsewhere in the package (or in examples/ and bench/)."""
import argparse
import importlib.metadata
import pathlib
import runpy
import sys


def cmd_backends(args) -> int:
    from tinygrad_core.device import Device
    from tinygrad_core.plugins import registry
    for backend in registry.usable():      # ok only once loaded: one that fails to load is listed broken, and why
        try:
            Device[backend.name]
        except Exception:                    # noqa: BLE001 (the reason is on the backend now)
            pass
    rows = [("NAME", "DISTRIBUTION", "VERSION", "STATUS", "REASON")] + [
        (b.name, b.distribution, b.version, b.status, "; ".join(filter(None, (b.reason, b.clash))))
        for b in registry.all()]
    widths = [max(len(str(r[i])) for r in rows) for i in range(4)]
    for row in rows:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row[:4], widths)) + "  " + row[4])
    try:
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


def _run_script(script: pathlib.Path, script_args: list[str]) -> int:
    sys.argv = [str(script)] + script_args
    runpy.run_path(str(script), run_name="__main__")
    return 0


def examples_dir() -> pathlib.Path:
    # the examples lie inside the package when it is installed from a wheel (see pyproject.toml), beside it in a
    # source checkout
    here = pathlib.Path(__file__).resolve().parent
    return here / "examples" if (here / "examples").is_dir() else here.parent / "examples"


def cmd_train(args) -> int:
    return _run_script(examples_dir() / f"{args.model}.py", args.script_args)


def cmd_bench(args) -> int:
    script = pathlib.Path(__file__).resolve().parent.parent / "bench" / f"{args.name}.py"
    if not script.is_file():
        print(f"`tinygrad-core bench` runs bench/{args.name}.py of a source checkout, and an installed package has "
              f"none: git clone the repository and run it from there", file=sys.stderr)
        return 2
    return _run_script(script, args.script_args)


TRAINABLE = ("mnist_mlp", "mnist_cnn", "cifar_cnn", "custom_op")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["llm"]:             # (its own arguments, all of them: python -m tinygrad_core.llm's)
        from tinygrad_core.llm.cli import main as llm
        return llm(argv[1:])
    parser = argparse.ArgumentParser(prog="tinygrad-core", description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--version", action="version", version=f"%(prog)s {importlib.metadata.version('tinygrad-core')}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("backends", help="list installed backends, their status and why any can't be used")
    p.set_defaults(func=cmd_backends)
    p = sub.add_parser("conformance", help="run the backend conformance suite on one backend")
    from tinygrad_core.conformance.runner import add_arguments, run_from_args
    add_arguments(p)
    p.set_defaults(func=run_from_args)
    p = sub.add_parser("new-backend", help="write a new backend distribution to start from (the guide's TOY backend)")
    from tinygrad_core.conformance import scaffold
    scaffold.add_arguments(p)
    p = sub.add_parser("train", help="train an example model (default: the MNIST MLP)",
                       description="Train an example model: tinygrad-core train [MODEL] [its options, e.g. --epochs 1]. "
                                   "`python examples/MODEL.py --help` lists a model's options.")
    p.add_argument("model", nargs="?", default="mnist_mlp", choices=TRAINABLE, help="default: mnist_mlp")
    p.add_argument("script_args", nargs=argparse.REMAINDER, help="passed to the example (--epochs N, ...)")
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("export", help="write an example model with trained weights as a standalone C program")
    from tinygrad_core import export
    export.add_arguments(p, examples_dir())
    sub.add_parser("llm", help="chat with a GGUF language model, complete a prompt, benchmark or serve it "
                               "(tinygrad-core llm --help)")
    p = sub.add_parser("bench", help="run a benchmark script from bench/")
    p.add_argument("name", nargs="?", default="bench_cpu")
    p.add_argument("script_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_bench)
    if argv[:1] == ["train"] and argv[1:2] and argv[1].startswith("-") and argv[1] not in ("-h", "--help"):
        argv = ["train", "mnist_mlp", *argv[1:]]        # (the model is optional: its options may come first)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
