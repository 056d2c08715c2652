#!/usr/bin/env python3
"""gen_tokenizer_fixtures.py - reference token ids for tests/test_tokenizer_hf.c.

The tokenizer tests compare our C tokenizers with Hugging Face `tokenizers`
(and `sentencepiece`, `transformers`) id for id. Those libraries are not
installed where we build, so this script runs in two steps:

  1. build (any machine, plain python 3, no packages):
       python3 scripts/gen_tokenizer_fixtures.py build [--shared ../shared/models] [--ref .tokref]
     copies the tokenizer files the reference run needs into the git-ignored
     folder .tokref/ and writes tokenizer.json files derived from the GGUF
     vocabularies in ../shared/models (SentencePiece-as-BPE, GPT-2, BERT
     WordPiece), because those models exist here only as GGUF.

  2. ref (the GPU machine, which has tokenizers 0.23.2, transformers and
     sentencepiece; no network):
       python3 scripts/gen_tokenizer_fixtures.py ref --ref .tokref --out DIR
     encodes the shared test strings with every reference tokenizer and
     writes DIR/*.json, committed as tests/data/tokenizer/.

  3. seeds (any machine): writes the libFuzzer seed corpus
     tests/fuzz/corpus/tokenizer/ for tests/fuzz/fuzz_tokenizer.c.

Fixture format (small, parsed by the C test with jansson):
  strings.json: {"texts": [...], "invalid_hex": [...]}   the inputs, shared by
      all tokenizers. invalid_hex are byte strings that are not UTF-8; their
      reference is the tokenizer run on bytes.decode("utf-8", "replace").
  <name>.json: {"name", "source", "build": how the tokenizer was made,
      "ids": [[...] per text]          add_special_tokens=False, specials parsed
      "ids_split_special": {"i": [...]} encode_special_tokens=True where different
      "ids_add_special": {"i": [...]}  add_special_tokens=True for some texts
      "decode_diff": {"i": "..."}      decode(ids) where it is not the input text
      "invalid": [[...] per invalid_hex]}
  Tokenizers built from another file ("build.base") carry their normalizer /
  pre_tokenizer JSON inline, so the C test rebuilds exactly the same thing.

The table PRE below is the pre-tokenizer each `tokenizer.ggml.pre` name stands
for, as the model's own tokenizer.json declares it. src/tokenizer/pretok_table.c
holds the same table; the C test checks that both agree.
"""
import base64
import json
import os
import random
import shutil
import struct
import sys
import time

# --------------------------------------------------------------------------
# Pre-tokenizer regexes as Hugging Face tokenizer.json files declare them.

R_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
R_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
            r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
R_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
           r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
R_TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
            r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
R_O200K = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
           r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
           r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
R_SEED_CODER = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}|"
                r" ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+")
R_DS3 = (r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|"
         r" ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
R_DSLLM_LETTERS = "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+"
R_DSLLM_PUNCT = "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"
R_CJK_DS = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
R_BLOOM = " ?[^(\\s|[.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c])]+"


def split(regex, behavior="Isolated", invert=False):
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": behavior, "invert": invert}


def bytelevel(use_regex, add_prefix_space=False, trim_offsets=True):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": trim_offsets,
            "use_regex": use_regex}


def seq(*items):
    return {"type": "Sequence", "pretokenizers": list(items)}


NFC = {"type": "NFC"}
DIGITS1 = {"type": "Digits", "individual_digits": True}

# name list -> (normalizer, pre_tokenizer, ignore_merges)
PRE = [
    (["gpt-2", "phi-2", "gpt2", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "roberta-bpe"],
     None, bytelevel(True), False),
    (["mpt", "olmo"], NFC, bytelevel(True), False),
    (["starcoder", "refact", "smollm", "codeshell"], None, seq(DIGITS1, bytelevel(True)), False),
    (["command-r"], NFC, seq(DIGITS1, bytelevel(True)), False),
    (["llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"], None,
     seq(split(R_LLAMA3), bytelevel(False)), True),
    (["dbrx", "smaug-bpe", "chatglm4", "glm4", "chatglm-bpe"], None,
     seq(split(R_LLAMA3), bytelevel(False)), False),
    (["qwen2", "deepseek-r1-qwen", "megrez"], NFC, seq(split(R_QWEN2), bytelevel(False, trim_offsets=False)), False),
    (["deepseek-llm"], None, seq(split("[\r\n]"), split(R_DSLLM_LETTERS), split(R_DSLLM_PUNCT),
                                 split("\\s+$"), split(R_CJK_DS), DIGITS1, bytelevel(False)), False),
    (["deepseek-coder"], None, seq(split("[\r\n]"), split("\\s?\\p{L}+"), split("\\s?\\p{P}+"),
                                   split(R_CJK_DS), DIGITS1, bytelevel(False)), False),
    (["deepseek-v3"], None, seq(split("\\p{N}{1,3}"), split("[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"), split(R_DS3),
                                bytelevel(False)), False),
    (["falcon"], None, seq({"type": "Punctuation", "behavior": "Contiguous"}, bytelevel(True),
                           {"type": "Digits", "individual_digits": False},
                           split("[0-9][0-9][0-9]")), False),
    (["tekken"], None, seq(split(R_TEKKEN), bytelevel(False)), True),
    (["bloom", "poro-chat", "gpt3-finnish"], None, seq(split(R_BLOOM), bytelevel(False)), False),
    (["gpt-4o", "llama4"], None, seq(split(R_O200K), bytelevel(False)), False),
    (["seed-coder"], None, seq(split(R_SEED_CODER), bytelevel(False)), False),
    (["default"], None, seq(split("[\\p{P}\\$\\+<=>\\^~\\|]+"), split(R_GPT2), split("\\p{N}+"),
                            split("[0-9][0-9][0-9]"), bytelevel(False)), False),
]

# --------------------------------------------------------------------------
# Test strings.

