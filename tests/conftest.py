"""Strict test configuration shared by the whole suite.

- jaxtyping annotations of `parallax` are checked at run time (beartype), via the import hook
  installed before `parallax` is first imported. `parallax._core` (the `State`, `MARLState`
  and `Agents` pytree dataclasses) is left out on purpose: JAX rebuilds pytrees with
  non-array leaves (`jax.eval_shape`, `jax.tree.map(lambda x: x.shape, state)`, `vmap`
  axis specs), which a checked `__init__` would refuse although the code is right;
- strict dtype promotion and `rank_promotion="raise"` for every test, except tests marked
  `standard_promotion` (verbatim documentation examples written for JAX's defaults);
- warnings are errors (pyproject's `filterwarnings`, with narrow third-party exceptions);
- the `x64` fixture runs a test with `jax_enable_x64` on and off;
- the persistent compilation cache stores every program (see below);
- compiled programs are dropped when a process holds too many memory mappings (see below);
- temporary files go into pytest's own temporary folder, not the system's (see below);
- Hypothesis draws the same examples on every run (see below).
"""

from __future__ import annotations

import gc
import os
import tempfile

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import pathlib

from jaxtyping import install_import_hook

_PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "parallax"
_CHECKED = sorted(
    f"parallax.{path.stem}"
    for path in _PACKAGE.iterdir()
    if path.name not in ("__init__.py", "_core.py", "__pycache__")
    and (path.suffix == ".py" or (path / "__init__.py").exists())
)

with install_import_hook(_CHECKED, "beartype.beartype"):
    import parallax  # noqa: F401

import jax
import pytest
from hypothesis import settings

jax.config.update("jax_platforms", "cpu")

# Hypothesis's examples are derived from each test's name, not drawn afresh, so `make test`
# passes or fails the same way on every run and machine. A search with fresh randomness:
# `HYPOTHESIS_PROFILE=explore make test`; what it finds becomes an `@example` of the test.
settings.register_profile("reproducible", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "reproducible"))

# The persistent compilation cache keeps every compiled program, not only those that took
# JAX's default 1 s to compile: most of the suite's programs are small, and a re-run (or
# another test compiling the same program) then loads them from disk. `make test` sets
# $JAX_COMPILATION_CACHE_DIR; a bare `pytest` uses the same folder. JAX's own environment
# variables still win (e.g. JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=1 for JAX's default).
if not jax.config.jax_compilation_cache_dir:
    jax.config.update("jax_compilation_cache_dir", str(_PACKAGE.parent / ".jax_cache"))
if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
if "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES" not in os.environ:
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


@pytest.fixture(autouse=True)
def _strict_jax(request: pytest.FixtureRequest):
    if request.node.get_closest_marker("standard_promotion"):
        yield
        return
    with jax.numpy_dtype_promotion("strict"), jax.numpy_rank_promotion("raise"):
        yield


# XLA's CPU backend maps the code of every compiled program into pages of its own, and keeps
# them while JAX's caches hold the program. A test process that compiled a few thousand
# programs (half of the suite) reached Linux's `vm.max_map_count` (65530 mappings) and died
# with a segfault and no Python traceback. After a test that leaves the process above
# `_MAX_MAPPINGS`, JAX's in-memory caches are cleared, which unmaps those programs; a later
# use recompiles or loads from the persistent cache.
_MAPS = pathlib.Path("/proc/self/maps")
# tests/clients runs in a virtual environment of its own (`make clients`: rejax needs gymnax
# 0.0.x, this suite gymnax 1.0), so this suite does not collect it; nor tests/clients_brax
# (`make clients-brax`, JAX 0.9.2) and tests/clients_sb3 (`make clients-sb3`, PyTorch)
collect_ignore = ["clients", "clients_brax", "clients_sb3"]

_MAX_MAPPINGS = 20_000


def _mappings() -> int:
    return _MAPS.read_bytes().count(b"\n") if _MAPS.exists() else 0


@pytest.fixture(autouse=True)
def _bounded_mappings():
    yield
    if _mappings() > _MAX_MAPPINGS:
        jax.clear_caches()
        gc.collect()


# The library writes some files to the system's temporary folder when the caller gives no
# path (`check_matches_reference`'s mismatch dump). The tests that make a check fail on
# purpose would leave one in /tmp per run; here they go into pytest's temporary folder,
# which pytest prunes (it keeps the last three runs). $TMPDIR carries the folder to the
# subprocesses tests start (CLI runs, notebook kernels).
@pytest.fixture(scope="session", autouse=True)
def _temporary_files_in_pytest_basetemp(tmp_path_factory: pytest.TempPathFactory):
    folder = str(tmp_path_factory.mktemp("tempfile"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", folder)
        patch.setenv("TMPDIR", folder)
        yield folder


@pytest.fixture(params=[False, True], ids=["f32", "x64"])
def x64(request: pytest.FixtureRequest):
    """Run the test with `jax_enable_x64` off and on; yields the flag."""
    with jax.enable_x64(request.param):
        yield request.param


def pytest_configure(config: pytest.Config) -> None:
    # Two xdist workers can write and read the same cache entry at once (JAX writes the file
    # in place). A torn read is a cache miss: JAX warns and compiles, which is not a failure.
    for verb in ("reading", "writing"):
        config.addinivalue_line(
            "filterwarnings",
            f"ignore:Error {verb} persistent compilation cache entry:UserWarning",
        )
