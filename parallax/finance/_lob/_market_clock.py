"""The market's exact clock: sekai's fractions as float pairs (pure functions).

sekai's `LimitOrderBookMarket` keeps the session clock and each trader's next decision time
as exact `Fraction`s (sums of float waits), so that a step's `dt` is an exact difference of
decision times, and times within `1e-9` (the exact fraction) coincide. Here each time is a
pair `(hi, lo)` with `hi + lo` the exact sum and `hi` its correctly rounded float: a sum of
a few hundred float64 waits fits in the pair, so under x64 every float sekai derives from
its fractions comes out the same.

- `schedule`: the decision times after a step's decisions, the step's end and its `dt`.
- `due`: the traders whose decision time has come at the step's end.
- `divide`: `x / d` kept a division under XLA.
"""

from __future__ import annotations

from fractions import Fraction

import jax.numpy as jnp
from jaxtyping import Array

from .._common import opaque

__all__ = ["divide", "due", "schedule"]

_COINCIDENT = Fraction(1, 10**9)
_COINCIDENT_HI = float(_COINCIDENT)
_COINCIDENT_LO = float(_COINCIDENT - Fraction(_COINCIDENT_HI))


def _two_sum(a: Array, b: Array) -> tuple[Array, Array]:
    """`(s, e)` with `s = fl(a + b)` and `s + e == a + b` exactly (Knuth)."""
    s = opaque(a + b)
    bb = opaque(s - a)
    return s, (a - (s - bb)) + (b - bb)


def _add(hi: Array, lo: Array, x: Array) -> tuple[Array, Array]:
    """The pair `hi + lo` plus the float `x`, renormalised."""
    s, e = _two_sum(hi, x)
    return _two_sum(s, e + lo)


def _sub(a_hi: Array, a_lo: Array, b_hi: Array, b_lo: Array) -> tuple[Array, Array]:
    """`a - b` of two pairs, renormalised (`hi` is the rounded difference)."""
    s, e = _two_sum(a_hi, -b_hi)
    return _two_sum(s, e + (a_lo - b_lo))


def _less(a_hi: Array, a_lo: Array, b_hi: Array, b_lo: Array) -> Array:
    return (a_hi < b_hi) | ((a_hi == b_hi) & (a_lo < b_lo))


def schedule(
    clock: Array, next_decision: Array, active: Array, wait: Array, session_length: float
) -> tuple[Array, Array, Array]:
    """sekai's `_next[i] = clock + wait[i]` for the active traders, then the step's end.

    Args:
        clock: float `(2,)`, the session time as a pair.
        next_decision: float `(A, 2)`, each trader's next decision time as a pair.
        active: bool `(A,)`, the traders that decided in this step.
        wait: float `(A,)`, their waits (used where `active`).
        session_length: the session's end.

    Returns:
        `(next_decision, until, dt)`: the new decision times `(A, 2)`, the step's end
        `min(decision times, session_length)` `(2,)`, and `dt = float(until - clock)`.
    """
    hi, lo = _add(clock[0], clock[1], wait)
    next_hi = jnp.where(active, hi, next_decision[:, 0])
    next_lo = jnp.where(active, lo, next_decision[:, 1])
    first = jnp.argmin(jnp.where(next_hi == jnp.min(next_hi), next_lo, jnp.inf))
    until_hi, until_lo = next_hi[first], next_lo[first]
    end = jnp.asarray(session_length, clock.dtype)
    capped = _less(end, jnp.zeros_like(end), until_hi, until_lo)
    until_hi = jnp.where(capped, end, until_hi)
    until_lo = jnp.where(capped, 0.0, until_lo)
    dt = _sub(until_hi, until_lo, clock[0], clock[1])[0]
    return jnp.stack([next_hi, next_lo], axis=1), jnp.stack([until_hi, until_lo]), dt


def due(next_decision: Array, until: Array) -> Array:
    """bool `(A,)`: `next_decision <= until + 1e-9` (sekai's exact fraction `1 / 10**9`)."""
    gap_hi, gap_lo = _sub(next_decision[:, 0], next_decision[:, 1], until[0], until[1])
    limit_hi = jnp.asarray(_COINCIDENT_HI, until.dtype)
    limit_lo = jnp.asarray(_COINCIDENT_LO, until.dtype)
    return ~_less(limit_hi, limit_lo, gap_hi, gap_lo)


def divide(x: Array, d: float, live: Array) -> Array:
    """`x / d`, kept a division: the denominator depends on `live` (always True) at run
    time, so XLA cannot rewrite it as `x * (1 / d)` (which rounds differently), not even
    inside `scan` or `vmap`, where `optimization_barrier` on a constant is not enough."""
    return x / jnp.where(live, jnp.asarray(d, x.dtype), jnp.ones((), x.dtype))
