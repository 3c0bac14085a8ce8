"""Reading an env's `transaction_cost=`: a rate or a cost model, ours or sekai's, checked.

- `as_cost_model(x)`: a cost model from a rate (`ProportionalCost`), one of ours, or one of
  sekai's (`sekai.finance.ProportionalCost(...)` and friends are converted).
- `check_cost_inputs(cost, fields=..., lookback=...)`: refuse, at construction, a model
  whose data inputs (`volume`, `spread`, a volatility estimate) the price source lacks.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from ._costs import (
    CompositeCost,
    CostModel,
    FixedCost,
    NoCost,
    ProportionalCost,
    SpreadCost,
    SquareRootImpact,
)

__all__ = ["as_cost_model", "check_cost_inputs"]


def _from_sekai(cost: Any) -> CostModel:
    """One of sekai's cost models as ours."""
    name = type(cost).__name__
    if name == "NoCost":
        return NoCost()
    if name == "ProportionalCost":
        return ProportionalCost(cost.rate)
    if name == "FixedCost":
        return FixedCost(cost.amount, threshold=cost.threshold)
    if name == "SpreadCost":
        if cost.half_spread is None:
            return SpreadCost(fallback_spread=cost.fallback_spread)
        return SpreadCost(cost.half_spread)
    if name == "SquareRootImpact":
        return SquareRootImpact(cost.coefficient, fallback_volatility=cost.fallback_volatility)
    if name == "CompositeCost":
        return CompositeCost([_from_sekai(m) for m in cost.models])
    raise TypeError(f"unsupported sekai cost model {cost!r}")


_FIELD_UNITS = {"volume": "shares traded per step", "spread": "fraction of the price"}


def check_cost_inputs(
    cost: CostModel, *, fields: Collection[str] = (), lookback: int | None = None
) -> None:
    """Refuse, at construction, a cost model whose data inputs the price source lacks.

    Args:
        cost: the cost model.
        fields: the data fields the source provides (`MarketData.fields`; none for price
            arrays and simulated markets).
        lookback: the env's lookback, if it estimates volatility from it (`< 2` gives no
            estimate, so a model that reads `volatility` is refused).

    Raises:
        ValueError: a `volume` or `spread` the source lacks, or a volatility with
            `lookback < 2` (sekai's checks).
    """
    for name, unit in _FIELD_UNITS.items():
        if name in cost.requires and name not in fields:
            raise ValueError(
                f"{cost!r} needs a {name!r} data field ({unit}), which this price source does "
                "not provide (price arrays and simulated markets have none; MarketData(..., "
                f"{name}=...) does)"
            )
    if lookback is not None and lookback < 2 and "volatility" in cost.requires:
        raise ValueError(
            f"{cost!r} needs a per-asset volatility estimate, which takes at least 2 returns, "
            f"but lookback={lookback}; use lookback >= 2"
        )


def as_cost_model(
    cost: Any,
    name: str = "transaction_cost",
    *,
    fields: Collection[str] = (),
    lookback: int | None = None,
) -> CostModel:
    """A cost model from a rate or a cost model, as sekai's `transaction_cost=` reads it.

    Args:
        cost: one of our `CostModel`s; a sekai `CostModel` (converted); or an int or float
            (numpy scalars too, bools excluded), which becomes `ProportionalCost(cost)`.
        name: the parameter name used in error messages.
        fields: the data fields the price source provides (`check_cost_inputs`); the
            default, none, refuses the quoted `SpreadCost()` and `SquareRootImpact`.
        lookback: the env's lookback, for the volatility check (`check_cost_inputs`).

    Returns:
        A `CostModel`.

    Raises:
        ValueError: a negative or non-finite rate, or a model that needs data fields the
            source lacks.
        TypeError: anything else (a bool, a string, an array).

    Example:
        >>> as_cost_model(1e-3)
        ProportionalCost(0.001)
    """
    if isinstance(cost, CostModel) or type(cost).__module__.startswith("sekai."):
        model = cost if isinstance(cost, CostModel) else _from_sekai(cost)
        check_cost_inputs(model, fields=fields, lookback=lookback)
        return model
    if isinstance(cost, int | float | np.integer | np.floating) and not isinstance(
        cost, bool | np.bool_
    ):
        value = float(cost)
        if not (np.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {cost!r}")
        return ProportionalCost(value)
    raise TypeError(f"{name} must be a CostModel or a non-negative rate, got {cost!r}")
