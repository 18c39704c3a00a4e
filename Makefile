# The two commands of the README, and their parts.
#   make demo   set everything up, build, run the demo
#   make test   set everything up, build, run every test (ctest, TSAN, pytest)
PYTHON ?= python3
BUILD := build/cmake
TSAN_BUILD := build/tsan

.PHONY: demo test deps build test-cpp test-tsan test-python bench

demo: build
	$(PYTHON) -m pypto_torch.demo

test: build test-cpp test-tsan test-python

deps: build/.deps-installed
build/.deps-installed: requirements.txt requirements-apt.txt scripts/install-deps.sh
	scripts/install-deps.sh
	@mkdir -p build && touch $@

# First time: an editable install (CMake configure + build). Afterwards an
# incremental CMake build is all it takes: _C is built straight into the package.
build: deps build/.editable-installed
	cmake --build $(BUILD)
build/.editable-installed: setup.py pyproject.toml CMakeLists.txt
	$(PYTHON) -m pip install -q --disable-pip-version-check --no-build-isolation -e .
	@touch $@

test-cpp: build
	ctest --test-dir $(BUILD) --output-on-failure

# The torch-free suites again, under ThreadSanitizer.
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DPTO_TSAN=ON -DPTO_BUILD_TORCH=OFF >/dev/null
	cmake --build $(TSAN_BUILD)
	for suite in runtime_tests isa_tests kernels_tests kernels_structured_tests compiler_tests; do $(TSAN_BUILD)/tests/cpp/$$suite --gtest_brief=1 || exit 1; done

test-python: build
	$(PYTHON) -m pytest

bench: build
	$(PYTHON) benchmarks/bench_runtime.py
	$(PYTHON) benchmarks/bench_ops.py
	$(PYTHON) benchmarks/bench_compile.py
	$(PYTHON) benchmarks/bench_pypto.py
