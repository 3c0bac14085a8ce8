"""The suite's guard against the kernel's limit on memory mappings (see tests/conftest.py).

Every program XLA compiles for the CPU lives in memory pages mapped for it alone, so a test
process that keeps thousands of programs runs into `vm.max_map_count` and segfaults. The
conftest's `_bounded_mappings` fixture relies on one fact of JAX, checked here so that a JAX
upgrade that breaks it fails a test instead of crashing a worker: clearing JAX's caches
unmaps the compiled programs.
"""

from __future__ import annotations

import gc
import pathlib

import jax
import jax.numpy as jnp
import pytest
from conftest import _MAX_MAPPINGS, _bounded_mappings, _mappings

pytestmark = pytest.mark.skipif(
    not pathlib.Path("/proc/self/maps").exists(), reason="memory mappings are read from /proc"
)


def _compile_programs(count: int) -> list:
    # distinct shapes: each is a program of its own, kept alive by jit's cache
    f = jax.jit(lambda x: jnp.sin(x) * 2.0 + 1.0)
    return [f(jnp.zeros((n + 1,), jnp.float32)) for n in range(count)]


def test_compiled_programs_hold_mappings_until_the_caches_are_cleared():
    jax.clear_caches()
    gc.collect()
    before = _mappings()
    _compile_programs(60)
    grown = _mappings() - before
    assert grown >= 60, f"60 programs added only {grown} mappings"
    jax.clear_caches()
    gc.collect()
    assert _mappings() - before < grown / 3, "clearing JAX's caches kept the programs mapped"


def test_the_guard_clears_only_above_its_threshold(monkeypatch: pytest.MonkeyPatch):
    import conftest

    guard = _bounded_mappings.__wrapped__  # the fixture's generator function
    _compile_programs(10)
    held = _mappings()
    monkeypatch.setattr(conftest, "_MAX_MAPPINGS", held + 1_000)
    for _ in guard():
        pass
    assert _mappings() >= held - 50, "the guard cleared below its threshold"
    monkeypatch.setattr(conftest, "_MAX_MAPPINGS", 0)
    for _ in guard():
        pass
    assert _mappings() < held - 20, "the guard did not clear above its threshold"
    assert _MAX_MAPPINGS < 65_530 // 2  # far below Linux's default limit
