"""Transaction-cost models for the finance envs, as small pytrees with pure `__call__`.

- `CostModel`: the base class; `cost(trades, equity=...)` gives the cost of a rebalance as a
  fraction of equity, and `a + b` builds a `CompositeCost`.
- `NoCost`, `ProportionalCost(rate)` (a scalar or per-asset rate), `SpreadCost(half_spread)`
  and the quoted `SpreadCost()` (reads a `spread` per asset), `FixedCost(amount,
  threshold=1e-6)`, `SquareRootImpact(coefficient=0.5)` (reads `volatility` and `volume`),
  `CompositeCost(models)`: sekai 0.2.0's cost models, with the same formulas, parameter
  checks, missing-value fills and summation order.
- `CostContext`: the inputs of one cost call.

Where the rest lives: `fill_from_median` and `sum_left_to_right` (and the parameter checks)
in `_costs_numerics`; `as_cost_model(x)` (a cost model from a rate, one of ours, or one of
sekai's) and `check_cost_inputs` in `_costs_convert`.

A cost model is an `equinox.Module`: its numbers (rates, spreads, fees) are pytree leaves, so a
model can sit in an env's params pytree and be vmapped for domain randomisation; its kind and
structure (which models, scalar or per-asset rate) are static.

Data-reading models take their inputs as keyword arguments of the call, for the fill's row:
`cost(trades, equity=..., volatility=..., volume=..., spread=...)`, each `(..., n)` (volume
in currency: shares traded times the price). Where sekai raises (a trade in a row where no
asset has a valid input and the model has no fallback), the JAX cost is NaN: inside `jit`
nothing can raise, and a NaN cost is never mistaken for a free trade.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array

from ._costs_numerics import (
    _as,
    _fallback,
    _non_negative,
    _non_negative_scalar,
    fill_from_median,
    sum_left_to_right,
)

__all__ = [
    "CompositeCost",
    "CostContext",
    "CostModel",
    "FixedCost",
    "NoCost",
    "ProportionalCost",
    "SpreadCost",
    "SquareRootImpact",
]


class CostContext(eqx.Module):
    """The inputs of one cost call, each a float array in the trades' dtype or None.

    Attributes:
        equity: `(...)` account value in currency before the trade.
        volatility: `(..., n)` per-step volatility of each asset's log returns.
        volume: `(..., n)` traded value per step of each asset, in currency.
        spread: `(..., n)` quoted bid-ask spread, a fraction of the price.
    """

    equity: Any
    volatility: Any = None
    volume: Any = None
    spread: Any = None

    def need(self, name: str, model: str, shape: tuple[int, ...]) -> Array:
        """The input `name` broadcast to the trades' `shape`; `ValueError` if not given."""
        value = getattr(self, name)
        if value is None:
            raise ValueError(
                f"{model} needs {name}=...; pass the {name!r} of the fill's row to the cost "
                "call (environments supply it from MarketData fields)"
            )
        return jnp.broadcast_to(value, shape)


