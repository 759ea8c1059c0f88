# mediafs — build, test, demo, install.
# `make demo` and `make test` work on a fresh Debian 12 machine as root: they
# install what is missing first (scripts/install-deps.sh).

PREFIX    ?= /usr/local
DESTDIR   ?=
BUILD_DIR ?= .build
PYTEST_ARGS ?=

ifeq ($(shell command -v swift 2>/dev/null),)
export PATH := /opt/swift/usr/bin:$(PATH)
endif

SWIFT_FLAGS := --scratch-path $(BUILD_DIR)
BIN         := $(BUILD_DIR)/release/mediafs
export MEDIAFS_BIN := $(abspath $(BIN))
# Archive fixtures no one here wrote (scripts/fetch-archive-fixtures.sh).
ARCHIVE_FIXTURES ?= $(HOME)/.cache/mediafs-archive-fixtures
export MEDIAFS_RARFILE_FIXTURES ?= $(abspath $(ARCHIVE_FIXTURES))

.PHONY: all build deps archive-fixtures test tsan demo bench install clean stress-suite stress-start

all: build

build:
	swift build -c release $(SWIFT_FLAGS)

deps:
	scripts/install-deps.sh

archive-fixtures:
	scripts/fetch-archive-fixtures.sh $(MEDIAFS_RARFILE_FIXTURES) >/dev/null

test: deps archive-fixtures
	$(MAKE) build
	swift test --disable-swift-testing $(SWIFT_FLAGS)
	$(MAKE) tsan
	python3 -m pytest -v $(PYTEST_ARGS) integration/

# The unit tests under ThreadSanitizer, in a build directory of their own
# (a sanitized build cannot share objects with the plain one).
tsan: archive-fixtures
	swift test --sanitize=thread --disable-swift-testing --scratch-path .build-tsan

# The flake hunt: the integration suite RUNS times in a row (default 20),
# stopping at the first run that fails; `make stress-suite RUNS=5`.
RUNS ?= 20
stress-suite: deps
	$(MAKE) build
	for run in $$(seq 1 $(RUNS)); do \
	  echo "== stress-suite: run $$run of $(RUNS)"; \
	  python3 -m pytest -q $(PYTEST_ARGS) integration/ || { echo "== stress-suite: run $$run FAILED"; exit 1; }; \
	done; echo "== stress-suite: $(RUNS) runs passed"

# Start-up that cannot hang, at full size: a 100,000-entry cache remounted
# in daemon mode 50 times, each answering a stat at once.
stress-start: deps
	$(MAKE) build
	MEDIAFS_START_ENTRIES=100000 MEDIAFS_START_REMOUNTS=50 python3 -m pytest -v integration/test_daemon_start.py

demo: deps
	$(MAKE) build
	scripts/demo.sh

# Measures mediafs beside curl (and rclone, installed if missing) in one run.
bench: deps
	$(MAKE) build
	command -v rclone >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rclone || true
	python3 bench/run.py $(BENCH_ARGS)

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/mediafs
	install -D -m 0644 man/mediafs.1 $(DESTDIR)$(PREFIX)/share/man/man1/mediafs.1

clean:
	rm -rf $(BUILD_DIR) .build-tsan
