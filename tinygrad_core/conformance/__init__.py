"""The backend conformance suite: the tests every backend must pass, as a pytest plugin plus test modules.

Run it with `tinygrad-core conformance NAME` (runner.py: each test's crash or hang is that test's failure) or
`pytest --pyargs tinygrad_core.conformance --tinygrad-backend NAME`; the module for section N is test_N_*.py,
plugin.py is the pytest side and report.py builds the table, the verdict and the JSON and Markdown reports. Beside
it, fuzz.py compares random op graphs across backends and with PyTorch (`python -m tinygrad_core.conformance.fuzz`)."""

SECTIONS = {
    1: "discovery and metadata",
    2: "allocator",
    3: "compile and launch",
    4: "primitive ops x dtypes",
    5: "reductions and movement",
    6: "tensor ops forward and backward",
    7: "JIT capture and replay",
    8: "training a small conv net",
    9: "determinism and copies",
}
