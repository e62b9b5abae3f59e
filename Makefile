# Two commands do everything on a fresh Debian machine (run as root, or with sudo available):
#   make demo   - install what is missing, build the firmware, run a power-fault campaign on the
#                 simulated rig and write its report
#   make test   - install what is missing, lint, type-check, build and test firmware and host
# A station that only runs campaigns installs the runtime set alone:
#   make station - the Debian packages and Python packages that `rig run`, `rig report`,
#                 `rig serve` and `rig fleet agent` need, the native library and the board's
#                 firmware image (flash it with `make -C firmware flash`); no simulator, QEMU,
#                 browser, PostgreSQL server or test tools. `make setup` adds those on top.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# The runtime set (a station): building the native library, udev, the drive tools the health
# and write-cache layers call, and the AVR toolchain and avrdude to build and flash the board.
STATION_APT_PACKAGES := python3-venv gcc libc6-dev make util-linux udev \
	gcc-avr avr-libc binutils-avr avrdude \
	smartmontools sg3-utils nvme-cli hdparm sdparm
# The test and development set, installed on top by `make setup`: the simulated rig (FUSE,
# simavr), the guest tier (QEMU, a kernel, busybox), the dashboard's browser tests (Chromium),
# the fleet's PostgreSQL server, benchmarks (fio), tools the tests call (mkfs, sfdisk), KiCad 6
# and the X tools KiAuto drives it with (tests/hardware/test_hardware_board.py: ERC, DRC). A package
# only tests, benchmarks or the simulator need goes here; one a station runs goes above.
APT_PACKAGES := pkg-config fdisk e2fsprogs fuse3 libfuse3-dev simavr libsimavr-dev \
	fio qemu-system-x86 linux-image-amd64 busybox-static \
	chromium chromium-driver poppler-utils postgresql prometheus \
	kicad kicad-footprints kicad-symbols xvfb xdotool x11-utils xauth
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

NATIVE_LIB := rig/native/libpfr.so
NATIVE_SRC := $(wildcard rig/native/*.c) $(wildcard rig/native/*.h)

.PHONY: setup station demo fleet-demo test check lint typecheck firmware station-firmware native clean-sim
setup: $(VENV)/.installed firmware native
station: $(VENV)/.runtime native station-firmware

# apt-get install of the packages of $(1) that are not installed yet
define apt_install
	@missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi
endef

.station-apt-installed: Makefile
	$(call apt_install,$(STATION_APT_PACKAGES))
	@touch $@

.apt-installed: Makefile .station-apt-installed
	$(call apt_install,$(APT_PACKAGES))
	@touch $@

# requirements.lock: what the rig runs with; requirements-dev.lock: tests, lint, type-check
$(VENV)/.runtime: .station-apt-installed requirements.lock pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements.lock
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-deps -e .
	@touch $@

$(VENV)/.installed: .apt-installed $(VENV)/.runtime requirements-dev.lock
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements-dev.lock
	@touch $@

# The rig's C kernels (record format, write engine), loaded with ctypes by rig/native.
native: $(NATIVE_LIB)
$(NATIVE_LIB): $(NATIVE_SRC) .station-apt-installed
	gcc -std=gnu11 -O3 -fPIC -shared -Wall -Wextra -Werror -pthread -o $@ $(filter %.c,$(NATIVE_SRC))

firmware: .apt-installed
	@if [ -f firmware/Makefile ]; then $(MAKE) -s -C firmware all; fi

# a station builds only the board's image (the simavr bridge and host twin are for tests)
station-firmware: .station-apt-installed
	@if [ -f firmware/Makefile ]; then $(MAKE) -s -C firmware build/powerboard.hex; fi

demo: setup
	$(VENV)/bin/rig demo

# A fleet on this machine: PostgreSQL, three simulated stations and the dashboard (Ctrl-C stops)
fleet-demo: setup
	$(VENV)/bin/rig fleet demo

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

# Tests run on $(WORKERS) pytest-xdist workers, a test file to a worker at a time (the guest tier's
# files all on one: one QEMU guest at a time; tests/conftest.py): the tests share the machine as
# they must share a lab's (docs/decisions.md, "Tests run on two workers"). WORKERS=0: one process.
# The tests that start their own CPU hog (marker `alone`) run after, by themselves: their hog of
# 4 busy processes per core would load whatever the other worker runs. So do the guest tier's
# (marked `alone` in tests/conftest.py): their QEMU runs at nice -10 and starved the other worker.
# A failure is reported as a native traceback (pyproject.toml) without column ranges: neither then
# parses source with `ast`, whose spurious SystemError on CPython 3.11 (gh-106905) turned one
# failing test into an internal error that ended the whole run (docs/decisions.md).
WORKERS ?= 2
XDIST := -n $(WORKERS) --dist loadfile
PYTEST := PYTHONNODEBUGRANGES=1 $(VENV)/bin/pytest
test: setup lint typecheck
	@if [ -f firmware/Makefile ]; then $(MAKE) -s -C firmware test; fi
	$(PYTEST) -q $(XDIST) -m "not alone" $(PYTEST_ARGS)
	$(PYTEST) -q -m alone $(PYTEST_ARGS) || [ $$? -eq 5 ]  # (5: none selected)

# The inner loop (under 5 minutes here): lint, type-check and the tests that need no QEMU guest,
# PostgreSQL, KiCad or Chromium, less those of tests/heavy.txt (1.5 s or more each: whole
# campaigns on the twins, statistical simulations). `make test` runs them all.
QUICK_IGNORE := --ignore=tests/guest --ignore=tests/fleet --ignore=tests/hardware \
	--ignore=tests/test_install_split.py
check: setup lint typecheck
	$(PYTEST) -q $(XDIST) $(QUICK_IGNORE) -m "not heavy" -k "not chromium and not browser and not print" $(PYTEST_ARGS)

clean-sim: $(VENV)/.installed
	$(VENV)/bin/rig clean-sim
