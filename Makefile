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
# The release binary carries the Swift runtime and Foundation (the
# toolchain's static archives), so it runs where there is no toolchain: ldd
# names only Debian's own libraries (docs/decisions/0044). Symbols are bound
# at start (-z now: full RELRO, as Debian's hardening asks; start-up the
# same within noise). The unit-test builds (tsan) stay dynamic.
RELEASE_FLAGS := -c release --static-swift-stdlib -Xlinker -z -Xlinker now
BIN         := $(BUILD_DIR)/release/mediafs
export MEDIAFS_BIN := $(abspath $(BIN))
# Archive fixtures no one here wrote (scripts/fetch-archive-fixtures.sh).
ARCHIVE_FIXTURES ?= $(HOME)/.cache/mediafs-archive-fixtures
export MEDIAFS_RARFILE_FIXTURES ?= $(abspath $(ARCHIVE_FIXTURES))

.PHONY: all build deps archive-fixtures test tsan tsan-build tsan-run house demo bench install deb clean stress stress-suite

all: build

build:
	swift build $(RELEASE_FLAGS) $(SWIFT_FLAGS)

deps:
	scripts/install-deps.sh

archive-fixtures:
	scripts/fetch-archive-fixtures.sh $(MEDIAFS_RARFILE_FIXTURES) >/dev/null

# Workers for the integration suite (pytest-xdist): most tests wait on a
# server, a mount or a read, so 4 keep this 2-core machine busy.
JOBS ?= 4
PYTEST := python3 -m pytest -p no:cacheprovider
# The product's tests and the tools' (integration/tools/): tests that can run
# beside others on JOBS workers, grouped where they share a machine-wide
# setting; then those marked `alone`, one at a time.
INTEGRATION = $(PYTEST) -n $(JOBS) --dist loadgroup -m "not alone" --durations=15 $(PYTEST_ARGS) integration/ \
	&& { $(PYTEST) -m alone --durations=5 $(PYTEST_ARGS) integration/; rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ]; }

# The release build beside the ThreadSanitizer build: a release build
# compiles a module at a time, so it leaves a core mostly idle on this
# 2-core machine (130% CPU); each build's output is printed whole when it
# ends. The unit run comes after both, on a machine of its own.
test: deps archive-fixtures house
	$(MAKE) -j2 --output-sync=target build tsan-build
	$(MAKE) tsan-run
	$(INTEGRATION)

# The house rules no compiler checks (no cycle among the core's folders,
# each rule's state owned by one type, ...), read from the source tree.
house:
	python3 scripts/house.py

# The unit tests, once, under ThreadSanitizer (a debug build, so the lock
# ranks are checked too), a test class per process, several at once.
tsan: tsan-build
	$(MAKE) tsan-run

tsan-build:
	swift build --build-tests --sanitize=thread --disable-swift-testing --scratch-path .build-tsan

tsan-run: archive-fixtures
	python3 scripts/unit-tests.py "$$(swift build --show-bin-path --sanitize=thread --scratch-path .build-tsan)/mediafsPackageTests.xctest"

# The long versions of the stress, soak and start-up tests: `make test` runs
# each for seconds, this for minutes (see README).
STRESS_ENV = MEDIAFS_KILLS=60 MEDIAFS_STRESS_SECONDS=120 MEDIAFS_FLIP_SECONDS=60 MEDIAFS_START_ENTRIES=100000 MEDIAFS_START_REMOUNTS=50
stress: deps
	$(MAKE) build
	$(STRESS_ENV) $(PYTEST) -v -m stress --durations=0 $(PYTEST_ARGS) integration/

# The flake hunt: the integration suite RUNS times in a row (default 20),
# stopping at the first run that fails; `make stress-suite RUNS=5`.
RUNS ?= 20
stress-suite: deps archive-fixtures
	$(MAKE) build
	for run in $$(seq 1 $(RUNS)); do \
	  echo "== stress-suite: run $$run of $(RUNS)"; start=$$(date +%s); \
	  ( $(INTEGRATION) ) || { echo "== stress-suite: run $$run FAILED"; exit 1; }; \
	  echo "== stress-suite: run $$run passed in $$(( $$(date +%s) - start )) s"; \
	done; echo "== stress-suite: $(RUNS) runs passed"

demo: deps
	$(MAKE) build
	scripts/demo.sh

# Measures mediafs beside curl (and rclone, installed if missing) in one run.
bench: deps
	$(MAKE) build
	command -v rclone >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rclone || true
	python3 bench/run.py $(BENCH_ARGS)

# The binary (stripped), the man page and the systemd template (naming
# $(PREFIX)/bin/mediafs); scripts/install-files.sh says what goes where.
install: build
	scripts/install-files.sh $(BIN) "$(DESTDIR)" $(PREFIX) $(PREFIX)/lib/systemd/system

# mediafs_VERSION_ARCH.deb in DEB_DIR (default $(BUILD_DIR)), from the same
# files for /usr, with Depends from dpkg-shlibdeps; then lintian on it (an
# error or warning fails; docs/decisions/0044 explains the tags left).
# DEB_DIR holds the last package built, so `apt install ./DIR/mediafs_*.deb`
# names one.
DEB_DIR ?= $(BUILD_DIR)
deb: deps
	$(MAKE) build
	rm -f $(DEB_DIR)/mediafs_*.deb
	deb=$$(scripts/build-deb.sh $(BIN) $(DEB_DIR)) && echo "$$deb" \
	  && lintian --fail-on error,warning "$$deb"

clean:
	rm -rf $(BUILD_DIR) .build-tsan
