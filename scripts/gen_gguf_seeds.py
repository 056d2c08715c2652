#!/usr/bin/env python3
"""Write the seed corpus for tests/fuzz/fuzz_gguf.c: small GGUF files of
versions 1, 2 and 3 covering every value type, nested arrays, a vocabulary-like
string array, custom alignment and tensors of several ggml types. Run once;
the fuzzer grows the corpus from here."""
import os, struct, sys

out = sys.argv[1] if len(sys.argv) > 1 else "tests/fuzz/corpus/gguf"
os.makedirs(out, exist_ok=True)

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
       BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}

def count(v, n):
    return struct.pack("<I" if v == 1 else "<Q", n)

def string(v, s):
    b = s.encode()
    return count(v, len(b)) + b

def value(v, t, x):
    if t == STR:
        return string(v, x)
    if t == ARR:
        et, items = x
        body = b"".join(value(v, et, i) for i in items)
        return struct.pack("<I", et) + count(v, len(items)) + body
    return struct.pack(FMT[t], x)

# (name, type, ne, block elems, block bytes)
TYPES = {"f32": (0, 1, 4), "f16": (1, 1, 2), "q4_0": (2, 32, 18), "q8_0": (8, 32, 34),
         "q4_K": (12, 256, 144), "q6_K": (14, 256, 210), "iq4_nl": (20, 32, 18),
         "bf16": (30, 1, 2), "tq2_0": (35, 256, 66), "mxfp4": (39, 32, 17)}

def gguf(v, kvs, tensors, align=32):
    h = b"GGUF" + struct.pack("<I", v) + count(v, len(tensors)) + count(v, len(kvs))
    for k, t, x in kvs:
        h += string(v, k) + struct.pack("<I", t) + value(v, t, x)
    off, datas = 0, []
    for name, ty, ne in tensors:
        tid, bs, bb = TYPES[ty]
        n = 1
        for d in ne:
            n *= d
        nbytes = n // bs * bb
        h += string(v, name) + struct.pack("<I", len(ne))
        h += b"".join(count(v, d) for d in ne) + struct.pack("<IQ", tid, off)
        datas.append(bytes((i * 37 + 11) & 0xFF for i in range(nbytes)))
        off += (nbytes + align - 1) // align * align
    h += b"\0" * (-len(h) % align)
    for d in datas:
        h += d + b"\0" * (-len(d) % align)
    return h

every = [("general.architecture", STR, "llama"), ("a.u8", U8, 7), ("a.i8", I8, -7),
         ("a.u16", U16, 700), ("a.i16", I16, -700), ("a.u32", U32, 70000), ("a.i32", I32, -70000),
         ("a.f32", F32, 0.5), ("a.bool", BOOL, True), ("a.u64", U64, 1 << 40), ("a.i64", I64, -(1 << 40)),
         ("a.f64", F64, 0.25), ("a.arr", ARR, (I32, [1, 2, 3])),
         ("a.nested", ARR, (ARR, [(U8, [1, 2]), (STR, ["x", "yz"])]))]
vocab = [("tokenizer.ggml.model", STR, "gpt2"),
         ("tokenizer.ggml.tokens", ARR, (STR, ["<s>", "</s>", "a", "b", "ab", "\u0120the"])),
         ("tokenizer.ggml.scores", ARR, (F32, [0.0, 0.0, -1.0, -2.0, -3.0, -4.0])),
         ("tokenizer.ggml.token_type", ARR, (I32, [3, 3, 1, 1, 1, 1])),
         ("tokenizer.ggml.merges", ARR, (STR, ["a b", "\u0120 t"])),
         ("tokenizer.ggml.bos_token_id", U32, 0)]
seeds = {
    "v3_every_type.gguf": gguf(3, every, [("w.weight", "f32", [8, 2])]),
    "v2_every_type.gguf": gguf(2, every, [("w.weight", "f16", [8, 2])]),
    "v1_small.gguf": gguf(1, every[:12], [("w.weight", "f32", [4])]),
    "v3_vocab.gguf": gguf(3, vocab, []),
    "v3_quant_tensors.gguf": gguf(3, [("general.architecture", STR, "llama")],
                                  [(n, t, [256, 1]) for n, t in
                                   [("q4", "q4_0"), ("q8", "q8_0"), ("k4", "q4_K"), ("k6", "q6_K"),
                                    ("nl", "iq4_nl"), ("bf", "bf16"), ("tq", "tq2_0"), ("mx", "mxfp4")]]),
    "v3_align64.gguf": gguf(3, [("general.alignment", U32, 64)], [("a", "f32", [3]), ("b", "f32", [5, 1, 1, 2])], 64),
    "v3_empty.gguf": gguf(3, [], []),
}
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(f"wrote {len(seeds)} seeds to {out}")
