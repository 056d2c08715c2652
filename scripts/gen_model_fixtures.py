#!/usr/bin/env python3
"""gen_model_fixtures.py - reference models and logits from Hugging Face transformers.

For each case below this script builds a tiny random-initialised model with
transformers (fixed seeds, float32, eager attention), saves it the way a
Hugging Face checkpoint is saved (config.json + model.safetensors), adds a
small byte-level BPE tokenizer trained with `tokenizers` on fixed text, runs a
fixed 64-token prompt through the model and records:

  config.json, model.safetensors   the checkpoint (save_pretrained)
  tokenizer.json                   byte-level BPE, vocab size = the model's
  tokenizer_config.json            bos/eos/pad, add_bos_token, a chat template
  prompt.txt                       the 64 prompt ids, space separated (first = bos)
  logits.f32                       logits of every prompt position, raw little-endian
                                   float32, row-major [64 x n_vocab]
  greedy.txt                       32 ids from model.generate(do_sample=False), EOS
                                   not stopping it
  meta.json                        n_vocab, n_prompt, n_gen, sha256 of logits.f32,
                                   versions, the smallest top-1/top-2 logit margin
                                   over the prompt (what quantized runs can be held
                                   to), and the checks listed below

Checks done here, recorded in meta.json: the greedy ids equal a plain argmax
loop over full forward passes; reloading the saved folder reproduces the
logits exactly; for the sliding-window case, the window changes the logits
(so the reference does exercise it).

It needs torch, transformers, tokenizers and safetensors, so it runs on the
GPU machine (on its CPU: float32 on the CPU is the most faithful reference);
the tests only read what it wrote (tests/data/models/<case>/):

    PYTHONUNBUFFERED=1 python3 scripts/gen_model_fixtures.py --out DIR [--tar FILE]

Seeds are fixed and torch runs on one CPU thread, so a re-run with the same library
versions is expected to give the same files (meta.json records the versions).
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
N_GEN = 32
VOCAB = 384
BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"

# name, HF family, options. Shared shape: hidden 64, 4 heads, 2 kv heads,
# head_dim 16, intermediate 128, 2 layers, 256 positions.
CASES = [
    ("llama", "llama", {}),
    ("llama_tied", "llama", {"tied": True}),
    ("llama_rope_linear", "llama", {"rope": {"rope_type": "linear", "factor": 2.0}}),
    # factor = max_position_embeddings / original, as real YaRN configs have it
    ("llama_rope_yarn", "llama", {"rope": {"rope_type": "yarn", "factor": 4.0,
                                           "original_max_position_embeddings": 64}}),
    # with head_dim 16 and original 64, the 8 frequencies fall in all three
    # llama3 bands (kept, smoothed, divided by factor)
    ("llama_rope_llama3", "llama", {"rope": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                             "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}),
    ("mistral_swa", "mistral", {"sliding_window": 16}),
    ("qwen2", "qwen2", {}),
    # head_dim 32 != hidden / heads, as in real Qwen3 models
    ("qwen3", "qwen3", {"head_dim": 32}),
    ("qwen3_tied", "qwen3", {"head_dim": 32, "tied": True}),
]

WORDS = ("the a of and to in is was it that he she they we you for on with as at by from this have had not "
         "but what all were when there can an your which their said if do will each about how up out them "
         "then many some so these would other into has more her two like him see time could no make than "
         "first been its who now people my made over did down only way find use may water long little very "
         "after words called just where most know story cat dog tree house river moon small happy quiet").split()

CHAT_TEMPLATE = ("{% for m in messages %}" + BOS + "{{ m['role'] }}\n{{ m['content'] }}" + EOS + "\n{% endfor %}"
                 "{% if add_generation_prompt %}" + BOS + "assistant\n{% endif %}")


def log(*a):
    print(*a, flush=True)


def training_text():
    """Deterministic English-like text, enough for VOCAB - 259 merges."""
    rng = random.Random(20240601)
    lines = []
    for _ in range(400):
        n = rng.randint(6, 18)
        s = " ".join(rng.choice(WORDS) for _ in range(n))
        lines.append(s.capitalize() + rng.choice([".", ".", "!", "?", ","]))
    return lines


def train_tokenizer(out_dir):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, min_frequency=1, special_tokens=[BOS, EOS, PAD],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(training_text(), trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(single=BOS + " $A", pair=BOS + " $A " + BOS + " $B",
                                                       special_tokens=[(BOS, bos_id)])
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    tcfg = {
        "bos_token": BOS, "eos_token": EOS, "pad_token": PAD, "unk_token": None,
        "add_bos_token": True, "add_eos_token": False,
        "model_max_length": 256, "clean_up_tokenization_spaces": False,
        "tokenizer_class": "PreTrainedTokenizerFast", "chat_template": CHAT_TEMPLATE,
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, indent=2)
    ids = {"bos": bos_id, "eos": tok.token_to_id(EOS), "pad": tok.token_to_id(PAD)}
    sample = tok.encode("The cat sat by the river.").ids
    log("tokenizer: vocab", tok.get_vocab_size(), "ids", ids, "sample", sample)
    return tok.get_vocab_size(), ids


def prompt_ids(seed, n_vocab, ids):
    """First id bos, the rest uniform over the non-special ids."""
    rng = random.Random(seed)
    specials = set(ids.values())
    pool = [i for i in range(n_vocab) if i not in specials]
    return [ids["bos"]] + [rng.choice(pool) for _ in range(N_PROMPT - 1)]


def build_config(transformers, family, opts, n_vocab, ids):
    v5 = int(transformers.__version__.split(".")[0]) >= 5
    cls_name = {"llama": "LlamaConfig", "mistral": "MistralConfig", "qwen2": "Qwen2Config",
                "qwen3": "Qwen3Config"}[family]
    cls = getattr(transformers, cls_name)
    kw = dict(vocab_size=n_vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5,
              initializer_range=0.2, hidden_act="silu", tie_word_embeddings=bool(opts.get("tied")),
              bos_token_id=ids["bos"], eos_token_id=ids["eos"], pad_token_id=ids["pad"], use_cache=True)
    if "head_dim" in opts:
        kw["head_dim"] = opts["head_dim"]
    if family == "mistral":
        kw["sliding_window"] = opts.get("sliding_window")
    rope = dict(opts.get("rope") or {"rope_type": "default"})
    if v5:
        rope["rope_theta"] = 10000.0
        kw["rope_parameters"] = rope
    else:
        kw["rope_theta"] = 10000.0
        kw["rope_scaling"] = None if rope["rope_type"] == "default" else rope
    cfg = cls(**kw)
    # What the model will do must be what we asked for.
    assert cfg.vocab_size == n_vocab and cfg.hidden_size == 64 and cfg.num_key_value_heads == 2
    if "head_dim" in opts:
        assert cfg.head_dim == opts["head_dim"], cfg.head_dim
    if family == "mistral":
        assert cfg.sliding_window == opts.get("sliding_window"), cfg.sliding_window
    rp = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    if opts.get("rope"):
        assert rp.get("rope_type", rp.get("type")) == opts["rope"]["rope_type"], rp
    return cfg


def model_class(transformers, family):
    return getattr(transformers, {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                                  "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}[family])


def make_model(torch, transformers, family, cfg, seed):
    cls = model_class(transformers, family)
    torch.manual_seed(seed)
    try:
        model = cls._from_config(cfg, attn_implementation="eager")
    except (TypeError, AttributeError):
        cfg._attn_implementation = "eager"
        model = cls(cfg)
    model = model.float().eval()
    # Norm weights start at 1 and biases at 0: perturb them so that applying
    # them (or not) shows in the logits.
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    impl = getattr(model.config, "_attn_implementation", None)
    assert impl == "eager", impl
    return model


def forward_logits(torch, model, ids):
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False)
    return out.logits[0].float().contiguous()


def greedy_generate(torch, transformers, model, ids, pad_id):
    # EOS must not stop the run: the reference is exactly N_GEN argmax steps.
    model.generation_config.eos_token_id = None
    gc = transformers.GenerationConfig(do_sample=False, max_new_tokens=N_GEN, eos_token_id=None,
                                       pad_token_id=pad_id, num_beams=1)
    x = torch.tensor([ids], dtype=torch.long)
    with torch.no_grad():
        out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), generation_config=gc)
    return out[0, len(ids):].tolist()


def greedy_loop(torch, model, ids):
    seq = list(ids)
    for _ in range(N_GEN):
        seq.append(int(forward_logits(torch, model, seq)[-1].argmax()))
    return seq[len(ids):]


def top_margin(logits):
    """Smallest gap between the best and second-best logit over positions."""
    top2 = logits.topk(2, dim=-1).values
    return float((top2[:, 0] - top2[:, 1]).min())


def run_case(torch, transformers, out_root, tok_dir, index, name, family, opts, n_vocab, ids):
    d = os.path.join(out_root, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    seed = 1000 + 17 * index
    cfg = build_config(transformers, family, opts, n_vocab, ids)
    model = make_model(torch, transformers, family, cfg, seed)
    model.save_pretrained(d)
    for extra in os.listdir(d):
        if extra not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(d, extra))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, f), os.path.join(d, f))

    prompt = prompt_ids(seed, n_vocab, ids)
    logits = forward_logits(torch, model, prompt)
    assert tuple(logits.shape) == (N_PROMPT, n_vocab), logits.shape
    raw = logits.numpy().astype("<f4").tobytes()
    with open(os.path.join(d, "logits.f32"), "wb") as f:
        f.write(raw)
    gen = greedy_generate(torch, transformers, model, prompt, ids["pad"])
    loop = greedy_loop(torch, model, prompt)
    assert len(gen) == N_GEN, len(gen)
    with open(os.path.join(d, "prompt.txt"), "w") as f:
        f.write(" ".join(str(i) for i in prompt) + "\n")
    with open(os.path.join(d, "greedy.txt"), "w") as f:
        f.write(" ".join(str(i) for i in gen) + "\n")

    # The saved folder reproduces the logits.
    cls = model_class(transformers, family)
    try:
        again = cls.from_pretrained(d, attn_implementation="eager").float().eval()
    except (TypeError, ValueError):
        again = cls.from_pretrained(d).float().eval()
    reload_diff = float((forward_logits(torch, again, prompt) - logits).abs().max())

    meta = {
        "case": name, "family": family, "hf_architecture": cls.__name__,
        "n_vocab": n_vocab, "n_prompt": N_PROMPT, "n_gen": N_GEN,
        "logits_file": "logits.f32", "logits_dtype": "float32 little-endian, row-major [n_prompt x n_vocab]",
        "logits_sha256": hashlib.sha256(raw).hexdigest(),
        "seed": seed, "options": opts,
        "bos_id": ids["bos"], "eos_id": ids["eos"], "pad_id": ids["pad"],
        "min_top1_margin": top_margin(logits),
        "max_abs_logit": float(logits.abs().max()),
        "greedy_equals_argmax_loop": gen == loop,
        "reload_max_abs_diff": reload_diff,
        "torch": torch.__version__, "transformers": transformers.__version__,
        "attn_implementation": "eager", "dtype": "float32", "device": "cpu",
    }
    try:
        import tokenizers
        meta["tokenizers"] = tokenizers.__version__
    except Exception:
        pass
    if family == "mistral":
        # The same weights without the window: positions past the window must differ.
        full_cfg = build_config(transformers, family, dict(opts, sliding_window=None), n_vocab, ids)
        full = make_model(torch, transformers, family, full_cfg, seed)
        full.load_state_dict(model.state_dict())
        diff = (forward_logits(torch, full, prompt) - logits).abs().max(dim=-1).values
        w = opts["sliding_window"]
        meta["swa_max_diff_inside_window"] = float(diff[:w].max())
        meta["swa_max_diff_after_window"] = float(diff[w:].max())
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
    sizes = {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))}
    log(name, "margin %.4g" % meta["min_top1_margin"], "greedy==loop", meta["greedy_equals_argmax_loop"],
        "reload", reload_diff, "sizes", sizes, "total", sum(sizes.values()))
    if family == "mistral":
        log("  swa diff inside %.3g after %.3g" % (meta["swa_max_diff_inside_window"],
                                                   meta["swa_max_diff_after_window"]))
    return meta


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="folder for <case>/ subfolders")
    ap.add_argument("--tar", help="also pack the folder into this .tar.gz")
    ap.add_argument("--only", help="comma-separated case names")
    args = ap.parse_args()

    import torch
    import transformers
    torch.set_num_threads(1)  # one summation order: reproducible to the bit
    torch.set_default_dtype(torch.float32)
    log("torch", torch.__version__, "transformers", transformers.__version__, "python", sys.version.split()[0])
    os.makedirs(args.out, exist_ok=True)
    tok_dir = os.path.join(args.out, "_tokenizer")
    n_vocab, ids = train_tokenizer(tok_dir)

    failed = []
    only = set(args.only.split(",")) if args.only else None
    for i, (name, family, opts) in enumerate(CASES):
        if only and name not in only:
            continue
        try:
            run_case(torch, transformers, args.out, tok_dir, i, name, family, opts, n_vocab, ids)
        except Exception:
            failed.append(name)
            log("CASE FAILED", name)
            traceback.print_exc()
            sys.stdout.flush()
    shutil.rmtree(tok_dir)
    if args.tar:
        with tarfile.open(args.tar, "w:gz") as t:
            t.add(args.out, arcname="models")
        log("packed", args.tar, os.path.getsize(args.tar), "bytes")
    log("failed:", failed if failed else "none")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
