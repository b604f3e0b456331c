# convcore — the two commands of the README:
#   make bench   the main job: convcore bench on the default suite (GPU if one is visible, else CPU)
#   make test    every test: C API (ctest), Python (pytest), the find_package consumer
# Each one sets itself up on a fresh machine: apt packages, a virtual environment, the build.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

VENV      ?= .venv
PY        := $(VENV)/bin/python
PIP       := $(PY) -m pip
BUILD_DIR ?= build/release
JOBS      ?= $(shell nproc)
APT_PACKAGES := libopenblas-openmp-dev libfftw3-dev libgtest-dev libgmock-dev libbenchmark-dev
PY_PACKAGES  := numpy pytest hypothesis pybind11 scikit-build-core ninja cmake wincnn sympy
# The CPU build of torch that lies on this machine's disk (PyTorch is the benchmark competitor
# and the reference of the torch tests); a plain `torch` would fetch a multi-GB CUDA build.
TORCH        := torch==2.13.0
NVCC         := $(shell command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
SUDO         := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps venv build test test-cpp test-python bench info clean
all: build

deps:  ## system packages (apt-get update first, only when one is missing)
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "== apt-get install$$missing"; \
	  $(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing; \
	fi

$(VENV)/.ready:
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(PY_PACKAGES) $(TORCH)
	@if [ -n "$(NVCC)" ]; then echo "== nvcc found: cuBLAS/cuFFT wheels for the CUDA build"; \
	  $(PIP) install -q nvidia-cublas nvidia-cufft; fi
	touch $@

venv: $(VENV)/.ready

build: deps venv  ## libconvcore + the Python package (+ tests), installed into the venv
	$(PIP) install -q --no-build-isolation -Cbuild-dir=$(BUILD_DIR) \
	  -Cbuild.tool-args=-j$(JOBS) \
	  -Ccmake.define.CONVCORE_BUILD_TESTS=ON -Ccmake.define.Python_EXECUTABLE=$(abspath $(PY)) .

test-cpp: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j$(JOBS)

test-python: build
	$(PY) -m pytest -q tests/python tests/gpu

test: test-cpp test-python  ## all tests

bench: build  ## the main job
	$(VENV)/bin/convcore bench $(BENCH_ARGS)

info: build
	$(VENV)/bin/convcore info

clean:
	rm -rf build
