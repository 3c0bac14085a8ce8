"""Statistical quality of ``parallax.rng`` at CI size (a few seconds, fixed seeds).

Each test runs on fixed keys, so it is deterministic; thresholds are p-values
(p > 1e-4) or bounds stated in the test. The larger battery lives in
``benchmarks/rng_quality.py``.

- uniformity (chi-square, 256 bins, and Kolmogorov-Smirnov) of ``uniform``
  along consecutive indices, steps, slots and episode keys;
- the standard normal (KS against Phi, chi-square on Phi(z), moments);
- serial correlation between consecutive indices, steps and slots;
- avalanche: flipping any single bit of any input (both key words, step,
  slot, index) flips each of the 64 output bits with probability 0.5 +- 0.06
  (n = 2048 pairs per cell, about 5.4 sigma), and the 10240 cells together
  pass a chi-square test;
- per-bit balance of the 64 output bits, no 64-bit collisions;
- ``randint`` and ``bernoulli`` frequencies.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from parallax import rng
from parallax.rng import _hash

N = 1 << 16
P_MIN = 1e-4
EK = rng.episode_key(jax.random.key(20240601))


def _streams() -> dict[str, np.ndarray]:
    """Uniforms along one varying input, others fixed (or random keys)."""
    i = jnp.arange(N, dtype=jnp.uint32)
    keys = rng.episode_key(jax.random.split(jax.random.key(7), N))
    return {
        "index": np.asarray(rng.uniform(EK, 5, 3, i)),
        "step": np.asarray(rng.uniform(EK, i, 3, 0)),
        "slot": np.asarray(rng.uniform(EK, 5, i, 0)),
        "episode_key": np.asarray(rng.uniform(keys, 5, 3, 0)),
    }


STREAM_NAMES = ["index", "step", "slot", "episode_key"]


@pytest.fixture(scope="module")
def streams() -> dict[str, np.ndarray]:
    return _streams()


@pytest.mark.parametrize("name", STREAM_NAMES)
def test_uniform_chi_square_and_ks(streams, name):
    u = streams[name].astype(np.float64)
    counts = np.bincount((u * 256).astype(np.int64), minlength=256)
    assert stats.chisquare(counts).pvalue > P_MIN
    assert stats.kstest(u, "uniform").pvalue > P_MIN


@pytest.mark.parametrize("name", STREAM_NAMES)
def test_serial_correlation(streams, name):
    u = streams[name].astype(np.float64)
    for lag in (1, 2):
        assert stats.pearsonr(u[:-lag], u[lag:]).pvalue > P_MIN
    # pairs of consecutive draws fill the unit square evenly (16 x 16 cells)
    a = (u[0::2] * 16).astype(np.int64)
    b = (u[1::2] * 16).astype(np.int64)
    assert stats.chisquare(np.bincount(a * 16 + b, minlength=256)).pvalue > P_MIN


def test_slots_are_uncorrelated_at_the_same_step():
    t = jnp.arange(N, dtype=jnp.uint32)
    a = np.asarray(rng.uniform(EK, t, 0, 0)).astype(np.float64)
    b = np.asarray(rng.uniform(EK, t, 1, 0)).astype(np.float64)
    assert stats.pearsonr(a, b).pvalue > P_MIN


def test_normal_distribution():
    z = np.asarray(rng.normal(EK, 9, 2, jnp.arange(N, dtype=jnp.uint32))).astype(np.float64)
    assert stats.kstest(z, "norm").pvalue > P_MIN
    counts = np.bincount((stats.norm.cdf(z) * 128).astype(np.int64), minlength=128)
    assert stats.chisquare(counts).pvalue > P_MIN
    se = 1 / np.sqrt(N)
    assert abs(z.mean()) < 5 * se
    assert abs(z.var() - 1) < 5 * np.sqrt(2) * se
    assert abs(stats.skew(z)) < 5 * np.sqrt(6) * se
    assert abs(stats.kurtosis(z)) < 5 * np.sqrt(24) * se
    # consecutive steps are uncorrelated too
    zs = np.asarray(rng.normal(EK, jnp.arange(N, dtype=jnp.uint32), 2, 0)).astype(np.float64)
    assert stats.pearsonr(zs[:-1], zs[1:]).pvalue > P_MIN


_hash_words = jax.jit(_hash.hash_words)


def _flip_counts(base: np.ndarray) -> np.ndarray:
    """counts[input, bit, out_bit]: how often out_bit flips when input's bit flips."""
    n = base.shape[0]
    flips = np.zeros((161, 5), np.uint32)  # row 0: no flip; row 1 + 32 j + b: bit b of input j
    for j in range(5):
        flips[1 + 32 * j : 33 + 32 * j, j] = np.uint32(1) << np.arange(32, dtype=np.uint32)
    inputs = (base[None, :, :] ^ flips[:, None, :]).reshape(-1, 5)
    w0, w1 = (np.asarray(w).reshape(161, n) for w in _hash_words(*inputs.T))
    d = np.stack([w0[1:] ^ w0[:1], w1[1:] ^ w1[:1]], axis=-1)  # (160, n, 2)
    bits = (d[..., None] >> np.arange(32, dtype=np.uint32)) & 1  # (160, n, 2, 32)
    return bits.sum(axis=1).reshape(5, 32, 64)


def test_avalanche():
    n = 2048
    g = np.random.default_rng(11)
    base = np.stack(
        [
            g.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32),  # key word 0
            g.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32),  # key word 1
            g.integers(0, 1000, n).astype(np.uint32),  # realistic small steps
            g.integers(0, 16, n).astype(np.uint32),  # slots
            g.integers(0, 64, n).astype(np.uint32),  # indices
        ],
        axis=1,
    )
    counts = _flip_counts(base).astype(np.float64)
    frac = counts / n
    assert np.abs(frac - 0.5).max() < 0.06, np.abs(frac - 0.5).max()
    chi2 = (((counts - n / 2) ** 2) / (n / 4)).sum()
    assert stats.chi2.sf(chi2, counts.size) > P_MIN


def test_output_bits_balanced_and_no_collisions():
    w = np.asarray(rng.bits(EK, 1, 1, jnp.arange(N, dtype=jnp.uint32), words=2))
    bits = (w[:, :, None] >> np.arange(32, dtype=np.uint32)) & 1
    ones = bits.reshape(N, 64).sum(axis=0)
    assert np.abs(ones - N / 2).max() < 5 * np.sqrt(N / 4)
    full = w[:, 0].astype(np.uint64) << np.uint64(32) | w[:, 1]
    assert len(np.unique(full)) == N


@pytest.mark.parametrize("n", [7, 1000])
def test_randint_uniform(n):
    k = np.asarray(rng.randint(EK, 3, 4, jnp.arange(N, dtype=jnp.uint32), n))
    assert k.min() >= 0 and k.max() < n
    assert stats.chisquare(np.bincount(k, minlength=n)).pvalue > P_MIN


def test_bernoulli_frequency():
    hits = int(np.asarray(rng.bernoulli(EK, 3, 5, jnp.arange(N, dtype=jnp.uint32), 0.15)).sum())
    assert stats.binomtest(hits, N, 0.15).pvalue > P_MIN
