"""Standalone C export: a TinyJit capture -> one C file (every kernel, the weights, `model_run`) needing only libc/libm.

The kernels the capture recorded are rendered again by a C dialect of the C-style renderer, each running its parallel
index as a loop; weights become constant arrays, intermediates static arrays, inputs and outputs model_run's arguments."""
from __future__ import annotations
import argparse
import sys
import pathlib
import numpy as np
from tinygrad_core.codegen.lower import program_signature
from tinygrad_core.codegen.pipeline import program_for
from tinygrad_core.device import Buffer
from tinygrad_core.dtype import ALL, DType, dtypes
from tinygrad_core.engine.jit import TinyJit, _tensors_out
from tinygrad_core.engine.realize import CompiledRunner, has_variables
from tinygrad_core.ops import Ops, UOp
from tinygrad_core.renderer.cstyle import CKernel, CStyleRenderer
from tinygrad_core.buffers import buffer_of
from tinygrad_core.tensor import Tensor


class CKernelLoops(CKernel):
    """Plain C has no threads: the kernel runs its parallel indices (the SPECIALs) as loops around its whole body."""

    def render(self) -> str:
        for u in self.uops:
            if u.op is Ops.SPECIAL:
                name, size = u.arg
                self.emit(f"for ({self.type_name(u.dtype)} {name} = 0; {name} < {size}; {name}++) {{")
                self.depth += 1
        return super().render()

    def function(self) -> str:
        while self.depth > 1:
            self.depth -= 1
            self.emit("}")
        return super().function()

    OPS = {**CKernel.OPS, Ops.SPECIAL: lambda w, u, src: u.arg[0]}

    def math_call(self, name: str, dtype: DType, x: str) -> str:
        # exp2(float) would compute in double: the f functions compute in the float the other backends compute in
        return f"{name}f({x})" if dtype == dtypes.float32 else super().math_call(name, dtype, x)

    def bitcast_expression(self, x: str, source: DType, target: DType) -> str:
        # reading a union member other than the one written reinterprets the bits (C99 6.5.2.3)
        return f"((union {{ {self.type_names[source]} a; {self.type_names[target]} b; }}){{.a = {x}}}).b"

    def helper_source(self, name: str) -> str:
        # every kernel of the file brings the helpers it calls: the guard keeps one copy of each
        guard = f"TG_HELPER_{name.upper()}"
        return f"#ifndef {guard}\n#define {guard}\n{super().helper_source(name)}\n#endif"


class CRenderer(CStyleRenderer):
    """ISO C99 for one CPU thread; half and bfloat16 live in memory as their 16 bits and are computed on as float."""
    device = "C"
    has_local = False
    kernel_prefix = "static void"
    type_names = {dtypes.bool: "_Bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char",
                  dtypes.int16: "short", dtypes.uint16: "unsigned short", dtypes.int32: "int",
                  dtypes.uint32: "unsigned int", dtypes.int64: "long long", dtypes.uint64: "unsigned long long",
                  dtypes.float32: "float", dtypes.float64: "double"}
    storage_type_names = {dtypes.bool: "unsigned char"}     # one byte per bool, as numpy holds them
    literal_suffix = {dtypes.uint32: "u", dtypes.int64: "ll", dtypes.uint64: "ull"}
    float_computed = frozenset({dtypes.float16, dtypes.bfloat16})
    supported_dtypes = frozenset(ALL)
    max_upcast = 16                   # a 4 x 4 register tile of outputs per loop trip (matmul: ~30x fewer loads)
    kernel_writer = CKernelLoops


def _find_capture(jit: TinyJit, inputs: list[Tensor]):
    """Call jit until it has a capture for these inputs (a fresh TinyJit captures on its second call); returns (the
    capture, the input buffers, what the last call returned)."""
    for _ in range(3):
        ret = jit(*inputs)
        buffers = [buffer_of(t.uop) for t in inputs]
        for capture in jit.captures.values():
            if capture.input_buffers and all(capture.kernels[i][1][j] is buffers[k] for i, j, k in capture.input_slots):
                return capture, buffers, ret
    raise RuntimeError("the function was run three times without a TinyJit capture for these inputs: export needs "
                       "the JIT on (JIT=0 is set?) and a function that takes at least one Tensor it reads")


