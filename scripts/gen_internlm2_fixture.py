#!/usr/bin/env python3
"""gen_internlm2_fixture.py - InternLM2 fixtures from the Llama ones (standard library only).

InternLM2ForCausalLM is remote code (modeling_internlm2.py on the Hub), not a
transformers class, so no transformers run can make its reference directly.
Its math is LlamaForCausalLM's, line for line (checked against
modeling_internlm2.py):

  InternLM2RMSNorm        = LlamaRMSNorm (float32 variance, weight * x)
  rotary embedding        = Llama's rotate_half RoPE, inv_freq from rope_theta over
                            head_dim; "linear" divides the positions by the factor
                            (Llama's linear); "dynamic" (NTK) changes the base only for
                            sequences longer than max_position_embeddings
  attention               = Llama's: RoPE on q and k, repeat_kv for GQA, softmax of
                            q k^T / sqrt(head_dim) in float32 under a causal mask
  InternLM2MLP            = w2(silu(w1 x) * w3 x) = down_proj(silu(gate_proj x) * up_proj x)
  decoder layer           = x += attention(attention_norm(x)); x += feed_forward(ffn_norm(x))
  head                    = model.norm, then `output` (untied)

The differences are names and one layout: q, k and v live in one
attention.wqkv whose rows are grouped per KV head h as [query heads
h*G .. h*G+G-1 (G = n_head / n_kv), key head h, value head h], head_dim rows
each (modeling_internlm2.py: rearrange 'b q (h gs d) -> b q h gs d' with
gs = G + 2; InternLM's tools/convert2llama.py splits it the same way). The q/k
rows inside a head keep HF's rotate_half order, as Llama's q_proj/k_proj do,
so the repack moves whole rows only.

So this script takes a transformers-made LlamaForCausalLM fixture
(tests/data/models/<llama case>: float32 model.safetensors, transformers'
logits, greedy tokens, prompt, tokenizer) and writes the same model as an
InternLM2 checkpoint: config.json in InternLM2's keys, model.safetensors with
InternLM2's tensor names and wqkv packed as above, the reference files
copied unchanged. Self-checks, recorded in meta.json:

  wqkv_roundtrip             unpacking wqkv as modeling_internlm2.py does gives back
                             the source q_proj/k_proj/v_proj bytes exactly
  internlm2_forward_max_rel  an independent forward pass written from
                             modeling_internlm2.py (float64, pure Python) on the written
                             InternLM2 tensors, against transformers' logits: the worst
                             per-position max |diff| / max |ref| over the prompt

Cases: internlm2 (from llama) and internlm2_rope_linear (from
llama_rope_linear; rope_scaling {"type": "linear", "factor": 2.0}, InternLM2's
key form).

    python3 scripts/gen_internlm2_fixture.py [--models tests/data/models] [--only NAME,...]
"""
import argparse
import hashlib
import json
import math
import os
import shutil
import struct
import sys

CASES = [("internlm2", "llama"), ("internlm2_rope_linear", "llama_rope_linear")]
COPIED = ("tokenizer.json", "tokenizer_config.json", "prompt.txt", "logits.f32", "greedy.txt")


