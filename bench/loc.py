"""Count the core's lines of code: non-blank lines that aren't comments or docstrings, per file and in total.

Usage: python bench/loc.py [package_dir]   (default: tinygrad_core, without its conformance suite
and the differential fuzzer that sits with it: the tools that check backends, not the framework)"""
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


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent / "tinygrad_core")
    files = sorted(p for p in root.rglob("*.py") if "conformance" not in p.parts)
    counts = {p.relative_to(root): code_lines(p) for p in files}
    for path, n in counts.items():
        print(f"{n:6d}  {path}")
    print(f"{sum(counts.values()):6d}  total ({len(counts)} files, excluding the conformance suite)")


if __name__ == "__main__":
    main()
