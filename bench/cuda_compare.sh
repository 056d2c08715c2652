#!/bin/bash
# cuda_compare.sh - on a machine with an NVIDIA GPU: 1bit's CUDA backend and
# llama.cpp's CUDA build, side by side on the same GGUF files, in one run.
#
#   bench/cuda_compare.sh [llama-start] [models] [ours] [theirs]   (default: all, in that order)
#
#   llama-start  configure and build llama.cpp's llama-bench from $LLAMACPP_SRC (a llama.cpp
#                checkout, never part of this repository) into $LLAMACPP_SRC/build-cuda, in the
#                background (setsid): it compiles while the other steps run
#   models       random-weight models of real shapes (1bit bench --make-model): Llama-3.1-8B
#                in Q4_K_M and Q8_0, Llama-3.2-1B in Q4_K_M, into $MODELS (default /tmp/obm)
#   ours         1bit bench --device cuda -p 512 -n 128 -r $REPS on each model; with
#                OB_CUDA_MMVQ=0 too (the float decode kernel), so both kernels are compared
#   theirs       llama-bench -ngl 99 -p 512 -n 128 -r $REPS on the same files, once its build
#                is done (waits up to $LLAMA_WAIT seconds for it)
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
LLAMA_WAIT=${LLAMA_WAIT:-0}
VOCAB=${VOCAB:-$ROOT/.cudadev/models/ggml-vocab-gpt-2.gguf}
LSRC=${LLAMACPP_SRC:-}
LBUILD=${LSRC:+$LSRC/build-cuda}
STEPS=${*:-llama-start models ours theirs}
mkdir -p "$OUT" "$MODELS"
REPORT=$OUT/compare.md
CASES=${CASES:-"llama-3.1-8b:q4_K_M llama-3.1-8b:q8_0 llama-3.2-1b:q4_K_M"}

for step in $STEPS; do
case $step in
llama-start)
  if [ -z "$LSRC" ] || [ ! -f "$LSRC/CMakeLists.txt" ]; then echo "llama-start: set LLAMACPP_SRC" >&2; continue; fi
  if [ -x "$LBUILD/bin/llama-bench" ]; then echo "llama-start: already built"; continue; fi
  setsid nohup bash -c "cmake -S '$LSRC' -B '$LBUILD' -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-90} -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON > '$LSRC/build.log' 2>&1 &&
    cmake --build '$LBUILD' -j ${LLAMA_JOBS:-12} --target llama-bench >> '$LSRC/build.log' 2>&1;
    echo \$? > '$LSRC/build.rc'" > /dev/null 2>&1 < /dev/null &
  echo "llama-start: building in the background ($LSRC/build.log)"
  ;;
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
    for q in 1 0; do
      echo "### 1bit $shape $type (OB_CUDA_MMVQ=$q)" >> "$REPORT"
      OB_CUDA_MMVQ=$q timeout 300 "$BUILD/bin/1bit" bench -m "$f" --device cuda -p 512 -n 128 -r "$REPS" -o md \
        >> "$REPORT" 2> "$OUT/ours-$shape-$type-$q.log" || { echo "ours: $c failed"; tail -5 "$OUT/ours-$shape-$type-$q.log"; }
    done
  done
  ;;
theirs)
  [ -z "$LSRC" ] && { echo "theirs: set LLAMACPP_SRC" >&2; continue; }
  w=0
  while [ ! -f "$LSRC/build.rc" ] && [ $w -lt "$LLAMA_WAIT" ]; do sleep 5; w=$((w + 5)); done
  cp "$LSRC/build.log" "$OUT/llama-build.log" 2>/dev/null
  if [ ! -x "$LBUILD/bin/llama-bench" ]; then echo "theirs: llama-bench not built (yet)"; tail -3 "$LSRC/build.log"; continue; fi
  for c in $CASES; do
    shape=${c%%:*} type=${c##*:}
    echo "### llama.cpp $shape $type" >> "$REPORT"
    timeout 300 "$LBUILD/bin/llama-bench" -m "$MODELS/$shape-$type.gguf" -ngl 99 -p 512 -n 128 -r "$REPS" -o md \
      >> "$REPORT" 2> "$OUT/theirs-$shape-$type.log" || { echo "theirs: $c failed"; tail -5 "$OUT/theirs-$shape-$type.log"; }
  done
  ;;
esac
done
[ -f "$REPORT" ] && cat "$REPORT"
