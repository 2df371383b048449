# The two commands of the README's quick start, plus the sanitizer suite CI runs.
.PHONY: run test build test-sanitize test-fuzz-build sanitize-configure install
build:
	@tools/setup.sh
run: build
	build/gpusim run configs/llama7b.yaml
# The binary to $(PREFIX)/bin, its data (configs) to
# $(PREFIX)/share/gpusim, where the installed binary finds them.
PREFIX ?= /usr/local
install: build
	cmake --install build --prefix $(PREFIX)
# The tests also need chromium (setup.sh --test); the browser test must run.
test:
	@tools/setup.sh --test
	cd build && GPUSIM_REQUIRE_BROWSER=1 GPUSIM_REQUIRE_TORCH=1 GPUSIM_REQUIRE_TRACE_READER=1 ctest --output-on-failure --parallel $$(nproc) -LE heavy

# One sanitized build, build-asan/, for both checks CI runs: Debian's clang 14
# with ASan + UBSan (any UB aborts) and the libFuzzer targets (GPUSIM_FUZZ=ON,
# which implies GPUSIM_SANITIZE); see tests/fuzz/README.md. -O1 -g1: quicker
# to build than -O2 -g, still line-accurate reports. One build rather than a
# g++ one for the suite and a clang one for the fuzzers: the library is
# compiled sanitized once (CI runs on 2 cores; the two builds were half its
# time). A build-asan/ configured otherwise (the g++ one of before) is
# configured afresh.
SANITIZE_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1 \
               UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
               LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizer/lsan.supp
FUZZ_TARGETS = $(patsubst %_fuzzer.cc,%_fuzzer,$(notdir $(wildcard sim/*/*_fuzzer.cc sim/*/*/*_fuzzer.cc models/*_fuzzer.cc tests/fuzz/*_fuzzer.cc)))
sanitize-configure:
	@if ! grep -qs '^GPUSIM_FUZZ:BOOL=ON' build-asan/CMakeCache.txt; then \
	  rm -rf build-asan && \
	  cmake -S . -B build-asan $$(command -v ninja >/dev/null && echo -G Ninja) \
	    -DCMAKE_CXX_COMPILER=clang++-14 -DGPUSIM_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" >/dev/null; fi

# The fuzz targets, each run once over its seeds and regression inputs
# (-runs=0: no new inputs, every seed checked), so the fuzz build cannot
# regress (issue 17: it failed at HEAD unnoticed). Long runs:
# tests/fuzz/README.md.
test-fuzz-build: sanitize-configure
	cmake --build build-asan --parallel $$(nproc) --target $(FUZZ_TARGETS)
	@for t in $(FUZZ_TARGETS); do c=$${t%_fuzzer}; \
	  $(SANITIZE_ENV) build-asan/$$t -runs=0 tests/fuzz/$$c $$( [ -d tests/fuzz/regressions/$$c ] && echo tests/fuzz/regressions/$$c ) \
	    >build-asan/$$t.log 2>&1 || { cat build-asan/$$t.log; exit 1; }; echo "$$t: seeds ran clean"; done

# The suite, sanitized, then the fuzz targets over their seeds. The docs.*
# checks (the docs' tables and commands against fresh runs, minutes under
# ASan) are left to `make test`: they check text, and the code they run is
# run sanitized by the golden, CLI and hostile-input tests.
test-sanitize: sanitize-configure
	cmake --build build-asan --parallel $$(nproc) --target gpusim gpusim_tests $(FUZZ_TARGETS)
	cd build-asan && $(SANITIZE_ENV) ctest --output-on-failure --parallel $$(nproc) -LE 'heavy|docs'
	@$(MAKE) --no-print-directory test-fuzz-build
