"""Every finance metric of a series at once, as one jitted dict: the evaluation's summaries.

- `performance_metrics`: every return-series metric of `_metrics` (sekai's
  `performance_summary` as arrays), with `n_periods`.
- `pnl_metrics`: a summary of per-period P&L increments in absolute units (sekai's
  `pnl_summary`), for processes that start from zero wealth, such as a market maker's.

Both follow the conventions of `_metrics` (last axis is time, `where=` masks, sekai's
definitions) and compute with the kernels of `_metrics_kernels`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array

from ._metrics_kernels import (
    _annualized_return,
    _annualized_volatility,
    _calmar_ratio,
    _check_finite,
    _check_level,
    _check_non_negative,
    _check_positive,
    _conditional_value_at_risk,
    _hit_rate,
    _mask,
    _max_drawdown,
    _mean,
    _prepare,
    _sample_std,
    _scalar,
    _series,
    _sharpe_ratio,
    _sortino_ratio,
    _total_return,
    _value_at_risk,
)

__all__ = ["performance_metrics", "pnl_metrics"]


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
