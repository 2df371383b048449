# The two commands of the README's quick start.
.PHONY: run test build
build:
	@tools/setup.sh
run: build
	build/gpusim run configs/llama7b.yaml
# The tests also need chromium (setup.sh --test); the browser test must run.
test:
	@tools/setup.sh --test
	cd build && GPUSIM_REQUIRE_BROWSER=1 ctest --output-on-failure --parallel $$(nproc) -LE heavy
