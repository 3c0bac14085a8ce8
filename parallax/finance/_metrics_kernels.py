"""What the finance metrics compute with: argument checks, masked statistics, jitted kernels.

- argument checks on concrete Python numbers, with sekai's messages (`_check_positive`,
  `_check_finite`, `_check_non_negative`, `_check_level`, `_check_flag`; traced values pass
  through unchecked), and `_signed` (a loss, or the negative return it is);
- masked array helpers along the last axis: `_series`, `_mask`, `_mean`, `_sample_std`
  (exactly 0 when constant up to rounding), `_excess`, `_growth` (floored at zero after a
  wipe-out) and `_quantile` (numpy's linear quantile);
- the jitted implementation of every metric on validated arrays (`_total_return` ...
  `_hit_rate`), and `_prepare`, which validates a `returns` / `where` pair.

The public functions (`_metrics`) and the summaries (`_metrics_summary`) check their
arguments with these and call these kernels; the conventions are in `_metrics`' docstring.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array

# Rounding of a return (a difference of growth factors near 1), in units of the dtype's eps.
_ROUNDING_ULPS = 16.0


# -- argument checks (concrete Python numbers only; traced values pass through) ------------------
def _concrete(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float | np.integer | np.floating):
        return float(value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return float(value)
    return None


def _check_positive(value: Any, name: str) -> None:
    v = _concrete(value)
    if v is not None and not (math.isfinite(v) and v > 0.0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def _check_finite(value: Any, name: str) -> None:
    v = _concrete(value)
    if v is not None and not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")


def _check_non_negative(value: Any, name: str) -> None:
    v = _concrete(value)
    if v is not None and not (math.isfinite(v) and v >= 0.0):
        raise ValueError(f"{name} must be a non-negative finite number, got {value!r}")


def _check_flag(value: Any, name: str, owner: str) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{owner}: {name} must be True or False, got {value!r}")


def _signed(loss: Array, as_loss: bool) -> Array:
    """`loss` as it is, or as the (negative) return it is; `0 - x` keeps a zero at +0.0."""
    return loss if as_loss else 0 - loss


def _check_level(level: Any) -> None:
    v = _concrete(level)
    if v is not None and not 0.0 < v < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level!r}")


# -- array helpers -------------------------------------------------------------------------------
def _series(values: ArrayLike, name: str, minimum: int = 1) -> Array:
    x = jnp.asarray(values)
    if x.ndim < 1:
        raise ValueError(f"{name} must have at least one axis (periods last), got a scalar")
    if x.shape[-1] < minimum:
        raise ValueError(
            f"{name} needs at least {minimum} value(s) along the last axis, got shape {x.shape}"
        )
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jax.dtypes.canonicalize_dtype(jnp.float64))
    return x


def _mask(where: ArrayLike | None, x: Array) -> Array:
    if where is None:
        return jnp.ones(x.shape, bool)
    w = jnp.asarray(where)
    if w.dtype != jnp.bool_:
        raise TypeError(f"where must be a boolean array, got dtype {w.dtype}")
    if w.shape != x.shape:
        raise ValueError(f"where must have the shape of the series {x.shape}, got {w.shape}")
    return w


def _scalar(value: Any, dtype: Any) -> Array:
    return jnp.asarray(value, dtype)


def _eps(dtype: Any) -> float:
    return _ROUNDING_ULPS * float(jnp.finfo(dtype).eps)


def _count(w: Array, dtype: Any) -> Array:
    return jnp.sum(w, axis=-1).astype(dtype)


def _mean(x: Array, w: Array) -> Array:
    n = _count(w, x.dtype)
    return jnp.sum(jnp.where(w, x, 0), axis=-1) / jnp.maximum(n, 1)


def _sample_std(x: Array, w: Array, offset: Array | float = 1.0) -> Array:
    """ddof=1 standard deviation; exactly 0 below two periods or when constant up to rounding
    (measured against `offset + max|x|`)."""
    n = _count(w, x.dtype)
    mean = _mean(x, w)
    dev = jnp.where(w, x - mean[..., None], 0)
    var = jnp.sum(dev * dev, axis=-1) / jnp.maximum(n - 1, 1)
    sd = jnp.sqrt(var)
    hi = jnp.max(jnp.where(w, x, -jnp.inf), axis=-1)
    lo = jnp.min(jnp.where(w, x, jnp.inf), axis=-1)
    big = jnp.max(jnp.where(w, jnp.abs(x), 0), axis=-1)
    tiny = sd <= _eps(x.dtype) * (offset + big)
    return jnp.where((n < 2) | (hi == lo) | tiny, jnp.zeros_like(sd), sd)


def _excess(x: Array, hurdle: Array) -> Array:
    excess = x - hurdle
    tolerance = _eps(x.dtype) * (1 + jnp.abs(x) + jnp.abs(hurdle))
    return jnp.where(jnp.abs(excess) <= tolerance, jnp.zeros_like(excess), excess)


def _growth(x: Array, w: Array) -> Array:
    """Wealth relative to 1, shape `(..., n + 1)`, floored at zero after a wipe-out."""
    factors = jnp.where(w, 1 + x, jnp.ones_like(x))
    ones = jnp.ones((*x.shape[:-1], 1), x.dtype)
    growth = jnp.concatenate([ones, jnp.cumprod(factors, axis=-1)], axis=-1)
    wiped = jax.lax.cummax((growth <= 0).astype(jnp.int32), axis=growth.ndim - 1) > 0
    return jnp.where(wiped, jnp.zeros_like(growth), growth)


def _quantile(x: Array, w: Array, q: Array) -> Array:
    """numpy's default (linear) quantile of the counted values along the last axis."""
    n = jnp.sum(w, axis=-1, dtype=jnp.int32)
    ordered = jnp.sort(jnp.where(w, x, jnp.inf), axis=-1)
    position = q * (jnp.maximum(n, 1) - 1).astype(x.dtype)
    below = jnp.clip(jnp.floor(position), 0, None)
    frac = position - below
    i = below.astype(jnp.int32)
    j = jnp.minimum(i + 1, jnp.maximum(n, 1) - 1)
    a = jnp.take_along_axis(ordered, i[..., None], axis=-1)[..., 0]
    b = jnp.take_along_axis(ordered, j[..., None], axis=-1)[..., 0]
    diff = b - a
    # numpy's _lerp: from the nearer end, so the result is exact at both order statistics
    value = jnp.where(frac >= 0.5, b - diff * (1 - frac), a + diff * frac)
    return jnp.where(n > 0, value, jnp.zeros_like(value))


