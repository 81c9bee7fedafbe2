# The two commands of the README: `make demo` (the main job) and `make test` (everything CI checks).
# Each target installs what it needs itself (scripts/setup).

CARGO ?= cargo

.PHONY: demo test setup fmt lint lint-sqlite unit stress

demo: setup
	$(CARGO) run --quiet --locked -- demo

test: setup fmt lint-sqlite unit

setup:
	@scripts/setup

fmt:
	$(CARGO) fmt --all -- --check

# Both database drivers: PostgreSQL is a feature (`--features postgres`), off by default, so the
# workspace is linted and tested with it, and the memory crate also alone, with SQLite only.
BOTH = --features mnemo/postgres

# clippy over everything, both configurations, while working. `make test` runs the same lints
# inside its test build instead (see LINTED), and this second configuration on its own.
lint: lint-sqlite
	$(CARGO) clippy --workspace --all-targets --locked $(BOTH) -- -D warnings

lint-sqlite:
	$(CARGO) clippy -p mnemo-memory --all-targets --locked -- -D warnings

# clippy's lints, warnings denied, inside the test build: Cargo compiles the workspace's own
# crates with clippy-driver as its workspace wrapper, as `cargo clippy` does, so the
# dependencies are compiled once, for the tests, and not a second time in check mode for a
# separate lint (three to four minutes of a fresh clone's `make test` on 2 cores). `cargo test`
# builds every target that `clippy --all-targets` checks: libraries, binaries, tests and
# examples (there are no benches). The wrapper changes the workspace crates' artifact hashes, so
# these builds sit beside a plain `cargo test`'s and neither rebuilds the other's.
LINTED = RUSTC_WORKSPACE_WRAPPER=clippy-driver CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

# The PostgreSQL tests share one server (mnemo-pg-fixture starts it); it is discarded with its
# databases when the tests end, whatever their outcome.
PG_TESTS = $${CARGO_TARGET_DIR:-target}/tools/pg-tests

unit:
	$(LINTED) $(CARGO) test --workspace --locked $(BOTH); status=$$?; scripts/postgres discard "$(PG_TESTS)"; exit $$status

# The crash-safety loop at length (200 SIGKILLs instead of the 20 `make test` runs), and
# several processes writing one store at length (5 writers x 2,000 events instead of 4 x 150).
stress: setup
	MNEMO_CRASH_KILLS=200 $(CARGO) test --locked $(BOTH) --test it crash_ingest:: -- --nocapture
	MNEMO_STRESS_WRITES=2000 MNEMO_STRESS_WRITERS=4 $(CARGO) test --locked $(BOTH) --test it multi_process:: -- --nocapture
