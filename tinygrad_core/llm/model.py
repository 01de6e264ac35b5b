"""A llama-family Transformer built from a GGUF file's metadata and weights (RMSNorm, RoPE, grouped-query attention,
SwiGLU, tied or separate output embedding), with a KV cache written in place at a position that is a bound Variable:
one TinyJit capture serves every decode step.

The weights stay as the file's quantized blocks: each is a lazy graph that dequantizes them (gguf.py), which the
matmuls reading it fuse, so the float weights never exist as a whole."""
from __future__ import annotations
import math
import numpy as np
from tinygrad_core import Device, Tensor, TinyJit, Variable, dtypes
from tinygrad_core.llm.gguf import gguf_load
from tinygrad_core.ops import Ops


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    return x * (x.square().mean(-1, keepdim=True) + eps).rsqrt() * weight


def rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x (..., T, head_dim) rotated pair by pair, (x[2i], x[2i+1]) by angle i: llama.cpp's order, which the GGUF
    converter permuted the query and key weights for (transformers permutes them back, for rotate_half)."""
    pairs = x.reshape(*x.shape[:-1], x.shape[-1] // 2, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    return (a * cos - b * sin).unsqueeze(-1).cat((a * sin + b * cos).unsqueeze(-1), dim=-1).reshape(x.shape)


class Weight:
    """A weight kept as the graph that dequantizes its blocks, made a Tensor afresh for each use: a Tensor kept alive
    is a value that may be read again, so what a matmul computed of it (a prefill's dequantized copy) would be kept
    too, the float weights whole after the first prompt."""
    def __init__(self, tensor: Tensor):
        self.graph, self.shape = tensor.uop, tensor.shape
        self.nbytes = sum(u.arg[0].nbytes for u in self.graph.toposort() if u.op is Ops.BUFFER)    # (the blocks)

    def __call__(self, x: Tensor) -> Tensor:
        """x @ weight.T, a Linear's without bias: the blocks dequantized inside the matmul's kernel, as it reads them."""
        return x @ Tensor(self.graph).T

    def __getitem__(self, index) -> Tensor: return Tensor(self.graph)[index]   # noqa: E704


class Block:
    def __init__(self, weights: dict[str, Tensor], n: int):
        get = lambda name: weights[f"blk.{n}.{name}.weight"]    # noqa: E731
        self.attn_norm, self.ffn_norm = get("attn_norm").realize(), get("ffn_norm").realize()
        self.wq, self.wk, self.wv, self.wo = (Weight(get(k)) for k in ("attn_q", "attn_k", "attn_v", "attn_output"))
        self.gate, self.up, self.down = (Weight(get(k)) for k in ("ffn_gate", "ffn_up", "ffn_down"))
        self.cache: Tensor | None = None


class Transformer:
    """The model: `logits(tokens)` (teacher-forced, all positions) and `generate(tokens)` (yields token ids)."""

    def __init__(self, kv: dict, weights: dict[str, Tensor], max_context: int | None = None):
        arch = kv["general.architecture"]
        self.dim, self.n_layers = kv[f"{arch}.embedding_length"], kv[f"{arch}.block_count"]
        self.n_heads = kv[f"{arch}.attention.head_count"]
        self.n_kv_heads = kv.get(f"{arch}.attention.head_count_kv", self.n_heads)
        self.head_dim = kv.get(f"{arch}.attention.key_length", self.dim // self.n_heads)
        self.eps = kv[f"{arch}.attention.layer_norm_rms_epsilon"]
        self.max_context = min(max_context or kv[f"{arch}.context_length"], kv[f"{arch}.context_length"])
        self.vocab_size = weights["token_embd.weight"].shape[0]
        theta = kv.get(f"{arch}.rope.freq_base", 10000.0)
        rot = kv.get(f"{arch}.rope.dimension_count", self.head_dim)
        freqs = 1.0 / theta ** (np.arange(0, rot, 2, dtype=np.float64) / rot)
        if "rope_freqs.weight" in weights:      # (llama 3's long-context factors, one per frequency)
            freqs = freqs / weights["rope_freqs.weight"].numpy().astype(np.float64)
        angles = np.arange(self.max_context, dtype=np.float64)[:, None] * freqs[None, :]
        self.positions = Tensor.arange(self.max_context).realize()      # (the causal mask's, sliced where it starts)
        self.cos, self.sin = (Tensor(f(angles).astype(np.float32)).realize() for f in (np.cos, np.sin))
        self.embedding, self.norm = Weight(weights["token_embd.weight"]), weights["output_norm.weight"].realize()
        self.output = Weight(weights["output.weight"]) if "output.weight" in weights else self.embedding   # (tied)
        self.blocks = [Block(weights, n) for n in range(self.n_layers)]
        # what one decode step reads of the weights: every block's, and the output's (a single row of the embedding)
        self.step_weight_bytes = self.output.nbytes + sum(w.nbytes for b in self.blocks for w in
                                                          (b.wq, b.wk, b.wv, b.wo, b.gate, b.up, b.down))
        self.decode_step = TinyJit(self._forward_last)
        self.position = Variable("position", 1, self.max_context - 1)
        self.prefill_steps: dict[int, tuple[TinyJit, Variable]] = {}     # chunk size -> its capture, its start

    @staticmethod
    def from_gguf(path, max_context: int | None = None) -> tuple[Transformer, dict]:
        """(model, metadata) of a GGUF file (a path, or a Tensor of its bytes)."""
        kv, weights = gguf_load(path)
        if (arch := kv.get("general.architecture")) not in ("llama",):
            raise ValueError(f"{path}: architecture {arch!r}; this model reads llama-family files (llama)")
        return Transformer(kv, weights, max_context), kv

    # ---- the forward pass over T new tokens at positions start .. start + T - 1 ----
    def _attention(self, block: Block, x: Tensor, start, T: int) -> Tensor:
        hd, nh, nkv = self.head_dim, self.n_heads, self.n_kv_heads
        cos, sin = self.cos[start:start + T].unsqueeze(0), self.sin[start:start + T].unsqueeze(0)
        # (n, T, hd). Written out: RoPE reads each output twice (as a and as b of a pair), and fused into it the
        # projection's dot products would be computed for each read
        heads = lambda w, n: w(x).contiguous().reshape(T, n, hd).transpose(0, 1)     # noqa: E731
        if block.cache is None:
            block.cache = Tensor.zeros(2, nkv, self.max_context, hd).contiguous().realize()
        # (no tensor of the new keys and values outlives the write: one would keep what its graph computed, a
        # prefill's dequantized weights)
        block.cache[:, :, start:start + T, :].assign(Tensor.stack(rope(heads(block.wk, nkv), cos, sin),
                                                                 heads(block.wv, nkv)))
        block.cache.realize()           # (settled on its buffer: the write's graph can go)
        q = rope(heads(block.wq, nh), cos, sin)                            # (heads, T, hd)
        keys, values = block.cache[0, :, 0:start + T], block.cache[1, :, 0:start + T]     # (kv heads, start + T, hd)
        group = nh // nkv                                                 # query heads per key-value head
        q = q.reshape(nkv, group * T, hd)
        scores = (q @ keys.transpose(1, 2)) * (1 / math.sqrt(hd))          # (kv heads, group * T, start + T)
        if T > 1:       # causal within the new tokens: query t sees the keys up to start + t (start may be a Variable)
            seen = self.positions[start:start + T].reshape(T, 1) >= self.positions[0:start + T].reshape(1, start + T)
            seen = seen.reshape(1, 1, T, start + T).expand(nkv, group, T, start + T)
            scores = seen.reshape(nkv, group * T, start + T).where(scores, -math.inf)
        out = (scores.softmax(-1) @ values).reshape(nh, T, hd).transpose(0, 1).reshape(T, nh * hd)
        return block.wo(out)

    def _hidden(self, tokens: Tensor, start) -> Tensor:
        T = tokens.shape[0]
        h = self.embedding[tokens]
        for block in self.blocks:
            h = h + self._attention(block, rms_norm(h, block.attn_norm, self.eps), start, T)
            x = rms_norm(h, block.ffn_norm, self.eps)
            h = (h + block.down(block.gate(x).silu() * block.up(x))).contiguous()
        return rms_norm(h, self.norm, self.eps)

    def _forward_last(self, tokens: Tensor, start) -> Tensor:
        """The logits of the last of tokens (a Tensor of ids) placed at position start."""
        return self.output(self._hidden(tokens, start)[-1:]).reshape(-1).realize()

    def _forward_row(self, tokens: Tensor, start, row: Tensor) -> Tensor:
        """The logits of tokens[row] (row a Tensor of one index), tokens placed at position start."""
        return self.output(self._hidden(tokens, start)[row]).reshape(-1).realize()

    def _prefill(self, chunk: list[int], start: int, size: int) -> Tensor:
        """The logits of chunk's last token, chunk written to the cache at start. A chunk padded to `size` tokens is
        a TinyJit replay, its start a bound Variable: a prompt's chunks after the second run no Python of the model.
        (The padding's keys and values land past the prompt, where each decode step writes before it reads.)"""
        if start + size > self.max_context:          # (no room for the padding: the chunk as it is, scheduled anew)
            return self._forward_last(Tensor(np.array(chunk, dtype=np.int32)), start)
        if size not in self.prefill_steps:
            self.prefill_steps[size] = TinyJit(self._forward_row), Variable("start", 0, self.max_context - size)
        step, variable = self.prefill_steps[size]
        padded = np.zeros(size, dtype=np.int32)
        padded[:len(chunk)] = chunk
        return step(Tensor(padded), variable.bind(start), Tensor([len(chunk) - 1], dtype=dtypes.int32))

    # ---- what a user calls ----
    def logits(self, tokens: list[int], chunk_size: int = 64) -> np.ndarray:
        """Teacher-forced logits of every position, (len(tokens), vocab) float32, from an empty cache."""
        self._check_length(len(tokens))
        out = []
        for start in range(0, len(tokens), chunk_size):
            chunk = Tensor(np.array(tokens[start:start + chunk_size], dtype=np.int32))
            out.append(self.output(self._hidden(chunk, start)).numpy())
        return np.concatenate(out).astype(np.float32)

    def generate(self, tokens: list[int], chunk_size: int = 32, temperature: float = 0.0, top_k: int = 0,
                 top_p: float = 1.0, seed: int | None = None):
        """Yields the next token ids after tokens, one at a time, from an empty cache: the prompt is read in chunks of
        chunk_size, then each new token is one step (a TinyJit replay, the position a bound Variable)."""
        self._check_length(len(tokens) + 1)
        rng = np.random.default_rng(seed)
        position = 0
        for start in range(0, len(tokens), chunk_size):
            chunk = tokens[start:start + chunk_size]
            logits = self._prefill(chunk, start, chunk_size)
            position = start + len(chunk)
        # the prefill's temporaries (each matrix dequantized once for all of a chunk's rows) are no decode step's
        # size: kept by the allocator's cache, they would only add to the peak
        if (free_cache := getattr(Device[self.norm.device].allocator, "free_cache", None)) is not None:
            free_cache()
        while True:
            token = sample(logits, temperature, top_k, top_p, rng)
            yield token
            if position >= self.max_context:
                return
            logits = self.decode_step(Tensor([token], dtype=dtypes.int32), self.position.bind(position))
            position += 1

    def complete(self, tokenizer, tokens: list[int], max_tokens: int, **sampling):
        """Yields (token id, its text) after tokens, up to max_tokens, an end token (not yielded) or the end of the
        context."""
        decode = tokenizer.stream_decoder()
        for count, token in enumerate(self.generate(tokens, **sampling)):
            if tokenizer.is_end(token) or count >= max_tokens:
                break
            yield token, decode(token)
            if len(tokens) + count + 1 >= self.max_context:
                break

    def _check_length(self, n: int):
        if not 0 < n <= self.max_context:
            raise ValueError(f"{n} tokens: the context holds 1 to {self.max_context} (--max_context)")


def sample(logits: Tensor, temperature: float, top_k: int, top_p: float, rng: np.random.Generator) -> int:
    """The next token: the most likely at temperature 0 (on the device), else drawn from the softmax of logits /
    temperature over the top_k most likely (0: all) whose probabilities, largest first, reach top_p."""
    if temperature <= 0:
        return int(logits.argmax().item())
    z = logits.numpy().astype(np.float64) / temperature
    order = np.argsort(-z, kind="stable")[:top_k or None]
    p = np.exp(z[order] - z[order[0]])
    p /= p.sum()
    keep = max(1, int(np.searchsorted(np.cumsum(p), top_p) + 1)) if top_p < 1 else len(p)
    p = p[:keep] / p[:keep].sum()
    return int(order[rng.choice(keep, p=p)])