# -- implementations on validated arrays ---------------------------------------------------------
@jax.jit
def _total_return(x: Array, w: Array) -> Array:
    return _growth(x, w)[..., -1] - 1


@jax.jit
def _annualized_return(x: Array, w: Array, ppy: Array) -> Array:
    wiped = jnp.any(w & (x <= -1), axis=-1)
    logs = jnp.log1p(jnp.where(x > -1, x, jnp.zeros_like(x)))
    log_growth = jnp.sum(jnp.where(w, logs, jnp.zeros_like(logs)), axis=-1)
    n = jnp.maximum(_count(w, x.dtype), 1)
    annual = jnp.expm1(log_growth * ppy / n)
    return jnp.where(wiped, -jnp.ones_like(annual), annual)


@jax.jit
def _annualized_volatility(x: Array, w: Array, ppy: Array) -> Array:
    return _sample_std(x, w) * jnp.sqrt(ppy)


@jax.jit
def _sharpe_ratio(x: Array, w: Array, ppy: Array, risk_free: Array) -> Array:
    excess = _excess(x, risk_free / ppy)
    sd = _sample_std(excess, w)
    zero = sd == 0
    ratio = _mean(excess, w) / jnp.where(zero, jnp.ones_like(sd), sd) * jnp.sqrt(ppy)
    return jnp.where(zero, jnp.zeros_like(ratio), ratio)


@jax.jit
def _sortino_ratio(x: Array, w: Array, ppy: Array, target: Array) -> Array:
    excess = _excess(x, target / ppy)
    downside = jnp.minimum(excess, 0)
    dd = jnp.sqrt(_mean(downside * downside, w))
    mean = _mean(excess, w)
    zero = dd == 0
    ratio = mean / jnp.where(zero, jnp.ones_like(dd), dd) * jnp.sqrt(ppy)
    flat = jnp.where(mean > 0, jnp.full_like(mean, jnp.inf), jnp.zeros_like(mean))
    return jnp.where(zero, flat, ratio)


@jax.jit
def _drawdown_series(x: Array, w: Array) -> Array:
    growth = _growth(x, w)
    peak = jax.lax.cummax(growth, axis=growth.ndim - 1)  # >= 1, so the division is safe
    return jnp.clip(1 - growth / peak, 0, 1)


@jax.jit
def _max_drawdown(x: Array, w: Array) -> Array:
    return jnp.max(_drawdown_series(x, w), axis=-1)


@jax.jit
def _calmar_ratio(x: Array, w: Array, ppy: Array) -> Array:
    annual = _annualized_return(x, w, ppy)
    mdd = _max_drawdown(x, w)
    zero = mdd == 0
    ratio = annual / jnp.where(zero, jnp.ones_like(mdd), mdd)
    flat = jnp.where(annual > 0, jnp.full_like(annual, jnp.inf), jnp.zeros_like(annual))
    return jnp.where(zero, flat, ratio)


@jax.jit
def _value_at_risk(x: Array, w: Array, level: Array) -> Array:
    # `0 - q` rather than `-q` so a zero quantile reports 0.0, not -0.0 (as sekai)
    return 0 - _quantile(x, w, 1 - level)


@jax.jit
def _conditional_value_at_risk(x: Array, w: Array, level: Array) -> Array:
    q = _quantile(x, w, 1 - level)
    tail = w & (x <= q[..., None])
    lowest = jnp.min(jnp.where(w, x, jnp.inf), axis=-1)
    # an empty tail is only possible through rounding in the interpolation
    empty = ~jnp.any(tail, axis=-1)
    tail = jnp.where(empty[..., None], w & (x == lowest[..., None]), tail)
    return 0 - _mean(x, tail)


@jax.jit
def _hit_rate(x: Array, w: Array) -> Array:
    active = w & (x != 0)
    wins = _count(active & (x > 0), x.dtype)
    return wins / jnp.maximum(_count(active, x.dtype), 1)


def _prepare(returns: ArrayLike, where: ArrayLike | None) -> tuple[Array, Array]:
    x = _series(returns, "returns")
    return x, _mask(where, x)
