# The two commands: `make demo` and `make test`. Both build .venv from nothing but Python.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export JAX_COMPILATION_CACHE_DIR ?= $(CURDIR)/.jax_cache
export PYTHONHASHSEED := 0

.PHONY: test test-slow test-steps demo install lint typecheck pytest docs bench dist clean clients clients-brax clients-sb3

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# uv (from PyPI, into the venv) installs the extras in about 17 s where pip takes about 80 s
# (issue 20: the install counts in `make test`'s time); pip does it if uv cannot be had
$(STAMP): pyproject.toml | $(BIN)/python
	( $(BIN)/python -m pip install --quiet uv && \
	  $(BIN)/uv pip install --quiet --python $(BIN)/python -e ".[test,docs]" ) || \
	$(BIN)/python -m pip install --quiet -e ".[test,docs]"
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# One pytest session on two xdist workers. Each worker runs about half of the suite, and
# tests/conftest.py keeps its memory mappings bounded (a worker that kept every compiled
# program reached the kernel's vm.max_map_count and segfaulted).
PYTEST := $(BIN)/python -m pytest -n 2 --dist loadgroup -q --durations=30

# `make test` runs every test but the long-running extras marked `slow` (whole notebooks,
# the limit order book's x64 batteries, multi-process and whole-program runs); `make
# test-slow` runs those, and `.ci/run` runs both. A bare `pytest` runs everything.
pytest: $(STAMP)
	$(PYTEST) -m "not slow"

test-slow: $(STAMP)
	@start=$$(date +%s); status=0; \
	$(PYTEST) -m slow || status=$$?; \
	elapsed=$$(( $$(date +%s) - start )); \
	echo "make test-slow: $$( [ $$status -eq 0 ] && echo passed || echo FAILED ) in $$((elapsed / 60)) min $$((elapsed % 60)) s"; \
	exit $$status

docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

# `make test` prints its total wall time and the CPU time of its steps (hosts differ: the CPU
# time says how fast this one was) at the end, also when a step fails (issue 40: keep
# it under 15 minutes on an idle 2-core machine)
test:
	@start=$$(date +%s); status=0; \
	$(MAKE) --no-print-directory test-steps || status=$$?; \
	elapsed=$$(( $$(date +%s) - start )); \
	echo "make test: $$( [ $$status -eq 0 ] && echo passed || echo FAILED ) in $$((elapsed / 60)) min $$((elapsed % 60)) s ($$elapsed s wall time)"; \
	echo "CPU time of the shell, then of the steps (user, system):"; times; \
	exit $$status

test-steps: lint typecheck pytest docs

demo: $(STAMP)
	$(BIN)/python -m parallax._demo

# the wheel and the sdist, built offline with .venv's setuptools (the test extra pins it)
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --no-isolation --outdir dist .

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(CLIENTS) $(CLIENTS_BRAX) $(CLIENTS_SB3) .jax_cache .cache site dist build .pytest_cache .mypy_cache .ruff_cache

# $(call client_venv,DIR,EXTRA): a virtual environment at DIR with this package and its EXTRA
# extra (uv when it installs, pip otherwise), stamped DIR/.installed. Each client target below
# has its own.
define client_venv
	$(PYTHON) -m venv $(1)
	( $(1)/bin/python -m pip install --quiet uv && \
	  $(1)/bin/uv pip install --quiet --python $(1)/bin/python -e ".[$(2)]" ) || \
	$(1)/bin/python -m pip install --quiet -e ".[$(2)]"
	touch $(1)/.installed
endef

# Third-party trainers in a virtual environment of their own (`.venv-clients`, the `clients`
# extra): rejax 0.1.3 on gymnax 0.0.9 (tests/clients; see its docstring). `.ci/run` runs it
# after `make test`.
CLIENTS := .venv-clients
$(CLIENTS)/.installed: pyproject.toml
	$(call client_venv,$(CLIENTS),clients)

clients: $(CLIENTS)/.installed
	$(CLIENTS)/bin/python -m pytest -q -p no:cacheprovider --confcutdir=tests/clients \
		-o filterwarnings=ignore::DeprecationWarning tests/clients

# brax's own trainer, `brax.training.agents.ppo.train`, in a virtual environment of its own
# (`.venv-brax`, the `brax-train` extra): brax 0.14.2 calls `jax.device_put_replicated`, which
# JAX 0.10 removed, so it runs on JAX 0.9.2 (tests/clients_brax; see its docstring), with the
# main suite's brax export tests and import tests on that JAX. Warnings stay errors
# (pyproject's filters), except the deprecation warning of `device_put_replicated` itself.
# `.ci/run` runs it after `make clients`.
CLIENTS_BRAX := .venv-brax
$(CLIENTS_BRAX)/.installed: pyproject.toml
	$(call client_venv,$(CLIENTS_BRAX),brax-train)

clients-brax: $(CLIENTS_BRAX)/.installed
	$(CLIENTS_BRAX)/bin/python -m pytest -q -p no:cacheprovider --confcutdir=tests/clients_brax \
		-W "ignore:jax.device_put_replicated is deprecated:DeprecationWarning" \
		tests/clients_brax tests/test_export_brax.py tests/test_adapters_imports.py

# Stable-Baselines3 2.9.2 on the Gymnasium export, in a virtual environment of its own
# (`.venv-sb3`, the `sb3` extra): SB3 needs PyTorch, whose Linux wheel pulls NVIDIA's CUDA
# libraries (about 3 GB), so it stays out of `.venv`; torch runs on the CPU. SB3's env checker,
# A2C on GridWorld-v0 and PPO on Trading-v0 (tests/clients_sb3; see its docstring). Warnings
# stay errors (pyproject's filters). `.ci/run` runs it after `make clients-brax`.
CLIENTS_SB3 := .venv-sb3
$(CLIENTS_SB3)/.installed: pyproject.toml
	$(call client_venv,$(CLIENTS_SB3),sb3)

clients-sb3: $(CLIENTS_SB3)/.installed
	$(CLIENTS_SB3)/bin/python -m pytest -q -p no:cacheprovider --confcutdir=tests/clients_sb3 \
		--durations=10 tests/clients_sb3
