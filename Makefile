# fitgrad — a thin driver over CMake + Ninja + CTest. Everything real lives in
# CMakeLists.txt and CMakePresets.json; this file only strings the steps together.
#
#   make demo         train a small decoder on the embedded Austen corpus (about 3-5 minutes
#                     on 2 CPU cores), print a sample, say where the loss curve and memory went
#   make memory-demo  `fitgrad train --device meta` on GPT-2 (124M): the dry run of a training
#                     step, then the same step at batch 16 under a 6 GiB budget (an OOM)
#   make test         install missing Debian packages, configure, build, fetch the SmolLM2
#                     model (tools/fetch-smollm2.sh; one line says so where it cannot, and
#                     the tests that need it skip), run the tests
#   make build        the same without the fetch and the tests
#   make cuda-check   compile and link the CUDA backend (no GPU needed; skipped without nvcc)
#   make device-rehearsal  tools/device-check.sh --rehearse: every step of the GPU machine's
#                     check, on this CPU at small sizes, from a pack of BUILD_DIR's binaries,
#                     with each step's time; with nvcc, first `make cuda-check` and the CUDA
#                     pack's library list (tools/device-prepare.sh --libraries)
#   make multihost-check  as root: two network namespaces as two hosts, a Redis server, and
#                     the README's two-node job across them: equal to one host's, a link
#                     down, the store down, shaped links (tools/multihost-check.sh); one line
#                     says so and it skips where namespaces cannot be made
#   make fresh-check  as root: a debootstrap root of this Debian release, the checkout copied
#                     in, and there from nothing: install-deps, configure, the CLI build and a
#                     short demo (tools/fresh-check.sh; FITGRAD_CACHE keeps its downloads)
#   make bench        build and run the Google Benchmark programs
#   make fuzz         clang + libFuzzer build of the parser fuzz targets (fuzz/), then a short
#                     campaign per target that fails on any crash; skipped without libFuzzer
#   make format       clang-format every tracked .h/.cpp/.cu file in place
#   make clean        remove the build directories
#
# Variables: BUILD_DIR (build), CUDA_BUILD_DIR (build-cuda-check), BUILD_TYPE (Release),
# CUDA (AUTO, ON or OFF: FITGRAD_CUDA for test/build), CMAKE_ARGS (extra configure
# arguments), CTEST_JOBS (2), JOBS (Ninja's default), BENCH_ARGS (passed to each bench),
# FUZZ_BUILD_DIR (build-fuzz), FUZZ_TIME (seconds per fuzz target, 25), CUDA_CHECK_ARCHS
# (the architectures `make cuda-check` compiles for, 80), FRESH_DEMO_STEPS (30, the demo
# steps of `make fresh-check`). CUDA=AUTO builds the backend only where a GPU is visible,
# for that GPU (Note [CUDA AUTO builds for a visible GPU] in CMakeLists.txt); CUDA=ON builds
# it wherever nvcc is, for 80;86;89;90 unless CMAKE_ARGS names CMAKE_CUDA_ARCHITECTURES.

BUILD_DIR      ?= build
CUDA_BUILD_DIR ?= build-cuda-check
BUILD_TYPE     ?= Release
CUDA           ?= AUTO
CMAKE_ARGS     ?=
CTEST_JOBS     ?= 2
JOBS           ?=
BENCH_ARGS     ?=
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_TIME      ?= 25
CUDA_CHECK_ARCHS ?= 80

# nvcc is often not on PATH in a fresh shell; the toolkit's default prefix is checked too.
NVCC := $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))

CMAKE_BUILD = cmake --build $(1) $(if $(JOBS),--parallel $(JOBS))

# Note [ccache]
# CI builds the cpu sources twice on one machine: `make test` in BUILD_DIR, then
# `make cuda-check` in CUDA_BUILD_DIR, whose libraries are the same sources compiled with
# the same command (only cuda/ and dist/'s NCCL file are its own). With ccache (installed by
# tools/install-deps.sh) as the compiler launcher the second build takes the first one's
# objects. Deferred (`=`): the lookup runs when a configure recipe runs, after `deps`.
# Its cache lives in the checkout (.ccache, ignored by git), where every user can write, also
# as root without HOME (CI).
CCACHE = $(shell command -v ccache 2>/dev/null)
LAUNCHER = $(if $(CCACHE),-DCMAKE_CXX_COMPILER_LAUNCHER=$(CCACHE))
export CCACHE_DIR ?= $(CURDIR)/.ccache

