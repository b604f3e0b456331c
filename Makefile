# convcore — the two commands of the README:
#   make bench   the main job: convcore bench on the default suite (GPU if one is visible, else CPU),
#                then one network end to end against PyTorch (convcore bench --model)
#   make test    every test: C API (ctest), Python (pytest), the find_package consumer, then the
#                same two suites under AddressSanitizer + UBSan (test-asan), the emulated CUDA
#                device's tests (test-cuda-emulated) and a short libFuzzer run on the C API (fuzz),
#                in stages two at a time, with each stage's time (tools/test_stages.sh)
# and beside them:
#   make sweep   convcore.torch.convert against PyTorch on every CNN of timm's families, MONAI's 3-D
#                networks and wav2vec 2.0's feature extractor (python -m convcore.model_sweep), into
#                bench/results/sweep-<date>
# Each one sets itself up on a fresh machine: apt packages, a virtual environment, the build.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

VENV      ?= .venv
PY        := $(VENV)/bin/python
PIP       := $(PY) -m pip
BUILD_DIR ?= build/release
JOBS      ?= $(shell nproc)
APT_PACKAGES := libopenblas-openmp-dev libfftw3-dev libgtest-dev libgmock-dev libbenchmark-dev \
                clang libclang-rt-dev libomp-dev
# expecttest: torch.testing._internal imports it (PyTorch's OpInfo samples in tests/python/test_torch_nd.py)
# timm, monai: the model sweep's networks (make sweep, tests/python/test_model_sweep.py). torchaudio
# is not here: its last release (2.11.1) has a C++ extension that does not load with TORCH, so the
# sweep takes wav2vec 2.0's feature extractor from convcore.bench_networks.
PY_PACKAGES  := numpy pytest hypothesis expecttest mypy pybind11 scikit-build-core ninja cmake wincnn sympy matplotlib \
                onnx onnxruntime openvino timm==1.0.31 monai==1.6.1