def read_safetensors(path):
    """{name: (dtype, shape, bytes)} and the file's __metadata__."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    meta = header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        assert 0 <= a <= b <= len(data), (path, name)
        out[name] = (t["dtype"], list(t["shape"]), data[a:b])
    return out, meta


def write_safetensors(path, tensors, meta):
    """tensors: {name: (dtype, shape, bytes)}, written in name order."""
    header, off, chunks = {}, 0, []
    if meta is not None:
        header["__metadata__"] = meta
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        chunks.append(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # data section 8-byte aligned, as safetensors writes it
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


def rows_of(raw, cols):
    """The rows of an F32 matrix as byte blocks."""
    w = 4 * cols
    return [raw[i:i + w] for i in range(0, len(raw), w)]


def repack(src, cfg):
    """Llama tensors -> InternLM2 tensors."""
    E, H, KV, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
    hd, G = E // H, H // KV
    rename = {"input_layernorm.weight": "attention_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
              "self_attn.o_proj.weight": "attention.wo.weight", "mlp.gate_proj.weight": "feed_forward.w1.weight",
              "mlp.up_proj.weight": "feed_forward.w3.weight", "mlp.down_proj.weight": "feed_forward.w2.weight"}
    glob = {"model.embed_tokens.weight": "model.tok_embeddings.weight", "model.norm.weight": "model.norm.weight",
            "lm_head.weight": "output.weight"}
    out, used = {}, set()
    for name, t in src.items():
        assert t[0] == "F32", (name, t[0])
        if name in glob:
            out[glob[name]] = t
            used.add(name)
            continue
        parts = name.split(".", 3)  # model, layers, N, rest
        if len(parts) == 4 and parts[:2] == ["model", "layers"] and parts[3] in rename:
            out["model.layers.%s.%s" % (parts[2], rename[parts[3]])] = t
            used.add(name)
    for l in range(L):
        p = "model.layers.%d.self_attn." % l
        q, k, v = (src[p + x + "_proj.weight"] for x in "qkv")
        assert q[1] == [H * hd, E] and k[1] == [KV * hd, E] and v[1] == [KV * hd, E], (q[1], k[1], v[1])
        qr, kr, vr = rows_of(q[2], E), rows_of(k[2], E), rows_of(v[2], E)
        rows = []
        for grp in range(KV):
            for j in range(G):
                h = grp * G + j
                rows += qr[h * hd:(h + 1) * hd]
            rows += kr[grp * hd:(grp + 1) * hd]
            rows += vr[grp * hd:(grp + 1) * hd]
        out["model.layers.%d.attention.wqkv.weight" % l] = ("F32", [(H + 2 * KV) * hd, E], b"".join(rows))
        used.update(p + x + "_proj.weight" for x in "qkv")
    left = sorted(set(src) - used)
    assert not left, "Llama tensors with no InternLM2 name: %s" % left
    return out


def unpack_check(out, src, cfg):
    """wqkv read back as modeling_internlm2.py does ('(h gs d)' with gs = G + 2:
    q = [:, :G], k = [:, -2], v = [:, -1]) equals the source q/k/v bytes."""
    E, H, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, G = E // H, H // KV
    for l in range(cfg["num_hidden_layers"]):
        rows = rows_of(out["model.layers.%d.attention.wqkv.weight" % l][2], E)
        blocks = [rows[(grp * (G + 2) + j) * hd:(grp * (G + 2) + j + 1) * hd] for grp in range(KV) for j in range(G + 2)]
        q = b"".join(b"".join(blocks[grp * (G + 2) + j]) for grp in range(KV) for j in range(G))
        k = b"".join(b"".join(blocks[grp * (G + 2) + G]) for grp in range(KV))
        v = b"".join(b"".join(blocks[grp * (G + 2) + G + 1]) for grp in range(KV))
        p = "model.layers.%d.self_attn." % l
        if (q, k, v) != (src[p + "q_proj.weight"][2], src[p + "k_proj.weight"][2], src[p + "v_proj.weight"][2]):
            return False
    return True


def floats(t):
    dtype, shape, raw = t
    vals = struct.unpack("<%df" % (len(raw) // 4), raw)
    if len(shape) == 1:
        return list(vals)
    c = shape[1]
    return [vals[i:i + c] for i in range(0, len(vals), c)]


def internlm2_forward(st, jc, ids):
    """Logits [T][vocab] as modeling_internlm2.py computes them (eager
    attention), in float64, from the InternLM2 tensor names."""
    E, H, KV, L = jc["hidden_size"], jc["num_attention_heads"], jc["num_key_value_heads"], jc["num_hidden_layers"]
    hd, G, eps, T = E // H, H // KV, jc["rms_norm_eps"], len(ids)
    W = {n: floats(t) for n, t in st.items()}

    def mv(m, x):
        return [sum(a * b for a, b in zip(row, x)) for row in m]

    def rms(x, w):
        r = 1.0 / math.sqrt(sum(a * a for a in x) / len(x) + eps)
        return [wi * (a * r) for wi, a in zip(w, x)]

    rs = jc.get("rope_scaling") or {}
    scale = rs["factor"] if rs.get("type") == "linear" else 1.0  # "dynamic": no change below max positions
    inv = [1.0 / (jc["rope_theta"] ** (2 * i / hd)) for i in range(hd // 2)]

    def rope(x, pos):  # x * cos + rotate_half(x) * sin, cos/sin of cat(freqs, freqs)
        t = pos / scale
        out = list(x)
        for i in range(hd // 2):
            c, s = math.cos(t * inv[i]), math.sin(t * inv[i])
            a, b = x[i], x[i + hd // 2]
            out[i], out[i + hd // 2] = a * c - b * s, b * c + a * s
        return out

    x = [list(W["model.tok_embeddings.weight"][i]) for i in ids]
    for l in range(L):
        p = "model.layers.%d." % l
        qs, ks, vs = [], [], []
        for pos in range(T):
            h = rms(x[pos], W[p + "attention_norm.weight"])
            qkv = mv(W[p + "attention.wqkv.weight"], h)
            grp = [qkv[g * (G + 2) * hd:(g + 1) * (G + 2) * hd] for g in range(KV)]
            qs.append([rope(grp[hh // G][(hh % G) * hd:(hh % G + 1) * hd], pos) for hh in range(H)])
            ks.append([rope(grp[g][G * hd:(G + 1) * hd], pos) for g in range(KV)])
            vs.append([grp[g][(G + 1) * hd:(G + 2) * hd] for g in range(KV)])
        for pos in range(T):
            o = []
            for hh in range(H):
                g = hh // G  # repeat_kv
                sc = [sum(a * b for a, b in zip(qs[pos][hh], ks[j][g])) / math.sqrt(hd) for j in range(pos + 1)]
                m = max(sc)
                e = [math.exp(s - m) for s in sc]
                z = sum(e)
                o += [sum(e[j] * vs[j][g][d] for j in range(pos + 1)) / z for d in range(hd)]
            x[pos] = [a + b for a, b in zip(x[pos], mv(W[p + "attention.wo.weight"], o))]
        for pos in range(T):
            h = rms(x[pos], W[p + "ffn_norm.weight"])
            gate, up = mv(W[p + "feed_forward.w1.weight"], h), mv(W[p + "feed_forward.w3.weight"], h)
            f = [a / (1.0 + math.exp(-a)) * b for a, b in zip(gate, up)]
            x[pos] = [a + b for a, b in zip(x[pos], mv(W[p + "feed_forward.w2.weight"], f))]
    return [mv(W["output.weight"], rms(x[pos], W["model.norm.weight"])) for pos in range(T)]


def internlm2_config(lc):
    """config.json in InternLM2's keys (configuration_internlm2.py) for the
    Llama config lc."""
    rp = lc.get("rope_parameters") or {}
    theta = rp.get("rope_theta", lc.get("rope_theta", 10000.0))
    rt = rp.get("rope_type", "default")
    assert rt in ("default", "linear"), rt  # what InternLM2's code knows besides dynamic
    assert not lc.get("tie_word_embeddings") and not lc.get("attention_bias") and not lc.get("mlp_bias"), lc
    assert lc.get("head_dim", lc["hidden_size"] // lc["num_attention_heads"]) * lc["num_attention_heads"] == \
        lc["hidden_size"], lc
    assert lc.get("hidden_act", "silu") == "silu", lc
    jc = {"architectures": ["InternLM2ForCausalLM"],
          "auto_map": {"AutoConfig": "configuration_internlm2.InternLM2Config",
                       "AutoModel": "modeling_internlm2.InternLM2ForCausalLM",
                       "AutoModelForCausalLM": "modeling_internlm2.InternLM2ForCausalLM"},
          "model_type": "internlm2", "bias": False, "tie_word_embeddings": False, "hidden_act": "silu",
          "rope_theta": float(theta),
          "rope_scaling": {"type": "linear", "factor": float(rp["factor"])} if rt == "linear" else None,
          "attn_implementation": "eager", "torch_dtype": "float32", "use_cache": True}
    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "max_position_embeddings", "initializer_range", "rms_norm_eps", "bos_token_id",
              "eos_token_id", "pad_token_id", "transformers_version"):
        jc[k] = lc[k]
    return jc


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def make_case(models, name, src_case):
    sd, d = os.path.join(models, src_case), os.path.join(models, name)
    with open(os.path.join(sd, "config.json")) as f:
        lc = json.load(f)
    with open(os.path.join(sd, "meta.json")) as f:
        lmeta = json.load(f)
    src, st_meta = read_safetensors(os.path.join(sd, "model.safetensors"))
    jc = internlm2_config(lc)
    out = repack(src, lc)
    assert unpack_check(out, src, lc), "wqkv does not unpack to the source q/k/v"
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(jc, f, indent=2, sort_keys=True)
        f.write("\n")
    write_safetensors(os.path.join(d, "model.safetensors"), out, st_meta)
    for fn in COPIED:
        shutil.copy(os.path.join(sd, fn), os.path.join(d, fn))
    logits_sha = sha256(os.path.join(sd, "logits.f32"))
    assert logits_sha == lmeta["logits_sha256"], (src_case, "logits.f32 is not the one its meta.json names")

    # the independent InternLM2 pass on what was written, against transformers' logits
    written, _ = read_safetensors(os.path.join(d, "model.safetensors"))
    with open(os.path.join(d, "prompt.txt")) as f:
        prompt = [int(t) for t in f.read().split()]
    V, T = lmeta["n_vocab"], lmeta["n_prompt"]
    with open(os.path.join(d, "logits.f32"), "rb") as f:
        ref = struct.unpack("<%df" % (V * T), f.read())
    ours = internlm2_forward(written, jc, prompt)
    worst = 0.0
    for pos in range(T):
        r = ref[pos * V:(pos + 1) * V]
        worst = max(worst, max(abs(a - b) for a, b in zip(ours[pos], r)) / max(abs(b) for b in r))
    assert worst < 1e-4, (name, "the InternLM2 pass differs from transformers' Llama logits", worst)

    meta = dict(lmeta)
    meta.pop("tensors", None)
    meta.update({
        "case": name, "family": "internlm2", "hf_architecture": "InternLM2ForCausalLM",
        "reference": "transformers LlamaForCausalLM logits of tests/data/models/%s (its logits.f32, greedy.txt, "
                     "prompt.txt), weights repacked in InternLM2's layout by scripts/gen_internlm2_fixture.py "
                     "(InternLM2ForCausalLM is remote code with Llama's math)" % src_case,
        "source_case": src_case, "source_logits_sha256": logits_sha,
        "options": {"rope_scaling": jc["rope_scaling"]} if jc["rope_scaling"] else {},
        "wqkv_roundtrip": True,
        "internlm2_forward_max_rel": worst,
        "tensors": {n: t[1] for n, t in sorted(out.items())},
    })
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    print(name, "from", src_case, "internlm2 pass worst rel %.3g" % worst,
          "files", {fn: os.path.getsize(os.path.join(d, fn)) for fn in sorted(os.listdir(d))}, flush=True)


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--models", default=os.path.join(here, "..", "tests", "data", "models"),
                    help="folder of the fixture cases (read and written)")
    ap.add_argument("--only", help="comma-separated case names")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    for name, src_case in CASES:
        if not only or name in only:
            make_case(args.models, name, src_case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
