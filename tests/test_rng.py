"""Tests for ``parallax.rng``: agreement of the two flavours, API contract, slot tables.

- bit-identity of JAX and NumPy reference draws (hypothesis over keys, steps,
  slots and indices including 0 and 2**32 - 1; x64 on and off; eager, jit,
  vmap and scan), including the normal draw in both dtypes;
- the normal transform itself over branch boundaries and extremes, and its
  accuracy against ``scipy.special.ndtri``;
- episode keys (typed and legacy keys, batches, vmap), ``fold_in``;
- broadcasting, vector forms, order independence, argument validation;
- ``Slot`` / ``SlotTable``; the docstring examples of the package.
"""

from __future__ import annotations

import contextlib
import doctest
import importlib
import io
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import ndtri

from parallax import rng
from parallax.rng import _fit, _normal, _spec
from parallax.rng import reference as ref

U32_MAX = 2**32 - 1
EDGES = [0, 1, 2, 2**31 - 1, 2**31, 2**32 - 2, U32_MAX]
u32 = st.one_of(st.sampled_from(EDGES), st.integers(0, U32_MAX))
HYP = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _ek(a: int, b: int) -> np.ndarray:
    return np.array([a, b], np.uint32)


def _same(a, b) -> None:
    """Bit-identical: same dtype, shape and bits."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape, (a.shape, b.shape)
    if a.dtype.kind == "f":
        np.testing.assert_array_equal(
            a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}")
        )
    else:
        np.testing.assert_array_equal(a, b)


def _random_tuples(n: int, seed: int) -> tuple[np.ndarray, ...]:
    """n (key0, key1, step, slot, index) tuples, a quarter of them extremes."""
    g = np.random.default_rng(seed)
    cols = []
    for _ in range(5):
        c = g.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        mask = g.random(n) < 0.25
        c[mask] = g.choice(np.array(EDGES, np.uint32), mask.sum())
        cols.append(c)
    return tuple(cols)


# --------------------------------------------------------------- agreement


def _same_common_draws(args: tuple, n, p, x64: bool) -> None:
    """Both flavours agree at ``args``: 64-bit bits, uniform, uint32 randint, bernoulli,
    normal, and with x64 the float64 uniform and normal."""
    _same(rng.bits(*args, words=2), ref.bits(*args, words=2))
    _same(rng.uniform(*args), ref.uniform(*args))
    _same(rng.randint(*args, n, dtype=jnp.uint32), ref.randint(*args, n, dtype=np.uint32))
    _same(rng.bernoulli(*args, p), ref.bernoulli(*args, p))
    _same(rng.normal(*args), ref.normal(*args))
    if x64:
        _same(rng.uniform(*args, dtype=jnp.float64), ref.uniform(*args, dtype=np.float64))
        _same(rng.normal(*args, dtype=jnp.float64), ref.normal(*args, dtype=np.float64))


@HYP
@given(k0=u32, k1=u32, step=u32, slot=u32, index=u32, n=st.integers(1, U32_MAX), p=st.floats(0, 1))
def test_scalar_draws_bit_identical(x64, k0, k1, step, slot, index, n, p):
    ek = _ek(k0, k1)
    args = (ek, step, slot, index)
    _same_common_draws(args, n, p, x64)
    _same(rng.bits(*args), ref.bits(*args))
    _same(rng.randint(*args, min(n, 2**31 - 1)), ref.randint(*args, min(n, 2**31 - 1)))
    if x64:
        _same(rng.bernoulli(*args, p, dtype=jnp.float64), ref.bernoulli(*args, p, dtype=np.float64))


@jax.jit
def _jitted_draws(ek, step, slot, index):
    return rng.bits(ek, step, slot, index, words=2), rng.normal(ek, step, slot, index)


@HYP
@given(k0=u32, k1=u32, step=u32, slot=u32, index=u32)
def test_jit_and_array_arguments_agree(k0, k1, step, slot, index):
    ek = _ek(k0, k1)
    w, z = _jitted_draws(ek, np.uint32(step), np.uint32(slot), np.uint32(index))
    _same(w, ref.bits(ek, step, slot, index, words=2))
    _same(z, ref.normal(ek, step, slot, index))
    # int32 arrays wrap mod 2**32, like the reference does with NumPy arrays
    s32 = np.asarray(step, np.uint32).astype(np.int32)
    _same(rng.bits(ek, jnp.asarray(s32), slot, index), ref.bits(ek, s32, slot, index))
    _same(rng.bits(ek, jnp.asarray(s32), slot, index), ref.bits(ek, step, slot, index))


def test_batched_draws_bit_identical(x64):
    k0, k1, step, slot, index = _random_tuples(600, seed=1)
    ek = np.stack([k0, k1], -1)
    args = (ek, step, slot, index)
    n = np.random.default_rng(2).integers(1, 2**32, 600, dtype=np.uint64).astype(np.uint32)
    p = np.random.default_rng(3).random(600).astype(np.float32)
    _same_common_draws(args, n, p, x64)
    if x64:
        _same(rng.randint(*args, n, dtype=jnp.int64), ref.randint(*args, n, dtype=np.int64))


def test_both_flavours_export_the_same_names():
    # each module spells its `__all__` out (linters and type checkers read only a literal)
    assert ref.__all__ == rng.__all__


def test_vmap_scan_agree_with_reference():
    keys = jax.random.split(jax.random.key(7), 16)
    eks = jax.vmap(rng.episode_key)(keys)

    @jax.jit
    def roll(eks):
        def body(carry, t):
            z = jax.vmap(lambda ek: rng.normal_vector(ek, t, 4, 8))(eks)
            g = jax.vmap(lambda ek: rng.bernoulli(ek, t, 5, 0, 0.15))(eks)
            k = jax.vmap(lambda ek: rng.randint_vector(ek, t, 2, 3, 8))(eks)
            return carry, (z, g, k)

        return jax.lax.scan(body, 0, jnp.arange(6))[1]

    z, g, k = roll(eks)
    e = np.asarray(eks)
    _same(z, np.stack([ref.normal_vector(e, t, 4, 8) for t in range(6)]))
    _same(g, np.stack([ref.bernoulli(e, t, 5, 0, 0.15) for t in range(6)]))
    _same(k, np.stack([ref.randint_vector(e, t, 2, 3, 8) for t in range(6)]))


# -------------------------------------------------- the normal transform


def _boundary_words() -> np.ndarray:
    """Words around 0, 2**31, 2**32 and the AS241 central/tail boundary."""
    # central iff (2**32 - 2v - 1) / 2**33 <= 0.425
    v_split = (2**32 - 1 - int(0.425 * 2**33)) // 2
    around = [
        0,
        2**31,
        2**32 - 1,
        v_split,
        2**31 - 1 - v_split,
        2**31 + v_split,
        2**32 - 1 - v_split,
    ]
    ws = np.concatenate([np.arange(c - 300, c + 300, dtype=np.int64) for c in around])
    return (ws % 2**32).astype(np.uint32)


def test_normal_f32_transform_bit_identical_at_boundaries():
    g = np.random.default_rng(4)
    w = np.concatenate(
        [_boundary_words(), g.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32)]
    )
    z = np.asarray(jax.jit(_normal.normal_f32)(jnp.asarray(w)))
    expect = np.array([ref._normal_f32(int(x)) for x in w], np.float32)
    _same(z, expect)
    # antisymmetric: w and ~w give z and -z exactly
    _same(np.asarray(jax.jit(_normal.normal_f32)(jnp.asarray(~w))), -expect)


def test_normal_f64_transform_bit_identical_at_boundaries():
    g = np.random.default_rng(5)
    w = np.concatenate(
        [
            g.integers(0, 2**64, 2000, dtype=np.uint64),
            np.array([0, 1, 2**63 - 1, 2**63, 2**64 - 1], np.uint64),
            # around the far-tail split r = 5 (q = exp(-25)) and the central split
            np.uint64(int(np.exp(-25.0) * 2**64)) + np.arange(-200, 200).astype(np.uint64),
            np.uint64(int(0.075 * 2**64)) + np.arange(-200, 200).astype(np.uint64),
        ]
    )
    with jax.enable_x64(True):
        w0 = jnp.asarray((w >> np.uint64(32)).astype(np.uint32))
        w1 = jnp.asarray((w & np.uint64(U32_MAX)).astype(np.uint32))
        z = np.asarray(jax.jit(_normal.normal_f64)(w0, w1))
    expect = np.array([ref._normal_f64(int(x) >> 32, int(x) & U32_MAX) for x in w], np.float64)
    _same(z, expect)


def test_normal_accuracy_against_ndtri():
    g = np.random.default_rng(6)
    w = np.concatenate(
        [_boundary_words(), g.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)]
    )
    z = np.asarray(jax.jit(_normal.normal_f32)(jnp.asarray(w))).astype(np.float64)
    exact = ndtri((w.astype(np.float64) + 0.5) / 2**32)
    rel = np.abs(z - exact) / np.abs(exact)
    assert rel.max() < 6e-7  # AS241 PPND7 in float32: measured 4.3e-7
    assert np.abs(z).max() < 6.4
    with jax.enable_x64(True):
        w0 = g.integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32)
        w1 = g.integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32)
        z64 = np.asarray(jax.jit(_normal.normal_f64)(jnp.asarray(w0), jnp.asarray(w1)))
    big = w0.astype(np.uint64) * np.uint64(2**32) + w1
    exact64 = ndtri((big.astype(np.float64) + 0.5) / 2.0**64)
    keep = np.abs(exact64) > 1e-2  # the float64 reference u loses digits at u ~ 1/2
    assert (np.abs(z64 - exact64) / np.abs(exact64))[keep].max() < 1e-13


def test_log_coefficients_are_our_fit_and_meet_their_bound():
    num, den, _ = _fit.fit_log_rational(3, 2)
    np.testing.assert_allclose(num, _spec.LOG_NUM32, rtol=1e-6)
    np.testing.assert_allclose(den, _spec.LOG_DEN32, rtol=1e-6)
    a = np.linspace(np.sqrt(0.5) - 1, np.sqrt(2) - 1, 100_001)
    approx = a * np.polyval(_spec.LOG_NUM32, a) / np.polyval(_spec.LOG_DEN32, a)
    assert np.abs(approx - np.log1p(a)).max() < 3e-8


# --------------------------------------------------------- episode keys


def test_episode_key_typed_legacy_batch_vmap():
    ek = rng.episode_key(jax.random.key(0))
    assert ek.shape == (2,) and ek.dtype == jnp.uint32
    _same(ek, rng.episode_key(jax.random.PRNGKey(0)))
    _same(ek, ref.episode_key(jax.random.key(0)))
    _same(ek, ref.episode_key(np.array([0, 0], np.uint32)))
    keys = jax.random.split(jax.random.key(3), 10)
    batch = rng.episode_key(keys)
    assert batch.shape == (10, 2)
    _same(jax.vmap(rng.episode_key)(keys), batch)
    _same(jax.jit(jax.vmap(rng.episode_key))(keys), batch)
    _same(ref.episode_key(keys), batch)
    assert len({tuple(r) for r in np.asarray(batch).tolist()}) == 10
    rbg = jax.random.key(1, impl="rbg")
    _same(rng.episode_key(rbg), ref.episode_key(rbg))
    assert rng.episode_key(rbg).shape == (2,)


def test_episode_key_rejects_non_keys():
    for bad in (0, 1.5, "seed"):
        with pytest.raises(TypeError, match="key"):
            rng.episode_key(bad)
        with pytest.raises(TypeError, match="key"):
            ref.episode_key(bad)
    with pytest.raises(TypeError, match="key"):
        rng.episode_key(jnp.zeros(2, jnp.int32))


def test_fold_in():
    ek = rng.episode_key(jax.random.key(5))
    child = rng.fold_in(ek, 1)
    assert child.shape == (2,) and child.dtype == jnp.uint32
    _same(child, ref.fold_in(ek, 1))
    assert not np.array_equal(child, ek)
    assert not np.array_equal(child, rng.fold_in(ek, 2))
    many = rng.fold_in(ek, jnp.arange(100, dtype=jnp.uint32))
    _same(many, ref.fold_in(np.asarray(ek), np.arange(100)))
    assert len({tuple(r) for r in np.asarray(many).tolist()}) == 100
    eks = rng.episode_key(jax.random.split(jax.random.key(1), 3))
    _same(jax.vmap(lambda e: rng.fold_in(e, U32_MAX))(eks), ref.fold_in(eks, U32_MAX))


# ------------------------------------------------------ shapes, contract


def test_broadcasting_and_shapes():
    eks = rng.episode_key(jax.random.split(jax.random.key(0), 4))  # (4, 2)
    assert rng.bits(eks, 0, 1, 0).shape == (4,)
    assert rng.bits(eks, jnp.arange(4), 1, 0).shape == (4,)
    assert rng.bits(eks[0], 0, 1, jnp.zeros((3, 5), jnp.int32)).shape == (3, 5)
    assert rng.bits(eks[:, None, :], 0, 1, jnp.arange(6)).shape == (4, 6)
    assert rng.bits(eks, 0, 1, 0, words=2).shape == (4, 2)
    assert rng.uniform_vector(eks, 0, 1, 6).shape == (4, 6)
    assert rng.uniform_vector(eks, jnp.arange(4), 1, 0).shape == (4, 0)
    assert rng.randint(eks, 0, 1, 0, jnp.arange(1, 5)).shape == (4,)
    with pytest.raises(ValueError, match="broadcast"):
        rng.uniform(eks, 0, 1, jnp.arange(3))
    with pytest.raises(ValueError, match="broadcast"):
        ref.uniform(np.asarray(eks), 0, 1, np.arange(3))


def test_vector_forms_equal_index_ranges():
    ek = rng.episode_key(jax.random.key(9))
    idx = jnp.arange(5, 13, dtype=jnp.uint32)
    _same(rng.normal_vector(ek, 3, 2, 8, start=5), rng.normal(ek, 3, 2, idx))
    _same(rng.bernoulli_vector(ek, 3, 2, 8, 0.3, start=5), rng.bernoulli(ek, 3, 2, idx, 0.3))
    _same(ref.normal_vector(ek, 3, 2, 8, start=5), ref.normal(ek, 3, 2, np.asarray(idx)))
    _same(
        rng.uniform_vector(ek, 0, 0, 3, start=U32_MAX - 2),
        ref.uniform_vector(ek, 0, 0, 3, start=U32_MAX - 2),
    )


def test_draws_do_not_depend_on_order_or_on_other_draws():
    ek = rng.episode_key(jax.random.key(11))
    idx = np.arange(64)
    full = np.asarray(rng.normal(ek, 4, 3, idx))
    perm = np.random.default_rng(0).permutation(64)
    _same(rng.normal(ek, 4, 3, perm), full[perm])
    _same(rng.normal(ek, 4, 3, 17), full[17])
    # drawing (and discarding) other slots or steps first changes nothing
    rng.normal(ek, 5, 3, idx)
    rng.uniform(ek, 4, 2, idx)
    _same(rng.normal(ek, 4, 3, idx), full)
    # different step, slot, index or key give different draws
    assert not np.array_equal(rng.bits(ek, 4, 3, idx), rng.bits(ek, 5, 3, idx))
    assert not np.array_equal(rng.bits(ek, 4, 3, idx), rng.bits(ek, 4, 4, idx))
    assert len(set(np.asarray(rng.bits(ek, 4, 3, idx)).tolist())) == 64


def test_value_ranges(x64):
    ek = rng.episode_key(jax.random.key(2))
    idx = jnp.arange(4096)
    u = np.asarray(rng.uniform(ek, 0, 0, idx))
    assert u.dtype == np.float32 and u.min() >= 0 and u.max() < 1
    n = jnp.asarray([1, 2, 3, 7, 1000, U32_MAX] * 8, jnp.uint32)
    k = np.asarray(rng.randint(ek, 0, 1, jnp.arange(48), n, dtype=jnp.uint32))
    assert (k < np.asarray(n)).all() and (k[np.asarray(n) == 1] == 0).all()
    assert not np.asarray(rng.bernoulli(ek, 0, 2, idx, 0.0)).any()
    assert np.asarray(rng.bernoulli(ek, 0, 2, idx, 1.0)).all()
    if x64:
        u64 = np.asarray(rng.uniform(ek, 0, 0, idx, dtype=jnp.float64))
        assert u64.dtype == np.float64 and u64.min() >= 0 and u64.max() < 1
        assert np.abs(u64 - u).max() < 2**-24  # float32 is the top 24 bits


# ------------------------------------------------------------ validation


@pytest.mark.parametrize("mod", [rng, ref], ids=["jax", "reference"])
def test_argument_errors(mod):
    ek = np.zeros(2, np.uint32)
    with pytest.raises(ValueError, match=r"step must be in \[0, 2\*\*32 - 1\], got -1"):
        mod.uniform(ek, -1, 0, 0)
    with pytest.raises(ValueError, match="index must be in"):
        mod.uniform(ek, 0, 0, 2**32)
    with pytest.raises(TypeError, match="slot must be an integer"):
        mod.uniform(ek, 0, 1.5, 0)
    with pytest.raises(TypeError, match="slot must be an integer"):
        mod.uniform(ek, 0, True, 0)
    with pytest.raises(TypeError, match="index must have an integer dtype"):
        mod.uniform(ek, 0, 0, np.zeros(3, np.float32))
    with pytest.raises(ValueError, match=r"n must be in \[1, 2147483647\] for dtype int32, got 0"):
        mod.randint(ek, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="n must be in"):
        mod.randint(ek, 0, 0, 0, 2**31)
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\], got 1.5"):
        mod.bernoulli(ek, 0, 0, 0, 1.5)
    with pytest.raises(TypeError, match="p must be"):
        mod.bernoulli(ek, 0, 0, 0, np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="dtype must be"):
        mod.normal(ek, 0, 0, 0, dtype=np.float16)
    with pytest.raises(ValueError, match="dtype must be int32"):
        mod.randint(ek, 0, 0, 0, 3, dtype=np.int8)
    with pytest.raises(TypeError, match="episode_key must be a uint32"):
        mod.uniform(np.zeros(2, np.int32), 0, 0, 0)
    with pytest.raises(ValueError, match=r"episode_key must have shape \(\.\.\., 2\)"):
        mod.uniform(np.zeros(3, np.uint32), 0, 0, 0)
    with pytest.raises(ValueError, match="words must be 1 or 2"):
        mod.bits(ek, 0, 0, 0, words=3)
    with pytest.raises(ValueError, match="num must be in"):
        mod.normal_vector(ek, 0, 0, -1)
    with pytest.raises(ValueError, match="start \\+ num - 1"):
        mod.normal_vector(ek, 0, 0, 2, start=U32_MAX)


def test_float64_needs_x64():
    ek = np.zeros(2, np.uint32)
    with jax.enable_x64(False):
        with pytest.raises(ValueError, match="jax_enable_x64"):
            rng.normal(ek, 0, 0, 0, dtype=jnp.float64)
        with pytest.raises(ValueError, match="jax_enable_x64"):
            rng.randint(ek, 0, 0, 0, 3, dtype=jnp.int64)
    assert ref.normal(ek, 0, 0, 0, dtype=np.float64).dtype == np.float64


# ----------------------------------------------------------- slot tables


FORAGER = rng.SlotTable(
    rng.Slot(0, "AGENT_X", "reset (step 0)", "0", "randint(G)"),
    rng.Slot(1, "AGENT_Y", "reset (step 0)", "0", "randint(G)"),
    rng.Slot(2, "BERRY_X", "reset (step 0)", "k", "randint(G)"),
    rng.Slot(3, "BERRY_Y", "reset (step 0)", "k", "randint(G)"),
    rng.Slot(4, "BERRY_KIND", "reset (step 0)", "k", "randint(N_KINDS)"),
    rng.Slot(5, "GUST", "every step t", "0", "bernoulli(GUST_P)"),
)


def test_slot_table_lookup_and_markdown():
    assert FORAGER.GUST == 5 and FORAGER.BERRY_KIND == 4
    assert FORAGER["BERRY_X"].index_meaning == "k"
    assert FORAGER.by_number(3).name == "BERRY_Y"
    assert "GUST" in FORAGER and "WIND" not in FORAGER
    assert len(FORAGER) == 6 and [s.number for s in FORAGER] == list(range(6))
    assert FORAGER.names[0] == "AGENT_X" and FORAGER.numbers[-1] == 5
    assert ref.SlotTable is rng.SlotTable
    assert FORAGER.to_markdown() == (
        "| slot | name       | used at        | index | distribution      |\n"
        "|------|------------|----------------|-------|-------------------|\n"
        "| 0    | AGENT_X    | reset (step 0) | 0     | randint(G)        |\n"
        "| 1    | AGENT_Y    | reset (step 0) | 0     | randint(G)        |\n"
        "| 2    | BERRY_X    | reset (step 0) | k     | randint(G)        |\n"
        "| 3    | BERRY_Y    | reset (step 0) | k     | randint(G)        |\n"
        "| 4    | BERRY_KIND | reset (step 0) | k     | randint(N_KINDS)  |\n"
        "| 5    | GUST       | every step t   | 0     | bernoulli(GUST_P) |"
    )
    with pytest.raises(AttributeError, match="no slot named 'WIND'"):
        FORAGER.WIND
    with pytest.raises(KeyError, match="no slot numbered 9"):
        FORAGER.by_number(9)


def test_slot_table_validation():
    a = rng.Slot(0, "A", "reset", "0", "uniform")
    with pytest.raises(ValueError, match="duplicate slot number 0"):
        rng.SlotTable(a, rng.Slot(0, "B", "reset", "0", "uniform"))
    with pytest.raises(ValueError, match="duplicate slot name 'A'"):
        rng.SlotTable(a, rng.Slot(1, "A", "reset", "0", "uniform"))
    with pytest.raises(ValueError, match="reserved"):
        rng.SlotTable(rng.Slot(1, "to_markdown", "reset", "0", "uniform"))
    with pytest.raises(TypeError, match="rows must be Slot"):
        rng.SlotTable(a, (1, "B"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Slot.number must be in \[0, 2\*\*32 - 1\], got -1"):
        rng.Slot(-1, "A", "reset", "0", "uniform")
    with pytest.raises(ValueError, match="identifier"):
        rng.Slot(1, "two words", "reset", "0", "uniform")
    with pytest.raises(ValueError, match="must not contain"):
        rng.Slot(1, "A", "reset | step", "0", "uniform")
    with pytest.raises(TypeError):
        rng.Slot(True, "A", "reset", "0", "uniform")


# -------------------------------------------------------------- doctests


@pytest.mark.parametrize(
    "name",
    [
        "parallax.rng",
        "parallax.rng._draws",
        "parallax.rng._fit",
        "parallax.rng._hash",
        "parallax.rng._slots",
        "parallax.rng._spec",
        "parallax.rng.reference",
    ],
)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "rng.md"


def test_docs_page_examples_run():
    text = DOC.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 5
    for block in blocks:
        for module in re.findall(r"^(?:from|import) (\S+)", block, re.M):
            assert module in ("jax", "jax.numpy", "numpy", "parallax", "parallax.rng"), module
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, str(DOC), "exec"), {})
        if out.getvalue():
            assert out.getvalue() in text  # printed output is shown verbatim on the page
