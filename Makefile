# The two commands of the README's quick start.
.PHONY: run test build
build:
	@tools/setup.sh
run: build
	build/gpusim run configs/llama7b.yaml
test: build
	cd build && ctest --output-on-failure --parallel $$(nproc) -LE heavy
