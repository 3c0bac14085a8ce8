"""Bits -> standard normal in JAX, with results that do not depend on the compiler.

XLA:CPU (and GPU) contracts ``a * b + c`` into a fused multiply-add, which
rounds once instead of twice, and its ``log`` differs from NumPy's in the last
bit. This module therefore computes the normal quantile with arithmetic whose
result is fixed by IEEE 754 alone:

- every product that feeds an addition is *exact*: both factors are cut into
  halves of at most half the significand bits (``_split``), and the three
  partial products that are kept are exact, so fusing them into an FMA cannot
  change a result;
- other operations are single correctly rounded ``+ - / sqrt`` on runtime
  values, products feeding only a division, and conversions of integers that
  fit the significand exactly;
- ``ln`` is computed here from the integer bits: the exponent from a
  leading-zero count, ``ln m`` of the significand by a fitted rational
  (float32) or the ``atanh`` series (float64).

Each division's result has a single use and the float32 path has no other
expensive op with several uses, so XLA keeps the float32 transform (and the
hash before it) in one loop fusion instead of recomputing the hash in several.

The quantile itself is Wichura's AS241 (PPND7 for float32, PPND16 for
float64). ``parallax.rng.reference`` performs the same operations one scalar
at a time in NumPy, so the two flavours agree bit for bit.

Holds: ``normal_f32(word)`` and ``normal_f64(word0, word1)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from parallax.rng import _spec

_Spec = _spec.FloatSpec


def _split(a: jax.Array, spec: _Spec) -> tuple[jax.Array, jax.Array]:
    """Cut ``a`` into ``hi + lo`` (exactly), each with at most half the bits."""
    uint = jnp.dtype(spec.uint)
    bits = lax.bitcast_convert_type(a, uint)
    hi = lax.bitcast_convert_type(bits & spec.uint.type(spec.split_mask), a.dtype)
    return hi, a - hi


def _mul(a: tuple[jax.Array, jax.Array], b: tuple[jax.Array, jax.Array]) -> jax.Array:
    """``a * b`` from split factors as ``hh + (hl + lh)``, every product exact."""
    a_hi, a_lo = a
    b_hi, b_lo = b
    return a_hi * b_hi + (a_hi * b_lo + a_lo * b_hi)


def _const(value: float, spec: _Spec) -> tuple[jax.Array, jax.Array]:
    """A coefficient as split halves of ``spec.dtype``."""
    hi, lo = _spec.split_constant(value, spec)
    return jnp.asarray(hi, spec.dtype), jnp.asarray(lo, spec.dtype)


def _horner(coefs: tuple[float, ...], x: jax.Array, spec: _Spec) -> jax.Array:
    """Polynomial with ``coefs`` (highest degree first) at ``x``, exact products."""
    xs = _split(x, spec)
    acc = _mul(_const(coefs[0], spec), xs) + spec.dtype.type(coefs[1])
    for c in coefs[2:]:
        acc = _mul(_split(acc, spec), xs) + spec.dtype.type(c)
    return acc


def _log_from_int(n: jax.Array, bits: int, scale_exp: int, spec: _Spec) -> jax.Array:
    """``ln(n * 2**-scale_exp)`` for ``n >= 1`` held in an unsigned ``bits``-bit array.

    The significand is ``n`` shifted to the top and rounded to
    ``mantissa + 1`` bits, so it converts to float exactly.
    """
    dt = spec.dtype
    mant_bits = np.finfo(dt).nmant  # 23 or 52
    nz = lax.clz(n)
    top = n << nz  # leading one at bit (bits - 1)
    drop = bits - 1 - mant_bits
    one = spec.uint.type(1)
    m_int = (top >> spec.uint.type(drop)) + ((top >> spec.uint.type(drop - 1)) & one)
    mant = m_int.astype(dt) * dt.type(2.0**-mant_bits)  # in [1, 2], exact
    big = mant > dt.type(spec.sqrt2)
    mant = jnp.where(big, mant * dt.type(0.5), mant)
    # exponent of n is (bits - 1 - nz); of the scaled value, minus scale_exp.
    k_int = jnp.int32(bits - 1 - scale_exp) - nz.astype(jnp.int32) + big.astype(jnp.int32)
    k = k_int.astype(dt)
    if dt == np.float32:
        a = mant - dt.type(1.0)  # exact
        num = _horner(_spec.LOG_NUM32, a, spec)
        ln_m = (a * num) / _horner(_spec.LOG_DEN32, a, spec)
    else:
        s = (mant - dt.type(1.0)) / (mant + dt.type(1.0))
        ss = _split(s, spec)
        poly = _horner(_spec.LOG_ATANH64, _mul(ss, ss), spec)
        ln_m = _mul(ss, _split(poly, spec))
    return k * dt.type(spec.ln2_hi) + (k * dt.type(spec.ln2_lo) + ln_m)


def _fixed_to_float(d: jax.Array, low_bits: int, scale_exp: int, spec: _Spec) -> jax.Array:
    """``d * 2**-scale_exp`` rounded once to ``spec.dtype`` (``d`` unsigned int)."""
    dt = spec.dtype
    hi = (d >> spec.uint.type(low_bits)).astype(dt) * dt.type(2.0 ** (low_bits - scale_exp))
    lo = (d & spec.uint.type((1 << low_bits) - 1)).astype(dt) * dt.type(2.0**-scale_exp)
    return hi + lo


def _lane_coefs(
    pieces: Sequence[tuple[jax.Array | None, tuple[float, ...]]], spec: _Spec
) -> list[jax.Array]:
    """Per-lane coefficients: the first piece whose mask holds (last: default).

    Shorter coefficient tuples are padded with leading zeros; a leading zero
    makes the first Horner step return the next coefficient exactly, so the
    result equals evaluating the shorter polynomial on its own.
    """
    degree = max(len(c) for _, c in pieces)
    padded = [(m, (0.0,) * (degree - len(c)) + tuple(c)) for m, c in pieces]
    out = []
    for i in range(degree):
        mask, coefs = padded[-1]
        acc: jax.Array = jnp.asarray(spec.dtype.type(coefs[i]))
        for mask, coefs in reversed(padded[:-1]):
            assert mask is not None
            acc = jnp.where(mask, spec.dtype.type(coefs[i]), acc)
        out.append(acc)
    return out


def _horner_lanes(coefs: list[jax.Array], x: jax.Array, spec: _Spec) -> jax.Array:
    """Like ``_horner`` with per-lane coefficients (one evaluation for all branches)."""
    xs = _split(x, spec)
    acc = _mul(_split(jnp.broadcast_to(coefs[0], x.shape), spec), xs) + coefs[1]
    for c in coefs[2:]:
        acc = _mul(_split(acc, spec), xs) + c
    return acc


def normal_f32(word: jax.Array) -> jax.Array:
    """Standard normal float32 from one uint32 word (AS241 PPND7).

    The word ``w`` stands for ``u = (w + 1/2) / 2**32``; the result is
    ``Phi^-1(u)`` to about 1e-7, exactly antisymmetric in ``w <-> ~w``.
    Both AS241 branches share one Horner evaluation with per-lane
    coefficients.

    Args:
      word: uint32 array.

    Returns:
      float32 array of the same shape, in about [-6.4, 6.4].
    """
    spec = _spec.F32
    dt = spec.dtype
    upper = word >= np.uint32(1 << 31)
    v = jnp.where(upper, ~word, word)  # < 2**31
    n = (v << np.uint32(1)) | np.uint32(1)  # tail area q = n / 2**33
    dfix = ~(v << np.uint32(1))  # 2**32 - n: |u - 1/2| = dfix / 2**33
    d = _fixed_to_float(dfix, 8, 33, spec)
    central = d <= dt.type(_spec.PPND7_SPLIT1)
    # central variable: 0.180625 - d**2; tail variable: sqrt(-ln q) - 1.6
    ds = _split(d, spec)
    r = dt.type(_spec.PPND7_CONST1) - _mul(ds, ds)
    t = jnp.sqrt(-_log_from_int(n, 32, 33, spec)) - dt.type(_spec.PPND7_CONST2)
    x = jnp.where(central, r, t)
    num = _horner_lanes(
        _lane_coefs([(central, _spec.PPND7_A), (None, _spec.PPND7_C)], spec), x, spec
    )
    den = _horner_lanes(
        _lane_coefs([(central, _spec.PPND7_B), (None, _spec.PPND7_D)], spec), x, spec
    )
    top = jnp.where(central, d, dt.type(1.0)) * num
    return jnp.where(upper, top, -top) / den  # (-x) / y == -(x / y) exactly


def normal_f64(word0: jax.Array, word1: jax.Array) -> jax.Array:
    """Standard normal float64 from two uint32 words (AS241 PPND16); needs x64.

    The 64-bit integer ``w = word0 * 2**32 + word1`` stands for
    ``u = (w + 1/2) / 2**64``; the result is ``Phi^-1(u)`` to about 1e-15
    relative, exactly antisymmetric in ``w <-> ~w``.

    Args:
      word0, word1: uint32 arrays of one shape.

    Returns:
      float64 array of that shape, in about [-9.2, 9.2].
    """
    spec = _spec.F64
    dt = spec.dtype
    u64 = np.uint64
    w = (word0.astype(jnp.uint64) << u64(32)) | word1.astype(jnp.uint64)
    upper = w >= u64(1 << 63)
    v = jnp.where(upper, ~w, w)
    n = (v << u64(1)) | u64(1)  # q = n / 2**65
    dfix = ~(v << u64(1))  # |u - 1/2| = dfix / 2**65
    d = _fixed_to_float(dfix, 11, 65, spec)
    central = d <= dt.type(_spec.PPND16_SPLIT1)
    ds = _split(d, spec)
    r = dt.type(_spec.PPND16_CONST1) - _mul(ds, ds)
    root = jnp.sqrt(-_log_from_int(n, 64, 65, spec))
    near = root <= dt.type(_spec.PPND16_SPLIT2)
    t = jnp.where(near, root - dt.type(_spec.PPND16_CONST2), root - dt.type(_spec.PPND16_SPLIT2))
    x = jnp.where(central, r, t)
    near_tail = near & ~central
    num_pieces = [(central, _spec.PPND16_A), (near_tail, _spec.PPND16_C), (None, _spec.PPND16_E)]
    den_pieces = [(central, _spec.PPND16_B), (near_tail, _spec.PPND16_D), (None, _spec.PPND16_F)]
    num = _horner_lanes(_lane_coefs(num_pieces, spec), x, spec)
    den = _horner_lanes(_lane_coefs(den_pieces, spec), x, spec)
    top = jnp.where(central, d, dt.type(1.0)) * num
    return jnp.where(upper, top, -top) / den  # (-x) / y == -(x / y) exactly
