"""A larger statistical battery for ``parallax.rng`` (the CI-size one is tests/test_rng_quality.py).

Draws come from the JAX flavour on CPU; statistics use SciPy. Every test prints its
statistic and p-value; a result is ``ok`` for p >= 1e-3, ``weak`` for 1e-6 <= p < 1e-3 (expect
about one in a thousand by chance) and ``FAIL`` below 1e-6 or outside a stated bound.

Streams (one input varies, the rest fixed): ``index`` (consecutive indices), ``step``
(consecutive steps), ``slot`` (consecutive slots), ``episode`` (episode keys of consecutive
seeds ``episode_key(jax.random.key(s))``), ``grid`` (a step x index grid, row-major).

Per stream: chi-square of 4096 equal bins; Kolmogorov-Smirnov; chi-square of consecutive
pairs (64 x 64 cells) and triples (16^3 cells); lag-1..8 autocorrelation (smallest p,
Bonferroni); balance of each of the 64 output bits (smallest p, Bonferroni); 64-bit
collisions. Then the normal (KS, chi-square of Phi(z), moments, tail frequencies),
``randint`` and ``bernoulli`` frequencies, and avalanche: for every single-bit flip of every
input word (key 0, key 1, step, slot, index) the flip rate of each of the 64 output bits.

    python benchmarks/rng_quality.py [--log2n 22] [--avalanche-log2n 14] [--seed 0]
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from parallax import rng
from parallax.rng import _hash

ROWS: list[tuple[str, str, int, str, float, str]] = []


def record(test: str, stream: str, n: int, stat: str, p: float, ok: bool | None = None) -> None:
    """Add a result row; ``ok`` overrides the p-value verdict (for bounds)."""
    if ok is None:
        verdict = "ok" if p >= 1e-3 else ("weak" if p >= 1e-6 else "FAIL")
    else:
        verdict = "ok" if ok else "FAIL"
    ROWS.append((test, stream, n, stat, p, verdict))


def words_for(stream: str, n: int, seed: int) -> np.ndarray:
    """(n, 2) uint32 hash words of a stream."""
    ek = rng.episode_key(jax.random.key(seed))
    i = jnp.arange(n, dtype=jnp.uint32)
    if stream == "index":
        w = rng.bits(ek, 17, 3, i, words=2)
    elif stream == "step":
        w = rng.bits(ek, i, 3, 0, words=2)
    elif stream == "slot":
        w = rng.bits(ek, 17, i, 0, words=2)
    elif stream == "episode":
        seeds = jnp.arange(seed, seed + n, dtype=jnp.uint32)
        eks = jax.jit(jax.vmap(lambda s: rng.episode_key(jax.random.key(s))))(seeds)
        w = rng.bits(eks, 17, 3, 0, words=2)
    elif stream == "grid":
        side = 1 << (int(np.log2(n)) // 2)
        t = jnp.arange(n // side, dtype=jnp.uint32).reshape(-1, 1)
        j = jnp.arange(side, dtype=jnp.uint32).reshape(1, -1)
        w = rng.bits(ek, t, 3, j, words=2).reshape(-1, 2)
    else:
        raise ValueError(stream)
    return np.asarray(w)


def uniform_tests(stream: str, w: np.ndarray) -> None:
    n = len(w)
    u = (w[:, 0] >> 8).astype(np.float64) * 2.0**-24  # exactly rng.uniform
    counts = np.bincount(w[:, 0] >> 20, minlength=4096)
    r = stats.chisquare(counts)
    record("chi2 4096 bins", stream, n, f"{r.statistic:.0f}", r.pvalue)
    r = stats.kstest(u, "uniform")
    record("Kolmogorov-Smirnov", stream, n, f"D={r.statistic:.2e}", r.pvalue)
    m = n // 2 * 2
    pairs = (w[:m:2, 0] >> 26).astype(np.int64) * 64 + (w[1:m:2, 0] >> 26)
    r = stats.chisquare(np.bincount(pairs, minlength=4096))
    record("pairs 64x64", stream, m // 2, f"{r.statistic:.0f}", r.pvalue)
    m = n // 3 * 3
    tri = ((w[:m:3, 0] >> 28).astype(np.int64) * 16 + (w[1:m:3, 0] >> 28)) * 16 + (
        w[2:m:3, 0] >> 28
    )
    r = stats.chisquare(np.bincount(tri, minlength=4096))
    record("triples 16^3", stream, m // 3, f"{r.statistic:.0f}", r.pvalue)
    x = u - u.mean()
    best_p, best_r = 1.0, 0.0
    for lag in range(1, 9):
        rr = float(np.dot(x[:-lag], x[lag:]) / np.dot(x, x))
        p = float(2 * stats.norm.sf(abs(rr) * np.sqrt(n - lag)))
        if p < best_p:
            best_p, best_r = p, rr
    record("autocorrelation lags 1-8", stream, n, f"max|r|={abs(best_r):.1e}", min(1.0, 8 * best_p))
    ones = np.array(
        [((w[:, k] >> np.uint32(b)) & 1).sum(dtype=np.int64) for k in (0, 1) for b in range(32)]
    )
    z = (ones - n / 2) / np.sqrt(n / 4)
    p = float(2 * stats.norm.sf(np.abs(z).max()))
    record("64 output bits balanced", stream, n, f"max|z|={np.abs(z).max():.2f}", min(1.0, 64 * p))
    full = (w[:, 0].astype(np.uint64) << np.uint64(32)) | w[:, 1]
    dup = n - len(np.unique(full))
    lam = n * (n - 1) / 2 / 2.0**64
    record(
        "64-bit collisions",
        stream,
        n,
        f"{dup} (expect {lam:.1e})",
        float(stats.poisson.sf(dup - 1, lam)),
    )


def normal_tests(n: int, seed: int) -> None:
    ek = rng.episode_key(jax.random.key(seed + 1))
    z = np.asarray(rng.normal(ek, 5, 2, jnp.arange(n, dtype=jnp.uint32))).astype(np.float64)
    r = stats.kstest(z, "norm")
    record("normal: Kolmogorov-Smirnov", "index", n, f"D={r.statistic:.2e}", r.pvalue)
    counts = np.bincount((stats.norm.cdf(z) * 1024).astype(np.int64), minlength=1024)
    r = stats.chisquare(counts)
    record("normal: chi2 of Phi(z), 1024 bins", "index", n, f"{r.statistic:.0f}", r.pvalue)
    se = 1 / np.sqrt(n)
    for name, value, sd in [
        ("mean", z.mean(), se),
        ("variance - 1", z.var() - 1, np.sqrt(2) * se),
        ("skewness", stats.skew(z), np.sqrt(6) * se),
        ("excess kurtosis", stats.kurtosis(z), np.sqrt(24) * se),
    ]:
        record(
            f"normal: {name}",
            "index",
            n,
            f"{value:+.2e}",
            float(2 * stats.norm.sf(abs(value) / sd)),
        )
    for k in (3.0, 4.0, 5.0):
        hits = int((np.abs(z) > k).sum())
        p0 = float(2 * stats.norm.sf(k))
        record(
            f"normal: P(|z| > {k:g})",
            "index",
            n,
            f"{hits} (expect {n * p0:.0f})",
            stats.binomtest(hits, n, p0).pvalue,
        )


def discrete_tests(n: int, seed: int) -> None:
    ek = rng.episode_key(jax.random.key(seed + 2))
    i = jnp.arange(n, dtype=jnp.uint32)
    for m in (3, 7, 1000):
        k = np.asarray(rng.randint(ek, 1, 4, i, m))
        r = stats.chisquare(np.bincount(k, minlength=m))
        record(f"randint({m})", "index", n, f"{r.statistic:.0f}", r.pvalue)
    k = np.asarray(rng.randint(ek, 2, 4, i, 2**31 - 1))
    r = stats.chisquare(np.bincount(k >> 21, minlength=1024))
    record("randint(2**31 - 1), top 10 bits", "index", n, f"{r.statistic:.0f}", r.pvalue)
    for p in (0.5, 0.15, 1e-3):
        hits = int(np.asarray(rng.bernoulli(ek, 3, 5, i, p)).sum())
        record(
            f"bernoulli({p:g})", "index", n, f"{hits / n:.5f}", stats.binomtest(hits, n, p).pvalue
        )


def avalanche(n: int, seed: int) -> None:
    g = np.random.default_rng(seed)
    base = np.stack(
        [
            g.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32),
            g.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32),
            g.integers(0, 1 << 16, n).astype(np.uint32),
            g.integers(0, 64, n).astype(np.uint32),
            g.integers(0, 1024, n).astype(np.uint32),
        ],
        axis=1,
    )
    hash_words = jax.jit(_hash.hash_words)
    w0, w1 = (np.asarray(x) for x in hash_words(*base.T))
    names = ["key word 0", "key word 1", "step", "slot", "index"]
    worst_all, chi2_all = 0.0, 0.0
    for j, name in enumerate(names):
        counts = np.zeros((32, 64))
        for b in range(32):
            cols = [base[:, c] ^ np.uint32(1 << b) if c == j else base[:, c] for c in range(5)]
            f0, f1 = (np.asarray(x) for x in hash_words(*cols))
            d = np.stack([w0 ^ f0, w1 ^ f1], 1)
            counts[b] = (
                ((d[:, :, None] >> np.arange(32, dtype=np.uint32)) & 1).reshape(n, 64).sum(0)
            )
        frac = counts / n
        worst = float(np.abs(frac - 0.5).max())
        chi2 = float((((counts - n / 2) ** 2) / (n / 4)).sum())
        worst_all, chi2_all = max(worst_all, worst), chi2_all + chi2
        record(
            f"avalanche: flip a bit of {name}",
            "random",
            n,
            f"max|p-1/2|={worst:.4f}",
            float(stats.chi2.sf(chi2, counts.size)),
        )
    bound = 6 * 0.5 / np.sqrt(n)
    record(
        "avalanche: all 10240 cells within 6 sigma",
        "random",
        n,
        f"max|p-1/2|={worst_all:.4f} <= {bound:.4f}",
        float(stats.chi2.sf(chi2_all, 5 * 32 * 64)),
        ok=worst_all <= bound,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=22, help="draws per stream = 2**log2n")
    parser.add_argument("--avalanche-log2n", type=int, default=14, help="pairs per avalanche cell")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    n = 1 << args.log2n
    start = time.perf_counter()
    for stream in ("index", "step", "slot", "episode", "grid"):
        uniform_tests(stream, words_for(stream, n, args.seed))
    normal_tests(n, args.seed)
    discrete_tests(n, args.seed)
    avalanche(1 << args.avalanche_log2n, args.seed)
    widths = [max(len(str(r[i])) for r in ROWS) for i in (0, 1, 3)]
    header = f"{'test':<{widths[0]}}  {'stream':<{widths[1]}}  {'n':>9}  {'statistic':<{widths[2]}}  {'p-value':>9}  result"
    print(header)
    print("-" * len(header))
    for test, stream, size, stat, p, verdict in ROWS:
        print(
            f"{test:<{widths[0]}}  {stream:<{widths[1]}}  {size:>9}  {stat:<{widths[2]}}  {p:>9.3g}  {verdict}"
        )
    fails = sum(r[5] == "FAIL" for r in ROWS)
    weak = sum(r[5] == "weak" for r in ROWS)
    print(f"\n{len(ROWS)} tests, {fails} FAIL, {weak} weak, in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
