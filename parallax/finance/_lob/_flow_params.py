"""The background flow's parameters and the record of one run, as frozen pytrees.

- `FlowParams`: the flow's parameters (sekai's `ZeroIntelligenceFlow` keywords, defaults and
  validation), a frozen pytree of numbers, so a batch can vmap over them.
- `FlowStats`: what one run of the flow did (event counts, the truncation flag, the trades
  of the interval in a ring buffer, and the fills of agents' resting orders).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import numpy as np

__all__ = ["FlowParams", "FlowStats"]


def _check_rate(name: str, value: Any, *, strict: bool) -> None:
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        return  # arrays (batched or traced parameters) are the caller's contract
    bound = "> 0" if strict else ">= 0"
    ok = math.isfinite(float(value)) and (float(value) > 0 if strict else float(value) >= 0)
    if not ok:
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}.")


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class FlowParams:
    """The parameters of the background flow (sekai's `ZeroIntelligenceFlow`).

    Every field is a number (or an array, for a batch); Python numbers are validated with
    sekai's rules and messages naming the argument.

    Attributes:
        limit_rate: Limit orders per unit time, per side, finite and > 0 (default 10.0).
        market_rate: Market orders per unit time, per side, finite and > 0 (default 2.0).
        cancel_rate: Cancellations per resting background order per unit time, finite and
            >= 0 (default 0.5).
        max_offset: Largest limit-order distance from the opposite best quote, in ticks,
            an integer >= 1 (default 10).
        offset_decay: Decay of the offset distribution per tick, finite and >= 0 (0 is
            uniform; default 0.5).
        mean_size: Mean order size, finite and >= 1 (default 3.0). Sizes are
            `1 + Poisson(mean_size - 1)`, by exact inversion for `mean_size <= 31` and by
            the rounded normal approximation above.

    Example:
        >>> from parallax.finance._lob import FlowParams
        >>> FlowParams(cancel_rate=1.0).cancel_rate
        1.0
    """

    limit_rate: Any = 10.0
    market_rate: Any = 2.0
    cancel_rate: Any = 0.5
    max_offset: Any = 10
    offset_decay: Any = 0.5
    mean_size: Any = 3.0

    def __post_init__(self) -> None:
        _check_rate("limit_rate", self.limit_rate, strict=True)
        _check_rate("market_rate", self.market_rate, strict=True)
        _check_rate("cancel_rate", self.cancel_rate, strict=False)
        _check_rate("offset_decay", self.offset_decay, strict=False)
        size = self.mean_size
        is_number = isinstance(size, int | float | np.number)
        if (
            is_number
            and not isinstance(size, bool | np.bool_)
            and not (math.isfinite(float(size)) and float(size) >= 1)
        ):
            raise ValueError(f"mean_size must be finite and >= 1, got {size!r}.")
        offset = self.max_offset
        if isinstance(offset, bool | np.bool_ | float | np.floating):
            raise ValueError(f"max_offset must be an integer, got {offset!r}.")
        if isinstance(offset, int | np.integer) and int(offset) < 1:
            raise ValueError(f"max_offset must be >= 1, got {offset!r}.")


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class FlowStats:
    """What one run of the flow did.

    The trade log is a ring buffer of the last `T` (`max_trades`) trades of the run: trade
    `j` (0-based, in execution order) sits at `j % T`, so with `n_trades <= T` entry `j`
    is trade `j`; later entries are 0.

    Attributes:
        events: int32 `()`, Poisson events that happened (a skipped market order counts).
        limit_orders, market_orders, cancels: int32 `()`, events of each kind carried out
            (market orders that found the opposite side empty are not counted).
        refills: int32 `()`, limit orders placed to refill an emptied side.
        iterations: int32 `()`, loop iterations used: one per event and per refill, one
            more per execution of an order after its first (an iteration executes against
            one resting order), and one for the final waiting time that crossed `until`.
        truncated: bool `()`, True when the loop stopped at `max_events` iterations before
            reaching `until`: the book is then that of an earlier time.
        n_trades: int32 `()`, executions in the run.
        volume: int32 `()`, quantity executed in the run.
        trade_time: float `(T,)`, the time of each logged trade.
        trade_price, trade_size: int32 `(T,)`, the execution price and quantity.
        trade_maker_owner, trade_taker_side: int32 `(T,)`, the resting order's owner and
            the side of the incoming (background) order.
        agent_bought, agent_sold: int32 `(A,)`, quantity bought and sold by owners
            `0..A-1` (`num_agents`) through their resting orders.
        agent_cash: int32 `(A,)`, their cash change in ticks (sold value - bought value).
        agent_fills: int32 `(A,)`, the number of executions against their resting orders.
        end_time: float `()`, the time reached: `until`, or the last event's time if
            truncated.
    """

    events: jax.Array
    limit_orders: jax.Array
    market_orders: jax.Array
    cancels: jax.Array
    refills: jax.Array
    iterations: jax.Array
    truncated: jax.Array
    n_trades: jax.Array
    volume: jax.Array
    trade_time: jax.Array
    trade_price: jax.Array
    trade_size: jax.Array
    trade_maker_owner: jax.Array
    trade_taker_side: jax.Array
    agent_bought: jax.Array
    agent_sold: jax.Array
    agent_cash: jax.Array
    agent_fills: jax.Array
    end_time: jax.Array
