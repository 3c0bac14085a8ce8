"""Transaction-cost models for the finance envs, as small pytrees with pure `__call__`.

- `CostModel`: the base class; `cost(trades, equity=...)` gives the cost of a rebalance as a
  fraction of equity, and `a + b` builds a `CompositeCost`.
- `NoCost`, `ProportionalCost(rate)` (a scalar or per-asset rate), `SpreadCost(half_spread)`,
  `FixedCost(amount, threshold=1e-6)`, `CompositeCost(models)`: sekai 0.2.0's cost models,
  with the same formulas, parameter checks and summation order.
- `as_cost_model(x)`: a cost model from a rate, one of ours, or one of sekai's
  (`sekai.finance.ProportionalCost(...)` and friends are converted).
- `sum_left_to_right(x)`: the summation order numpy uses for short vectors.

A cost model is an `equinox.Module`: its numbers (rates, spreads, fees) are pytree leaves, so a
model can sit in an env's params pytree and be vmapped for domain randomisation; its kind and
structure (which models, scalar or per-asset rate) are static.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array

__all__ = [
    "CompositeCost",
    "CostModel",
    "FixedCost",
    "NoCost",
    "ProportionalCost",
    "SpreadCost",
    "as_cost_model",
    "sum_left_to_right",
]


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


class CostModel(eqx.Module):
    """Cost of a rebalance as a fraction of equity; combine models with `+`.

    `cost(trades, equity=...)` takes `trades`, `(..., n)` signed weight changes per asset
    (fractions of equity), and `equity`, `(...)` the account value in currency before the
    trade (only `FixedCost` reads it); it returns the `(...)` cost in the trades' float dtype.
    Subclasses implement `_cost(trades, equity)` on JAX arrays.
    """

    requires: ClassVar[frozenset[str]] = frozenset()

    def __call__(self, trades: ArrayLike, *, equity: ArrayLike) -> Array:
        """The cost of `trades` (`(..., n)`) for an account worth `equity` (`(...)`) in currency."""
        trades = jnp.asarray(trades)
        return self._cost(trades, jnp.asarray(equity, dtype=trades.dtype))

    def _cost(self, trades: Array, equity: Array) -> Array:
        raise NotImplementedError

    def __add__(self, other: object) -> CompositeCost:
        if not isinstance(other, CostModel):
            return NotImplemented
        return CompositeCost([self, other])

    def check_assets(self, n_assets: int) -> None:
        """Raise `ValueError` if a per-asset parameter does not have `n_assets` entries."""


class NoCost(CostModel):
    """Frictionless trading: every rebalance is free.

    Example:
        >>> import jax.numpy as jnp
        >>> float(NoCost()(jnp.array([0.5, -0.2]), equity=jnp.array(1e6)))
        0.0
    """

    def _cost(self, trades: Array, equity: Array) -> Array:
        return jnp.zeros(trades.shape[:-1], trades.dtype)

    def __repr__(self) -> str:
        return "NoCost()"


class ProportionalCost(CostModel):
    """`rate * |trade|` per asset: commissions and fees proportional to the traded value.

    Args:
        rate: finite, >= 0; a scalar (`rate * sum|t|`) or one rate per asset
            (`sum rate_i |t_i|`), float64 `()` or `(n,)`.

    Example:
        >>> import jax.numpy as jnp
        >>> cost = ProportionalCost(1e-3)
        >>> round(float(cost(jnp.array([0.5, -0.25]), equity=jnp.array(1e6))), 6)
        0.00075
    """

    rate: Any

    def __init__(self, rate: Any) -> None:
        self.rate = _non_negative("rate", rate)
        if self.rate.ndim > 1:
            raise ValueError(f"rate must be a scalar or a 1-D array, got shape {self.rate.shape}")

    def _cost(self, trades: Array, equity: Array) -> Array:
        rate = _as(self.rate, trades)
        if np.ndim(self.rate) == 0:
            return rate * sum_left_to_right(jnp.abs(trades))
        return sum_left_to_right(rate * jnp.abs(trades))

    def check_assets(self, n_assets: int) -> None:
        """Per-asset rates must have one entry per asset (or a single entry)."""
        if np.ndim(self.rate) == 1 and np.shape(self.rate)[0] not in (1, n_assets):
            raise ValueError(
                f"ProportionalCost rate has {np.shape(self.rate)[0]} entries but the env has "
                f"{n_assets} assets"
            )

    def __repr__(self) -> str:
        return f"ProportionalCost({np.asarray(self.rate).tolist()})"


class SpreadCost(CostModel):
    """Crossing half the bid-ask spread on every trade: `sum half_i |t_i|`.

    Only the fixed half-spread form of sekai's `SpreadCost` exists here: the quoted form
    (`half_spread=None`) reads a `spread` data field, which price arrays and simulated markets
    do not have (sekai refuses it there as well).

    Args:
        half_spread: half-spread as a fraction of the price, finite and >= 0; a scalar or one
            per asset.

    Example:
        >>> import jax.numpy as jnp
        >>> cost = SpreadCost(half_spread=2e-4)
        >>> round(float(cost(jnp.array([1.0, -1.0]), equity=jnp.array(1e6))), 6)
        0.0004
    """

    half_spread: Any

    def __init__(self, half_spread: Any) -> None:
        if half_spread is None:
            raise ValueError(
                "SpreadCost(half_spread=None) prices trades with a quoted 'spread' data field, "
                "which price arrays and simulated markets do not provide; give half_spread"
            )
        self.half_spread = _non_negative("half_spread", half_spread)
        if self.half_spread.ndim > 1:
            raise ValueError(
                f"half_spread must be a scalar or a 1-D array, got shape {self.half_spread.shape}"
            )

    def _cost(self, trades: Array, equity: Array) -> Array:
        return sum_left_to_right(_as(self.half_spread, trades) * jnp.abs(trades))

    def check_assets(self, n_assets: int) -> None:
        """Per-asset half-spreads must have one entry per asset (or a single entry)."""
        if np.ndim(self.half_spread) == 1 and np.shape(self.half_spread)[0] not in (1, n_assets):
            raise ValueError(
                f"SpreadCost half_spread has {np.shape(self.half_spread)[0]} entries but the env "
                f"has {n_assets} assets"
            )

    def __repr__(self) -> str:
        return f"SpreadCost(half_spread={np.asarray(self.half_spread).tolist()})"


class FixedCost(CostModel):
    """A fixed fee in currency per traded asset: `amount * #{|t_i| > threshold} / equity`.

    Args:
        amount: fee per traded asset, in the currency of the env's `capital`; a finite number
            >= 0 (`TypeError` for an array).
        threshold: weight changes at or below it are not trades; finite >= 0, default 1e-6.

    Example:
        >>> import jax.numpy as jnp
        >>> cost = FixedCost(10.0)
        >>> round(float(cost(jnp.array([0.5, 0.0]), equity=jnp.array(1000.0))), 6)
        0.01
    """

    requires: ClassVar[frozenset[str]] = frozenset({"equity"})
    amount: Any
    threshold: Any

    def __init__(self, amount: Any, *, threshold: Any = 1e-6) -> None:
        self.amount = _non_negative_scalar("amount", amount)
        self.threshold = _non_negative_scalar("threshold", threshold)

    def _cost(self, trades: Array, equity: Array) -> Array:
        count = jnp.sum(jnp.abs(trades) > _as(self.threshold, trades), axis=-1).astype(trades.dtype)
        positive = equity > 0
        fee = _as(self.amount, trades) * count / jnp.where(positive, equity, 1.0)
        return jnp.where(positive, fee, jnp.zeros_like(fee))

    def __repr__(self) -> str:
        return f"FixedCost({float(self.amount)})"


class CompositeCost(CostModel):
    """The sum of several cost models, added in order (build it with `+`).

    Args:
        models: a non-empty sequence of cost models; nested composites are flattened.

    Example:
        >>> import jax.numpy as jnp
        >>> cost = ProportionalCost(1e-3) + SpreadCost(half_spread=1e-4)
        >>> round(float(cost(jnp.array([1.0]), equity=jnp.array(1e6))), 6)
        0.0011
    """

    models: tuple[CostModel, ...]

    def __init__(self, models: Sequence[CostModel]) -> None:
        flat: list[CostModel] = []
        for model in models:
            if not isinstance(model, CostModel):
                raise TypeError(f"CompositeCost takes cost models, got {model!r}")
            flat.extend(model.models if isinstance(model, CompositeCost) else [model])
        if not flat:
            raise ValueError("CompositeCost needs at least one cost model")
        self.models = tuple(flat)

    def _cost(self, trades: Array, equity: Array) -> Array:
        total = self.models[0]._cost(trades, equity)
        for model in self.models[1:]:
            total = total + model._cost(trades, equity)
        return total

    def check_assets(self, n_assets: int) -> None:
        """Check every part."""
        for model in self.models:
            model.check_assets(n_assets)

    def __repr__(self) -> str:
        return " + ".join(repr(m) for m in self.models)


def _from_sekai(cost: Any) -> CostModel:
    """One of sekai's cost models as ours (only the kinds price arrays can support)."""
    name = type(cost).__name__
    if name == "NoCost":
        return NoCost()
    if name == "ProportionalCost":
        return ProportionalCost(cost.rate)
    if name == "FixedCost":
        return FixedCost(cost.amount, threshold=cost.threshold)
    if name == "SpreadCost":
        if cost.half_spread is None:
            raise ValueError(
                f"{cost!r} needs a 'spread' data field (fraction of the price), which price "
                "arrays and simulated markets do not provide"
            )
        return SpreadCost(cost.half_spread)
    if name == "CompositeCost":
        return CompositeCost([_from_sekai(m) for m in cost.models])
    if name == "SquareRootImpact":
        raise ValueError(
            f"{cost!r} needs a 'volume' data field (shares traded per step), which price "
            "arrays and simulated markets do not provide"
        )
    raise TypeError(f"unsupported sekai cost model {cost!r}")


def as_cost_model(cost: Any, name: str = "transaction_cost") -> CostModel:
    """A cost model from a rate or a cost model, as sekai's `transaction_cost=` reads it.

    Args:
        cost: one of our `CostModel`s; a sekai `CostModel` (converted); or an int or float
            (numpy scalars too, bools excluded), which becomes `ProportionalCost(cost)`.
        name: the parameter name used in error messages.

    Returns:
        A `CostModel`.

    Raises:
        ValueError: a negative or non-finite rate, or a sekai model that needs data fields.
        TypeError: anything else (a bool, a string, an array).

    Example:
        >>> as_cost_model(1e-3)
        ProportionalCost(0.001)
    """
    if isinstance(cost, CostModel):
        return cost
    if type(cost).__module__.startswith("sekai."):
        return _from_sekai(cost)
    if isinstance(cost, int | float | np.integer | np.floating) and not isinstance(
        cost, bool | np.bool_
    ):
        value = float(cost)
        if not (np.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {cost!r}")
        return ProportionalCost(value)
    raise TypeError(f"{name} must be a CostModel or a non-negative rate, got {cost!r}")