def _check_kernels(capture) -> list:
    kernels = capture.kernels
    if capture.random_slots:
        raise NotImplementedError("the function draws random numbers (dropout in training mode?): export a function "
                                  "that doesn't, e.g. run the model under `with Tensor.train(False):`")
    for runner, bufs, _ in kernels:
        if not isinstance(runner, CompiledRunner):
            raise NotImplementedError(f"the capture moves data between devices ({bufs[1].device} -> "
                                      f"{bufs[0].device}): keep the model and its inputs on one device to export it")
        if has_variables(runner.ast):
            raise NotImplementedError(f"kernel {runner.name} has a size made of Variables: export needs fixed shapes")
    return kernels


def _roles(kernels: list, inputs: list[Buffer], outputs: list[Buffer]) -> dict[Buffer, str]:
    """Each buffer's place in the C file: an input, an output, a weight (only read) or an intermediate (written before
    anything reads it). A buffer read and later written holds state the C program would have to carry: refused."""
    roles = {b: f"input{k}" for k, b in enumerate(inputs)} | {b: f"output{k}" for k, b in enumerate(outputs)}
    written: set[Buffer] = set()
    for runner, bufs, _ in kernels:
        for b in bufs[1:]:
            if b not in roles:
                roles[b] = f"weight{sum(r.startswith('weight') for r in roles.values())}"
        if bufs[0] in inputs:
            raise NotImplementedError(f"kernel {runner.name} writes input {inputs.index(bufs[0])}: export a function "
                                      f"that leaves its inputs as they are")
        if roles.get(bufs[0], "").startswith("weight"):
            raise NotImplementedError(f"kernel {runner.name} updates a tensor it read before (BatchNorm's running "
                                      f"statistics in training mode?): export a function that only reads its weights, "
                                      f"e.g. under `with Tensor.train(False):`")
        roles.setdefault(bufs[0], f"buf{sum(r.startswith('buf') for r in roles.values())}")
        written.add(bufs[0])
    if missing := [k for k, b in enumerate(outputs) if b not in written]:
        raise NotImplementedError(f"outputs {missing} are not computed by the function's kernels (an input or a weight "
                                  f"returned as it is?): return a computed tensor, e.g. x + 0")
    return roles


def _c_values(renderer: CRenderer, buf: Buffer) -> str:
    """The buffer's contents as a C initializer list, exactly: numpy writes the shortest text that reads back as the
    same float; anything else (ints, inf, NaN, 16-bit floats as their bits) is spelled by the renderer."""
    values, dtype = buf.numpy(), buf.dtype
    if dtype in renderer.float_computed:
        values, dtype = values.view(np.uint16), dtypes.uint16
    if dtype in (dtypes.float32, dtypes.float64) and np.isfinite(values).all():
        texts = np.char.add(values.astype(str), "f" if dtype == dtypes.float32 else "").tolist()
    else:
        texts = [renderer.render_const(v, dtype) for v in values.tolist()]
    return ",\n".join(", ".join(texts[i:i + 8]) for i in range(0, len(texts), 8))