.PHONY: all deps configure build demo memory-demo test cuda-check device-rehearsal fresh-check \
  multihost-check \
  bench fuzz format format-check clean

all: build

deps:
	@bash tools/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DFITGRAD_WERROR=ON -DFITGRAD_CUDA=$(CUDA) -DFITGRAD_TESTS=ON -DFITGRAD_BENCH=ON \
	  $(LAUNCHER) $(CMAKE_ARGS)

build: configure
	$(call CMAKE_BUILD,$(BUILD_DIR))

# The demo: a 3M-parameter byte-level Llama (apps/demo/model.json) learns Austen's novels
# (data/assets/austen.txt) for DEMO_STEPS steps, then samples from its final checkpoint.
# 400 steps keep it within five minutes on a 2-core machine of either x86-64 family
# (bench/RESULTS.md, "make demo"): about 2.5 minutes on an AVX2-only EPYC.
DEMO_DIR   ?= $(BUILD_DIR)/demo
DEMO_STEPS ?= 400
DEMO_PROMPT ?= It is a truth universally acknowledged

demo: configure
	$(call CMAKE_BUILD,$(BUILD_DIR)) --target fitgrad_cli
	rm -rf $(DEMO_DIR)  # the demo's own output; --overwrite_output_dir would keep it aside
	@echo "== the demo: $(DEMO_STEPS) steps of a 3M-parameter byte-level Llama on Austen, on the CPU"
	@echo "   (400 steps: about 2.5 minutes on 2 cores; the loss falls from 5.5 to about 1.65)"
	$(BUILD_DIR)/fitgrad train --model apps/demo/model.json --data data/assets/austen.txt \
	  --output_dir $(DEMO_DIR) --seq_len 128 \
	  --per_device_train_batch_size 16 --learning_rate 2e-3 --lr_scheduler_type cosine \
	  --warmup_steps 30 --weight_decay 0.1 --max_steps $(DEMO_STEPS) --logging_steps 25 \
	  --eval_steps 100 --eval_max_batches 8 --save_steps 0 --dataloader_num_workers 1
	@echo
	@echo "== a sample from $(DEMO_DIR)/checkpoint-$(DEMO_STEPS):"
	@printf '%s' "$(DEMO_PROMPT)"
	@$(BUILD_DIR)/fitgrad generate --model $(DEMO_DIR)/checkpoint-$(DEMO_STEPS) \
	  --prompt "$(DEMO_PROMPT)" --max_new_tokens 200 --temperature 0.8 --top_k 40 --seed 1
	@echo
	@echo "== written:"
	@echo "   loss curve:       $(DEMO_DIR)/loss_curve.svg (metrics: $(DEMO_DIR)/metrics.jsonl)"
	@echo "   memory timeline:  $(DEMO_DIR)/memory_trace.json (open in https://ui.perfetto.dev)"
	@echo "   memory snapshot:  $(DEMO_DIR)/memory.json, peak: $(DEMO_DIR)/peak_report.txt"

MEMORY_DEMO = $(BUILD_DIR)/fitgrad train --device meta --model gpt2 --max_steps 1 \
  --seq_len 1024 --eval_max_batches 1 --progress plain --overwrite_output_dir
memory-demo: configure
	$(call CMAKE_BUILD,$(BUILD_DIR)) --target fitgrad_cli
	$(MEMORY_DEMO) --per_device_train_batch_size 4 --output_dir $(BUILD_DIR)/memory-demo
	@cat $(BUILD_DIR)/memory-demo/peak_report.txt
	@echo "== the same step at batch 16 under a 6 GiB budget:"
	$(MEMORY_DEMO) --per_device_train_batch_size 16 --memory_budget 6GiB \
	  --output_dir $(BUILD_DIR)/memory-demo/oom; test $$? -eq 3