SPECIAL_TEXTS = [
    "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>system<|end_header_id|>\n\nHi<|eot_id|>",
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
    "<s>", "</s>", "<unk>", "<s> hi </s>", "[CLS]", "[SEP]", "[MASK]", "[PAD]", "[CLS] a b [SEP]", "<pad>",
    "<mask>", "a <mask> b", "a<mask>b", "  <mask>  x", "[X]   y", "[X]", "x[X]", "word", "a word here",
    "awordb", "sword words word.", "ÄÖ", "äö ÄÖ", "<sep>", "x<sep>y", "<|im_sta", "<<|endoftext|>>",
    "<|im_start|><|im_end|>", " <|im_start|> ", "a<|eot_id|>b", "<|end|>", "<|user|>\nhi<|end|>\n<|assistant|>",
    "<｜begin▁of▁sentence｜>hi", "<|reserved_special_token_0|>",
]

HAND = [
    "", " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n\n", " \n ", "\t\n", "Hello world", " Hello world",
    "Hello  world", "hello\tworld", "abc   ", "   abc", "Hello, world!", "I'm", "you'RE", "they'll've",
    "'s", "can't won't", "'S 'T 'Re 'vE 'M 'LL 'D", "1", "12", "123", "1234", "12345678901234567890",
    "3.14159", "1,000,000.00", "٣٤٥ ١٢", "½ ¾ ²³", "① ② Ⅻ", "!!!", "...", "?!", "¿Qué?", "«quotes»",
    "—dash— – ‒", "foo_bar", "a-b-c", "🦙", "👨‍👩‍👧‍👦", "🇫🇷🇩🇪", "👍🏽", "😶‍🌫️ ✅",
    "你好，世界", "日本語のテキスト", "한국어 텍스트", "中文English混合123", "مرحبا بالعالم",
    "שלום עולם", "abc مرحبا 123 שלום", "e\u0301", "Cafe\u0301 café", "ñ vs n\u0303", "\u212b \u00c5",
    "ﬁ ligature ﬀ", "Ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ", "नमस्ते दुनिया", "สวัสดีชาวโลก", "កាន់តែពិសេស",
    "Привет мир", "Γειά σου Κόσμε", "İstanbul ı", "ß ẞ", "ǅ ǈ", "ΣΑΣ σας", "a\u200bb", "\ufeffBOM",
    "a\u00a0b", "a\u3000b", "a\u2028b", "a\u0085b", "\x0b\x0c", "a\x00b", "\x01\x1f", "\x7f", "\u2581 x\u2581y",
    "def f(x):\n    return x**2\n", "for (int i = 0; i < n; i++) {\n\tsum += a[i];\n}",
    "<html><body>Hi</body></html>", "SELECT * FROM t WHERE id=1;", '{"a": [1, 2, {"b": null}]}',
    "https://example.com/path?q=1&r=2#frag", "me@example.org", "C:\\Users\\me\\file.txt", "^(a|b)*$",
    "# Title\n\n- item\n- item2\n\n```py\nprint(1)\n```", "x" + " " * 16, "\t\t\tx", "\n" * 5, " \n \n",
    "a \n\n b", "supercalifragilisticexpialidocious", "a" * 60, "ab" * 20, "ThisIsCamelCase",
    "snake_case_identifier", "UPPER CASE WORDS", "MiXeD cAsE", "HTTPServerError", "  \t  \n\n  end",
    "3..3 3...3 33.33", "$100 + 5% = €€ ¥", "x² + y² = z²", "⅓ ⅔", "😀😃😄😁", "🦙🦙 3 33 333",
    "ied 5 ½ weeks", "Ärger über Öl", "Ça va? Très bien!", "Tiếng Việt có dấu", "ქართული ენა",
    "Ελληνικά και English", "ⓐⓑⓒ", "\u0301\u0301", "a\u0308\u0301", "\U0001d400\U0001d401", "\u00ad",
]

for k in range(1, 9):
    HAND.append(" " * k + "x")
for k in (2, 3, 4, 8):
    HAND.append("\n" * k + "y")

POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789",
    " \t\n\r  ",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿÀÉÎÕÜß",
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年",
    "あいうえおかきくけこアイウエオカキクケコ",
    "😀😂🤣😍🦙🚀✅❤️👍🏽🇯🇵",
    "\u0300\u0301\u0302\u0303\u0308\u0327\u200d\u200b\ufe0f",
    "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
    "אבגדהוזחטיכלמנסעפצקרשת",
    "абвгдеёжзийклмнопрстуфхцчшщъыьэюя",
    "कखगघचछजझटठडढणतथदधनपफबभमयरलवशसह",
    "←→↑↓∀∂∃∅∇∈∉≈≠≤≥⊂⊃€£¥©®™°±×÷",
    "\u2581\u00a0\u3000\u2028\u0085",
    "'s 'll 've 're 'd 'm n't ",
]


def random_strings(n, rng):
    out = []
    for _ in range(n):
        length = rng.choice([1, 2, 3, 5, 8, 13, 21, 34, 55])
        pools = rng.sample(POOLS, rng.randint(1, 4))
        s = []
        for _ in range(length):
            p = rng.choice(pools)
            if rng.random() < 0.25 and p[0].isalpha():
                w = "".join(rng.choice(p) for _ in range(rng.randint(2, 7)))
                s.append(w + rng.choice([" ", "", "\n", ", "]))
            else:
                s.append(rng.choice(p))
        if rng.random() < 0.1:
            s.insert(rng.randrange(len(s) + 1), rng.choice(SPECIAL_TEXTS))
        out.append("".join(s))
    return out


LONG = (
    "The quick brown fox jumps over the lazy dog. It wasn't the first time; the dog'd seen it 1,234 times "
    "before!  Meanwhile, in 東京, 午後3時に会議があります。Встреча в 15:00. مرحبا 🦙🦙🦙\n\n"
    "```python\nclass Foo(object):\n    def __init__(self, x=42):\n        self.x = x  # 'answer'\n\n"
    "    def __repr__(self):\n        return f\"Foo({self.x!r})\"\n```\n"
    "\tTabbed line\r\nWindows line\n    Indented     spaces    here.   \n"
)