def export_c(fn, *example_inputs: Tensor, path: str | pathlib.Path | None = None, name: str = "model",
             weights: str = "inline") -> dict:
    """fn (a TinyJit, or a function to wrap in one) on example_inputs -> {file name: text} of `{name}.c` (the kernels,
    the weights and `int {name}_run(const float *input0, ..., float *output0, ...)`), `{name}.h` and a `main.c` that
    runs it on records read from a file. With path, the files are written into that directory too.

    weights="inline" writes the weights into `{name}.c` as initializers; weights="file" writes them, raw, to
    `{name}.bin` (bytes, in the file dict), which `int {name}_load(const char *path)` reads at start (main.c: its
    third argument, else `{name}.bin`): the source stays small and compiles fast, whatever the model's size.

    The weights are the values fn's tensors hold now; inputs and outputs have the shapes and dtypes of this call."""
    if weights not in ("inline", "file"):
        raise ValueError(f"weights={weights!r}: 'inline' (in {name}.c) or 'file' ({name}.bin, read at start)")
    jit = fn if isinstance(fn, TinyJit) else TinyJit(fn)
    inputs = list(example_inputs)
    capture, input_buffers, ret = _find_capture(jit, inputs)
    kernels = _check_kernels(capture)
    out_tensors = _tensors_out(ret)
    output_buffers = [buffer_of(t.uop) for t in out_tensors]
    roles = _roles(kernels, input_buffers, output_buffers)
    renderer = CRenderer()
    functions: dict[UOp, str] = {}       # kernel AST -> its C function's name (a kernel run twice is written once)
    sources, calls = [], []
    # the C type each kernel takes each buffer as: the JIT's memory plan may give one intermediate buffer to kernels of
    # several dtypes (a float, later a double), which C holds as the members of a union (one array passed as another
    # type's pointer would be undefined behaviour, and fails -Werror)
    signatures = [program_signature(runner.ast.toposort())[0] for runner, _, _ in kernels]
    types: dict[Buffer, dict[str, int]] = {}          # buffer -> {C type: its item size}
    for (_, bufs, _), params in zip(kernels, signatures):
        for b, param in zip(bufs, params):
            types.setdefault(b, {})[renderer.storage_type(param.dtype)] = param.dtype.itemsize
    unions = {b for b, taken in types.items() if len(taken) > 1 and roles[b].startswith("buf")}
    member = lambda c_type: "as_" + c_type.replace(" ", "_")     # noqa: E731
    for (runner, bufs, _), params in zip(kernels, signatures):
        if runner.ast not in functions:
            renderer.check_dtypes(runner.ast.toposort())
            functions[runner.ast] = f"{runner.name}_{len(functions)}"
            sources.append(renderer.render(functions[runner.ast], program_for(runner.ast, renderer)[0]))
        arguments = [f"{roles[b]}.{member(renderer.storage_type(param.dtype))}" if b in unions else roles[b]
                     for b, param in zip(bufs, params)]
        calls.append(f"  {functions[runner.ast]}({', '.join(arguments)});")
    storage = {b: renderer.storage_type(b.dtype) for b in roles}
    loaded = [b for b, role in roles.items() if role.startswith("weight")] if weights == "file" else []
    arrays = [f"static {storage[b]} {roles[b]}[{b.size}];  /* {b.dtype.name}, from {name}.bin */" for b in loaded]
    arrays += [f"static const {storage[b]} {role}[{b.size}] = {{ /* {b.dtype.name} */\n{_c_values(renderer, b)}\n}};"
              if role.startswith("weight") else f"static {storage[b]} {role}[{b.size}];" if b not in unions else
              f"static union {{ {' '.join(f'{t} {member(t)}[{b.nbytes // size}];' for t, size in types[b].items())} }}"
              f" {role};" for b, role in roles.items() if role.startswith(("weight", "buf")) and b not in loaded]
    params = ", ".join([f"const {storage[b]} *input{k}" for k, b in enumerate(input_buffers)] +
                       [f"{storage[b]} *output{k}" for k, b in enumerate(output_buffers)])
    signature = f"int {name}_run({params})"
    upper = name.upper()
    sizes = [f"#define {upper}_{roles[b].upper()}_SIZE {b.size}  /* {t.dtype.name}, shape {tuple(t.shape)} */"
             for b, t in zip(input_buffers + output_buffers, inputs + out_tensors)]
    load = [f"int {name}_load(const char *path)"] if loaded else []
    header = "\n".join([f"#ifndef {upper}_H", f"#define {upper}_H", *sizes,
                        *[f"/* reads the weights from {name}.bin's path; returns 0, or 1 if it can't */{load[0]};"
                          for _ in load], "/* runs the model once; returns 0 */", f"{signature};", "#endif", ""])
    reads = " && ".join(f"fread({roles[b]}, sizeof {roles[b]}, 1, f) == 1" for b in loaded)
    loader = [f"{load[0]} {{", '  FILE *f = fopen(path, "rb");', "  int ok = f != NULL && " + reads + ";",
              "  if (f != NULL)", "    ok = fclose(f) == 0 && ok;", "  return !ok;", "}", ""] if loaded else []
    source = "\n".join([f"/* {name}: {len(kernels)} kernels written by tinygrad_core.export; needs libm (and stdio) */",
                        "#include <math.h>", *["#include <stdio.h>" for _ in load], f'#include "{name}.h"', "",
                        *sources, *arrays, "", *loader, f"{signature} {{", *calls, "  return 0;", "}", ""])
    files: dict = {f"{name}.c": source, f"{name}.h": header,
                   "main.c": _main_source(name, storage, roles, input_buffers, output_buffers, bool(loaded))}
    if loaded:
        files[f"{name}.bin"] = b"".join(b.numpy().tobytes() for b in loaded)
    if path is not None:
        pathlib.Path(path).mkdir(parents=True, exist_ok=True)
        for file, content in files.items():
            target = pathlib.Path(path) / file
            target.write_bytes(content) if isinstance(content, bytes) else target.write_text(content)
    return files