class CostModel(eqx.Module):
    """Cost of a rebalance as a fraction of equity; combine models with `+`.

    `cost(trades, equity=..., volatility=None, volume=None, spread=None)` takes `trades`,
    `(..., n)` signed weight changes per asset (fractions of equity), `equity`, `(...)` the
    account value in currency before the trade (`FixedCost` and `SquareRootImpact` read it),
    and, for the models that read data (`requires`), the per-asset inputs of the fill's
    row, each `(..., n)` or broadcastable to it: `volatility` (per-step), `volume` (traded
    value in currency) and `spread` (full quoted spread, a fraction of the price). It
    returns the `(...)` cost in the trades' float dtype. Subclasses implement
    `_cost(trades, equity)`, or `_priced(trades, context)` to read the other inputs.
    """

    _REQUIRES: ClassVar[frozenset[str]] = frozenset()

    @property
    def requires(self) -> frozenset[str]:
        """The inputs the model reads, of `equity`, `volatility`, `volume`, `spread`."""
        return self._REQUIRES

    @property
    def fallbacks(self) -> frozenset[str]:
        """The inputs with an explicit fallback for rows where no asset has a valid value."""
        return frozenset()

    def __call__(
        self,
        trades: ArrayLike,
        *,
        equity: ArrayLike,
        volatility: ArrayLike | None = None,
        volume: ArrayLike | None = None,
        spread: ArrayLike | None = None,
    ) -> Array:
        """The cost of `trades` (`(..., n)`) for an account worth `equity` (`(...)`) in currency."""
        trades = jnp.asarray(trades)

        def cast(x: ArrayLike | None) -> Array | None:
            return None if x is None else jnp.asarray(x, dtype=trades.dtype)

        context = CostContext(cast(equity), cast(volatility), cast(volume), cast(spread))
        return self._priced(trades, context)

    def _priced(self, trades: Array, context: CostContext) -> Array:
        return self._cost(trades, context.equity)

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
        return sum_left_to_right(jnp.broadcast_to(rate, trades.shape) * jnp.abs(trades))

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

    With `half_spread` the half-spread is fixed. Without it (`SpreadCost()`) the model is
    quoted: it reads the full `spread` of the fill's row from the data (`spread=` in the
    call) and charges half of it; an asset whose spread is missing (NaN) or negative pays
    the row's median spread (`fill_from_median`), a zero spread is valid and free, and a
    row where no asset has a valid spread uses `fallback_spread`, or gives a NaN cost when
    it is traded (sekai raises).

    Args:
        half_spread: half-spread as a fraction of the price, finite and >= 0; a scalar or one
            per asset; None (the default) for the quoted spread.
        fallback_spread: full spread charged in rows without any valid quoted spread; a
            finite number >= 0, only with the quoted spread.

    Example:
        >>> import jax.numpy as jnp
        >>> cost = SpreadCost(half_spread=2e-4)
        >>> round(float(cost(jnp.array([1.0, -1.0]), equity=jnp.array(1e6))), 6)
        0.0004
        >>> quoted = SpreadCost()
        >>> spread = jnp.array([4e-4, jnp.nan])  # the second asset pays the median, 4e-4
        >>> round(float(quoted(jnp.array([1.0, -1.0]), equity=1e6, spread=spread)), 6)
        0.0004
    """

    half_spread: Any
    fallback_spread: Any

    def __init__(self, half_spread: Any = None, *, fallback_spread: Any = None) -> None:
        if half_spread is not None and fallback_spread is not None:
            raise ValueError(
                "fallback_spread only applies to quoted spreads (half_spread=None), got "
                f"half_spread={half_spread!r} and fallback_spread={fallback_spread!r}"
            )
        self.fallback_spread = _fallback("fallback_spread", fallback_spread)
        if half_spread is None:
            self.half_spread = None
            return
        self.half_spread = _non_negative("half_spread", half_spread)
        if self.half_spread.ndim > 1:
            raise ValueError(
                f"half_spread must be a scalar or a 1-D array, got shape {self.half_spread.shape}"
            )

    @property
    def quoted(self) -> bool:
        """Whether the spread comes from the data (`half_spread=None`)."""
        return self.half_spread is None

    @property
    def requires(self) -> frozenset[str]:
        """`{"spread"}` for the quoted spread, else nothing."""
        return frozenset({"spread"}) if self.quoted else frozenset()

    @property
    def fallbacks(self) -> frozenset[str]:
        """`{"spread"}` when a `fallback_spread` is set."""
        return frozenset() if self.fallback_spread is None else frozenset({"spread"})

    def _priced(self, trades: Array, context: CostContext) -> Array:
        size = jnp.abs(trades)
        if not self.quoted:
            half = jnp.broadcast_to(_as(self.half_spread, trades), trades.shape)
            return sum_left_to_right(half * size)
        quoted = context.need("spread", "SpreadCost()", trades.shape)
        filled, missing = fill_from_median(quoted, self.fallback_spread)
        half = jnp.asarray(0.5, trades.dtype) * filled
        total = sum_left_to_right(jnp.where(size > 0, half * size, jnp.zeros_like(size)))
        return total if self.fallback_spread is not None else _flag_unpriced(total, missing, size)

    def check_assets(self, n_assets: int) -> None:
        """Per-asset half-spreads must have one entry per asset (or a single entry)."""
        if self.quoted:
            return
        if np.ndim(self.half_spread) == 1 and np.shape(self.half_spread)[0] not in (1, n_assets):
            raise ValueError(
                f"SpreadCost half_spread has {np.shape(self.half_spread)[0]} entries but the env "
                f"has {n_assets} assets"
            )

    def __repr__(self) -> str:
        if not self.quoted:
            return f"SpreadCost(half_spread={np.asarray(self.half_spread).tolist()})"
        if self.fallback_spread is None:
            return "SpreadCost(half_spread=from data)"
        return f"SpreadCost(half_spread=from data, fallback_spread={float(self.fallback_spread)})"


def _flag_unpriced(total: Array, missing: Array, size: Array) -> Array:
    """`total`, or NaN in rows where an input had no valid value and an asset is traded."""
    unpriced = missing & jnp.any(size > 0, axis=-1)
    return jnp.where(unpriced, jnp.full_like(total, jnp.nan), total)


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

    _REQUIRES: ClassVar[frozenset[str]] = frozenset({"equity"})
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


class SquareRootImpact(CostModel):
    """Square-root market impact: `coefficient * sigma * sqrt(q / V)` per unit traded.

    Trading `q = |t| * equity` (currency) of an asset whose traded value in the step is `V`
    (currency) moves its price by about `coefficient * sigma * sqrt(q / V)`, paid on the
    whole trade, so the cost grows as `|t|^1.5`. Per asset: `unit = coefficient * sigma *
    sqrt(q / V)` if `V` is finite and > 0, else 1 (no liquidity to trade against); the cost
    is `min(unit, 1) * |t|` for a traded asset, 0 otherwise, summed over assets. A missing
    volatility (NaN, negative) pays the row's median (`fill_from_median`); a row where no
    asset has one uses `fallback_volatility`, or gives a NaN cost when traded (sekai raises).

    Args:
        coefficient: impact coefficient, a finite number >= 0 (0.5; order 0.1-1 empirically).
        fallback_volatility: per-step volatility for rows without any valid estimate; a
            finite number >= 0, or None.

    Example:
        >>> import jax.numpy as jnp
        >>> impact = SquareRootImpact(0.5)
        >>> cost = impact(jnp.array([0.1]), equity=1e6, volatility=jnp.array([0.02]),
        ...               volume=jnp.array([1e7]))  # trade 1% of the volume
        >>> round(float(cost), 8)  # 0.5 * 0.02 * sqrt(0.01) * 0.1
        0.0001
    """

    _REQUIRES: ClassVar[frozenset[str]] = frozenset({"equity", "volatility", "volume"})
    coefficient: Any
    fallback_volatility: Any

    def __init__(self, coefficient: Any = 0.5, *, fallback_volatility: Any = None) -> None:
        self.coefficient = _non_negative_scalar("coefficient", coefficient)
        self.fallback_volatility = _fallback("fallback_volatility", fallback_volatility)

    @property
    def fallbacks(self) -> frozenset[str]:
        """`{"volatility"}` when a `fallback_volatility` is set."""
        return frozenset() if self.fallback_volatility is None else frozenset({"volatility"})

    def _priced(self, trades: Array, context: CostContext) -> Array:
        name = "SquareRootImpact"
        size = jnp.abs(trades)
        equity = jnp.broadcast_to(context.equity, trades.shape[:-1])
        volatility = context.need("volatility", name, trades.shape)
        volume = context.need("volume", name, trades.shape)
        sigma, missing = fill_from_median(volatility, self.fallback_volatility)
        notional = size * equity[..., None]
        liquid = jnp.isfinite(volume) & (volume > 0)
        safe_volume = jnp.where(liquid, volume, jnp.ones_like(volume))
        participation = notional / safe_volume
        # q / V overflows float32 when V is near the smallest normal number (q = 4 against
        # V = 1.2e-38): then the root of each side, finite, as float64 computes it
        root = jnp.where(
            jnp.isinf(participation) & jnp.isfinite(notional),
            jnp.sqrt(notional) / jnp.sqrt(safe_volume),
            jnp.sqrt(participation),
        )
        root = jnp.where(liquid, root, 0.0)
        unit = jnp.where(liquid, _as(self.coefficient, trades) * sigma * root, 1.0)
        per_asset = jnp.where(size > 0, jnp.minimum(unit, 1.0) * size, jnp.zeros_like(size))
        total = sum_left_to_right(per_asset)
        if self.fallback_volatility is not None:
            return total
        return _flag_unpriced(total, missing, size)

    def __repr__(self) -> str:
        if self.fallback_volatility is None:
            return f"SquareRootImpact({float(self.coefficient)})"
        return (
            f"SquareRootImpact({float(self.coefficient)}, "
            f"fallback_volatility={float(self.fallback_volatility)})"
        )


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

    @property
    def requires(self) -> frozenset[str]:
        """The union of the parts' inputs."""
        return frozenset().union(*(m.requires for m in self.models))

    @property
    def fallbacks(self) -> frozenset[str]:
        """The inputs for which every part that reads them has a fallback."""
        return frozenset(
            name
            for name in self.requires
            if all(name in m.fallbacks for m in self.models if name in m.requires)
        )

    def _priced(self, trades: Array, context: CostContext) -> Array:
        total = self.models[0]._priced(trades, context)
        for model in self.models[1:]:
            total = total + model._priced(trades, context)
        return total

    def check_assets(self, n_assets: int) -> None:
        """Check every part."""
        for model in self.models:
            model.check_assets(n_assets)

    def __repr__(self) -> str:
        return " + ".join(repr(m) for m in self.models)