def make_strings():
    rng = random.Random(20251130)
    texts = list(dict.fromkeys(HAND + SPECIAL_TEXTS))
    texts += random_strings(130, rng)
    texts.append(LONG)
    texts.append(LONG * 3)
    texts.append("".join(rng.choice(POOLS[0] + POOLS[2] + POOLS[3]) for _ in range(1500)))
    invalid = [b"\xff", b"\xc3", b"\xc3(", b"a\x80b", b"\xe2\x82", b"\xe2\x82(", b"\xf0\x9f\x98",
               b"\xf0\x9f\x98\x80\xf0", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf5\x80\x80\x80",
               b"\xf4\x90\x80\x80", b"\xe0\x80\x80", b"\x80\x80\x80", b"ab\xfe\xffcd", b"\xf8\x88\x80\x80\x80",
               b"Hello \xe4\xbd wor\xa0ld", b" \xc3\xa9\xcc", b"\xef\xbf\xbd\xef\xbf", b"<|im_start|>\xff"]
    for _ in range(6):
        invalid.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 24))))
    return texts, [b.hex() for b in invalid]


# --------------------------------------------------------------------------
# Minimal GGUF metadata reader (no tensors), for the build step.

def read_gguf_kv(path):
    f = open(path, "rb").read()
    o = 0

    def take(fmt):
        nonlocal o
        v = struct.unpack_from(fmt, f, o)[0]
        o += struct.calcsize(fmt)
        return v

    def string():
        nonlocal o
        n = take("<Q")
        v = f[o:o + n]
        o += n
        return v.decode("utf-8", "surrogateescape")

    fmts = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et = take("<I")
            n = take("<Q")
            return [value(et) for _ in range(n)]
        return take(fmts[t])

    assert f[:4] == b"GGUF"
    o = 4
    take("<I")
    take("<Q")
    nkv = take("<Q")
    kv = {}
    for _ in range(nkv):
        k = string()
        kv[k] = value(take("<I"))
    return kv


def added(id_, content, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": special}


def spm_merges(pieces, scores):
    """Merges for a SentencePiece BPE vocabulary, the way transformers'
    SentencePieceExtractor derives them: every split of a piece into two
    pieces, ordered by the score of the merged piece (then by ids)."""
    vocab = {p: i for i, p in enumerate(pieces)}
    out = []
    for i, piece in enumerate(pieces):
        local = []
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in vocab and right in vocab:
                local.append((vocab[left], vocab[right], left, right))
        local.sort()
        for a, b, left, right in local:
            out.append((scores[i], i, left, right))
    out.sort(key=lambda x: (-x[0], x[1]))
    return [[left, right] for _, _, left, right in out]


def build_llama_spm(kv, metaspace):
    toks = kv["tokenizer.ggml.tokens"]
    scores = kv["tokenizer.ggml.scores"]
    types = kv["tokenizer.ggml.token_type"]
    vocab = {}
    for i, t in enumerate(toks):
        vocab.setdefault(t, i)
    normal = [t if types[i] in (1, 6) else "\u0000ctl%d" % i for i, t in enumerate(toks)]
    merges = spm_merges(normal, scores)
    d = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(i, toks[i]) for i in range(len(toks)) if types[i] in (2, 3)],
        "normalizer": None if metaspace else {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                          "split": False} if metaspace else None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 1}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}
        if metaspace else {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    if metaspace:
        # ByteFallback still has to turn <0x..> pieces into bytes.
        d["decoder"] = {"type": "Sequence", "decoders": [
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
            {"type": "ByteFallback"}, {"type": "Fuse"}]}
    return d


def build_gpt2(kv):
    toks = kv["tokenizer.ggml.tokens"]
    merges = [m.split(" ", 1) for m in kv["tokenizer.ggml.merges"]]
    vocab = {}
    for i, t in enumerate(toks):
        vocab.setdefault(t, i)
    eot = kv["tokenizer.ggml.eos_token_id"]
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(eot, toks[eot])],
        "normalizer": None,
        "pre_tokenizer": bytelevel(True),
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def bert_hf_token(tok, ttype):
    """Undo the 'phantom space' form llama.cpp's converter writes for BERT."""
    if ttype == 3 or (tok.startswith("[") and tok.endswith("]")):
        return tok
    if tok.startswith("\u2581"):
        return tok[1:]
    return "##" + tok


def build_bert(kv):
    toks = kv["tokenizer.ggml.tokens"]
    types = kv["tokenizer.ggml.token_type"]
    vocab = {}
    for i, t in enumerate(toks):
        h = bert_hf_token(t, types[i])
        if h and h not in vocab:
            vocab[h] = i
    specials = [i for i in range(len(toks)) if types[i] == 3]
    cls_id, sep_id = kv["tokenizer.ggml.cls_token_id"], kv["tokenizer.ggml.seperator_token_id"]
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(i, toks[i]) for i in specials],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}},
                                    {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                           "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [cls_id], "tokens": ["[CLS]"]},
                                              "[SEP]": {"id": "[SEP]", "ids": [sep_id], "tokens": ["[SEP]"]}}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }


