#!/usr/bin/env python3
"""gen_encoder_fixtures.py - reference encoders (embedding models) from transformers.

The decoder cases live in gen_model_fixtures.py; this script makes the
bidirectional encoders that /v1/embeddings serves. For each case: a tiny
random-initialised model (fixed seeds, float32, eager attention, one CPU
thread), saved as a Hugging Face checkpoint, a tokenizer trained here on fixed
text, and

  config.json, model.safetensors   the checkpoint (save_pretrained)
  tokenizer.json, tokenizer_config.json
                                   bert: WordPiece (BertNormalizer lowercasing,
                                   [CLS] $A [SEP]); modernbert: byte-level BPE
  prompt.txt                       64 ids: [CLS] + 62 random non-special ids + [SEP]
  hidden.f32                       last_hidden_state for every prompt position,
                                   float32 little-endian, row-major [64 x hidden]
  text.txt, text_ids.txt           a sentence and the ids `tokenizers` gives it
                                   (special tokens included), to check our tokenizer
  meta.json                        sizes, seed, versions, sha256 of hidden.f32, the
                                   tensor list and self-checks (reload reproduces the
                                   states; for modernbert the local window changes
                                   them; attention is bidirectional: changing the last
                                   token changes the first position's state)

Pooling (mean, CLS) is a function of hidden.f32 and is left to the test.

    PYTHONUNBUFFERED=1 python3 scripts/gen_encoder_fixtures.py --out DIR [--tar FILE]
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import tarfile
import traceback

N_PROMPT = 64
VOCAB = 384
TEXT = "The quick brown fox, Jumped over 12 lazy dogs! Héllo wörld."

WORDS = ("the of and to in is was for on that with as by at from it his an were are which this be "
         "has had not but their have one they its or new first two after who been time can more "
         "river cat sat stone light north water city table music garden morning quickly brown fox "
         "jumped lazy dogs hello world encoder vector sentence meaning search query passage").split()

# name, family, options. Shared shape: hidden 64, 4 heads, intermediate 128.
CASES = [
    ("bert", "bert", {}),
    ("modernbert", "modernbert", {}),
]


def log(*a):
    print(*a, flush=True)


def training_text():
    rng = random.Random(20241130)
    lines = []
    for _ in range(400):
        n = rng.randint(6, 18)
        s = " ".join(rng.choice(WORDS) for _ in range(n))
        lines.append(s.capitalize() + rng.choice([".", ".", "!", "?", ","]))
    return lines


def wordpiece_tokenizer(out_dir):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    trainer = trainers.WordPieceTrainer(vocab_size=VOCAB, min_frequency=1, special_tokens=specials,
                                        show_progress=False)
    tok.train_from_iterator(training_text(), trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    tcfg = {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]",
            "mask_token": "[MASK]", "do_lower_case": True, "model_max_length": 256,
            "tokenizer_class": "BertTokenizer"}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, indent=2)
    ids = {s: tok.token_to_id(s) for s in specials}
    return tok, ids


def bpe_tokenizer(out_dir):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, min_frequency=1, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(training_text(), trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    tcfg = {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]",
            "mask_token": "[MASK]", "model_max_length": 256, "tokenizer_class": "PreTrainedTokenizerFast"}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, indent=2)
    ids = {s: tok.token_to_id(s) for s in specials}
    return tok, ids


def build(transformers, family, ids, n_vocab, local_window=True):
    if family == "bert":
        cfg = transformers.BertConfig(
            vocab_size=n_vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128, hidden_act="gelu", max_position_embeddings=256, type_vocab_size=2,
            initializer_range=0.2, layer_norm_eps=1e-12, pad_token_id=ids["[PAD]"])
        return cfg, transformers.BertModel
    if family == "modernbert":
        # 4 layers, global attention on layers 0 and 2 (RoPE base 160000), local on 1 and 3
        # (window 16: 8 positions each side, RoPE base 10000); no biases.
        cfg = transformers.ModernBertConfig(
            vocab_size=n_vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
            num_attention_heads=4, hidden_activation="gelu", max_position_embeddings=256,
            initializer_range=0.2, norm_eps=1e-5, norm_bias=False, attention_bias=False, mlp_bias=False,
            global_attn_every_n_layers=2 if local_window else 1, local_attention=16,
            global_rope_theta=160000.0, local_rope_theta=10000.0,
            pad_token_id=ids["[PAD]"], cls_token_id=ids["[CLS]"], sep_token_id=ids["[SEP]"],
            bos_token_id=ids["[CLS]"], eos_token_id=ids["[SEP]"], reference_compile=False)
        return cfg, transformers.ModernBertModel
    raise ValueError(family)


def make_model(torch, cls, cfg, seed):
    torch.manual_seed(seed)
    try:
        model = cls._from_config(cfg, attn_implementation="eager")
    except (TypeError, AttributeError):
        cfg._attn_implementation = "eager"
        model = cls(cfg)
    model = model.float().eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            low = name.lower()
            if "norm" in low and low.endswith(".weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif low.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    impl = getattr(model.config, "_attn_implementation", None)
    assert impl == "eager", impl
    return model


def hidden_states(torch, model, ids):
    x = torch.tensor([ids], dtype=torch.long)
    with torch.no_grad():
        out = model(input_ids=x, attention_mask=torch.ones_like(x))
    return out.last_hidden_state[0].float().contiguous()


def run_case(torch, transformers, out_root, index, name, family):
    d = os.path.join(out_root, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    seed = 5000 + 31 * index
    tok_dir = os.path.join(out_root, "_tok_" + name)
    tok, ids = wordpiece_tokenizer(tok_dir) if family == "bert" else bpe_tokenizer(tok_dir)
    n_vocab = tok.get_vocab_size()
    cfg, cls = build(transformers, family, ids, n_vocab)
    model = make_model(torch, cls, cfg, seed)
    model.save_pretrained(d)
    for extra in os.listdir(d):
        if extra not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(d, extra))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, f), os.path.join(d, f))
    shutil.rmtree(tok_dir)

    rng = random.Random(seed)
    specials = set(ids.values())
    pool = [i for i in range(n_vocab) if i not in specials]
    prompt = [ids["[CLS]"]] + [rng.choice(pool) for _ in range(N_PROMPT - 2)] + [ids["[SEP]"]]
    h = hidden_states(torch, model, prompt)
    assert tuple(h.shape) == (N_PROMPT, 64), h.shape
    raw = h.numpy().astype("<f4").tobytes()
    with open(os.path.join(d, "hidden.f32"), "wb") as f:
        f.write(raw)
    with open(os.path.join(d, "prompt.txt"), "w") as f:
        f.write(" ".join(str(i) for i in prompt) + "\n")
    text_ids = tok.encode(TEXT).ids
    with open(os.path.join(d, "text.txt"), "w") as f:
        f.write(TEXT + "\n")
    with open(os.path.join(d, "text_ids.txt"), "w") as f:
        f.write(" ".join(str(i) for i in text_ids) + "\n")

    again = cls.from_pretrained(d, attn_implementation="eager").float().eval()
    reload_diff = float((hidden_states(torch, again, prompt) - h).abs().max())
    # bidirectional: the first position sees the last token
    alt = list(prompt)
    alt[-2] = pool[0] if alt[-2] != pool[0] else pool[1]
    first_pos_diff = float((hidden_states(torch, model, alt)[0] - h[0]).abs().max())
    meta = {
        "case": name, "family": family, "hf_architecture": cls.__name__, "n_vocab": n_vocab,
        "n_prompt": N_PROMPT, "n_embd": 64, "hidden_file": "hidden.f32",
        "hidden_dtype": "float32 little-endian, row-major [n_prompt x n_embd]",
        "hidden_sha256": hashlib.sha256(raw).hexdigest(), "seed": seed, "special_ids": ids,
        "max_abs_hidden": float(h.abs().max()), "reload_max_abs_diff": reload_diff,
        "bidirectional_first_pos_diff": first_pos_diff,
        "torch": torch.__version__, "transformers": transformers.__version__,
        "attn_implementation": "eager", "dtype": "float32", "device": "cpu",
    }
    if family == "modernbert":
        full_cfg, _ = build(transformers, family, ids, n_vocab, local_window=False)
        full = make_model(torch, cls, full_cfg, seed)
        full.load_state_dict(model.state_dict())
        diff = (hidden_states(torch, full, prompt) - h).abs().max()
        meta["local_window_max_diff"] = float(diff)
        meta["config_layer_types"] = getattr(model.config, "layer_types", None)
    from safetensors import safe_open
    with safe_open(os.path.join(d, "model.safetensors"), framework="pt") as st:
        meta["tensors"] = {k: list(st.get_slice(k).get_shape()) for k in st.keys()}
    try:
        import tokenizers
        meta["tokenizers"] = tokenizers.__version__
    except Exception:
        pass
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
    sizes = {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))}
    log(name, "reload", reload_diff, "bidir", first_pos_diff, "local", meta.get("local_window_max_diff"),
        "text ids", text_ids, "sizes", sizes)
    assert reload_diff == 0.0 and first_pos_diff > 1e-4
    if family == "modernbert":
        assert meta["local_window_max_diff"] > 1e-4
    return meta


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tar")
    ap.add_argument("--only")
    args = ap.parse_args()
    import torch
    import transformers
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    log("torch", torch.__version__, "transformers", transformers.__version__)
    os.makedirs(args.out, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    failed = []
    for i, (name, family, _opts) in enumerate(CASES):
        if only and name not in only:
            continue
        try:
            run_case(torch, transformers, args.out, i, name, family)
        except Exception:
            failed.append(name)
            log("CASE FAILED", name)
            traceback.print_exc()
    if args.tar:
        with tarfile.open(args.tar, "w:gz") as t:
            t.add(args.out, arcname="encoders")
    log("failed:", failed if failed else "none")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
