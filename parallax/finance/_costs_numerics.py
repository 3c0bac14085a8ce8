"""The arithmetic the cost models share: sekai's fills, its summation order, parameter checks.

- `fill_from_median(values, fallback)`: sekai's fill of missing inputs (the row's median of
  the valid values), in JAX.
- `sum_left_to_right(x)`: the summation order numpy uses for short vectors (float64 results
  equal sekai's bit for bit).
- `_non_negative`, `_non_negative_scalar`, `_fallback`: a model parameter checked as sekai
  checks it; `_as`: a parameter leaf in the env's float dtype.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array

__all__ = ["fill_from_median", "sum_left_to_right"]


def sum_left_to_right(x: Array) -> Array:
    """Sum over the last axis, adding left to right from 0.0, in a fixed order.

    The order does not depend on the batch shape (a vmapped env sums exactly as a single
    one), and for fewer than 8 numbers it is numpy's, so float64 results match sekai's
    bit for bit; numpy sums longer vectors pairwise (a last-ulp difference, within the
    comparison tolerance). The sum is unrolled, which suits the short vectors of the
    finance envs (one entry per asset).

    Args:
        x: float array `(..., n)`.

    Returns:
        float array `(...)` of the same dtype.

    Example:
        >>> import jax.numpy as jnp
        >>> float(sum_left_to_right(jnp.array([0.1, 0.2, 0.3])))  # doctest: +ELLIPSIS
        0.6000000...
    """
    total = jnp.zeros(x.shape[:-1], x.dtype)
    for i in range(x.shape[-1]):
        total = total + x[..., i]
    return total


def _non_negative(name: str, value: Any) -> np.ndarray:
    """A model parameter as a float64 array; `ValueError` unless finite and >= 0."""
    try:
        out = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be finite and non-negative, got {value!r}") from None
    if not (np.all(np.isfinite(out)) and np.all(out >= 0)):
        raise ValueError(f"{name} must be finite and non-negative, got {value!r}")
    return out


def _non_negative_scalar(name: str, value: Any) -> np.ndarray:
    """A scalar model parameter; `TypeError` for arrays, `ValueError` unless finite >= 0."""
    if np.ndim(value) != 0:
        raise TypeError(f"{name} must be a single number, got {value!r}")
    return _non_negative(name, value)


def _as(x: Any, like: Array) -> Array:
    """A parameter leaf in the dtype of `like` (the env's float dtype)."""
    return jnp.asarray(x, dtype=like.dtype)


def _fallback(name: str, value: Any) -> np.ndarray | None:
    """An optional scalar fallback: None, or a finite number >= 0 (`TypeError` for arrays)."""
    return None if value is None else _non_negative_scalar(name, value)


def fill_from_median(values: ArrayLike, fallback: ArrayLike | None = None) -> tuple[Array, Array]:
    """sekai's fill of a missing input: the median of the row's valid values.

    A value is valid when it is finite and >= 0 (a zero spread or a flat window's zero
    volatility is valid and kept). Each invalid value is replaced by the median of the
    valid values in its row (the last axis): a just-listed asset or a gap in a spread
    series is then priced like a typical asset, not for free. A row with no valid value
    takes `fallback`, or NaN when there is none (sekai raises there if the row is traded).
    The median is `(low + high) / 2` of the two middle values, as numpy computes it, so
    float64 results equal sekai's.

    Args:
        values: float `(..., n)` inputs (NaN, infinite or negative where missing).
        fallback: a number for rows without any valid value, or None.

    Returns:
        `(filled, missing)`: the filled values `(..., n)` in the dtype of `values`, and the
        bool `(...)` rows that had no valid value.

    Example:
        >>> import jax.numpy as jnp
        >>> filled, missing = fill_from_median(jnp.array([1e-3, jnp.nan, 3e-3, -1.0]))
        >>> [round(float(x), 6) for x in filled], bool(missing)
        ([0.001, 0.002, 0.003, 0.002], False)
    """
    values = jnp.asarray(values)
    ok = jnp.isfinite(values) & (values >= 0)
    count = jnp.sum(ok, axis=-1)
    ordered = jnp.sort(jnp.where(ok, values, jnp.inf), axis=-1)
    top = values.shape[-1] - 1
    low_at = jnp.clip((count - 1) // 2, 0, top)[..., None]
    high_at = jnp.clip(count // 2, 0, top)[..., None]
    low = jnp.take_along_axis(ordered, low_at, axis=-1)[..., 0]
    high = jnp.take_along_axis(ordered, high_at, axis=-1)[..., 0]
    missing = count == 0
    spare = jnp.nan if fallback is None else jnp.asarray(fallback, values.dtype)
    median = jnp.where(missing, jnp.asarray(spare, values.dtype), (low + high) / 2)
    return jnp.where(ok, values, median[..., None]), missing