# The CPU build of torch that lies on this machine's disk (PyTorch is the benchmark competitor
# and the reference of the torch tests); a plain `torch` would fetch a multi-GB CUDA build.
TORCH        := torch==2.13.0
# The model benchmark's networks (convcore bench --model, tests/python/test_model_bench.py): the
# release that goes with TORCH. Its wheel is built against CUDA torch; its C++ ops do not load
# with the CPU torch, and convcore.model_bench.import_torchvision works around that.
TORCHVISION  := torchvision==0.28.0
NVCC         := $(shell command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
SUDO         := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps venv build test test-cpp test-python test-asan test-cuda-emulated fuzz bench sweep info vcpu-check clean
all: build

deps:  ## system packages (apt-get update first, only when one is missing)
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "== apt-get install$$missing"; \
	  $(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing; \
	fi

# Remade when the Makefile changes (a package added to PY_PACKAGES reaches existing venvs).
$(VENV)/.ready: Makefile
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(PY_PACKAGES) $(TORCH) $(TORCHVISION)
	@if [ -n "$(NVCC)" ]; then echo "== nvcc found: cuBLAS/cuFFT wheels for the CUDA build"; \
	  $(PIP) install -q nvidia-cublas nvidia-cufft; fi
	touch $@

venv: $(VENV)/.ready

build: deps venv  ## libconvcore + the Python package (+ tests), installed into the venv
	$(PIP) install -q --no-build-isolation -Cbuild-dir=$(BUILD_DIR) \
	  -Cbuild.tool-args=-j$(JOBS) \
	  -Ccmake.define.CONVCORE_BUILD_TESTS=ON -Ccmake.define.Python_EXECUTABLE=$(abspath $(PY)) .

# ---- make test: the stages, two at a time (tools/test_stages.sh) -----------------------------
# Each stage below is a target of its own and logs to build/test-logs/<stage>.log; make test
# prints one line per stage (status, seconds, its closing lines) and a table at the end. Two
# stages run at a time (a stage starts once the one it needs, after the colon, has passed; the
# first listed of those ready goes first): while one runs a single-threaded step (pytest, a link,
# a configure step, the fuzzer) the other's compilers or tests take the idle core. The builds:
#   build           the release build (pip install; nvcc when found): ctest-release, pytest-release
#   asan-build      gcc, ASan + UBSan, CPU: asan-ctest, asan-pytest
#   emulated-build  clang, ASan + UBSan + libFuzzer's instrumentation, the emulated CUDA device:
#                   emulated-tests, fuzz-run
#   tsan-build      clang, ThreadSanitizer, the emulated CUDA device: tsan-tests
# The targets a developer runs alone: test-cpp, test-python, test-asan, test-cuda-emulated, fuzz.
TEST_STAGE_ORDER := emulated-build build asan-build pytest-release:build emulated-tests:emulated-build \
                    tsan-build ctest-release:build asan-pytest:asan-build asan-ctest:asan-build \
                    tsan-tests:tsan-build fuzz-run:emulated-build
test: deps venv  ## all tests
	SLOTS=$(JOBS) tools/test_stages.sh $(TEST_STAGE_ORDER)

# Prerequisites run in the order written (a stage needs the one before it), never side by side:
# the parallelism is the stage runner's and the build tools'.
.NOTPARALLEL:
test-cpp: build ctest-release
test-python: build pytest-release
test-asan: deps venv asan-build asan-ctest asan-pytest
test-cuda-emulated: deps venv emulated-build emulated-tests tsan-build tsan-tests
fuzz: deps venv emulated-build fuzz-run

ctest-release:
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j$(JOBS)

pytest-release:
	$(PY) -m pytest -q tests/python tests/gpu

# The tests run $(JOBS) programs at a time, each with OpenMP threads on every core. GOMP's default
# wait policy keeps idle threads spinning, which on an oversubscribed machine starves the ones
# with work (ctest ran 7x longer on 2 cores). The tests wait passively; benchmarks keep the
# default, as users run it.
TEST_STAGES := ctest-release pytest-release asan-build asan-ctest asan-pytest emulated-build \
               emulated-tests fuzz-run tsan-build tsan-tests
$(TEST_STAGES) test-cpp test-python test-asan test-cuda-emulated fuzz: export OMP_WAIT_POLICY = passive
.PHONY: $(TEST_STAGES)

# ---- hardening: sanitizer builds and fuzzing ---------------------------------------------------
# Plain CMake builds of their own. -O1 keeps them quick to compile. Two UBSan checks are left out
# where ASan runs: pointer-overflow (on every pointer step of the unrolled SIMD kernels it costs
# 5-10x the compile time) and object-size (it doubles clang's compile time of those kernels); ASan
# reports every out-of-bounds access either would lead to. OpenMP (libgomp) gives no ASan/UBSan
# reports here, so nothing is suppressed.
ASAN_DIR  ?= build/asan
FUZZ_TIME ?= 60
SAN_FLAGS := -O1 -g1 -fno-omit-frame-pointer -fsanitize=address,undefined \
             -fno-sanitize=pointer-overflow,object-size -fno-sanitize-recover=all
SAN_CMAKE := $(VENV)/bin/cmake -G Ninja -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja) \
             -DCMAKE_BUILD_TYPE=None -DCONVCORE_CUDA=OFF \
             -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined \
             -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined
# allocator_may_return_null: a huge allocation returns NULL (convcore reports ALLOC_FAILED)
# instead of ASan aborting. Python itself "leaks" at exit: no leak check for it. The Python
# process is not built with ASan, so the runtime is preloaded, with libstdc++ (else ASan
# cannot intercept C++ throws from the extension, loaded later).
ASAN_ENV  := ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
ASAN_PY_ENV := ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
             LD_PRELOAD="$$(g++ -print-file-name=libasan.so) $$(g++ -print-file-name=libstdc++.so)" \
             PYTHONPATH=$(ASAN_DIR)/site

# ctest and pytest against an ASan + UBSan build of the CPU library (gcc; build/asan)
asan-build:
	$(SAN_CMAKE) -S . -B $(ASAN_DIR) -DCMAKE_CXX_FLAGS="$(SAN_FLAGS)" -DCONVCORE_BUILD_TESTS=ON \
	  -DCONVCORE_BUILD_PYTHON=ON -DPython_EXECUTABLE=$(abspath $(PY)) \
	  -Dpybind11_DIR="$$($(PY) -m pybind11 --cmakedir)"
	$(VENV)/bin/cmake --build $(ASAN_DIR) -j$(JOBS)
	rm -rf $(ASAN_DIR)/site && $(VENV)/bin/cmake --install $(ASAN_DIR) --prefix $(ASAN_DIR)/site/convcore >/dev/null
	cp python/convcore/*.py $(ASAN_DIR)/site/convcore/

asan-ctest:
	$(ASAN_ENV) $(VENV)/bin/ctest --test-dir $(ASAN_DIR) --output-on-failure -j$(JOBS)

asan-pytest:
	$(ASAN_PY_ENV) $(PY) -m pytest -q -p no:cacheprovider -m "not pure_python and not harness and not model_sweep" tests/python tests/gpu

# ---- the emulated CUDA device, and libFuzzer on the same build ---------------------------------
# The emulated CUDA device (tests/cuda_emulator: GPU threads as fibers, blocks on 2 workers, the
# CUDA runtime, cuBLAS and cuFFT as stand-ins; docs/cuda_emulation.md), with clang, twice:
# - under ASan + UBSan (EMU_DIR): its own tests, then libconvcore built with
#   -DCONVCORE_CUDA=EMULATE (cpp/cuda compiled as C++ against the stand-ins) and the
#   tests/cpp/test_cuda_* programs on it. The same build, instrumented for libFuzzer
#   (-fsanitize=fuzzer-no-link), holds the fuzzer of the C API (fuzz_forward, on CPU handles);
# - under ThreadSanitizer (EMU_TSAN_DIR): the same, plus the CPU's thread tests. Each GPU thread
#   is a TSan fiber and each barrier a release/acquire point, so a missing __syncthreads or two
#   blocks writing one element is a data race, and any report fails the run. LLVM's Archer tool
#   (libomp-dev) shows TSan OpenMP's synchronisation.
# Both builds compile the CPU kernels (cpp/cpu) at -O0, and the first keeps ASan there but not
# UBSan nor the fuzzer's coverage: asan-build runs every CPU test under UBSan at -O1 already. Here
# the CPU serves as the GPU tests' reference (DIRECT), the fuzzer's handles and test_threads;
# -O0 compiles these SIMD kernels 6-10x faster (nhwc_gemm.cpp under ASan: 109 s at -O1, 12 s).
# A skipped test fails the stage (the emulated device must be there), except the two that test
# the no-GPU path.
EMU_DIR ?= build/cuda-emulated
EMU_TSAN_DIR ?= build/cuda-tsan
EMU_CUDA_TESTS := test_cuda_direct test_cuda_backward test_cuda_fft_family test_cuda_winograd_family test_cuda_api test_cuda_layouts
EMU_NO_GPU_TESTS := CudaDevice.CreateWithoutGpuIsNotSupported:CudaWinogradFamilyNoGpu.*
EMU_CMAKE := CC=clang CXX=clang++ $(VENV)/bin/cmake -G Ninja -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja) \
             -DCMAKE_BUILD_TYPE=None -DCONVCORE_CUDA=EMULATE -DCONVCORE_BUILD_TESTS=ON -DCONVCORE_CUDA_EMULATOR_TESTS=ON
TSAN_FLAGS := -O1 -g1 -fno-omit-frame-pointer -fsanitize=thread
TSAN_ENV   := TSAN_OPTIONS=halt_on_error=1:ignore_noninstrumented_modules=1 \
              OMP_TOOL_LIBRARIES="$$(ls /usr/lib/llvm-*/lib/libarcher.so | tail -1)"