def cmd_build(shared, ref):
    os.makedirs(ref, exist_ok=True)
    for sub, files in (("llama3", ["tokenizer.json", "tokenizer_config.json"]),
                       ("qwen2", ["vocab.json", "merges.txt", "tokenizer_config.json", "added_tokens.json",
                                  "special_tokens_map.json"]),
                       ("llama2", ["tokenizer.model"])):
        os.makedirs(os.path.join(ref, sub), exist_ok=True)
        for f in files:
            dst = os.path.join(ref, sub, f)
            shutil.copyfile(os.path.join(shared, "tokenizers", sub, f), dst)
            os.chmod(dst, 0o644)
    vdir = os.path.join(shared, "llama.cpp-vocab")
    built = os.path.join(ref, "built")
    os.makedirs(built, exist_ok=True)
    spm = read_gguf_kv(os.path.join(vdir, "ggml-vocab-llama-spm.gguf"))
    for name, ms in (("llama-spm-hf-legacy", False), ("llama-spm-hf-metaspace", True)):
        with open(os.path.join(built, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(build_llama_spm(spm, ms), f, ensure_ascii=False)
    with open(os.path.join(built, "gpt2-hf.json"), "w", encoding="utf-8") as f:
        json.dump(build_gpt2(read_gguf_kv(os.path.join(vdir, "ggml-vocab-gpt-2.gguf"))), f, ensure_ascii=False)
    with open(os.path.join(built, "bert-bge-hf.json"), "w", encoding="utf-8") as f:
        json.dump(build_bert(read_gguf_kv(os.path.join(vdir, "ggml-vocab-bert-bge.gguf"))), f, ensure_ascii=False)
    texts, invalid = make_strings()
    with open(os.path.join(ref, "strings.json"), "w", encoding="utf-8") as f:
        json.dump({"texts": texts, "invalid_hex": invalid}, f, ensure_ascii=False)
    shutil.copyfile(__file__, os.path.join(ref, "gen_tokenizer_fixtures.py"))
    print("built", ref, len(texts), "texts")


# --------------------------------------------------------------------------
# Reference step (GPU machine).

class Log:
    def __init__(self, path):
        self.f = open(path, "w")

    def __call__(self, *a):
        msg = " ".join(str(x) for x in a)
        print(msg, flush=True)
        self.f.write(msg + "\n")
        self.f.flush()


def encode_all(tok, texts, invalid):
    """Run one `tokenizers.Tokenizer` over the shared inputs."""
    out = {}
    encs = tok.encode_batch(texts, add_special_tokens=False)
    out["ids"] = [e.ids for e in encs]
    try:
        tok.encode_special_tokens = True
        encs2 = tok.encode_batch(texts, add_special_tokens=False)
        tok.encode_special_tokens = False
        out["ids_split_special"] = {str(i): e.ids for i, e in enumerate(encs2) if e.ids != out["ids"][i]}
    except Exception as ex:  # older tokenizers: no such switch
        out["ids_split_special_error"] = repr(ex)
    out["ids_add_special"] = {}
    for i in list(range(0, 12)) + [texts.index("Hello world")]:
        out["ids_add_special"][str(i)] = tok.encode(texts[i], add_special_tokens=True).ids
    dd = {}
    for i, ids in enumerate(out["ids"]):
        d = tok.decode(ids, skip_special_tokens=False)
        if d != texts[i]:
            dd[str(i)] = d
    out["decode_diff"] = dd
    out["invalid"] = [tok.encode(bytes.fromhex(h).decode("utf-8", "replace"), add_special_tokens=False).ids
                      for h in invalid]
    sk = {}
    for i, ids in enumerate(out["ids"]):
        d = tok.decode(ids, skip_special_tokens=True)
        if d != dd.get(str(i), texts[i]):
            sk[str(i)] = d
    out["decode_skip_special_diff"] = sk
    return out


def debug_stages(tok, texts):
    """What the normalizer and the pre-tokenizer alone make of each text (not
    committed; only for finding where a mismatch starts)."""
    dbg = {}
    try:
        if tok.normalizer is not None:
            dbg["norm"] = [tok.normalizer.normalize_str(t) for t in texts]
    except Exception as ex:
        dbg["norm_error"] = repr(ex)
    try:
        if tok.pre_tokenizer is not None:
            dbg["pre"] = [[p for p, _ in tok.pre_tokenizer.pre_tokenize_str(t)] for t in texts]
    except Exception as ex:
        dbg["pre_error"] = repr(ex)
    return dbg


def write_fixture(outdir, name, payload, log):
    path = os.path.join(outdir, name + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(payload, f, ensure_ascii=False, separators=(",", ":"))
    log("wrote", name, os.path.getsize(path), "bytes")


def pb_fields(buf):
    """Fields of one protobuf message: (number, wire type, value)."""
    def varint(i):
        v, shift = 0, 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v, i
    i = 0
    while i < len(buf):
        key, i = varint(i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            n, i = varint(i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def parse_spm_model(data):
    """The parts of a SentencePiece ModelProto we need, read without protobuf."""
    pieces, norm = [], {"charsmap": b"", "add_dummy_prefix": True, "remove_extra_whitespaces": True,
                        "escape_whitespaces": True}
    for num, _, v in pb_fields(data):
        if num == 1:
            p = {"piece": "", "score": 0.0, "type": 1}
            for n2, _, v2 in pb_fields(v):
                if n2 == 1:
                    p["piece"] = v2.decode("utf-8")
                elif n2 == 2:
                    p["score"] = struct.unpack("<f", v2)[0]
                elif n2 == 3:
                    p["type"] = v2
            pieces.append(p)
        elif num == 3:
            for n2, _, v2 in pb_fields(v):
                if n2 == 2:
                    norm["charsmap"] = v2
                elif n2 == 3:
                    norm["add_dummy_prefix"] = bool(v2)
                elif n2 == 4:
                    norm["remove_extra_whitespaces"] = bool(v2)
                elif n2 == 5:
                    norm["escape_whitespaces"] = bool(v2)
    return pieces, norm


def train_unigram(log, byte_fallback):
    import io
    import sentencepiece as spm
    import inspect
    import collections
    import json as json_mod
    import re as re_mod
    import textwrap
    docs = []
    for mod in (collections, json_mod, re_mod, textwrap, os, inspect, random, struct, io):
        for _, obj in inspect.getmembers(mod):
            d = getattr(obj, "__doc__", None)
            if isinstance(d, str):
                docs.extend(x for x in d.split("\n") if x.strip())
    texts, _ = make_strings()
    lines = docs + [t for t in texts if t.strip()] * 3
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, model_type="unigram",
        vocab_size=800 if byte_fallback else 1000, byte_fallback=byte_fallback,
        normalization_rule_name="identity" if byte_fallback else "nmt_nfkc",
        character_coverage=0.98 if byte_fallback else 0.9995, user_defined_symbols=["<sep>", "[X]"], num_threads=1,
        hard_vocab_limit=False)
    data = model.getvalue()
    pieces, norm = parse_spm_model(data)
    sp = spm.SentencePieceProcessor(model_proto=data)
    log("trained unigram", "byte_fallback" if byte_fallback else "nmt_nfkc", len(pieces), "pieces",
        "charsmap", len(norm["charsmap"]), "bytes", "sp size", sp.get_piece_size())
    return pieces, norm, sp, byte_fallback


def unigram_hf_json(pieces, norm, byte_fallback):
    # SentencePiece piece types: 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte.
    vocab = [[p["piece"], p["score"]] for p in pieces]
    unk_id = next(i for i, p in enumerate(pieces) if p["type"] == 2)
    norms = []
    if norm["charsmap"]:
        norms.append({"type": "Precompiled",
                      "precompiled_charsmap": base64.b64encode(norm["charsmap"]).decode()})
    if norm["remove_extra_whitespaces"]:
        norms.append({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})
    scheme = "always" if norm["add_dummy_prefix"] else "never"
    at = []
    for i, p in enumerate(pieces):
        if p["type"] in (2, 3):
            at.append(added(i, p["piece"]))
        elif p["type"] == 4:
            at.append(added(i, p["piece"], special=False))
    eos = next(i for i, p in enumerate(pieces) if p["piece"] == "</s>")
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": at,
        "normalizer": {"type": "Sequence", "normalizers": norms} if norms else None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "</s>", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}},
                                    {"SpecialToken": {"id": "</s>", "type_id": 1}}],
                           "special_tokens": {"</s>": {"id": "</s>", "ids": [eos], "tokens": ["</s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": True},
            {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "Unigram", "unk_id": unk_id, "vocab": vocab, "byte_fallback": byte_fallback},
    }


def sp_fixture(sp, texts, invalid):
    out = {"ids": [sp.encode(t) for t in texts]}
    dd = {}
    for i, ids in enumerate(out["ids"]):
        d = sp.decode(ids)
        if d != texts[i]:
            dd[str(i)] = d
    out["decode_diff"] = dd
    out["invalid"] = [sp.encode(bytes.fromhex(h).decode("utf-8", "replace")) for h in invalid]
    return out


def cmd_ref(ref, outdir):
    from tokenizers import Tokenizer
    import tokenizers
    os.makedirs(os.path.join(outdir, "debug"), exist_ok=True)
    log = Log(os.path.join(outdir, "log.txt"))
    log("tokenizers", tokenizers.__version__)
    with open(os.path.join(ref, "strings.json"), encoding="utf-8") as f:
        s = json.load(f)
    texts, invalid = s["texts"], s["invalid_hex"]
    write_fixture(outdir, "strings", s, log)
    t0 = time.time()

    def run(name, source, build, make):
        try:
            tok = make()
            payload = {"name": name, "source": source, "build": build}
            payload.update(encode_all(tok, texts, invalid))
            write_fixture(outdir, name, payload, log)
            write_fixture(os.path.join(outdir, "debug"), name, debug_stages(tok, texts), log)
        except BaseException as ex:  # pyo3 panics are BaseException
            import traceback
            log("FAILED", name, repr(ex), traceback.format_exc())

    # 1. Real tokenizer.json files.
    l3path = os.path.join(ref, "llama3", "tokenizer.json")
    run("llama3", "tokenizers/llama3/tokenizer.json", {"file": "llama3/tokenizer.json"},
        lambda: Tokenizer.from_file(l3path))
    for name, gguf in (("llama-spm-hf-legacy", "llama-spm"), ("llama-spm-hf-metaspace", "llama-spm"),
                       ("gpt2-hf", "gpt-2"), ("bert-bge-hf", "bert-bge")):
        p = os.path.join(ref, "built", name + ".json")
        run(name, "tokenizer.json built from llama.cpp-vocab/ggml-vocab-%s.gguf by this script" % gguf,
            {"recipe": name, "gguf": "llama.cpp-vocab/ggml-vocab-%s.gguf" % gguf},
            lambda p=p: Tokenizer.from_file(p))

    # 2. Pre-tokenizer kinds: the llama3 vocabulary and merges under each declared pipeline.
    with open(l3path, encoding="utf-8") as f:
        l3 = json.load(f)
    for names, norm, pre, ign in PRE:
        d = dict(l3)
        d["model"] = dict(l3["model"])
        d["model"]["ignore_merges"] = ign
        d["normalizer"] = norm
        d["pre_tokenizer"] = pre
        run("pre-" + names[0], "llama3 vocab+merges with the pre-tokenizer of " + names[0],
            {"base": "llama3", "pre_names": names, "normalizer": norm, "pre_tokenizer": pre, "ignore_merges": ign},
            lambda d=d: Tokenizer.from_str(json.dumps(d)))

    # 3. Normalizer / pre-tokenizer / added-token coverage on the same vocabulary.
    ks = [
        ("ks-norm1", {"type": "Sequence", "normalizers": [
            {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": True, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
         seq({"type": "WhitespaceSplit"}, {"type": "Punctuation", "behavior": "Isolated"},
             {"type": "Digits", "individual_digits": False}, bytelevel(False, add_prefix_space=True))),
        ("ks-norm2", {"type": "Sequence", "normalizers": [
            {"type": "NFD"}, {"type": "StripAccents"}, {"type": "Replace", "pattern": {"String": "e"}, "content": "E"},
            {"type": "Prepend", "prepend": "_"}]},
         seq({"type": "Whitespace"}, bytelevel(True))),
        ("ks-split", {"type": "NFKD"},
         seq({"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": False},
             split("\\d+", "MergedWithPrevious"), split("[aeiou]", "Removed"),
             split("\\p{P}", "Contiguous", True), {"type": "Punctuation", "behavior": "MergedWithNext"},
             bytelevel(False))),
        ("ks-split2", {"type": "Strip", "strip_left": False, "strip_right": True},
         seq(split("\\s+", "Contiguous"), split("\\w+", "Isolated", True),
             {"type": "Punctuation", "behavior": "Removed"}, bytelevel(False))),
    ]
    for name, norm, pre in ks:
        d = dict(l3)
        d["normalizer"] = norm
        d["pre_tokenizer"] = pre
        run(name, "llama3 vocab+merges, coverage pipeline",
            {"base": "llama3", "normalizer": norm, "pre_tokenizer": pre, "ignore_merges": True},
            lambda d=d: Tokenizer.from_str(json.dumps(d)))
    d = dict(l3)
    nid = 128256
    extra = [added(nid, "<mask>", special=True, lstrip=True), added(nid + 1, "[X]", special=False, rstrip=True),
             added(nid + 2, "word", special=False, normalized=True, single_word=True),
             added(nid + 3, "ÄÖ", special=False, normalized=True),
             added(nid + 4, "<sep>", special=True, lstrip=True, rstrip=True)]
    d["added_tokens"] = list(l3["added_tokens"]) + extra
    norm = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}
    d["normalizer"] = norm
    run("ks-added", "llama3 with extra added tokens (lstrip, rstrip, single_word, normalized)",
        {"base": "llama3", "normalizer": norm, "pre_tokenizer": l3["pre_tokenizer"], "ignore_merges": True,
         "added_tokens": extra},
        lambda: Tokenizer.from_str(json.dumps(d)))
    with open(os.path.join(ref, "built", "bert-bge-hf.json"), encoding="utf-8") as f:
        bert = json.load(f)
    for name, norm, pre in (
            ("ks-wp-cased", {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": False,
                             "strip_accents": False, "lowercase": False},
             {"type": "BertPreTokenizer"}),
            ("ks-wp-nfkd", {"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "Lowercase"},
                                                                 {"type": "StripAccents"}, {"type": "Strip",
                                                                 "strip_left": True, "strip_right": True}]},
             seq({"type": "Whitespace"}, DIGITS1))):
        d = dict(bert)
        d["normalizer"] = norm
        d["pre_tokenizer"] = pre
        run(name, "bert-bge WordPiece vocabulary, coverage pipeline",
            {"base": "bert-bge-hf", "normalizer": norm, "pre_tokenizer": pre, "ignore_merges": False},
            lambda d=d: Tokenizer.from_str(json.dumps(d)))
    with open(os.path.join(ref, "built", "llama-spm-hf-metaspace.json"), encoding="utf-8") as f:
        spmj = json.load(f)
    for scheme in ("always", "never"):
        pre = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": True}
        dec = {"type": "Sequence", "decoders": [dict(pre), {"type": "ByteFallback"}, {"type": "Fuse"}]}
        d = dict(spmj)
        d["pre_tokenizer"] = pre
        d["decoder"] = dec
        run("ks-metaspace-" + scheme, "llama-spm-hf-metaspace with another Metaspace pre-tokenizer",
            {"base": "llama-spm-hf-metaspace", "pre_tokenizer": pre, "decoder": dec},
            lambda d=d: Tokenizer.from_str(json.dumps(d)))
    # Strip with a stop, on the joined text and per token (llama-spm legacy base).
    with open(os.path.join(ref, "built", "llama-spm-hf-legacy.json"), encoding="utf-8") as f:
        leg = json.load(f)
    rep = {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}
    for name, dec in (
            # Note: tokenizers 0.23.2 panics (index out of bounds in strip.rs)
            # decoding an empty id list with a Strip whose stop > 0.
            ("ks-strip-whole", {"type": "Sequence", "decoders": [
                rep, {"type": "ByteFallback"}, {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 2}]}),
            ("ks-strip-token", {"type": "Sequence", "decoders": [
                rep, {"type": "Strip", "content": " ", "start": 1, "stop": 1}, {"type": "ByteFallback"},
                {"type": "Fuse"}]})):
        d = dict(leg)
        d["decoder"] = dec
        run(name, "llama-spm-hf-legacy with another decoder", {"base": "llama-spm-hf-legacy", "decoder": dec},
            lambda d=d: Tokenizer.from_str(json.dumps(d)))
    norm = {"type": "Sequence", "normalizers": [
        {"type": "Nmt"}, {"type": "Replace", "pattern": {"Regex": "[0-9]"}, "content": "#"},
        {"type": "Strip", "strip_left": True, "strip_right": False}]}
    pre = seq({"type": "CharDelimiterSplit", "delimiter": "-"},
              {"type": "Punctuation", "behavior": "MergedWithPrevious"},
              {"type": "Split", "pattern": {"String": "ab"}, "behavior": "MergedWithNext", "invert": False},
              bytelevel(False))
    d = dict(l3)
    d["normalizer"] = norm
    d["pre_tokenizer"] = pre
    run("ks-misc", "llama3 vocab+merges, coverage pipeline",
        {"base": "llama3", "normalizer": norm, "pre_tokenizer": pre, "ignore_merges": True},
        lambda d=d: Tokenizer.from_str(json.dumps(d)))
    # Models trained here: BPE with a continuing prefix and end-of-word suffix, WordLevel.
    try:
        from tokenizers import models, trainers, pre_tokenizers, normalizers, decoders, processors
        texts_train = [t for t in texts if t.strip()] * 2
        b = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>"))
        b.normalizer = normalizers.Lowercase()
        b.pre_tokenizer = pre_tokenizers.Whitespace()
        b.decoder = decoders.BPEDecoder(suffix="</w>")
        b.train_from_iterator(texts_train, trainers.BpeTrainer(
            vocab_size=400, special_tokens=["[UNK]", "[CLS]", "[SEP]"], continuing_subword_prefix="##",
            end_of_word_suffix="</w>", show_progress=False))
        b.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[
            ("[CLS]", b.token_to_id("[CLS]")), ("[SEP]", b.token_to_id("[SEP]"))])
        write_fixture(outdir, "bpe-suffix-tokenizer", json.loads(b.to_str()), log)
        run("bpe-suffix", "tokenizers BpeTrainer (## prefix, </w> suffix, BPEDecoder)",
            {"file": "bpe-suffix-tokenizer.json"}, lambda: b)
        wl = Tokenizer(models.WordLevel(unk_token="[UNK]"))
        wl.normalizer = normalizers.NFKC()
        wl.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                    pre_tokenizers.Punctuation("isolated")])
        wl.train_from_iterator(texts_train, trainers.WordLevelTrainer(
            vocab_size=300, special_tokens=["[UNK]", "<s>"], show_progress=False))
        write_fixture(outdir, "wordlevel-tokenizer", json.loads(wl.to_str()), log)
        run("wordlevel", "tokenizers WordLevelTrainer (no decoder: tokens joined by spaces)",
            {"file": "wordlevel-tokenizer.json"}, lambda: wl)
    except Exception as ex:
        import traceback
        log("FAILED trained models", repr(ex), traceback.format_exc())
    log("hf done", round(time.time() - t0, 1), "s")

    # 4. SentencePiece itself on the Llama-2 model (the truth for GGUF 'llama' vocabularies).
    try:
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=os.path.join(ref, "llama2", "tokenizer.model"))
        payload = {"name": "llama-spm-sentencepiece", "source": "sentencepiece on tokenizers/llama2/tokenizer.model",
                   "build": {"gguf": "llama.cpp-vocab/ggml-vocab-llama-spm.gguf"}}
        payload.update(sp_fixture(sp, texts, invalid))
        write_fixture(outdir, "llama-spm-sentencepiece", payload, log)
    except Exception as ex:
        import traceback
        log("FAILED sentencepiece", repr(ex), traceback.format_exc())

    # 5. Unigram: train two small SentencePiece models, reference both sentencepiece and tokenizers.
    for bf in (False, True):
        name = "unigram-bytefallback" if bf else "unigram-nfkc"
        try:
            pieces, norm, sp, _ = train_unigram(log, bf)
            hf = unigram_hf_json(pieces, norm, bf)
            write_fixture(outdir, name + "-tokenizer", hf, log)
            payload = {"name": name, "source": "tokenizers on " + name + "-tokenizer.json",
                       "build": {"file": name + "-tokenizer.json"}}
            payload.update(encode_all(Tokenizer.from_str(json.dumps(hf)), texts, invalid))
            write_fixture(outdir, name, payload, log)
            payload = {"name": name + "-sentencepiece", "source": "sentencepiece on the same model",
                       "build": {"file": name + "-tokenizer.json"},
                       "model": {"add_dummy_prefix": norm["add_dummy_prefix"],
                                 "remove_extra_whitespaces": norm["remove_extra_whitespaces"],
                                 "escape_whitespaces": norm["escape_whitespaces"],
                                 "types": [p["type"] for p in pieces]}}
            payload.update(sp_fixture(sp, texts, invalid))
            write_fixture(outdir, name + "-sentencepiece", payload, log)
        except BaseException as ex:  # pyo3 panics are BaseException
            import traceback
            log("FAILED", name, repr(ex), traceback.format_exc())

    # 6. Qwen2 "slow" layout through transformers.
    try:
        import transformers
        from transformers import AutoTokenizer
        log("transformers", transformers.__version__)
        t = AutoTokenizer.from_pretrained(os.path.join(ref, "qwen2"))
        log("qwen2 class", type(t).__name__)
        payload = {"name": "qwen2-transformers", "source": "transformers AutoTokenizer on tokenizers/qwen2 "
                   "(vocab.json + merges.txt + tokenizer_config.json + added_tokens.json)",
                   "build": {"dir": "qwen2"}, "class": type(t).__name__}
        payload["ids"] = [t.encode(x, add_special_tokens=False) for x in texts]
        payload["ids_add_special"] = {str(i): t.encode(texts[i], add_special_tokens=True) for i in range(12)}
        try:
            sp = [t(x, add_special_tokens=False, split_special_tokens=True)["input_ids"] for x in texts]
            payload["ids_split_special"] = {str(i): v for i, v in enumerate(sp) if v != payload["ids"][i]}
        except Exception as ex:
            log("qwen2 split_special_tokens failed", repr(ex))
        dd = {}
        for i, ids in enumerate(payload["ids"]):
            d = t.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
            if d != texts[i]:
                dd[str(i)] = d
        payload["decode_diff"] = dd
        sk = {}
        for i, ids in enumerate(payload["ids"]):
            d = t.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
            if d != dd.get(str(i), texts[i]):
                sk[str(i)] = d
        payload["decode_skip_special_diff"] = sk
        payload["invalid"] = [t.encode(bytes.fromhex(h).decode("utf-8", "replace"), add_special_tokens=False)
                              for h in invalid]
        write_fixture(outdir, "qwen2-transformers", payload, log)
        bt = getattr(t, "backend_tokenizer", None) or getattr(t, "_tokenizer", None)
        if bt is not None:
            j = json.loads(bt.to_str())
            j["model"]["vocab"] = len(j["model"].get("vocab", {}))
            j["model"]["merges"] = len(j["model"].get("merges", []))
            write_fixture(outdir, "qwen2-transformers-pipeline", j, log)
    except Exception as ex:
        import traceback
        log("FAILED qwen2 transformers", repr(ex), traceback.format_exc())
    log("all done", round(time.time() - t0, 1), "s")


