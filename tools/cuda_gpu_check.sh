#!/bin/bash
# cuda_gpu_check.sh - everything issue 7's GPU work checks, in one go on a
# machine with an NVIDIA GPU: build with the CUDA plugin, run the GPU tests
# (make test-cuda's ctest -L cuda), run compute-sanitizer (memcheck and
# racecheck) over the op tests, and measure decode (tg128) / prompt (pp512)
# speed on random-weight Llama-3.2-1B and 8B shapes against the measured
# copy bandwidth. Logs go to $OUT (default build-cuda/logs); a summary is
# printed last.
#
#   tools/cuda_gpu_check.sh [build|test|sanitize|bench]...   (default: all four)
#
# If .cudadev/sysroot exists (headers, libraries and pkg-config of the host
# dependencies, for a GPU machine that has none of them installed), the
# build uses it. CUDA_ARCH (default 90) picks the GPU architecture;
# BENCH_MODELS the shapes/types to measure (default "llama1b:q4_K
# llama1b:q8_0 llama8b:q4_K llama8b:q8_0"); SAN_TIMEOUT the limit of each
# sanitizer run (default 120 s); DEADLINE (seconds) skips sanitizer runs
# that would start later than that.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-$ROOT/build-cuda}
OUT=${OUT:-$BUILD/logs}
mkdir -p "$OUT"
JOBS=${JOBS:-$(nproc)}
STEPS=${*:-build test sanitize bench}
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }

note "== $(date -u +%FT%TZ) commit ${OB_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader \
  2>&1 | head -4 | while read -r l; do note "gpu: $l"; done

for step in $STEPS; do
case $step in
build)
  # -w for host C: -Werror cleanliness is checked with the project's own gcc and clang; a GPU
  # machine's newer compiler may warn where they do not, and that must not stop the GPU tests.
  CMARGS=(-DCMAKE_BUILD_TYPE=Release -DOB_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-90} -DCMAKE_C_FLAGS=-w)
  command -v ninja >/dev/null && CMARGS+=(-G Ninja)
  ENVV=()
  if [ -d "$ROOT/.cudadev/sysroot" ]; then
    S=$ROOT/.cudadev/sysroot
    ENVV=(env PKG_CONFIG_LIBDIR=$S/lib/pkgconfig PKG_CONFIG_PATH=)
    CMARGS+=(-DPKG_CONFIG_EXECUTABLE=$S/bin/pkg-config "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$S/lib")
  fi
  if "${ENVV[@]}" cmake -S . -B "$BUILD" "${CMARGS[@]}" > "$OUT/build.log" 2>&1 &&
     cmake --build "$BUILD" -j "$JOBS" --target 1bit-cuda test_cuda cuda_bench test_cuda_dequant 1bit >> "$OUT/build.log" 2>&1; then
    note "build: ok ($(elapsed) s)"
  else
    note "build: FAILED ($(elapsed) s); tail of build.log:"
    tail -30 "$OUT/build.log" | tee -a "$SUMMARY"
    exit 1
  fi
  ;;
test)
  (cd "$BUILD" && OB_TEST_VERBOSE=1 timeout 600 ctest -L cuda --output-on-failure --timeout 600 -V) > "$OUT/ctest.log" 2>&1
  rc=$?
  "$BUILD/bin/test_cuda_dequant" > "$OUT/dequant.log" 2>&1; rd=$?
  note "test: ctest -L cuda rc=$rc, test_cuda_dequant rc=$rd ($(elapsed) s)"
  grep -E "^\s*[0-9]+: \[(FAIL|ok|SKIP)|passed|tests passed|FAIL|worst|Total Test" "$OUT/ctest.log" | tail -40 | tee -a "$SUMMARY"
  ;;
sanitize)
  for tool in memcheck racecheck; do
    for t in op_matmul_every_type op_get_rows_every_type op_norms op_rope op_elementwise op_kv_write_and_attention; do
      if [ -n "${DEADLINE:-}" ] && [ "$(elapsed)" -gt "$DEADLINE" ]; then note "$tool $t: skipped (deadline)"; continue; fi
      timeout ${SAN_TIMEOUT:-120} compute-sanitizer --tool $tool --error-exitcode 9 "$BUILD/bin/test_cuda" $t \
        > "$OUT/$tool.$t.log" 2>&1
      rc=$?
      sum=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard" "$OUT/$tool.$t.log" | tail -1)
      note "$tool $t: rc=$rc ${sum:-} ($(elapsed) s)"
    done
  done
  ;;
bench)
  BW=$(python3 - <<'EOF' 2>>"$OUT/bench.log"
import torch
n = 2 << 30
x = torch.randint(0, 255, (n,), dtype=torch.uint8, device='cuda'); y = torch.empty_like(x)
for _ in range(5): y.copy_(x)
torch.cuda.synchronize()
best = 0
for rep in range(5):
    a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(10): y.copy_(x)
    b.record(); torch.cuda.synchronize()
    best = max(best, 2 * n * 10 / (a.elapsed_time(b) / 1e3))
print(f"{best:.4g}")
EOF
)
  note "copy bandwidth (read + write, best of 5 x 10 copies of 2 GiB): ${BW:-?} B/s"
  "$BUILD/bin/cuda_bench" probe 2>&1 | tee -a "$OUT/bench.log" | tee -a "$SUMMARY"
  python3 - <<'EOF' 2>&1 | tee -a "$OUT/bench.log" | tee -a "$SUMMARY"
import time, torch
x = torch.ones(4096, device='cuda')
for _ in range(200): x.mul_(1.0)
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(300): x.mul_(1.0)
enq = (time.perf_counter() - t) / 300
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(20000): x.mul_(1.0)
torch.cuda.synchronize()
print(f"torch, same machine: host enqueue {enq*1e6:.2f} us/op, stream of 20000 ops {(time.perf_counter()-t)/20000*1e6:.2f} us/op")
EOF
  for mt in ${BENCH_MODELS:-llama1b:q4_K llama1b:q8_0 llama8b:q4_K llama8b:q8_0}; do
    f=/tmp/ob_bench_${mt%%:*}_${mt##*:}.gguf
    [ -f "$f" ] || "$BUILD/bin/cuda_bench" gen ${mt%%:*} ${mt##*:} "$f" >> "$OUT/bench.log" 2>&1
    "$BUILD/bin/cuda_bench" bench "$f" --device cuda --tg 128 --pp 512 --reps 3 ${BW:+--bw $BW} 2>&1 | tee -a "$OUT/bench.log" | tee -a "$SUMMARY"
    # decode alone again, with the plugin's counters: how long the host waited for the GPU
    OB_CUDA_STATS=1 "$BUILD/bin/cuda_bench" bench "$f" --device cuda --tg 128 --pp 0 --reps 3 2>&1 | \
      grep -E "tg128|CUDA stats" | sed 's/^/  [stats run] /' | tee -a "$OUT/bench.log" | tee -a "$SUMMARY"
    rm -f "$f"
  done
  note "bench done ($(elapsed) s)"
  ;;
esac
done
