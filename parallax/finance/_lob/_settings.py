"""The settings both book envs (`LimitOrderBook-v0` and its market) share: `_static_int`,
`BookSettings` (their validated settings) and `book_settings` (their keywords)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .._validation import finite_number
from ._flow_bounds import default_capacity, default_max_events
from ._flow_params import FlowParams

if TYPE_CHECKING:
    from ._env import LimitOrderBookParams


def _static_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int, got {value!r}")
    return int(value)


class BookSettings:
    """The settings both limit order book envs share, validated in sekai's order.

    `_init_book_settings` checks them (naming the parameter, the value and the allowed
    range) and sets them as attributes; each env checks its own settings before.
    """

    params: LimitOrderBookParams
    mid_price: int
    session_length: float
    levels: int
    max_quote_offset: int
    order_size: int
    max_inventory: int
    max_trades: int
    warmup: float
    capacity: int
    max_events: int
    warmup_max_events: int

    def _init_book_settings(
        self,
        *,
        flow: FlowParams | None,
        mid_price: int,
        session_length: float,
        levels: int,
        max_quote_offset: int,
        order_size: int,
        max_inventory: int,
        inventory_penalty: float,
        max_trades: int,
        warmup: float,
        capacity: int | None,
        max_events: int | None,
        min_capacity: int,
        capacity_rule: str,
        reserved: int,
        flow_interval: float,
        interval_within_session: bool = False,
    ) -> tuple[FlowParams, float]:
        """Validate and set the shared settings; return the params' `(flow, inventory_penalty)`.

        `capacity` must be at least `min_capacity` (`capacity_rule` says why, in the error);
        `None` derives it from the flow (`default_capacity` over the warm-up and the session,
        `reserved` slots a side kept for the agents' orders);
        `max_events` defaults to what the flow needs for an interval of `flow_interval` (at
        most the session's length if `interval_within_session`).
        """
        ints = {
            name: _static_int(name, value)
            for name, value in (
                ("mid_price", mid_price),
                ("levels", levels),
                ("max_quote_offset", max_quote_offset),
                ("order_size", order_size),
                ("max_inventory", max_inventory),
                ("max_trades", max_trades),
                *(() if capacity is None else (("capacity", capacity),)),
            )
        }
        room = 2 * (ints["max_quote_offset"] + ints["levels"])
        if ints["mid_price"] < room:
            raise ValueError(
                "mid_price must leave room for the quotes: mid_price >= 2 * (max_quote_offset "
                f"+ levels) = {room}, got {mid_price!r}"
            )
        for name in ("levels", "max_quote_offset", "order_size", "max_inventory", "max_trades"):
            if ints[name] < 1:
                raise ValueError(f"{name} must be >= 1, got {ints[name]}")
        length = finite_number("session_length", session_length, ">0")
        penalty = finite_number("inventory_penalty", inventory_penalty, ">=0")
        warm = finite_number("warmup", warmup, ">=0")
        if capacity is not None and ints["capacity"] < min_capacity:
            raise ValueError(f"capacity must be >= {capacity_rule}, got {capacity!r}")
        if ints["mid_price"] > 2**29 or ints["order_size"] * ints["max_inventory"] > 2**24:
            raise ValueError(
                "mid_price must be <= 2**29 and order_size * max_inventory <= 2**24 (int32 "
                f"ticks), got mid_price={mid_price!r}, order_size={order_size!r}, "
                f"max_inventory={max_inventory!r}"
            )
        if flow is None:
            flow = FlowParams()
        if not isinstance(flow, FlowParams):
            raise TypeError(f"flow must be a FlowParams or None, got {type(flow).__name__}")
        if capacity is None:
            derived = default_capacity(flow, warm + length, reserved=reserved)
            ints["capacity"] = max(derived, min_capacity)
        if max_events is None:
            longest = min(flow_interval, length) if interval_within_session else flow_interval
            events = default_max_events(flow, longest, ints["capacity"])
        else:
            events = _static_int("max_events", max_events)
            if events < 1:
                raise ValueError(f"max_events must be >= 1, got {events}")
        self.mid_price = ints["mid_price"]
        self.session_length = length
        self.levels = ints["levels"]
        self.max_quote_offset = ints["max_quote_offset"]
        self.order_size = ints["order_size"]
        self.max_inventory = ints["max_inventory"]
        self.max_trades = ints["max_trades"]
        self.warmup = warm
        self.capacity = ints["capacity"]
        self.max_events = events
        self.warmup_max_events = default_max_events(flow, max(warm, 1e-9), ints["capacity"])
        return flow, penalty


BOOK_SETTINGS = (
    "flow",
    "mid_price",
    "session_length",
    "levels",
    "max_quote_offset",
    "order_size",
    "max_inventory",
    "inventory_penalty",
    "max_trades",
    "warmup",
    "capacity",
    "max_events",
)
"""The constructor keywords both book envs pass on to `_init_book_settings`."""


def book_settings(given: Mapping[str, Any]) -> dict[str, Any]:
    """The `BOOK_SETTINGS` among `given` (a constructor's `locals()`), by name."""
    return {name: given[name] for name in BOOK_SETTINGS}
