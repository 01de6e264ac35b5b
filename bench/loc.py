"""Count the core's lines of code: non-blank lines that aren't comments or docstrings, per file and in total.

Usage: python bench/loc.py [package_dir]   (default: tinygrad_core)

The core is what a reader follows from Tensor to a launched kernel: Tensor, autograd, the op contract, the scheduler,
the code generator, the JIT, nn, multi-device tensors. Not counted in it, and counted on their own lines: the
conformance suite and the differential fuzzer beside it (tools that check backends), the `tinygrad-core` command's
argument parsing, and the layers built on the public API that a reader of the core can skip: ONNX import, the other
file formats (safetensors, PyTorch checkpoints: nn/state.py) and the datasets' readers (nn/datasets.py), the language
model (llm/), the standalone C export, data-parallel training over MPI. tests/test_architecture.py holds the core to
its caps with these counts."""
import pathlib
import sys
import tokenize


def code_lines(path: pathlib.Path) -> int:
    """Lines holding at least one token that isn't a comment, a docstring or layout."""
    lines: set[int] = set()
    previous = tokenize.NEWLINE
    with open(path, "rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                            tokenize.ENCODING, tokenize.ENDMARKER):
                previous = tok.type if tok.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) else previous
                continue
            # a string standing alone as a statement is a docstring
            if tok.type == tokenize.STRING and previous in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                previous = tok.type
                continue
            previous = tok.type
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines)


LAYERS = {"conformance": "the conformance suite and fuzzer", "nn/onnx.py": "ONNX import",
          "nn/state.py": "weight files (safetensors, PyTorch)", "nn/datasets.py": "datasets (MNIST, CIFAR-10)",
          "llm": "the language model (GGUF, tokenizer, command line, server)",
          "export.py": "C export", "distributed.py": "MPI training", "cli.py": "the command line", "__main__.py": "python -m tinygrad_core"}


def layer_of(path: pathlib.Path) -> str | None:
    return next((name for name in LAYERS if path.as_posix() == name or path.parts[0] == name), None)


def core_counts(root: pathlib.Path) -> dict[pathlib.Path, int]:
    """The code lines of each core file under root (by its path relative to root): every .py file in no layer."""
    return {p: code_lines(root / p) for p in sorted(p.relative_to(root) for p in root.rglob("*.py"))
            if layer_of(p) is None}


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent / "tinygrad_core")
    files = sorted(p.relative_to(root) for p in root.rglob("*.py"))
    counts = core_counts(root)
    for path, n in counts.items():
        print(f"{n:6d}  {path}")
    print(f"{sum(counts.values()):6d}  total, the core ({len(counts)} files)")
    for name, what in LAYERS.items():
        layer = [p for p in files if layer_of(p) == name]
        if layer:
            print(f"{sum(code_lines(root / p) for p in layer):6d}  {what} ({name}, not in the core)")


if __name__ == "__main__":
    main()