def _main_source(name: str, storage: dict, roles: dict, inputs: list[Buffer], outputs: list[Buffer],
                 load: bool = False) -> str:
    """A program that reads records (every input's values in order, raw, in the machine's byte order) from one file
    until it ends, and writes each record's outputs to another (first reading the weights, where they are a file)."""
    upper, both = name.upper(), inputs + outputs
    arrays = "\n".join(f"static {storage[b]} {roles[b]}[{upper}_{roles[b].upper()}_SIZE];" for b in both)
    usage = f" [WEIGHTS, default {name}.bin]" if load else ""
    load_weights = f"""
  if ({name}_load(argc == 4 ? argv[3] : "{name}.bin") != 0) {{
    perror("main: the weights");
    return 1;
  }}""" if load else ""
    reads = " && ".join(f"fread({roles[b]}, sizeof {roles[b]}, 1, in) == 1" for b in inputs)
    writes = " || ".join(f"fwrite({roles[b]}, sizeof {roles[b]}, 1, out) != 1" for b in outputs)
    return f"""/* usage: main INPUTS OUTPUTS{usage}: runs {name}_run on each record of INPUTS, writes its outputs to
   OUTPUTS */
#include <stdio.h>
#include "{name}.h"

{arrays}

int main(int argc, char **argv) {{
  if (argc != 3{" && argc != 4" if load else ""}) {{
    fprintf(stderr, "usage: %s INPUTS OUTPUTS{usage}\\n", argv[0]);
    return 2;
  }}{load_weights}
  FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
  if (in == NULL || out == NULL) {{
    perror("main");
    return 1;
  }}
  while ({reads}) {{
    if ({name}_run({", ".join(roles[b] for b in both)}) != 0 || {writes}) {{
      perror("main");
      return 1;
    }}
  }}
  return fclose(out) != 0;
}}
"""


# ---- `tinygrad-core export`: an example model with saved weights -> a directory holding its C program ----
EXAMPLE_MODELS = {"mnist_mlp": "TinyMLP", "mnist_cnn": "MnistCNN"}     # example script -> its model class


def add_arguments(parser: argparse.ArgumentParser, examples: pathlib.Path):
    parser.add_argument("model", choices=EXAMPLE_MODELS, help="the example whose model the weights are for")
    parser.add_argument("weights", help="the trained weights: a .safetensors file, as `tinygrad-core train MODEL "
                                        "--save PATH` writes")
    parser.add_argument("--out", help="the directory to write model.c, model.h and main.c to (default: ./MODEL_c)")
    parser.add_argument("--batch-size", type=int, default=1, help="images per model_run call")
    parser.add_argument("--weights-in", choices=("inline", "file"), default="inline", help="the weights in model.c "
                        "(inline, the default) or in model.bin, which the program reads at start (file: the source "
                        "stays small and compiles fast)")
    parser.add_argument("--samples", type=int, default=0, help="also write the first N MNIST test images (normalized "
                        "float32) to inputs.bin and the framework's outputs on them to expected.bin")
    parser.set_defaults(func=lambda args: export_example(args, examples))


def export_example(args: argparse.Namespace, examples: pathlib.Path) -> int:
    import runpy

    from tinygrad_core.nn.datasets import load_mnist
    from tinygrad_core.nn.state import load_state_dict, safe_load
    script = runpy.run_path(str(examples / f"{args.model}.py"))
    model = script[EXAMPLE_MODELS[args.model]]()
    try:
        load_state_dict(model, safe_load(args.weights))
    except (KeyError, ValueError, TypeError) as e:       # (weights of another model: say so, not a traceback)
        message = str(e.args[0] if isinstance(e, KeyError) else e).split("; pass strict=False")[0]
        print(f"{args.weights} doesn't hold {args.model}'s weights ({message}): pass the file that "
              f"`tinygrad-core train {args.model} --save PATH` wrote", file=sys.stderr)
        return 2

    def forward(x: Tensor) -> Tensor:
        with Tensor.no_grad(), Tensor.train(False):     # BatchNorm with its running statistics
            return model(x)
    out = pathlib.Path(args.out or f"{args.model}_c")
    export_c(forward, Tensor.zeros(args.batch_size, 1, 28, 28).contiguous(), path=out, weights=args.weights_in)
    print(f"wrote {out}/model.c, model.h{', model.bin' if args.weights_in == 'file' else ''} and main.c; build with: "
          f"cc -O2 {out}/model.c {out}/main.c -o {out}/model -lm")
    if args.samples:
        count = args.samples - args.samples % args.batch_size
        images = script["normalize"](load_mnist()[2][:count]).astype(np.float32)
        images.tofile(out / "inputs.bin")
        np.concatenate([forward(Tensor(images[i:i + 500])).numpy() for i in range(0, count, 500)]).tofile(
            out / "expected.bin")
        print(f"wrote {count} test images to {out}/inputs.bin, the framework's outputs on them to {out}/expected.bin; "
              f"run: {out}/model {out}/inputs.bin outputs.bin")
    return 0
