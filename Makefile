# fitgrad — a thin driver over CMake + Ninja + CTest. Everything real lives in
# CMakeLists.txt and CMakePresets.json; this file only strings the steps together.
#
#   make demo         build and run the demo (for now: a dry run of GPT-2's memory on meta)
#   make test         install missing Debian packages, configure, build, run the tests
#   make build        the same without running the tests
#   make cuda-check   compile and link the CUDA backend (no GPU needed; skipped without nvcc)
#   make bench        build and run the Google Benchmark programs
#   make format       clang-format every tracked .h/.cpp/.cu file in place
#   make clean        remove the build directories
#
# Variables: BUILD_DIR (build), CUDA_BUILD_DIR (build-cuda-check), BUILD_TYPE (Release),
# CUDA (AUTO, ON or OFF: FITGRAD_CUDA for test/build), CMAKE_ARGS (extra configure
# arguments), CTEST_JOBS (2), JOBS (Ninja's default), BENCH_ARGS (passed to each bench).

BUILD_DIR      ?= build
CUDA_BUILD_DIR ?= build-cuda-check
BUILD_TYPE     ?= Release
CUDA           ?= AUTO
CMAKE_ARGS     ?=
CTEST_JOBS     ?= 2
JOBS           ?=
BENCH_ARGS     ?=

# nvcc is often not on PATH in a fresh shell; the toolkit's default prefix is checked too.
NVCC := $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))

CMAKE_BUILD = cmake --build $(1) $(if $(JOBS),--parallel $(JOBS))

.PHONY: all deps configure build demo test cuda-check bench format format-check clean

all: build

deps:
	@bash tools/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DFITGRAD_WERROR=ON -DFITGRAD_CUDA=$(CUDA) -DFITGRAD_TESTS=ON -DFITGRAD_BENCH=ON \
	  $(CMAKE_ARGS)

build: configure
	$(call CMAKE_BUILD,$(BUILD_DIR))

# Until the data/apps issue brings training on Austen, the demo is the allocation dry run
# of one GPT-2 (124M) training step on the meta device (apps/memory_demo.cpp).
demo: configure
	$(call CMAKE_BUILD,$(BUILD_DIR)) --target fitgrad_memory_demo
	$(BUILD_DIR)/fitgrad_memory_demo $(BUILD_DIR)/demo

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(CTEST_JOBS)

# Compile + link only: fitgrad_cuda_link_check links every CUDA object with cudart.
cuda-check: deps
ifeq ($(NVCC),)
	@echo "cuda-check: skipped: nvcc not found (on PATH or in /usr/local/cuda/bin)"
else
	cmake -S . -B $(CUDA_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DFITGRAD_WERROR=ON -DFITGRAD_CUDA=ON -DFITGRAD_TESTS=OFF -DFITGRAD_BENCH=OFF \
	  $(CMAKE_ARGS)
	$(call CMAKE_BUILD,$(CUDA_BUILD_DIR)) --target fitgrad_cuda fitgrad_cuda_link_check
endif

bench: build
	@found=0; for b in $(BUILD_DIR)/bench/*; do \
	  if [ -f "$$b" ] && [ -x "$$b" ]; then found=1; echo "== $$b"; "$$b" $(BENCH_ARGS) || exit 1; fi; \
	done; [ $$found = 1 ] || echo "bench: no benchmark programs yet (bench/*.cpp)"

format:
	git ls-files -z '*.h' '*.cpp' '*.cu' | xargs -0 -r clang-format -i

format-check:
	git ls-files -z '*.h' '*.cpp' '*.cu' | xargs -0 -r clang-format --dry-run --Werror

clean:
	rm -rf $(BUILD_DIR) $(CUDA_BUILD_DIR)