# $(1): the build folder, $(2): the environment, $(3): the test programs (2 at a time, each
# logged to <program>.log beside it, with gtest's time per test); a failure or a skipped test
# fails the recipe.
define run_emulated_tests
	cd $(1)/tests/cpp && printf '%s\n' $(3) | $(2) xargs -P$(JOBS) -I{} bash -c \
	  './{} --gtest_filter=-$(EMU_NO_GPU_TESTS) > {}.log 2>&1 || { cat {}.log; exit 1; }; \
	   if grep -q "SKIPPED \]" {}.log; then cat {}.log; echo "{}: a test skipped on the emulated device"; exit 1; fi; \
	   echo "{}: $$(grep -E "^\[=+\] .* ran" {}.log) $$(tail -1 {}.log)"'
endef

emulated-build:
	$(EMU_CMAKE) -S . -B $(EMU_DIR) -DCONVCORE_BUILD_FUZZERS=ON \
	  -DCMAKE_CXX_FLAGS="$(SAN_FLAGS) -fsanitize=fuzzer-no-link" \
	  -DCONVCORE_CPU_SOURCE_FLAGS="-O0;-fno-sanitize=undefined;-fno-sanitize=fuzzer-no-link" \
	  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined
	$(VENV)/bin/cmake --build $(EMU_DIR) --target test_cuda_emulator $(EMU_CUDA_TESTS) fuzz_forward -j$(JOBS)

emulated-tests:
	$(ASAN_ENV) $(EMU_DIR)/tests/cuda_emulator/test_cuda_emulator --gtest_brief=1
	$(call run_emulated_tests,$(EMU_DIR),$(ASAN_ENV),$(EMU_CUDA_TESTS))

# libFuzzer on the C API for FUZZ_TIME seconds; new inputs go to $(EMU_DIR)/fuzz-corpus,
# tests/fuzz/corpus (the seeds) is only read
fuzz-run:
	mkdir -p $(EMU_DIR)/fuzz-corpus $(EMU_DIR)/fuzz-artifacts
	cd $(EMU_DIR)/fuzz-artifacts && CONVCORE_FUZZ_STATS=1 $(ASAN_ENV) ../tests/fuzz/fuzz_forward \
	  -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
	  ../fuzz-corpus $(abspath tests/fuzz/corpus) 2>&1 | grep -v -E '^#[0-9]+.*(NEW|REDUCE|pulse)|NEW_FUNC|# Uses: |recommended dictionary'

