#!/bin/bash
# cuda_pack.sh - build the CUDA plugin, the binary and the GPU test here (nvcc compiles
# without a GPU) and pack them for a GPU machine that has the driver and the CUDA runtime
# but none of the host's libraries: .cudacarry/ob.tar.xz holds
#
#   .cudabin/bin/{1bit,test_cuda}  .cudabin/lib/lib1bit-cuda.so
#   .cudadev/sysroot/lib           the host libraries the binary links (jansson, libcurl, ...)
#   .cudadev/models                stories260K and a vocabulary for `1bit bench --make-model`
#
# and .cudacarry/unpack.sh, which a command on that machine sources first:
#
#   . .cudacarry/unpack.sh && $OBB/test_cuda && $OBB/1bit bench -m ... --device cuda
#
# Why: building on the GPU machine costs minutes of scarce device time, and a device tool
# that copies the working tree may cap its size (the fixtures alone are ~30 MB); xz keeps
# the bundle near 10 MB. BUILD (default build-cudac) and CUDA_ARCH (default 90) choose the
# build. .cudadev/ must exist (see docs/cuda.md, Tests).
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-cudac}
[ -d .cudadev/sysroot/lib ] || { echo "cuda_pack: .cudadev/sysroot/lib is missing" >&2; exit 1; }
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DOB_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" > /dev/null
fi
cmake --build "$BUILD" -j "$(nproc)" --target 1bit 1bit-cuda test_cuda
mkdir -p .cudabin/bin .cudabin/lib .cudacarry
cp "$BUILD/bin/1bit" "$BUILD/bin/test_cuda" .cudabin/bin/
cp "$BUILD/lib/lib1bit-cuda.so" .cudabin/lib/
tar -cJf .cudacarry/ob.tar.xz .cudabin/bin/1bit .cudabin/bin/test_cuda .cudabin/lib/lib1bit-cuda.so \
  .cudadev/sysroot/lib .cudadev/models
cat > .cudacarry/unpack.sh <<'EOF'
# sourced on the GPU machine from the repository root: unpack, then point the loader at the libraries
tar -xJf .cudacarry/ob.tar.xz && chmod +x .cudabin/bin/*
export LD_LIBRARY_PATH=$PWD/.cudadev/sysroot/lib OB_TEST_SOURCE_DIR=$PWD OBB=$PWD/.cudabin/bin
EOF
ls -la .cudacarry
