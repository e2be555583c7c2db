# The two commands of the README. Everything else is CMake presets (CMakePresets.json).
JOBS ?= $(shell nproc)

.PHONY: serve test test-asan test-tsan image test-image

# Install what is missing, build the release binary, then serve the built-in demo model.
serve:
	./scripts/setup
	cmake --preset release
	cmake --build --preset release --target tachyon
	./scripts/serve-demo

# Install what is missing, build, run every test (unit, end-to-end, then the GGUF fuzzer
# for a bounded time under ASan when clang is present).
test:
	./scripts/setup
	cmake --preset release
	cmake --build --preset release
	ctest --preset release --parallel $(JOBS)
	@if command -v clang++ >/dev/null 2>&1; then \
	  cmake --preset fuzz && cmake --build --preset fuzz && ctest --preset fuzz --parallel $(JOBS); \
	else \
	  echo "make test: clang++ not found, skipping the libFuzzer run"; \
	fi

# On demand (each a full build of its own, longer than the CI budget allows beside
# `make test`): every unit and end-to-end test under AddressSanitizer + UBSan, or
# under ThreadSanitizer. docs/hardening.md says what each covers.
test-asan:
	./scripts/setup
	cmake --preset asan
	cmake --build --preset asan
	ctest --preset asan --parallel $(JOBS)

test-tsan:
	./scripts/setup
	cmake --preset tsan
	cmake --build --preset tsan
	ctest --preset tsan --parallel $(JOBS)

# The OCI image localhost/tachyon:<version> (buildah, mmdebstrap: installed here when
# missing), and its check without a container runtime: the image mounted, its
# config and libraries checked, its own binary served from its root with chroot
# (tests/deploy/image_check.sh; needs root). docs/deploy.md.
image:
	./scripts/build-image

test-image:
	./scripts/setup
	./tests/deploy/image_check.sh
