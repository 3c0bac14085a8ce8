"""Trading performance metrics as pure JAX functions, with sekai 0.2.0's definitions.

- return-series metrics: `total_return`, `annualized_return`, `annualized_volatility`,
  `sharpe_ratio`, `sortino_ratio`, `max_drawdown`, `calmar_ratio`, `value_at_risk`,
  `conditional_value_at_risk`, `hit_rate`;
- series helpers: `returns_from_equity`, `equity_curve`, `drawdown_series`.

The summaries, `performance_metrics` (every return metric at once) and `pnl_metrics` (for
P&L processes in absolute units, such as a market maker's wealth), are in
`_metrics_summary`; the argument checks and jitted kernels that both use in
`_metrics_kernels`.

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

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array

from ._metrics_kernels import (
    _annualized_return,
    _annualized_volatility,
    _calmar_ratio,
    _check_finite,
    _check_flag,
    _check_level,
    _check_positive,
    _conditional_value_at_risk,
    _drawdown_series,
    _growth,
    _hit_rate,
    _max_drawdown,
    _prepare,
    _scalar,
    _series,
    _sharpe_ratio,
    _signed,
    _sortino_ratio,
    _total_return,
    _value_at_risk,
)

__all__ = [
    "annualized_return",
    "annualized_volatility",
    "calmar_ratio",
    "conditional_value_at_risk",
    "drawdown_series",
    "equity_curve",
    "hit_rate",
    "max_drawdown",
    "returns_from_equity",
    "sharpe_ratio",
    "sortino_ratio",
    "total_return",
    "value_at_risk",
]


# -- shared argument handling --------------------------------------------------------------------
# A kernel of `_metrics_kernels` takes the prepared `(x, w)` of `_prepare` and its numbers as
# arrays of `x`'s dtype; these check a metric's keyword numbers and make that call.
_Kernel = Callable[..., Array]


def _per_year(
    kernel: _Kernel, returns: ArrayLike, periods_per_year: ArrayLike, where: ArrayLike | None
) -> Array:
    """`kernel(x, w, periods_per_year)`, with `periods_per_year` checked positive."""
    _check_positive(periods_per_year, "periods_per_year")
    x, w = _prepare(returns, where)
    return kernel(x, w, _scalar(periods_per_year, x.dtype))


def _excess(
    kernel: _Kernel,
    metric: str,
    returns: ArrayLike,
    periods_per_year: ArrayLike,
    rate: ArrayLike,
    rate_name: str,
    where: ArrayLike | None,
    per_period: bool,
) -> Array:
    """`kernel(x, w, periods_per_year, annual_rate)` of a ratio of excess returns.

    `rate` (the argument `rate_name`) is annual, or per period (scaled by
    `periods_per_year`) with `per_period`; `metric` names the function in the flag's check.
    """
    _check_positive(periods_per_year, "periods_per_year")
    _check_finite(rate, rate_name)
    _check_flag(per_period, "per_period", metric)
    x, w = _prepare(returns, where)
    ppy = _scalar(periods_per_year, x.dtype)
    annual = _scalar(rate, x.dtype)
    return kernel(x, w, ppy, annual * ppy if per_period else annual)


def _tail(
    kernel: _Kernel,
    metric: str,
    returns: ArrayLike,
    level: ArrayLike,
    where: ArrayLike | None,
    as_loss: bool,
) -> Array:
    """`kernel(x, w, level)` of a tail metric, signed by `as_loss` (`metric` for the check)."""
    _check_level(level)
    _check_flag(as_loss, "as_loss", metric)
    x, w = _prepare(returns, where)
    return _signed(kernel(x, w, _scalar(level, x.dtype)), as_loss)


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
    return _per_year(_annualized_return, returns, periods_per_year, where)


def annualized_volatility(
    returns: ArrayLike, periods_per_year: ArrayLike = 252, *, where: ArrayLike | None = None
) -> Array:
    """Annualised volatility, `std(r, ddof=1) * sqrt(periods_per_year)` (0 for n < 2).

    Example:
        >>> from parallax.finance import annualized_volatility
        >>> round(float(annualized_volatility([0.01, -0.01], periods_per_year=4)), 4)
        0.0283
    """
    return _per_year(_annualized_volatility, returns, periods_per_year, where)


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
    args = (returns, periods_per_year, risk_free, "risk_free", where, per_period)
    return _excess(_sharpe_ratio, "sharpe_ratio", *args)


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
    args = (returns, periods_per_year, target, "target", where, per_period)
    return _excess(_sortino_ratio, "sortino_ratio", *args)


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
    return _per_year(_calmar_ratio, returns, periods_per_year, where)


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
    return _tail(_value_at_risk, "value_at_risk", returns, level, where, as_loss)


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
    args = (returns, level, where, as_loss)
    return _tail(_conditional_value_at_risk, "conditional_value_at_risk", *args)


def hit_rate(returns: ArrayLike, *, where: ArrayLike | None = None) -> Array:
    """Fraction of active (non-zero) periods with a positive return; 0 if none is active.

    Example:
        >>> from parallax.finance import hit_rate
        >>> float(hit_rate([0.01, 0.0, -0.02, 0.03]))
        0.6666666865348816
    """
    return _hit_rate(*_prepare(returns, where))
