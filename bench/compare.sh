#!/bin/sh
# compare.sh - 1bit bench against llama-bench on the same random-weight GGUFs,
# same thread count, interleaved in one run, as ratios.
#
#   LLAMA_BENCH=/path/to/llama-bench bench/compare.sh [options]
#
# Options (environment variables):
#   LLAMA_BENCH  llama-bench binary (required; build llama.cpp yourself,
#                outside this repository)
#   OB           1bit binary (default build/bin/1bit)
#   MODELS       folder for the generated models (default /tmp/1bit-bench-models)
#   CASES        shape:type pairs (default: qwen3-0.6b and llama-3.2-1b in
#                q4_0 q4_K_M iq4_xs q8_0 f16 bf16)
#   THREADS      (default 2)   P (default 512)   N (default 128)
#   REPS         repetitions inside each tool run (default 3)
#   ROUNDS       interleaved rounds: llama-bench, 1bit, llama-bench, ... (default 3)
#   OUT          folder for the raw jsonl and the table (default /tmp/1bit-compare)
#
# On a shared machine other jobs only ever slow a run down, so the table
# reports each engine's best round and the median round; ratios are 1bit /
# llama.cpp. The bandwidth floor is `1bit bench --membw` (best of 10 reads of
# 1 GiB with THREADS threads), and decode is reported as the fraction of it
# that model_size x tokens/s reaches (every weight byte is read once per
# token).
set -eu

OB=${OB:-build/bin/1bit}
MODELS=${MODELS:-/tmp/1bit-bench-models}
CASES=${CASES:-"qwen3-0.6b:q4_0 qwen3-0.6b:q4_K_M qwen3-0.6b:iq4_xs qwen3-0.6b:q8_0 qwen3-0.6b:f16 qwen3-0.6b:bf16 llama-3.2-1b:q4_0 llama-3.2-1b:q4_K_M llama-3.2-1b:iq4_xs llama-3.2-1b:q8_0 llama-3.2-1b:f16 llama-3.2-1b:bf16"}
THREADS=${THREADS:-2}
P=${P:-512}
N=${N:-128}
REPS=${REPS:-3}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-/tmp/1bit-compare}

if [ -z "${LLAMA_BENCH:-}" ] || [ ! -x "$LLAMA_BENCH" ]; then
    echo "compare.sh: set LLAMA_BENCH to a llama-bench binary" >&2
    exit 2
fi
[ -x "$OB" ] || { echo "compare.sh: $OB not found (build first or set OB)" >&2; exit 2; }
mkdir -p "$MODELS" "$OUT"
: > "$OUT/llama.jsonl"
: > "$OUT/1bit.jsonl"

for c in $CASES; do
    shape=${c%%:*}
    type=${c#*:}
    f="$MODELS/$shape-$type.gguf"
    [ -f "$f" ] || "$OB" bench --make-model "$shape" --type "$type" -o "$f"
done

"$OB" bench --membw -t "$THREADS" | tee "$OUT/membw.txt"

for r in $(seq 1 "$ROUNDS"); do
    for c in $CASES; do
        shape=${c%%:*}
        type=${c#*:}
        f="$MODELS/$shape-$type.gguf"
        echo "round $r: $shape $type" >&2
        "$LLAMA_BENCH" -m "$f" -p "$P" -n "$N" -r "$REPS" -t "$THREADS" -o jsonl 2>/dev/null |
            sed "s|^{|{\"round\": $r, \"case\": \"$c\", |" >> "$OUT/llama.jsonl"
        "$OB" bench -m "$f" -p "$P" -n "$N" -r "$REPS" -t "$THREADS" -o jsonl 2>/dev/null |
            sed "s|^{|{\"round\": $r, \"case\": \"$c\", |" >> "$OUT/1bit.jsonl"
    done
done
"$OB" bench --membw -t "$THREADS" | tee -a "$OUT/membw.txt"

python3 - "$OUT" <<'EOF' | tee "$OUT/table.md"
import json, re, statistics, sys
out = sys.argv[1]
def load(name):
    rows = {}
    for line in open(f"{out}/{name}.jsonl"):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        test = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
        rows.setdefault((r["case"], test), []).append((r["avg_ts"], r["model_size"]))
    return rows
ll, ob = load("llama"), load("1bit")
bw = max(float(m) for m in re.findall(r"([0-9.]+) GB/s", open(f"{out}/membw.txt").read()))
print(f"bandwidth floor (best 1bit bench --membw): {bw:.1f} GB/s\n")
print("| model | test | llama.cpp best | 1bit best | ratio best | llama.cpp median | 1bit median | ratio median | 1bit decode / floor |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for key in sorted(ob, key=lambda k: (k[0], k[1][0] == "t", k[1])):
    if key not in ll:
        continue
    a = [x for x, _ in ll[key]]
    b = [x for x, _ in ob[key]]
    size = ob[key][0][1]
    frac = ""
    if key[1].startswith("tg"):
        frac = f"{max(b) * size / 1e9 / bw * 100:.0f}%"
    print(f"| {key[0]} | {key[1]} | {max(a):.1f} | {max(b):.1f} | {max(b) / max(a):.2f} | "
          f"{statistics.median(a):.1f} | {statistics.median(b):.1f} | {statistics.median(b) / statistics.median(a):.2f} | {frac} |")
EOF
