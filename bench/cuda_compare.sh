#!/bin/bash
# cuda_compare.sh - on a machine with an NVIDIA GPU: 1bit's CUDA backend and
# llama.cpp's CUDA build, side by side on the same GGUF files, in one run.
#
#   LLAMA_BENCH=/path/to/llama-bench bench/cuda_compare.sh [models] [ours] [theirs]   (default: all three)
#
#   LLAMA_BENCH  a CUDA build of llama.cpp's llama-bench (build it yourself, outside this
#                repository; only needed for `theirs`)
#   models       random-weight models of real shapes (1bit bench --make-model): Llama-3.1-8B
#                in Q4_K_M and Q8_0, Llama-3.2-1B in Q4_K_M, into $MODELS (default /tmp/obm)
#   ours         1bit bench --device cuda -p 512 -n 128 -r $REPS on each model, once per
#                entry of $VARIANTS (environment settings, default "OB_CUDA_GRAPHS=1
#                OB_CUDA_GRAPHS=0": with and without CUDA graphs)
#   theirs       $LLAMA_BENCH -ngl 99 -fa 1 -p 512 -n 128 -r $REPS on the same files
#
# The 1bit build is expected in $BUILD (tools/cuda_gpu_check.sh build makes it). Output: one
# markdown table per tool and model in $OUT/compare.md, logs beside it.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-$ROOT/build-cuda}
OUT=${OUT:-$BUILD/logs}
MODELS=${MODELS:-/tmp/obm}
REPS=${REPS:-3}
VOCAB=${VOCAB:-$ROOT/.cudadev/models/ggml-vocab-gpt-2.gguf}
LLAMA_BENCH=${LLAMA_BENCH:-}
STEPS=${*:-models ours theirs}
mkdir -p "$OUT" "$MODELS"
REPORT=$OUT/compare.md
CASES=${CASES:-"llama-3.1-8b:q4_K_M llama-3.1-8b:q8_0 llama-3.2-1b:q4_K_M"}

for step in $STEPS; do
case $step in
models)
  for c in $CASES; do
    shape=${c%%:*} type=${c##*:}
    f=$MODELS/$shape-$type.gguf
    [ -s "$f" ] || "$BUILD/bin/1bit" bench --make-model "$shape" --type "$type" -o "$f" --vocab "$VOCAB" \
      > "$OUT/make-$shape-$type.log" 2>&1 || { echo "models: $c failed"; tail -5 "$OUT/make-$shape-$type.log"; }
  done
  ls -la "$MODELS"
  ;;
ours)
  for c in $CASES; do
    shape=${c%%:*} type=${c##*:}
    f=$MODELS/$shape-$type.gguf
    for v in ${VARIANTS:-OB_CUDA_GRAPHS=1 OB_CUDA_GRAPHS=0}; do
      echo "### 1bit $shape $type ($v)" >> "$REPORT"
      env "$v" timeout 300 "$BUILD/bin/1bit" bench -m "$f" --device cuda -p 512 -n 128 -r "$REPS" -o md \
        >> "$REPORT" 2> "$OUT/ours-$shape-$type-$v.log" || { echo "ours: $c failed"; tail -5 "$OUT/ours-$shape-$type-$v.log"; }
    done
  done
  ;;
theirs)
  if [ -z "$LLAMA_BENCH" ] || [ ! -x "$LLAMA_BENCH" ]; then echo "theirs: set LLAMA_BENCH to a llama-bench binary" >&2; continue; fi
  for c in $CASES; do
    shape=${c%%:*} type=${c##*:}
    echo "### llama.cpp $shape $type" >> "$REPORT"
    timeout 300 "$LLAMA_BENCH" -m "$MODELS/$shape-$type.gguf" -ngl 99 -fa 1 -p 512 -n 128 -r "$REPS" -o md \
      >> "$REPORT" 2> "$OUT/theirs-$shape-$type.log" || { echo "theirs: $c failed"; tail -5 "$OUT/theirs-$shape-$type.log"; }
  done
  ;;
esac
done
[ -f "$REPORT" ] && cat "$REPORT"