# The real SmolLM2 model for the tests that need it, unless FITGRAD_SMOLLM2 names a file. The
# script downloads nothing when the file is already in its cache; a failed fetch (no network)
# is one line, with the script's output in $(BUILD_DIR)/fetch-smollm2.log, and not a failure.
test: build
	@if [ -z "$$FITGRAD_SMOLLM2" ] && \
	    ! bash tools/fetch-smollm2.sh </dev/null >/dev/null 2>$(BUILD_DIR)/fetch-smollm2.log; then \
	  echo "test: could not fetch SmolLM2 ($$(tail -n 1 $(BUILD_DIR)/fetch-smollm2.log | \
	    sed 's/^fetch-smollm2: error: //')); its tests will skip"; \
	fi
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(CTEST_JOBS)

# Compile + link only: fitgrad_cuda_link_check links every CUDA object with cudart.
cuda-check: deps
ifeq ($(NVCC),)
	@echo "cuda-check: skipped: nvcc not found (on PATH or in /usr/local/cuda/bin)"
else
	cmake -S . -B $(CUDA_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DFITGRAD_WERROR=ON -DFITGRAD_CUDA=ON -DFITGRAD_TESTS=OFF -DFITGRAD_BENCH=OFF \
	  -DCMAKE_CUDA_ARCHITECTURES="$(CUDA_CHECK_ARCHS)" $(LAUNCHER) $(CMAKE_ARGS)
	$(call CMAKE_BUILD,$(CUDA_BUILD_DIR)) --target fitgrad_cuda fitgrad_cuda_link_check
endif

# With nvcc, the rehearsal also classifies the libraries of the CUDA build of `make
# cuda-check` as the real pack would, and fails when those to pack pass its limit (Note [What
# the device pack leaves out] in tools/device/libraries.sh).
device-rehearsal: build
ifneq ($(NVCC),)
	$(MAKE) cuda-check
	bash tools/device-prepare.sh --libraries $(CUDA_BUILD_DIR)/fitgrad_cuda_link_check
else
	@echo "device-rehearsal: nvcc not found: the CUDA pack's library list is not checked"
endif
	bash tools/device-prepare.sh --rehearse $(BUILD_DIR)
	OUT=$(BUILD_DIR)/device-check-out bash tools/device-check.sh --rehearse $(BUILD_DIR)/pack

multihost-check: build
	bash tools/multihost-check.sh $(BUILD_DIR)

FRESH_DEMO_STEPS ?= 30
fresh-check:
	FRESH_DEMO_STEPS=$(FRESH_DEMO_STEPS) bash tools/fresh-check.sh

bench: build
	@found=0; for b in $(BUILD_DIR)/bench/*; do \
	  if [ -f "$$b" ] && [ -x "$$b" ]; then found=1; echo "== $$b"; "$$b" $(BENCH_ARGS) || exit 1; fi; \
	done; [ $$found = 1 ] || echo "bench: no benchmark programs yet (bench/*.cpp)"

# The targets are fuzz/*_fuzz.cpp; fuzz/run_campaigns.sh seeds each from a temporary copy of
# fuzz/corpus/<name>/, so the repository is not written.
FUZZ_TARGETS := $(patsubst fuzz/%.cpp,%,$(wildcard fuzz/*_fuzz.cpp))
LIBFUZZER_PROBE := extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }

fuzz: deps
	@if ! printf '%s\n' '$(LIBFUZZER_PROBE)' | \
	     clang++ -x c++ -fsanitize=fuzzer - -o /dev/null >/dev/null 2>&1; then \
	  echo "fuzz: skipped: clang++ cannot link -fsanitize=fuzzer (libFuzzer not installed)"; \
	else \
	  set -e; \
	  cmake -S . -B $(FUZZ_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DFITGRAD_FUZZ=ON \
	    -DFITGRAD_WERROR=ON -DFITGRAD_CUDA=OFF -DFITGRAD_TESTS=OFF -DFITGRAD_BENCH=OFF \
	    -DFITGRAD_DNNL=OFF; \
	  $(call CMAKE_BUILD,$(FUZZ_BUILD_DIR)) --target $(FUZZ_TARGETS); \
	  bash fuzz/run_campaigns.sh $(FUZZ_BUILD_DIR) $(FUZZ_TIME); \
	fi

format:
	git ls-files -z '*.h' '*.cpp' '*.cu' | xargs -0 -r clang-format -i

format-check:
	git ls-files -z '*.h' '*.cpp' '*.cu' | xargs -0 -r clang-format --dry-run --Werror

clean:
	rm -rf $(BUILD_DIR) $(CUDA_BUILD_DIR) $(FUZZ_BUILD_DIR)