# --------------------------------------------------------------------------
# Seed corpus for tests/fuzz/fuzz_tokenizer.c (first byte: 'J' tokenizer.json,
# 'G' GGUF image, else tokenizer index; then a flags byte and the text).

def gguf_bytes(kv):
    """A GGUF v3 image with metadata only (no tensors)."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)))

    def string(x):
        b = x.encode("utf-8") if isinstance(x, str) else x
        return struct.pack("<Q", len(b)) + b

    for k, (t, v) in kv.items():
        out += string(k)
        if t == "str":
            out += struct.pack("<I", 8) + string(v)
        elif t == "u32":
            out += struct.pack("<II", 4, v)
        elif t == "bool":
            out += struct.pack("<I?", 7, v)
        elif t == "strs":
            out += struct.pack("<IIQ", 9, 8, len(v)) + b"".join(string(x) for x in v)
        elif t == "f32s":
            out += struct.pack("<IIQ", 9, 6, len(v)) + b"".join(struct.pack("<f", x) for x in v)
        elif t == "i32s":
            out += struct.pack("<IIQ", 9, 5, len(v)) + b"".join(struct.pack("<i", x) for x in v)
        elif t == "u8s":
            out += struct.pack("<IIQ", 9, 0, len(v)) + bytes(v)
    return bytes(out)


def cmd_seeds(out):
    os.makedirs(out, exist_ok=True)
    seeds = {}
    texts = ["Hello world", " two  spaces\n\ttab", "caf\u00e9 \u65e5\u672c\u8a9e \U0001f999 123456",
             "<|end|> special <|endoftext|><s></s>[CLS]", "I'm can't they'll", "\u2581 x \u0301e"]
    for i in range(8):
        for j, t in enumerate(texts):
            seeds["text-%d-%d" % (i, j)] = bytes([i, 3 if j % 2 else 0]) + t.encode("utf-8")
    seeds["text-invalid"] = bytes([1, 2]) + b"ab\xff\xc3(\xe2\x82\xf0\x9f\x98 x"
    seeds["json-wordlevel"] = b"J" + json.dumps({
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "hello": 1, "world": 2}, "unk_token": "[UNK]"},
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                                                                {"type": "Punctuation", "behavior": "Isolated"}]},
        "added_tokens": [{"id": 3, "content": "<x>", "special": True}]}).encode()
    seeds["json-bpe"] = b"J" + json.dumps({
        "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<0x41>": 3, "<unk>": 4}, "merges": [["a", "b"]],
                  "byte_fallback": True, "unk_token": "<unk>", "fuse_unk": True},
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                           {"type": "Replace", "pattern": {"String": " "},
                                                            "content": "\u2581"}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True},
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"},
                                                      "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
                                                     {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<unk>"}},
                                                                   {"Sequence": {"id": "A"}}],
                           "special_tokens": {"<unk>": {"id": "<unk>", "ids": [4], "tokens": ["<unk>"]}}}}).encode()
    seeds["json-unigram"] = b"J" + json.dumps({
        "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": False,
                  "vocab": [["<unk>", 0.0], ["\u2581a", -1.0], ["b", -2.0], ["\u2581", -3.0], ["ab", -1.5]]},
        "normalizer": {"type": "BertNormalizer", "lowercase": True, "strip_accents": None},
        "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "MergedWithNext",
                          "invert": False},
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"}}).encode()
    seeds["json-wordpiece"] = b"J" + json.dumps({
        "model": {"type": "WordPiece", "vocab": {"[UNK]": 0, "un": 1, "##aff": 2, "##able": 3},
                  "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True}}).encode()
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + ["\u2581", "a", "b", "\u2581a", "ab"]
    types = [2, 3, 3] + [6] * 256 + [1] * 5
    seeds["gguf-llama"] = b"G" + gguf_bytes({
        "tokenizer.ggml.model": ("str", "llama"), "tokenizer.ggml.tokens": ("strs", toks),
        "tokenizer.ggml.scores": ("f32s", [0.0] * 259 + [-1.0, -2.0, -3.0, -0.5, -0.7]),
        "tokenizer.ggml.token_type": ("i32s", types), "tokenizer.ggml.bos_token_id": ("u32", 1),
        "tokenizer.ggml.eos_token_id": ("u32", 2)})
    bl = [chr(c) for c in range(33, 127)] + ["\u0120", "\u0120a", "ab", "<|endoftext|>"]
    seeds["gguf-gpt2"] = b"G" + gguf_bytes({
        "tokenizer.ggml.model": ("str", "gpt2"), "tokenizer.ggml.pre": ("str", "llama3"),
        "tokenizer.ggml.tokens": ("strs", bl), "tokenizer.ggml.merges": ("strs", ["\u0120 a", "a b"]),
        "tokenizer.ggml.token_type": ("i32s", [1] * (len(bl) - 1) + [3]),
        "tokenizer.ggml.eos_token_id": ("u32", len(bl) - 1)})
    seeds["gguf-bert"] = b"G" + gguf_bytes({
        "tokenizer.ggml.model": ("str", "bert"),
        "tokenizer.ggml.tokens": ("strs", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "\u2581un", "aff", "able"]),
        "tokenizer.ggml.token_type": ("i32s", [3, 3, 3, 3, 1, 1, 1]), "tokenizer.ggml.unknown_token_id": ("u32", 1),
        "tokenizer.ggml.cls_token_id": ("u32", 2), "tokenizer.ggml.seperator_token_id": ("u32", 3)})
    seeds["gguf-t5"] = b"G" + gguf_bytes({
        "tokenizer.ggml.model": ("str", "t5"),
        "tokenizer.ggml.tokens": ("strs", ["<pad>", "</s>", "<unk>", "\u2581", "\u2581a", "b"]),
        "tokenizer.ggml.scores": ("f32s", [0.0, 0.0, 0.0, -2.0, -1.0, -3.0]),
        "tokenizer.ggml.token_type": ("i32s", [3, 3, 2, 1, 1, 1]),
        "tokenizer.ggml.remove_extra_whitespaces": ("bool", True),
        "tokenizer.ggml.precompiled_charsmap": ("u8s", [4, 0, 0, 0, 0, 0, 0, 0])})
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("wrote", len(seeds), "seeds to", out)


def main():
    args = sys.argv[1:]
    if args and args[0] == "seeds":
        cmd_seeds(args[2] if len(args) > 2 and args[1] == "--out" else "tests/fuzz/corpus/tokenizer")
        return
    if not args or args[0] not in ("build", "ref"):
        print(__doc__)
        sys.exit(2)
    opts = {"--shared": os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "models"),
            "--ref": ".tokref", "--out": "tests/data/tokenizer"}
    for i in range(1, len(args), 2):
        opts[args[i]] = args[i + 1]
    if args[0] == "build":
        cmd_build(opts["--shared"], opts["--ref"])
    else:
        cmd_ref(opts["--ref"], opts["--out"])


if __name__ == "__main__":
    main()
