# 1bit engine - convenience wrapper around CMake.
#
#   make            build build/bin/1bit (Release, gcc)
#   make test       everything CI runs: release tests, then ASan+UBSan tests and fuzz smoke runs (clang)
#   make test-asan  only the ASan+UBSan build and its tests (+ fuzz smoke)
#   make fuzz       build the libFuzzer targets (build-asan/bin/fuzz_*)
#   make serve      build and serve MODEL=path-or-stored-name, else the first model in the store,
#                   else ../shared/models/stories260K, else pull stories260K (ARGS="--port 8081")
#   make install    1bit, lib1bit-cuda.so when built, and a `llama-server` name for `1bit serve`
#                   into PREFIX (/usr/local; DESTDIR for packaging); make uninstall removes them
#   make test-cuda  build with the CUDA plugin and run the GPU tests (GPU machine only; docs/cuda.md)
#
# Every target first makes sure the Debian packages are there (scripts/setup.sh).

JOBS ?= $(shell nproc)
GEN := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
CMAKE_FLAGS ?=
FUZZ_SECONDS ?= 20
ARGS ?=
MODEL ?=
PREFIX ?= /usr/local
DESTDIR ?=
# What `make serve` pulls when there is no model at all: stories260K (1.2 MB). ggml-org/models
# was renamed ggml-org/models-moved on the hub; the new name is used so no redirect is needed.
DEFAULT_MODEL ?= ggml-org/models-moved:tinyllamas/stories260K.gguf
SHARED_MODEL := ../shared/models/stories260K/stories260K.gguf

.PHONY: all build build-asan deps test test-release test-asan fuzz serve install uninstall test-cuda clean

all: build

deps:
	@sh scripts/setup.sh

build/CMakeCache.txt: | deps
	cmake -S . -B build $(GEN) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps build/CMakeCache.txt
	cmake --build build -j $(JOBS)

# The GPU tests (label cuda) run only in test-cuda, on a machine with a GPU.
test-release: build
	cd build && ctest -j $(JOBS) --output-on-failure --timeout 600 -LE cuda

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

# The model: MODEL (a path or a stored name, as -m takes), else the first complete model in the
# store, else the shared stories260K, else pull DEFAULT_MODEL; offline with none, say what to do.
serve: build
	@bin=./build/bin/1bit; m='$(MODEL)'; \
	if [ -n "$$m" ]; then \
	  p=$$($$bin list --path "$$m") || exit 1; \
	else \
	  p=$$($$bin list --paths | head -n 1); \
	  if [ -z "$$p" ] && [ -f $(SHARED_MODEL) ]; then p=$(SHARED_MODEL); fi; \
	  if [ -z "$$p" ]; then \
	    echo "make serve: no MODEL given and the store is empty; pulling $(DEFAULT_MODEL) (1.2 MB)" >&2; \
	    p=$$($$bin pull $(DEFAULT_MODEL)) || { \
	      echo "make serve: there is no model to serve. Any one of these fixes it:" >&2; \
	      echo "  serve a GGUF you have:      make serve MODEL=/path/to/model.gguf" >&2; \
	      echo "  download one when online:   $$bin pull org/repo:Q4_K_M && make serve" >&2; \
	      echo "  use a reachable hub mirror: HF_ENDPOINT=https://mirror.example make serve" >&2; \
	      echo "  put one in the store:       mkdir -p $$($$bin list --dir)/local && cp model.gguf $$($$bin list --dir)/local/" >&2; \
	      exit 1; }; \
	  fi; \
	fi; \
	echo "make serve: $$bin serve -m $$p $(ARGS)" >&2; \
	exec $$bin serve -m "$$p" $(ARGS)

# `llama-server` is a symlink to 1bit, which runs `1bit serve` when called by that name
# (src/cli/main.c). bin/llama-server is skipped when another llama-server (llama.cpp's) is
# there; libexec/1bit/llama-server is always installed, a name that never collides, for
# Lemonade's llamacpp.*_bin settings (docs/lemonade.md). The CUDA plugin goes to lib/, where
# the binary looks for it (../lib beside the resolved executable, src/backend/cuda_loader.c).
BINDIR = $(DESTDIR)$(PREFIX)/bin
LIBDIR = $(DESTDIR)$(PREFIX)/lib
EXECDIR = $(DESTDIR)$(PREFIX)/libexec/1bit
install: build
	install -d $(BINDIR) $(EXECDIR)
	install -m 755 build/bin/1bit $(BINDIR)/1bit
	ln -sf ../../bin/1bit $(EXECDIR)/llama-server
	@if [ -f build/lib/lib1bit-cuda.so ]; then \
	  echo "install -m 755 build/lib/lib1bit-cuda.so $(LIBDIR)/"; \
	  install -d $(LIBDIR) && install -m 755 build/lib/lib1bit-cuda.so $(LIBDIR)/lib1bit-cuda.so; \
	fi
	@if [ -e $(BINDIR)/llama-server ] && [ "$$(readlink $(BINDIR)/llama-server)" != 1bit ]; then \
	  echo "make install: $(BINDIR)/llama-server is another program (llama.cpp's?); left alone." >&2; \
	  echo "  $(PREFIX)/libexec/1bit/llama-server is 1bit's; move the other away to have both names." >&2; \
	else \
	  echo "ln -sf 1bit $(BINDIR)/llama-server"; ln -sf 1bit $(BINDIR)/llama-server; \
	fi

uninstall:
	rm -f $(BINDIR)/1bit $(EXECDIR)/llama-server $(LIBDIR)/lib1bit-cuda.so
	-rmdir $(EXECDIR) 2>/dev/null
	@if [ "$$(readlink $(BINDIR)/llama-server)" = 1bit ]; then \
	  echo "rm -f $(BINDIR)/llama-server"; rm -f $(BINDIR)/llama-server; fi

# CUDA_ARCH: the GPU's compute capability without the dot (90 = H100/H200).
CUDA_ARCH ?= 90
test-cuda: deps
	cmake -S . -B build-cuda $(GEN) -DCMAKE_BUILD_TYPE=Release -DOB_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$(CUDA_ARCH) $(CMAKE_FLAGS)
	cmake --build build-cuda -j $(JOBS)
	cd build-cuda && ctest -L cuda --output-on-failure --timeout 900

clean:
	rm -rf build build-asan build-cuda
