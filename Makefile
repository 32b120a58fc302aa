# SPDX-License-Identifier: Apache-2.0
# Thin wrappers over CMake. The two commands of the README:
#   make demo    installs what is missing, builds what the examples need, runs the main examples
#   make test    builds and runs every test suite (C and Python); ends with one line for both
# Knobs: BUILD_TYPE=Debug|Release|RelWithDebInfo, SANITIZE=address|thread,
#        BUILD_DIR=..., JOBS=N, PYTHON=python3, CMAKE_ARGS="...".
# Packaging (docs/install.md): make install PREFIX=DIR, make install-check,
#        make wheel (dist/*.whl, repaired by auditwheel), make wheel-check.
# Benchmarks: make bench (bench_c), make bench-smoke (every benchmark, a few calls: what CI runs).

BUILD_TYPE ?= RelWithDebInfo
SANITIZE   ?=
PYTHON     ?= python3
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
ifeq ($(SANITIZE),)
BUILD_DIR  ?= build/$(BUILD_TYPE)
else
BUILD_DIR  ?= build/$(BUILD_TYPE)-$(SANITIZE)
endif
CMAKE_ARGS ?=
# No "Entering/Leaving directory" lines from this make or the makes CMake runs under it.
MAKEFLAGS  += --no-print-directory

# What `make demo` builds: the C example and the Python extension, with the library they link (the same build
# folder and configuration as `make test`, which then builds the rest).
DEMO_TARGETS = dls_example_extension dlstream_python
# The built-in kernels of a GPU vendor (CMake's DLS_CUDA_KERNELS / DLS_HIP_KERNELS: AUTO, ON, OFF). `make demo` builds
# them only where that vendor's driver is here (nvcc and hipcc take about 70 CPU-seconds for images no CPU run loads);
# every other target asks for AUTO again, so `make test` after `make demo` builds them in the same folder.
CUDA_KERNELS ?= AUTO
HIP_KERNELS  ?= AUTO
demo: CUDA_KERNELS = $(if $(wildcard /dev/nvidiactl /proc/driver/nvidia/version)$(shell \
  { ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null | grep -F libcuda.so.1),AUTO,OFF)
demo: HIP_KERNELS = $(if $(wildcard /dev/kfd),AUTO,OFF)

.PHONY: all deps deps-demo configure build test test-c test-python demo install install-check wheel wheel-check fuzz \
        bench bench-smoke clean help

all: build

help:
	@sed -n '2,9p' Makefile

deps:
	@scripts/deps.sh "$(PYTHON)"

deps-demo:
	@scripts/deps.sh "$(PYTHON)" demo

configure:
	cmake -S . -B "$(BUILD_DIR)" -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DDLS_SANITIZE=$(SANITIZE) \
	  -DDLS_CUDA_KERNELS=$(CUDA_KERNELS) -DDLS_HIP_KERNELS=$(HIP_KERNELS) \
	  -DPython_EXECUTABLE="$$(command -v $(PYTHON))" $(CMAKE_ARGS)

build: configure
	cmake --build "$(BUILD_DIR)" -j $(JOBS)

test: deps build
	scripts/run-tests.sh "$(BUILD_DIR)" "$(PYTHON)" "$(SANITIZE)"

test-c: build
	cd "$(BUILD_DIR)" && ctest --output-on-failure -j $(JOBS)

demo: deps-demo configure
	cmake --build "$(BUILD_DIR)" -j $(JOBS) --target $(DEMO_TARGETS)
	scripts/demo.sh "$(BUILD_DIR)" "$(PYTHON)"

install: build
	cmake --install "$(BUILD_DIR)" $(if $(PREFIX),--prefix "$(PREFIX)",)

install-check: build
	scripts/install-check "$(BUILD_DIR)"

wheel:
	scripts/wheel.sh "$(PYTHON)"

wheel-check: deps build
	scripts/wheel-check "$(PYTHON)" "$(BUILD_DIR)"

fuzz:
	tests/fuzz/run.sh $(or $(SECONDS),60)

bench: build
	"$(BUILD_DIR)/bench/bench_c"

bench-smoke: build
	"$(PYTHON)" scripts/bench-smoke "$(BUILD_DIR)"

clean:
	rm -rf build
