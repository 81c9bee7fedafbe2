# The two commands of the README: `make demo` (the main job) and `make test` (everything CI checks).
# Each target installs what it needs itself (scripts/setup).

CARGO ?= cargo

.PHONY: demo test setup fmt lint unit stress

demo: setup
	$(CARGO) run --quiet --locked -- demo

test: setup fmt lint unit

setup:
	@scripts/setup

fmt:
	$(CARGO) fmt --all -- --check

# Both database drivers: PostgreSQL is a feature (`--features postgres`), off by default, so the
# workspace is linted and tested with it, and the memory crate also alone, with SQLite only.
BOTH = --features mnemo/postgres

lint:
	$(CARGO) clippy --workspace --all-targets --locked $(BOTH) -- -D warnings
	$(CARGO) clippy -p mnemo-memory --all-targets --locked -- -D warnings

# The PostgreSQL tests share one server (mnemo-pg-fixture starts it); it is discarded with its
# databases when the tests end, whatever their outcome.
PG_TESTS = $${CARGO_TARGET_DIR:-target}/tools/pg-tests

unit:
	$(CARGO) test --workspace --locked $(BOTH); status=$$?; scripts/postgres discard "$(PG_TESTS)"; exit $$status

# The crash-safety loop at length (200 SIGKILLs instead of the 20 `make test` runs), and
# several processes writing one store at length (5 writers x 2,000 events instead of 4 x 150).
stress: setup
	MNEMO_CRASH_KILLS=200 $(CARGO) test --locked $(BOTH) --test it crash_ingest:: -- --nocapture
	MNEMO_STRESS_WRITES=2000 MNEMO_STRESS_WRITERS=4 $(CARGO) test --locked $(BOTH) --test it multi_process:: -- --nocapture
