# The two commands of the README, and their parts.
#   make demo   set everything up, build, run the demo
#   make test   set everything up, build, run every test (ctest, TSAN, ASan+UBSan, strict
#               device memory, pytest)
PYTHON ?= python3
BUILD := build/cmake
TSAN_BUILD := build/tsan
# One AddressSanitizer + UndefinedBehaviorSanitizer build for the GoogleTest suites
# and the extension, so the torch-free layers are compiled once for both.
ASAN_BUILD := build/asan
# The package as Python imports it under ASan: the sanitized _C beside links to
# everything else in pypto_torch/.
ASAN_PYTHON := $(ASAN_BUILD)/python
# Every GoogleTest executable tests/cpp/CMakeLists.txt defines.
CPP_SUITES := $(shell sed -n 's/^\(pto_gtest\|add_executable\).\([a-z_]*\).*/\2/p' tests/cpp/CMakeLists.txt)
# What the torch glue does with memory: devices, copies, streams, the allocator and
# a training run.
ASAN_PYTESTS := $(sort $(wildcard $(addprefix tests/python/test_,$(addsuffix .py,\
	copy copy_fuzz device memory streams training))))
# What runs again with device memory closed to host code (PTO_SIM_STRICT=1): the
# device, copies, streams, memory, the elementwise ops' OpInfo comparisons, matmul,
# softmax and torch.ops.pto, training, graph programs, a Hugging Face decoder and
# the pccl collectives (whose transfers must reach device memory only through copies
# and device ops). About 2 minutes on 2 cores (one pytest worker per core); the whole
# suite passes under it too (tests of measured times skipped), in 14.
STRICT_PYTESTS := $(addprefix tests/python/test_,$(addsuffix .py,strict_mode device copy memory \
	streams training elementwise matmul softmax pto_ops kernel_asm compile_backend)) \
	'tests/python/test_compile_hf_models.py::test_compiled_model_matches_eager_in_eval_and_training[llama]' \
	tests/python/distributed/test_dist_init.py

.PHONY: demo test test-fast deps build test-cpp test-tsan test-asan test-asan-python test-strict test-python bench bench-avx2

demo: build
	$(PYTHON) -m pypto_torch.demo

test: build test-cpp test-tsan test-asan test-asan-python test-strict test-python

deps: build/.deps-installed
build/.deps-installed: requirements.txt requirements-apt.txt scripts/install-deps.sh
	scripts/install-deps.sh
	@mkdir -p build && touch $@

# First time: an editable install (CMake configure + build). Afterwards an
# incremental CMake build is all it takes: _C is built straight into the package.
build: deps build/.editable-installed
	cmake --build $(BUILD)
# -v: pip then shows CMake's and Ninja's progress ([n/N] per file), the several
# minutes a first build takes on 2 cores.
build/.editable-installed: setup.py pyproject.toml CMakeLists.txt
	@echo "building pypto_torch's native extension with CMake (a first build takes minutes; its progress follows)"
	$(PYTHON) -m pip install -v --disable-pip-version-check --no-build-isolation -e .
	@touch $@

test-cpp: build
	ctest --test-dir $(BUILD) --output-on-failure

# The torch-free suites again, under ThreadSanitizer.
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DPTO_TSAN=ON -DPTO_BUILD_TORCH=OFF -DPython3_EXECUTABLE=$$(command -v $(PYTHON)) >/dev/null
	cmake --build $(TSAN_BUILD)
	for suite in $(CPP_SUITES); do $(TSAN_BUILD)/tests/cpp/$$suite --gtest_brief=1 || exit 1; done

$(ASAN_BUILD)/build.ninja: | deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DPTO_ASAN=ON -DPython3_EXECUTABLE=$$(command -v $(PYTHON)) -DPTO_PYTHON_OUTPUT_DIR=$(CURDIR)/$(ASAN_PYTHON)/pypto_torch >/dev/null

# The torch-free suites under ASan+UBSan, leaks included.
test-asan: $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) --target $(CPP_SUITES)
	for suite in $(CPP_SUITES); do $(ASAN_BUILD)/tests/cpp/$$suite --gtest_brief=1 || exit 1; done

# The whole extension under ASan+UBSan, in the uninstrumented python and torch: the
# ASan runtime must be loaded before them (LD_PRELOAD), and libstdc++ with it, or
# ASan finds no __cxa_throw to wrap and aborts at the first C++ exception. No leak
# checks: CPython and torch keep interned objects, modules and registries alive
# until exit on purpose. PYTHONSAFEPATH keeps the working directory, where the
# uninstrumented pypto_torch lies, off sys.path, in pytest and in the interpreters
# tests start. --capture=sys lets a report, written to file descriptor 2 just
# before the process aborts, reach the terminal.
ASAN_PYTHON_ENV = LD_PRELOAD="$$($(CXX) -print-file-name=libasan.so) $$($(CXX) -print-file-name=libstdc++.so)" \
	PYTHONPATH=$(CURDIR)/$(ASAN_PYTHON) PYTHONSAFEPATH=1 \
	ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
test-asan-python: $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) --target _C
	find $(ASAN_PYTHON)/pypto_torch -maxdepth 1 -type l -delete
	for entry in pypto_torch/*; do case $$entry in *.so|*/__pycache__) ;; \
		*) ln -s $(CURDIR)/$$entry $(ASAN_PYTHON)/pypto_torch/ ;; esac; done
	@# Stops here if Python would import some other, uninstrumented _C.
	$(ASAN_PYTHON_ENV) $(PYTHON) -c "import pypto_torch, sys; sys.exit('$(ASAN_PYTHON)/' not in pypto_torch._C.__file__)"
	$(ASAN_PYTHON_ENV) $(PYTHON) -m pytest --capture=sys $(ASAN_PYTESTS)

# The demo and STRICT_PYTESTS with the simulated device's memory mapped with no
# access rights except while the driver executes: any host read or write of device
# memory, anywhere in the torch glue, is a crash (docs/RELIABILITY.md).
test-strict: build
	PTO_SIM_STRICT=1 $(PYTHON) -m pypto_torch.demo >/dev/null
	PTO_SIM_STRICT=1 $(PYTEST) $(STRICT_PYTESTS)

# One pytest worker per core (pytest-xdist), each file's tests on one worker: the
# sweeps run their checks in worker interpreters a file's tests share. The tiers
# (tests/python/conftest.py, TIERS) run one after the other, each reporting its time;
# the slow tier also lists its 25 slowest tests, where CI's time goes.
PYTEST := $(PYTHON) -m pytest -n auto --dist loadfile
FAST_TIER := -m "not slow and not soak"
test-python: build
	$(PYTEST) $(FAST_TIER)
	$(PYTEST) -m slow --durations=25
	$(PYTEST) -m soak

# A developer's loop, under 5 minutes on 2 cores: the build, the GoogleTest suites
# and every test outside the slow and soak tiers.
test-fast: build test-cpp
	$(PYTEST) $(FAST_TIER)

# Every benchmark within 15 minutes on 2 cores, then one summary of every aim.
# ISA=avx2 caps every side to AVX2 on an AVX-512 host: an emulation of an AVX2-only host.
bench: build
	$(PYTHON) benchmarks/run_all.py $(if $(ISA),--isa $(ISA))

bench-avx2: build
	$(PYTHON) benchmarks/run_all.py --isa avx2
