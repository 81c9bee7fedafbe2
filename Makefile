# The two commands of the README: `make demo` (the main job) and `make test` (everything CI checks).
# Each target installs what it needs itself (scripts/setup).

CARGO ?= cargo

.PHONY: demo test setup fmt lint unit

demo: setup
	$(CARGO) run --quiet --locked -- demo

test: setup fmt lint unit

setup:
	@scripts/setup

fmt:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

unit:
	$(CARGO) test --workspace --locked
