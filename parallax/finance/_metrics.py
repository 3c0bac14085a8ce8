"""Trading performance metrics as pure JAX functions, with sekai 0.2.0's definitions.

- return-series metrics: `total_return`, `annualized_return`, `annualized_volatility`,
  `sharpe_ratio`, `sortino_ratio`, `max_drawdown`, `calmar_ratio`, `value_at_risk`,
  `conditional_value_at_risk`, `hit_rate`;
- series helpers: `returns_from_equity`, `equity_curve`, `drawdown_series`;
- summaries: `performance_metrics` (every return metric at once) and `pnl_metrics` (for P&L
  processes in absolute units, such as a market maker's wealth).

Every function takes simple per-period returns along the **last** axis (`0.01` is +1 %),
any leading batch axes, and returns one value per series: shape `returns.shape[:-1]`, the
floating dtype of the input (float32, or float64 with x64). All are jit-, vmap- and
grad-traceable; the keyword parameters may be Python numbers (checked on the spot, with
sekai's messages) or arrays (traced, not checked).

`where=` (a boolean array shaped like `returns`) marks the periods that count; the others are
left out, as if the series were shorter. Episodes of different lengths in one batch are
summarised with it (see `parallax.finance.evaluate`). A series with no counted period gives 0.

Conventions, as sekai's `sekai.finance.metrics` (the differential tests compare the two):

- limited liability: a return of -100 % or worse wipes the account out and equity stays at
  zero, so `total_return >= -1`, drawdowns lie in `[0, 1]` and `annualized_return` is -1;
- a standard deviation (ddof=1) is exactly 0 for one period or for returns that are constant
  up to rounding (`16 * eps * (1 + max|r|)`, with `eps` of the input dtype); Sharpe is then
  0; with no downside Sortino is `inf` for a positive mean excess return, else 0; with no
  drawdown Calmar is `inf` for a positive annualised return, else 0;
- excess returns within rounding of zero count as exactly zero;
- VaR and CVaR are historical, reported as positive losses, with numpy's linear quantile.

Inputs must be finite: sekai raises on NaN or inf, these functions (inside jit) cannot, and
NaN propagates.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array

__all__ = [
    "annualized_return",
    "annualized_volatility",
    "calmar_ratio",
    "conditional_value_at_risk",
    "drawdown_series",
    "equity_curve",
    "hit_rate",
    "max_drawdown",
    "performance_metrics",
    "pnl_metrics",
    "returns_from_equity",
    "sharpe_ratio",
    "sortino_ratio",
    "total_return",
    "value_at_risk",
]

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


# -- public functions ----------------------------------------------------------------------------
def returns_from_equity(equity: ArrayLike) -> Array:
    """Simple returns between consecutive equity values, `equity[..., t+1] / equity[..., t] - 1`.

    The inverse of `equity_curve`. The first value at or below zero is a wipe-out: its
    return is exactly -1 and every later return is 0 (as sekai's `returns_from_equity`).

    Args:
        equity: equity paths, shape `(..., n + 1)` with `n >= 1`, starting positive.

    Returns:
        Returns of shape `(..., n)`.

    Example:
        >>> from parallax.finance import returns_from_equity
        >>> [round(r, 4) for r in returns_from_equity([100.0, 110.0, 99.0, 0.0, 0.0]).tolist()]
        [0.1, -0.1, -1.0, 0.0]
    """
    e = _series(equity, "equity", minimum=2)
    down = e <= 0
    wiped = jax.lax.cummax(down.astype(jnp.int32), axis=e.ndim - 1) > 0
    before, after = e[..., :-1], e[..., 1:]
    safe = jnp.where(wiped[..., :-1], jnp.ones_like(before), before)
    ratio = after / safe - 1
    r = jnp.where(down[..., 1:], -jnp.ones_like(ratio), ratio)
    return jnp.where(wiped[..., :-1], jnp.zeros_like(r), r)


def equity_curve(returns: ArrayLike, initial: ArrayLike = 1.0) -> Array:
    """Equity implied by compounding simple returns: `initial` then `initial * cumprod(1 + r)`.

    Args:
        returns: simple per-period returns, shape `(..., n)`.
        initial: starting equity (positive); broadcast against the leading axes.

    Returns:
        Equity of shape `(..., n + 1)`, zero from a wipe-out on.

    Example:
        >>> from parallax.finance import equity_curve
        >>> equity_curve([0.5, -0.5], initial=2.0).tolist()
        [2.0, 3.0, 1.5]
    """
    _check_positive(initial, "initial")
    x, w = _prepare(returns, None)
    return _scalar(initial, x.dtype)[..., None] * _growth(x, w)


def total_return(returns: ArrayLike, *, where: ArrayLike | None = None) -> Array:
    """Compounded return over each series, `prod(1 + r) - 1` (never below -1).

    Args:
        returns: simple per-period returns, shape `(..., n)`.
        where: optional boolean mask of the periods that count, shaped like `returns`.

    Returns:
        Shape `returns.shape[:-1]`.

    Example:
        >>> from parallax.finance import total_return
        >>> round(float(total_return([0.1, -0.1])), 4)
        -0.01
    """
    return _total_return(*_prepare(returns, where))


def annualized_return(
    returns: ArrayLike, periods_per_year: ArrayLike = 252, *, where: ArrayLike | None = None
) -> Array:
    """Geometric annualised return, `prod(1 + r) ** (periods_per_year / n) - 1`.

    -1 once equity reaches zero; may be `inf` when a short, strongly positive series is
    annualised (as sekai).

    Args:
        returns: simple per-period returns, shape `(..., n)`.
        periods_per_year: periods in a year (252 for daily bars), positive.
        where: optional boolean mask of the periods that count.

    Example:
        >>> from parallax.finance import annualized_return
        >>> round(float(annualized_return([0.01] * 12, periods_per_year=12)), 4)
        0.1268
    """
    _check_positive(periods_per_year, "periods_per_year")
    x, w = _prepare(returns, where)
    return _annualized_return(x, w, _scalar(periods_per_year, x.dtype))


def annualized_volatility(
    returns: ArrayLike, periods_per_year: ArrayLike = 252, *, where: ArrayLike | None = None
) -> Array:
    """Annualised volatility, `std(r, ddof=1) * sqrt(periods_per_year)` (0 for n < 2).

    Example:
        >>> from parallax.finance import annualized_volatility
        >>> round(float(annualized_volatility([0.01, -0.01], periods_per_year=4)), 4)
        0.0283
    """
    _check_positive(periods_per_year, "periods_per_year")
    x, w = _prepare(returns, where)
    return _annualized_volatility(x, w, _scalar(periods_per_year, x.dtype))


def sharpe_ratio(
    returns: ArrayLike,
    periods_per_year: ArrayLike = 252,
    risk_free: ArrayLike = 0.0,
    *,
    where: ArrayLike | None = None,
    per_period: bool = False,
) -> Array:
    """Annualised Sharpe ratio, `mean(e) / std(e, ddof=1) * sqrt(periods_per_year)`.

    `e = r - risk_free / periods_per_year`; 0 when the standard deviation is zero
    (empyrical gives `inf` or NaN there).

    Args:
        returns: simple per-period returns, shape `(..., n)`.
        periods_per_year: periods in a year, positive (empyrical's `annualization`).
        risk_free: annual simple risk-free rate (0.04 for 4 %), finite.
        where: optional boolean mask of the periods that count.
        per_period: `risk_free` is a per-period rate, `e = r - risk_free` (empyrical's and
            quantstats' convention).

    Example:
        >>> from parallax.finance import sharpe_ratio
        >>> round(float(sharpe_ratio([0.02, 0.0, 0.01], periods_per_year=1)), 4)
        1.0
    """
    _check_positive(periods_per_year, "periods_per_year")
    _check_finite(risk_free, "risk_free")
    _check_flag(per_period, "per_period", "sharpe_ratio")
    x, w = _prepare(returns, where)
    ppy = _scalar(periods_per_year, x.dtype)
    rate = _scalar(risk_free, x.dtype)
    return _sharpe_ratio(x, w, ppy, rate * ppy if per_period else rate)


def sortino_ratio(
    returns: ArrayLike,
    periods_per_year: ArrayLike = 252,
    target: ArrayLike = 0.0,
    *,
    where: ArrayLike | None = None,
    per_period: bool = False,
) -> Array:
    """Annualised Sortino ratio: mean excess return over the downside deviation.

    With `e = r - target / periods_per_year`, the downside deviation is
    `sqrt(mean(min(e, 0)**2))`; with none, `inf` for a positive mean and 0 otherwise.
    `target` is an annual rate; `per_period=True` takes it per period, `e = r - target`
    (empyrical's `required_return`).

    Example:
        >>> from parallax.finance import sortino_ratio
        >>> round(float(sortino_ratio([0.02, -0.01], periods_per_year=1)), 4)
        0.7071
    """
    _check_positive(periods_per_year, "periods_per_year")
    _check_finite(target, "target")
    _check_flag(per_period, "per_period", "sortino_ratio")
    x, w = _prepare(returns, where)
    ppy = _scalar(periods_per_year, x.dtype)
    rate = _scalar(target, x.dtype)
    return _sortino_ratio(x, w, ppy, rate * ppy if per_period else rate)


def drawdown_series(returns: ArrayLike, *, where: ArrayLike | None = None) -> Array:
    """Drawdown from the running peak after each period, `1 - equity / peak`.

    Returns:
        Shape `(..., n + 1)`, values in `[0, 1]`, the first always 0.

    Example:
        >>> from parallax.finance import drawdown_series
        >>> [round(v, 4) for v in drawdown_series([0.1, -0.5, 0.2]).tolist()]
        [0.0, 0.0, 0.5, 0.4]
    """
    return _drawdown_series(*_prepare(returns, where))


def max_drawdown(
    returns: ArrayLike, *, where: ArrayLike | None = None, as_loss: bool = True
) -> Array:
    """Maximum drawdown as a fraction of the running peak, in `[0, 1]`; with
    `as_loss=False` as the (negative) return from the peak, in `[-1, 0]`, the sign of
    empyrical and quantstats.

    Example:
        >>> from parallax.finance import max_drawdown
        >>> round(float(max_drawdown([0.1, -0.5, 0.2])), 4)
        0.5
    """
    _check_flag(as_loss, "as_loss", "max_drawdown")
    return _signed(_max_drawdown(*_prepare(returns, where)), as_loss)


def calmar_ratio(
    returns: ArrayLike, periods_per_year: ArrayLike = 252, *, where: ArrayLike | None = None
) -> Array:
    """Annualised return over maximum drawdown; with no drawdown `inf` if the annualised
    return is positive, else 0.

    Example:
        >>> from parallax.finance import calmar_ratio
        >>> round(float(calmar_ratio([0.1, -0.05], periods_per_year=2)), 4)
        0.9
    """
    _check_positive(periods_per_year, "periods_per_year")
    x, w = _prepare(returns, where)
    return _calmar_ratio(x, w, _scalar(periods_per_year, x.dtype))


def value_at_risk(
    returns: ArrayLike,
    level: ArrayLike = 0.95,
    *,
    where: ArrayLike | None = None,
    as_loss: bool = True,
) -> Array:
    """Historical value at risk as a positive loss, `-quantile(r, 1 - level)`.

    The quantile interpolates linearly between order statistics (numpy's default).

    Args:
        returns: simple per-period returns, shape `(..., n)`.
        level: confidence level, strictly between 0 and 1 (empyrical's `cutoff` is
            `1 - level`).
        where: optional boolean mask of the periods that count.
        as_loss: `False` gives the quantile itself, `quantile(r, 1 - level)` (a negative
            return for a loss: empyrical's and quantstats' sign).

    Example:
        >>> from parallax.finance import value_at_risk
        >>> round(float(value_at_risk([-0.04, -0.02, 0.0, 0.02, 0.04], level=0.75)), 4)
        0.02
    """
    _check_level(level)
    _check_flag(as_loss, "as_loss", "value_at_risk")
    x, w = _prepare(returns, where)
    return _signed(_value_at_risk(x, w, _scalar(level, x.dtype)), as_loss)


def conditional_value_at_risk(
    returns: ArrayLike,
    level: ArrayLike = 0.95,
    *,
    where: ArrayLike | None = None,
    as_loss: bool = True,
) -> Array:
    """Historical expected shortfall: minus the mean of the returns at or below the
    `1 - level` quantile (at least `value_at_risk`); `as_loss=False` gives the mean
    itself (empyrical's and quantstats' sign).

    Example:
        >>> from parallax.finance import conditional_value_at_risk
        >>> r = [-0.04, -0.02, 0.0, 0.02, 0.04]
        >>> round(float(conditional_value_at_risk(r, level=0.75)), 4)
        0.03
    """
    _check_level(level)
    _check_flag(as_loss, "as_loss", "conditional_value_at_risk")
    x, w = _prepare(returns, where)
    return _signed(_conditional_value_at_risk(x, w, _scalar(level, x.dtype)), as_loss)


def hit_rate(returns: ArrayLike, *, where: ArrayLike | None = None) -> Array:
    """Fraction of active (non-zero) periods with a positive return; 0 if none is active.

    Example:
        >>> from parallax.finance import hit_rate
        >>> float(hit_rate([0.01, 0.0, -0.02, 0.03]))
        0.6666666865348816
    """
    return _hit_rate(*_prepare(returns, where))


def performance_metrics(
    returns: ArrayLike,
    periods_per_year: ArrayLike = 252,
    *,
    risk_free: ArrayLike = 0.0,
    level: ArrayLike = 0.95,
    where: ArrayLike | None = None,
) -> dict[str, Array]:
    """Every return-series metric at once (sekai's `performance_summary` as arrays).

    Args:
        returns: simple per-period returns, shape `(..., n)`.
        periods_per_year: periods in a year, positive.
        risk_free: annual risk-free rate, the hurdle of both Sharpe and Sortino.
        level: VaR / CVaR confidence level in (0, 1).
        where: optional boolean mask of the periods that count.

    Returns:
        A dict with `n_periods` (int32) and `total_return`, `annualized_return`,
        `annualized_volatility`, `sharpe_ratio`, `sortino_ratio`, `max_drawdown`,
        `calmar_ratio`, `value_at_risk`, `conditional_value_at_risk`, `hit_rate`, each of
        shape `returns.shape[:-1]`.

    Example:
        >>> import jax.numpy as jnp
        >>> from parallax.finance import performance_metrics
        >>> m = performance_metrics(jnp.array([[0.01, -0.02, 0.03], [0.0, 0.0, 0.0]]))
        >>> m["sharpe_ratio"].shape, float(m["max_drawdown"][1])
        ((2,), 0.0)
    """
    _check_positive(periods_per_year, "periods_per_year")
    _check_finite(risk_free, "risk_free")
    _check_level(level)
    x, w = _prepare(returns, where)
    return _performance(
        x,
        w,
        _scalar(periods_per_year, x.dtype),
        _scalar(risk_free, x.dtype),
        _scalar(level, x.dtype),
    )


@jax.jit
def _performance(x: Array, w: Array, ppy: Array, rf: Array, lvl: Array) -> dict[str, Array]:
    return {
        "n_periods": jnp.sum(w, axis=-1, dtype=jnp.int32),
        "total_return": _total_return(x, w),
        "annualized_return": _annualized_return(x, w, ppy),
        "annualized_volatility": _annualized_volatility(x, w, ppy),
        "sharpe_ratio": _sharpe_ratio(x, w, ppy, rf),
        "sortino_ratio": _sortino_ratio(x, w, ppy, rf),
        "max_drawdown": _max_drawdown(x, w),
        "calmar_ratio": _calmar_ratio(x, w, ppy),
        "value_at_risk": _value_at_risk(x, w, lvl),
        "conditional_value_at_risk": _conditional_value_at_risk(x, w, lvl),
        "hit_rate": _hit_rate(x, w),
    }


def pnl_metrics(
    pnl: ArrayLike,
    periods_per_year: ArrayLike = 252,
    *,
    scale: ArrayLike = 0.0,
    where: ArrayLike | None = None,
) -> dict[str, Array]:
    """Summary of per-period P&L increments in absolute units (sekai's `pnl_summary`).

    For processes that start from zero wealth (a market maker's mark-to-market P&L), where
    returns are undefined.

    Args:
        pnl: per-period P&L increments, shape `(..., n)`.
        periods_per_year: periods in a year (annualises the Sharpe ratio), positive.
        scale: size of the cumulative P&L the increments are differences of (its largest
            absolute value, say): a standard deviation within `16 eps * (scale + max|x|)`
            of zero counts as zero. 0 treats the increments as exact.
        where: optional boolean mask of the periods that count.

    Returns:
        A dict with `n_periods`, `total_pnl`, `mean_pnl`, `pnl_volatility` (ddof=1),
        `sharpe_ratio`, `max_drawdown` (absolute, from a running peak starting at 0) and
        `hit_rate`, each of shape `pnl.shape[:-1]`.

    Example:
        >>> from parallax.finance import pnl_metrics
        >>> m = pnl_metrics([1.0, -2.0, 3.0])
        >>> float(m["total_pnl"]), float(m["max_drawdown"])
        (2.0, 2.0)
    """
    _check_positive(periods_per_year, "periods_per_year")
    _check_non_negative(scale, "scale")
    x = _series(pnl, "pnl")
    w = _mask(where, x)
    return _pnl(x, w, _scalar(periods_per_year, x.dtype), _scalar(scale, x.dtype))


@jax.jit
def _pnl(x: Array, w: Array, ppy: Array, scale: Array) -> dict[str, Array]:
    sd = _sample_std(x, w, offset=scale)
    mean = _mean(x, w)
    flows = jnp.where(w, x, jnp.zeros_like(x))
    zeros = jnp.zeros((*x.shape[:-1], 1), x.dtype)
    cumulative = jnp.concatenate([zeros, jnp.cumsum(flows, axis=-1)], axis=-1)
    drawdown = jax.lax.cummax(cumulative, axis=cumulative.ndim - 1) - cumulative
    zero = sd == 0
    sharpe = mean / jnp.where(zero, jnp.ones_like(sd), sd) * jnp.sqrt(ppy)
    return {
        "n_periods": jnp.sum(w, axis=-1, dtype=jnp.int32),
        "total_pnl": jnp.sum(flows, axis=-1),
        "mean_pnl": mean,
        "pnl_volatility": sd,
        "sharpe_ratio": jnp.where(zero, jnp.zeros_like(sharpe), sharpe),
        "max_drawdown": jnp.max(drawdown, axis=-1),
        "hit_rate": _hit_rate(x, w),
    }
