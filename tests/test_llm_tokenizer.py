"""The GGUF tokenizer (tinygrad_core/llm/tokenizer.py) against transformers' for the same file, on a corpus of 1,500+
strings (Unicode scripts, whitespace runs, digits, code, emoji, special-token text), for SmolLM2's file and for files
that name the other pre-tokenizers; its chat template against transformers'; and its streaming decoder."""
import os
import random
import pytest

gguf = pytest.importorskip("gguf")
transformers = pytest.importorskip("transformers")
from test_llm import SMOLLM2, needs_model  # noqa: E402

from tinygrad_core.llm.gguf import gguf_load  # noqa: E402
from tinygrad_core.llm.tokenizer import SimpleTokenizer  # noqa: E402

pytestmark = pytest.mark.slow      # (a quick run deselects it: -m 'not slow')

PIECES = ["Hello", " world", "  ", "\n", "\n\n", "\t", " \t ", "\r\n", "12345", "3.14159", "x=1234567;", "don't",
          "they'll", "I'M", "WE'VE", "é", "naïve", "Ünïcödé", "Привет, мир", "Γειά σου", "中文字符", "日本語のテキスト",
          "한국어 문장", "العربية", "עברית", "हिन्दी", "ไทย", "😀", "👨‍👩‍👧", "🇫🇷", "e\u0301", "\u00a0", "\u3000",
          "    def f(x):\n        return x ** 2\n", "{'a': [1, 2]}", "<|im_start|>", "<|im_end|>", "<|endoftext|>",
          "<|im_start|>user", "!!!", "...", "---", "@#$%^&*()", "http://x.y/z?q=1", "  leading", "trailing  ",
          "MiXeD CaSe", "über", "  \n  ", "0", "00", "٣٤٥", "①②", "\u200b", "Ω≈ç√∫", "¡¿", "~~", "'", "''", "a's",
          "1,000,000", "$9.99", "#include <stdio.h>", "\\n", "–—", "«»", "\x00", "\x7f", "\U0001f9d1\u200d\U0001f4bb"]


def corpus(seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return PIECES + ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 9))) for _ in range(1500)]


def write_tokenizer_file(path, kv: dict, pre: str):
    """A GGUF holding SmolLM2's vocabulary and merges under another pre-tokenizer name (and no tensors)."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(kv["tokenizer.ggml.tokens"])
    writer.add_token_types(kv["tokenizer.ggml.token_type"])
    writer.add_token_merges(kv["tokenizer.ggml.merges"])
    writer.add_bos_token_id(kv["tokenizer.ggml.bos_token_id"])
    writer.add_eos_token_id(kv["tokenizer.ggml.eos_token_id"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@needs_model
@pytest.mark.parametrize("pre", ["smollm", "gpt2", "llama-bpe", "qwen2"])
def test_the_tokenizer_encodes_as_transformers_does(pre, tmp_path):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    kv, _ = gguf_load(SMOLLM2)
    path = SMOLLM2 if pre == "smollm" else write_tokenizer_file(tmp_path / f"{pre}.gguf", kv, pre)
    reference = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    ours = SimpleTokenizer.from_gguf_kv(gguf_load(path)[0])
    texts = corpus(len(pre))
    assert len(texts) >= 1000
    different = [(text, ours.encode(text), reference.encode(text)) for text in texts
                 if ours.encode(text) != reference.encode(text)]
    assert not different, different[:3]
    for text in texts:
        decoded = ours.decode(ours.encode(text))
        assert decoded == text, (text, decoded)


@needs_model
def test_the_chat_template_renders_as_transformers_does_and_decoding_streams_whole_characters():
    kv, _ = gguf_load(SMOLLM2)
    ours = SimpleTokenizer.from_gguf_kv(kv)
    reference = transformers.AutoTokenizer.from_pretrained(SMOLLM2.parent, gguf_file=SMOLLM2.name)
    chats = [[{"role": "user", "content": "What is 2+2?"}],
             [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
              {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}]]
    for messages in chats:
        assert ours.render_chat(messages) == reference.apply_chat_template(messages, tokenize=False,
                                                                            add_generation_prompt=True)
    text = "ok 😀 中文 é"
    tokens = ours.encode(text)
    decode = ours.stream_decoder()
    pieces = [decode(t) for t in tokens] + [decode()]
    assert "".join(pieces) == text and all("\ufffd" not in p for p in pieces)
    assert any(p == "" for p in pieces)          # (the emoji's first bytes print nothing until its last comes)
    assert ours.is_end(kv["tokenizer.ggml.eos_token_id"]) and not ours.is_end(tokens[0])
