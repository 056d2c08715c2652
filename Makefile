# 1bit engine - convenience wrapper around CMake.
#
#   make            build build/bin/1bit (Release, gcc)
#   make test       everything CI runs: release tests, then ASan+UBSan tests and fuzz smoke runs (clang)
#   make test-asan  only the ASan+UBSan build and its tests (+ fuzz smoke)
#   make fuzz       build the libFuzzer targets (build-asan/bin/fuzz_*)
#   make serve      build and start the server (ARGS="-m model.gguf --port 8080")
#   make test-cuda  build with the CUDA plugin and run the GPU tests (GPU machine only)
#
# Every target first makes sure the Debian packages are there (scripts/setup.sh).

JOBS ?= $(shell nproc)
GEN := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
CMAKE_FLAGS ?=
FUZZ_SECONDS ?= 30
ARGS ?=

.PHONY: all build build-asan deps test test-release test-asan fuzz serve test-cuda clean

all: build

deps:
	@sh scripts/setup.sh

build/CMakeCache.txt: | deps
	cmake -S . -B build $(GEN) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps build/CMakeCache.txt
	cmake --build build -j $(JOBS)

test-release: build
	cd build && ctest -j $(JOBS) --output-on-failure --timeout 600

build-asan/CMakeCache.txt: | deps
	CC=clang cmake -S . -B build-asan $(GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DOB_SANITIZE=ON -DOB_FUZZ=ON -DOB_CUDA=OFF -DOB_FUZZ_SECONDS=$(FUZZ_SECONDS)

build-asan: deps build-asan/CMakeCache.txt
	cmake --build build-asan -j $(JOBS)

test-asan: build-asan
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest -j $(JOBS) --output-on-failure --timeout 900

fuzz: build-asan
	@ls build-asan/bin/fuzz_*

test: test-release test-asan

serve: build
	./build/bin/1bit serve $(ARGS)

test-cuda: deps
	cmake -S . -B build-cuda $(GEN) -DCMAKE_BUILD_TYPE=Release -DOB_CUDA=ON $(CMAKE_FLAGS)
	cmake --build build-cuda -j $(JOBS)
	cd build-cuda && ctest -L cuda --output-on-failure

clean:
	rm -rf build build-asan build-cuda
