# fuseport: the two commands of the README, and a few conveniences.
#   make bench   set up (Debian packages when run as root), build, run a short
#                default benchmark on the best backend present
#   make test    set up, build (CUDA compiled when nvcc is present), run the
#                tests, install into a scratch prefix and build and run
#                examples/ against it, then the CPU and OpenCL tests again under
#                AddressSanitizer + UBSan, the CUDA emulation under
#                ThreadSanitizer, the parsers under libFuzzer, and the OpenCL
#                kernels under Oclgrind
# Variables: BUILD (build dir), JOBS, BENCH_ARGS (extra `fuseport bench` flags).

BUILD ?= build
ASAN_BUILD ?= build-asan
RACE_BUILD ?= build-race
FUZZ_BUILD ?= build-fuzz
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BENCH_ARGS ?=
CMAKE_ARGS ?=

# Debian 12 packages fuseport builds and tests with (PoCL gives OpenCL on the
# CPU when there is no GPU; CLBlast, cmocka and cJSON have CMake configs;
# clang and its runtime libraries give libFuzzer; Oclgrind simulates OpenCL
# devices for test-oclgrind).
DEB_PACKAGES = build-essential cmake pkg-config ocl-icd-opencl-dev opencl-headers \
               pocl-opencl-icd clinfo libclblast-dev libcmocka-dev libcjson-dev \
               clang libclang-rt-14-dev oclgrind

.PHONY: all deps configure build bench test test-plain test-install test-asan test-race test-fuzz \
        test-oclgrind format clean

all: build

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then echo "deps: all Debian packages present"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "deps: installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "deps: missing Debian packages:$$missing"; \
	  echo "      run 'sudo make deps' or apt-get install them"; exit 1; fi

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

bench: build
	./$(BUILD)/fuseport bench $(BENCH_ARGS)

test: test-plain test-install test-asan test-race test-fuzz test-oclgrind

test-plain: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The package as a user links it: `cmake --install` into a scratch prefix,
# then examples/ built against it with find_package(fuseport) and with
# pkg-config, and run (on OpenCL or the CPU backend where there is no GPU).
INSTALL_TEST ?= $(BUILD)/install-test
test-install: build
	rm -rf $(INSTALL_TEST) $(BUILD)/example
	cmake --install $(BUILD) --prefix $(INSTALL_TEST)
	cmake -S examples -B $(BUILD)/example -DCMAKE_PREFIX_PATH=$(abspath $(INSTALL_TEST))
	cmake --build $(BUILD)/example
	$(abspath $(BUILD))/example/fused_bias_gelu
	pc=$$(dirname $$(find $(INSTALL_TEST) -name fuseport.pc)) && \
	  cc -std=c11 -Wall -Wextra -Werror examples/fused_bias_gelu.c -o $(BUILD)/example/fused_bias_gelu_pc \
	    $$(PKG_CONFIG_PATH=$$pc pkg-config --cflags --libs fuseport) -lm
	LD_LIBRARY_PATH=$(abspath $(INSTALL_TEST))/lib $(abspath $(BUILD))/example/fused_bias_gelu_pc

# CUDA is off here: its tests cannot run without a GPU, and the plain build
# above already proves that it compiles.
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DFUSEPORT_SANITIZE=ON \
	  -DFUSEPORT_CUDA=OFF $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) -L 'cpu|opencl'

# The CUDA row kernels' CPU emulation (tests/cuda_emu) under ThreadSanitizer:
# a data race between emulated threads is what compute-sanitizer's racecheck
# finds on a GPU. It needs the CUDA toolkit's headers, not a GPU; without a
# toolkit there is nothing to run, and it says so. The CUDA backend itself
# is off here: the emulation compiles the kernel sources as C++, and the
# plain build has compiled them with nvcc.
test-race: deps
	cmake -S . -B $(RACE_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFUSEPORT_EMU_TSAN=ON \
	  -DFUSEPORT_CUDA=OFF $(CMAKE_ARGS)
	@if grep -q cuda_emu $(RACE_BUILD)/tests/CTestTestfile.cmake; then \
	  cmake --build $(RACE_BUILD) -j $(JOBS) --target test_cuda_emu && \
	  cd $(RACE_BUILD) && ctest --output-on-failure -R '^cuda_emu$$'; \
	else echo "test-race: SKIPPED: no CUDA toolkit found, no emulated CUDA kernels to check"; fi

# The command's parsers under libFuzzer with ASan + UBSan (tests/fuzz):
# each harness replays its corpus (tests/fuzz/corpus/<harness>, which keeps
# every input that once found a fault), then fuzzes for FUZZ_SECONDS. A
# crash, leak, hang (10 s an input) or broken property fails, and leaves the
# input in $(FUZZ_BUILD)/artifacts; new inputs go to $(FUZZ_BUILD)/corpus,
# never into the tree. Only the CPU backend: the parsers use no device.
FUZZ_SECONDS ?= 30
FUZZ_TARGETS = fuzz_values fuzz_args fuzz_results fuzz_merge
test-fuzz: deps
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) \
	  -DCMAKE_C_COMPILER=clang -DFUSEPORT_FUZZ=ON -DFUSEPORT_CUDA=OFF -DFUSEPORT_OPENCL=OFF \
	  -DFUSEPORT_TESTS=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz
	@mkdir -p $(FUZZ_BUILD)/artifacts; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; log=$(FUZZ_BUILD)/$$t.log; \
	  if $(FUZZ_BUILD)/tests/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
	       -max_len=8192 -close_fd_mask=3 -dict=tests/fuzz/$$t.dict \
	       -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$t- \
	       $(FUZZ_BUILD)/corpus/$$t tests/fuzz/corpus/$$t >$$log 2>&1; then \
	    echo "test-fuzz: $$t: $$(grep -E '^#[0-9]+.*DONE' $$log | tail -1)"; \
	  else tail -n 40 $$log; echo "test-fuzz: $$t FAILED (log $$log; the input is in" \
	    "$(FUZZ_BUILD)/artifacts: rerun it with $(FUZZ_BUILD)/tests/fuzz/$$t FILE)"; exit 1; fi; \
	done

# The OpenCL kernels under Oclgrind, the OpenCL simulator, as
# compute-sanitizer runs the CUDA ones (tests/oclgrind.sh): `fuseport check`
# of every op family on small odd shapes with its data-race,
# uninitialised-value and API checks; any failure or report fails. About 1.5
# minutes on 2 cores (the Release build; 3 with a Debug one).
test-oclgrind: build
	JOBS=$(JOBS) tests/oclgrind.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cl')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(RACE_BUILD) $(FUZZ_BUILD)
