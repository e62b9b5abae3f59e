# Two commands do everything on a fresh Debian machine (run as root, or with sudo available):
#   make demo   - install what is missing, build the firmware, run a power-fault campaign on the
#                 simulated rig and write its report
#   make test   - install what is missing, lint, type-check, build and test firmware and host
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
APT_PACKAGES := python3-venv gcc libc6-dev make pkg-config util-linux fdisk e2fsprogs udev fuse3 libfuse3-dev \
	gcc-avr avr-libc binutils-avr avrdude simavr libsimavr-dev \
	fio smartmontools sg3-utils nvme-cli \
	qemu-system-x86 linux-image-amd64 busybox-static \
	chromium chromium-driver poppler-utils postgresql
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

NATIVE_LIB := rig/native/libpfr.so
NATIVE_SRC := $(wildcard rig/native/*.c) $(wildcard rig/native/*.h)

.PHONY: setup demo fleet-demo test lint typecheck firmware native clean-sim
setup: $(VENV)/.installed firmware native

.apt-installed: Makefile
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi
	@touch $@

$(VENV)/.installed: .apt-installed requirements.lock pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements.lock
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-deps -e .
	@touch $@

# The rig's C kernels (record format, write engine), loaded with ctypes by rig/native.
native: $(NATIVE_LIB)
$(NATIVE_LIB): $(NATIVE_SRC) .apt-installed
	gcc -std=gnu11 -O3 -fPIC -shared -Wall -Wextra -Werror -pthread -o $@ $(filter %.c,$(NATIVE_SRC))

firmware: .apt-installed
	@if [ -f firmware/Makefile ]; then $(MAKE) -s -C firmware all; fi

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

test: setup lint typecheck
	@if [ -f firmware/Makefile ]; then $(MAKE) -s -C firmware test; fi
	$(VENV)/bin/pytest -q $(PYTEST_ARGS)

clean-sim: $(VENV)/.installed
	$(VENV)/bin/rig clean-sim
