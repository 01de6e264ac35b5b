"""The tokenizer a GGUF file describes: byte-level BPE (tokenizer.ggml.model "gpt2") with the merges, the pre-tokenizer
regex that tokenizer.ggml.pre names, the control and user-defined tokens matched whole, BOS as the metadata says,
and the chat template rendered with jinja2. Encodes as `transformers` does for the same file
(AutoTokenizer.from_pretrained(dir, gguf_file=...)), which is what tests/test_llm_tokenizer.py checks."""
from __future__ import annotations
import codecs
import functools
import regex

# the pre-tokenizers (transformers' integrations/gguf, from llama.cpp's llama-vocab.cpp): the text is cut at these
# matches, and each piece is a word of its own for BPE. GPT-2's (ByteLevel's own) for every name not listed
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
          r"|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
         r"|\s+(?!\S)|\s+")
PRE_TOKENIZERS = {**dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "falcon3", "smaug-bpe", "dbrx", "pixtral"),
                                  LLAMA3),
                  **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "megrez"), QWEN2)}
CONTROL, USER_DEFINED = 3, 4         # tokenizer.ggml.token_type values


@functools.cache
def byte_alphabet() -> dict[int, str]:
    """GPT-2's spelling of bytes as characters: the printable ones as themselves, the rest from U+0100 on."""
    kept = [*range(33, 127), *range(161, 173), *range(174, 256)]
    others = [b for b in range(256) if b not in kept]
    return {**{b: chr(b) for b in kept}, **{b: chr(256 + i) for i, b in enumerate(others)}}


class SimpleTokenizer:
    """encode(text) -> ids, decode(ids) -> text, and a streaming decoder (tinygrad's names)."""

    def __init__(self, tokens: list[str], token_types: list[int], merges: list[str], pre: str = "gpt2",
                 bos_id: int | None = None, eos_id: int | None = None, add_bos: bool = False,
                 add_space_prefix: bool = False, chat_template: str | None = None, eot_id: int | None = None):
        self.tokens, self.ids = tokens, {t: i for i, t in enumerate(tokens)}
        self.ranks = {m: r for r, m in enumerate(merges)}      # ("a b": the file's own strings, no copies)
        self.split = regex.compile(PRE_TOKENIZERS.get(pre, GPT2))
        self.spell, alphabet = byte_alphabet(), set(byte_alphabet().values())
        self.unspell = {c: b for b, c in self.spell.items()}
        # the tokens matched whole in the text before it is split: the control ones spelled in the byte alphabet (as
        # transformers adds them; one outside it is a mislabel) and the user-defined ones; the longest first
        whole = [t for t, kind in zip(tokens, token_types) if kind == USER_DEFINED or kind == CONTROL and
                 set(t) <= alphabet]
        longest_first = sorted(whole, key=len, reverse=True)
        self.special = regex.compile("|".join(map(regex.escape, longest_first))) if whole else None
        self.bos_id, self.eos_id, self.add_bos, self.add_space_prefix = bos_id, eos_id, add_bos, add_space_prefix
        self.eot_id, self.chat_template = eot_id, chat_template
        self._words: dict[str, list[int]] = {}

    @staticmethod
    def from_gguf_kv(kv: dict) -> SimpleTokenizer:
        if (model := kv.get("tokenizer.ggml.model")) != "gpt2":
            raise ValueError(f"tokenizer.ggml.model is {model!r}: this tokenizer reads byte-level BPE ('gpt2') files")
        tokens = kv["tokenizer.ggml.tokens"]
        eot = next((i for i, t in enumerate(tokens) if t in ("<|im_end|>", "<|eot_id|>", "<|end|>")), None)
        return SimpleTokenizer(tokens, kv.get("tokenizer.ggml.token_type", [1] * len(tokens)),
                               kv.get("tokenizer.ggml.merges", []), kv.get("tokenizer.ggml.pre", "gpt2"),
                               kv.get("tokenizer.ggml.bos_token_id"), kv.get("tokenizer.ggml.eos_token_id"),
                               kv.get("tokenizer.ggml.add_bos_token", False), kv.get("tokenizer.ggml.add_space_prefix",
                               False), kv.get("tokenizer.chat_template"), kv.get("tokenizer.ggml.eot_token_id", eot))

    # ---- encoding ----
    def encode(self, text: str, add_bos: bool | None = None) -> list[int]:
        """The ids of text: BOS first where the metadata says (or add_bos), the whole tokens kept whole, each piece
        between them pre-tokenized and merged."""
        ids = [self.bos_id] if (self.add_bos if add_bos is None else add_bos) and self.bos_id is not None else []
        if self.add_space_prefix and not text.startswith(" "):
            text = " " + text
        at = 0
        for match in self.special.finditer(text) if self.special else ():
            ids += self._encode_plain(text[at:match.start()]) + [self.ids[match.group()]]
            at = match.end()
        return ids + self._encode_plain(text[at:])

    def _encode_plain(self, text: str) -> list[int]:
        return [i for word in self.split.findall(text) for i in self._encode_word(word)]

    def _encode_word(self, word: str) -> list[int]:
        """BPE: the word's bytes, spelled in the byte alphabet, merged pair by pair, the lowest-ranked merge first
        (the leftmost of equals)."""
        if (found := self._words.get(word)) is not None:
            return found
        parts = [self.spell[b] for b in word.encode()]
        while len(parts) > 1:
            rank, i = min((self.ranks.get(f"{a} {b}", len(self.ranks)), i)
                          for i, (a, b) in enumerate(zip(parts, parts[1:])))
            if rank == len(self.ranks):
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        self._words[word] = ids = [self.ids[p] for p in parts]
        return ids

    def encode_chat(self, messages: list[dict]) -> list[int]:
        """A chat's tokens: its messages rendered by the file's chat template (which writes any BOS itself), or without
        one, their contents one after the other."""
        if self.chat_template:
            return self.encode(self.render_chat(messages), add_bos=False)
        return self.encode("\n".join(m["content"] for m in messages))

    # ---- decoding ----
    def token_bytes(self, token_id: int) -> bytes:
        text = self.tokens[token_id]
        return bytes(self.unspell[c] for c in text) if all(c in self.unspell for c in text) else text.encode()

    def decode(self, ids) -> str:
        return b"".join(map(self.token_bytes, ids)).decode(errors="replace")

    def stream_decoder(self):
        """A function of one token id (None: the end) giving the text it completes: a character whose bytes are split
        across tokens comes out once, whole, with the token that ends it."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        return lambda token_id=None: decoder.decode(b"", final=True) if token_id is None else \
            decoder.decode(self.token_bytes(token_id))

    def is_end(self, token_id: int) -> bool:
        return token_id in (self.eos_id, self.eot_id)

    # ---- chat ----
    def render_chat(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """The metadata's chat template (jinja2) applied to messages ([{"role", "content"}])."""
        import jinja2.sandbox
        if not self.chat_template:
            raise ValueError("this GGUF file has no chat template (tokenizer.chat_template)")
        template = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(
            self.chat_template)
        special = lambda i: self.tokens[i] if i is not None else ""     # noqa: E731
        return template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                               bos_token=special(self.bos_id), eos_token=special(self.eos_id))