tsan-build:
	$(EMU_CMAKE) -S . -B $(EMU_TSAN_DIR) -DCMAKE_CXX_FLAGS="$(TSAN_FLAGS)" -DCONVCORE_CPU_SOURCE_FLAGS=-O0 \
	  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread
	$(VENV)/bin/cmake --build $(EMU_TSAN_DIR) --target test_cuda_emulator $(EMU_CUDA_TESTS) test_threads -j$(JOBS)

tsan-tests:
	$(TSAN_ENV) $(EMU_TSAN_DIR)/tests/cuda_emulator/test_cuda_emulator --gtest_brief=1
	$(call run_emulated_tests,$(EMU_TSAN_DIR),$(TSAN_ENV),$(EMU_CUDA_TESTS) test_threads)

# convcore's Python package picks OpenBLAS's SkylakeX (AVX-512) kernels on AVX-512 CPUs unless
# OPENBLAS_CORETYPE is set (python/convcore/__init__.py). An environment that pins it to Haswell
# (AVX2) halves the GEMM-based algorithms' speed on an AVX-512 CPU while PyTorch's oneDNN, the
# competitor, uses AVX-512 regardless. The benchmark unsets it, so both libraries use the CPU's
# full width; keep the pin with `make bench BENCH_BLAS_ENV=`. The benchmark's header prints the
# kernels in use (docs/benchmarking.md).
BENCH_BLAS_ENV ?= env -u OPENBLAS_CORETYPE
BENCH_MODELS   ?= resnet18
bench: build  ## the main job: the layer suite, then BENCH_MODELS end to end and per layer
	$(BENCH_BLAS_ENV) $(VENV)/bin/convcore bench $(BENCH_ARGS)
	$(BENCH_BLAS_ENV) $(VENV)/bin/convcore bench --model $(BENCH_MODELS)

# The model sweep: every model in float64 (fuse=False and fuse=True) against the PyTorch model;
# summary.md and sweep.json in SWEEP_OUT; fails if a model came out wrong or raised. SWEEP_ARGS
# adds options, e.g. --sample (the test sample), --dtype float32 --channels-last, --modes
# convert,fuse,inference_mode,autograd,autograd_fuse (python -m convcore.model_sweep --help).
SWEEP_OUT  ?= bench/results/sweep-$(shell date +%Y-%m-%d)
SWEEP_ARGS ?=
sweep: build
	$(PY) -m convcore.model_sweep --out $(SWEEP_OUT) $(SWEEP_ARGS)

info: build
	$(VENV)/bin/convcore info

# Whether every CPU runs at full speed right now (tools/vcpu_speed.c): on a shared VM a vCPU
# can run slow for minutes, which moves 2-thread benchmark ratios by up to 2x.
VCPU_SECONDS ?= 20
vcpu-check:
	@mkdir -p build
	cc -O2 -fopenmp -Icpp tools/vcpu_speed.c -o build/vcpu_speed
	build/vcpu_speed $(VCPU_SECONDS)

clean:
	rm -rf build

# ---- the GPU check (tools/gpu_check.py --help) ---------------------------------------------------
# make gpu-deps   on a machine with network access: the Debian packages a GPU machine lacks
#                 (OpenBLAS, FFTW, GoogleTest and their runtime libraries) as .deb files in
#                 GPU_DEPS, ignored by git, to travel with the checkout (about 16 MiB)
# make gpu-check  on the GPU machine, without network: builds with CUDA for the GPU found from
#                 what is there plus GPU_DEPS, then the CUDA tests, compute-sanitizer, the layer
#                 benchmark against cuDNN and resnet50 end to end, each stage within its time
#                 budget (under 8 minutes in all); everything in GPU_CHECK_OUT, summary.txt at
#                 its top. DRY_RUN=1: the build, and each GPU stage's commands recorded, not run.
#                 GPU_CHECK_TAR=FILE.tar.gz also packs the output folder into one file;
#                 GPU_CHECK_COMMIT=SHA names the commit where the checkout has no .git.
GPU_DEPS       ?= .gpu-deps
GPU_CHECK_OUT  ?= build/gpu-check-out
GPU_CHECK_TAR  ?=
GPU_CHECK_ARGS ?=
GPU_PYTHON     ?= python3
.PHONY: gpu-deps gpu-check
gpu-deps:
	tools/gpu_deps.sh $(GPU_DEPS)

gpu-check:
	$(GPU_PYTHON) tools/gpu_check.py --deps $(GPU_DEPS) --out $(GPU_CHECK_OUT) \
	  $(if $(DRY_RUN),--dry-run) $(if $(GPU_CHECK_TAR),--tar $(GPU_CHECK_TAR)) \
	  $(if $(GPU_CHECK_COMMIT),--commit $(GPU_CHECK_COMMIT)) $(GPU_CHECK_ARGS)
