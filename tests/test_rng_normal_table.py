"""Tests for the prototype table-based float32 normal (``benchmarks/normal_table.py``).

It is not the library's draw and not in the package (see ``docs/performance.md``), but it
is kept next to the measurement in ``benchmarks/rng_normal_cost.py``, so it must stay what that
measurement claims:

- bit-identical to its NumPy twin (``reference_normal_f32_table``) at every octave
  and part boundary of its table, at the extremes and on random words, with x64 off
  and on, and exactly antisymmetric;
- at least as accurate as the library's AS241 draw against ``scipy.special.ndtri``;
- its table is the fit that ``fit_normal_table`` describes;
- ``benchmarks/rng_normal_cost.py`` counts its work as claimed (load-independent), and
  swapping the library's draw for it while tracing leaves the library as it was;
- a standard normal by the Kolmogorov-Smirnov test and its moments;
- the docstring examples of ``benchmarks/normal_table.py`` run.
"""

from __future__ import annotations

import doctest
import importlib
import sys
from pathlib import Path
from types import ModuleType

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.special import ndtri
from test_benchmarks import load

from parallax import rng
from parallax.rng import _normal
from parallax.rng import reference as ref

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
U32_MAX = 2**32 - 1


def _import_benchmark_module(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as ``python benchmarks/<script>.py`` imports it."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


# the same module object that benchmarks/rng_normal_cost.py imports
normal_table = _import_benchmark_module("normal_table")


def _boundary_words() -> np.ndarray:
    """Words around 0, 2**31, 2**32 - 1 and every octave and part boundary of the table."""
    parts = 1 << normal_table.SEG_BITS
    # the tail area is n / 2**33, n = 2 v + 1; part j of octave e starts at 2**(31 - e) (1 + j / 16)
    starts = {
        (1 << (31 - e)) + j * (1 << (31 - e)) // parts for e in range(32) for j in range(parts)
    }
    v = np.array(sorted((n - 1) // 2 for n in starts), np.int64)
    v = np.unique(np.clip((v[:, None] + np.arange(-3, 4)).ravel(), 0, 2**31 - 1))
    ws = np.concatenate([v, U32_MAX - v, np.arange(2**31 - 40, 2**31 + 40), [0, U32_MAX]])
    return ws.astype(np.uint32)


@pytest.fixture(scope="module")
def words() -> np.ndarray:
    g = np.random.default_rng(8)
    return np.concatenate(
        [_boundary_words(), g.integers(0, 2**32, 2000, dtype=np.uint64).astype(np.uint32)]
    )


@pytest.fixture(scope="module")
def reference_values(words) -> np.ndarray:
    return np.array([normal_table.reference_normal_f32_table(int(w)) for w in words], np.float32)


def _bits(a) -> np.ndarray:
    return np.asarray(a).view(np.uint32)


@pytest.mark.parametrize("x64", [False, True])
def test_table_draw_bit_identical_to_its_numpy_twin(words, reference_values, x64):
    with jax.enable_x64(x64):
        z = np.asarray(jax.jit(normal_table.normal_f32_table)(jnp.asarray(words)))
        minus = np.asarray(jax.jit(normal_table.normal_f32_table)(jnp.asarray(~words)))
    assert z.dtype == np.float32
    np.testing.assert_array_equal(_bits(z), _bits(reference_values))
    np.testing.assert_array_equal(_bits(minus), _bits(-reference_values))  # antisymmetric


def test_table_draw_eager_equals_jit(words):
    w = jnp.asarray(words[:200])
    np.testing.assert_array_equal(
        _bits(normal_table.normal_f32_table(w)), _bits(jax.jit(normal_table.normal_f32_table)(w))
    )


def test_table_draw_at_least_as_accurate_as_as241():
    g = np.random.default_rng(9)
    w = np.concatenate(
        [_boundary_words(), g.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)]
    )
    exact = ndtri((w.astype(np.float64) + 0.5) / 2**32)
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    errors = {}
    for name, fn in (("table", normal_table.normal_f32_table), ("as241", _normal.normal_f32)):
        z = np.asarray(jax.jit(fn)(jnp.asarray(w))).astype(np.float64)
        errors[name] = np.abs(z - exact)
    rel = errors["table"] / np.abs(exact)
    assert rel.max() < 2.5e-7  # measured 1.8e-7 over 4M words
    assert (errors["table"] / ulp).max() < 3.5  # measured 2.6
    assert (errors["table"] / ulp).max() < (errors["as241"] / ulp).max()
    assert errors["table"].mean() < errors["as241"].mean()


def test_table_draw_is_standard_normal():
    n = 1 << 16
    w = np.random.default_rng(10).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    z = np.asarray(jax.jit(normal_table.normal_f32_table)(jnp.asarray(w))).astype(np.float64)
    assert stats.kstest(z, "norm").pvalue > 1e-4
    se = 1 / np.sqrt(n)
    assert abs(z.mean()) < 5 * se
    assert abs(z.var() - 1) < 5 * np.sqrt(2) * se


def test_table_is_our_fit():
    table = normal_table.TABLE32
    assert table.shape == (32 << normal_table.SEG_BITS, normal_table.DEGREE + 1)
    assert table.dtype == np.float32 and not table.flags.writeable
    # the leading coefficients have at most 12 significant bits (exact products with t)
    assert (table[:, 0].view(np.uint32) & np.uint32(0xFFF)).max() == 0
    # a refit agrees closely (the shipped table is the specification: a refit on another
    # machine may differ in the last bits)
    refit = normal_table.fit_normal_table(normal_table.SEG_BITS, normal_table.DEGREE)
    np.testing.assert_allclose(refit[:, -1], table[:, -1], rtol=1e-6)
    np.testing.assert_allclose(refit, table, rtol=1e-3, atol=1e-9)
    # the fitted function H(q) = (1/2 - q) / Phi^-1(1 - q), against scipy
    q = np.array([1e-9, 1e-4, 0.01, 0.2, 0.4999])
    np.testing.assert_allclose(normal_table.h_of_tail_area(q), (0.5 - q) / -ndtri(q), rtol=1e-15)


def test_benchmark_counts_the_work_and_restores_the_library_draw():
    bench = load("rng_normal_cost")
    costs = bench.measure_costs(4096)
    table, as241 = costs["float32 table transform"], costs["float32 as241 transform"]
    assert table["flops"] < 0.4 * as241["flops"]  # measured 60 against 172
    assert table["transcendentals"] == 0 and as241["transcendentals"] == 1
    t = bench.timing_shape(4, 3, repeats=1, steps=2)
    assert set(t["fusions"]) == {"as241", "table"} and t["median_ratio_as241_over_table"] > 0
    assert _normal.normal_f32 is bench.SIDES["as241"]  # the swap was undone
    ek = np.array([1, 2], np.uint32)
    np.testing.assert_array_equal(
        _bits(rng.normal_vector(ek, 0, 0, 4)), _bits(ref.normal_vector(ek, 0, 0, 4))
    )


def test_docstring_examples():
    result = doctest.testmod(normal_table)
    # one example each: the JAX draw, its NumPy twin, quantile64, h_of_tail_area, the fit
    assert result.attempted >= 5 and result.failed == 0


def test_the_prototype_is_not_in_the_package():
    folder = Path(rng.__file__).parent
    for gone in ("_normal_fast", "_reference_fast", "_normal_table", "_normal_fit"):
        assert not (folder / f"{gone}.py").exists(), gone
    assert Path(normal_table.__file__).resolve() == BENCHMARKS / "normal_table.py"
