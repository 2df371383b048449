# The two commands of the README's quick start, plus the sanitizer suite CI runs.
.PHONY: run test build test-sanitize test-fuzz-build install
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

# ASan + UBSan (any UB aborts) build of the same suite in build-asan/; see
# tests/fuzz/README.md. -O1 -g1: quicker to build than -O2 -g, still
# line-accurate reports.
SANITIZE_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1 \
               UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
               LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizer/lsan.supp
test-sanitize:
	@if [ ! -f build-asan/CMakeCache.txt ]; then \
	  cmake -S . -B build-asan $$(command -v ninja >/dev/null && echo -G Ninja) \
	    -DGPUSIM_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" >/dev/null; fi
	cmake --build build-asan --parallel $$(nproc) --target gpusim gpusim_tests fuzz_replays
	cd build-asan && $(SANITIZE_ENV) ctest --output-on-failure --parallel $$(nproc) -LE heavy

# The libFuzzer targets built with Debian's clang 14 (GPUSIM_FUZZ=ON, ASan +
# UBSan) in build-fuzz/, so the fuzz build cannot regress (issue 17: it
# failed at HEAD unnoticed), then each target run once over its seeds and
# regression inputs (-runs=0: no new inputs, every seed checked). Long runs:
# tests/fuzz/README.md.
FUZZ_TARGETS = $(patsubst %_fuzzer.cc,%_fuzzer,$(notdir $(wildcard sim/*/*_fuzzer.cc sim/*/*/*_fuzzer.cc models/*_fuzzer.cc tests/fuzz/*_fuzzer.cc)))
test-fuzz-build:
	@if [ ! -f build-fuzz/CMakeCache.txt ]; then \
	  cmake -S . -B build-fuzz $$(command -v ninja >/dev/null && echo -G Ninja) \
	    -DCMAKE_CXX_COMPILER=clang++-14 -DGPUSIM_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" >/dev/null; fi
	cmake --build build-fuzz --parallel $$(nproc) --target $(FUZZ_TARGETS)
	@for t in $(FUZZ_TARGETS); do c=$${t%_fuzzer}; \
	  $(SANITIZE_ENV) build-fuzz/$$t -runs=0 tests/fuzz/$$c $$( [ -d tests/fuzz/regressions/$$c ] && echo tests/fuzz/regressions/$$c ) \
	    >build-fuzz/$$t.log 2>&1 || { cat build-fuzz/$$t.log; exit 1; }; echo "$$t: seeds ran clean"; done
