"""Invariants of `LimitOrderBookEnv`, for the battery's invariant sweep.

- `lob_invariants(env)`: `{name: fn(state) -> bool array}`, the form of
  `parallax.finance._invariants.invariants_for`; `LimitOrderBookEnv.invariants` returns it,
  so the sweep finds it on the env.

Each function reads only the `State` it is given and the env's static configuration, so it
runs under `jit` and `vmap`. The wealth identity allows relative `1e-5` of the magnitudes
(float32 rounding of one product and one sum); the others are exact integer identities.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

__all__ = ["lob_invariants"]

_ONE_STEP = 1e-5


def lob_invariants(env: Any) -> dict[str, Callable[[Any], Any]]:
    """The invariants of a `LimitOrderBookEnv`.

    - `wealth_identity`: `info["wealth"] == cash + inventory * mid` (mid from the book).
    - `no_crossed_book`: after matching, the best bid is below the best ask.
    - `volume_conserved`: the agent's position is what its fills bought minus sold, each
      resting order's size is >= 1 (an empty slot holds 0), the agent rests at most one
      order of at most `order_size` lots per side, and the inventory stays within
      `max_inventory`.
    - `trade_log_consistent`: the trade mask marks exactly the logged trades, and every
      logged trade has a positive size and a side of +1 or -1.
    """
    max_inventory, order_size = env.max_inventory, env.order_size

    def wealth_identity(state: Any) -> Any:
        book, account, info = state.env_state.book, state.env_state.account, state.info
        has_both = jnp.any(book.valid[0]) & jnp.any(book.valid[1])
        bid = jnp.max(jnp.where(book.valid[0], book.price[0], 0))
        ask = jnp.min(jnp.where(book.valid[1], book.price[1], jnp.iinfo(jnp.int32).max))
        mid = jnp.where(has_both, (bid + ask).astype(info["wealth"].dtype) * 0.5, info["mid_price"])
        expected = account.cash.astype(mid.dtype) + account.inventory.astype(mid.dtype) * mid
        wealth = info["wealth"]
        scale = 1.0 + jnp.abs(expected) + jnp.abs(wealth)
        return (jnp.abs(wealth - expected) <= _ONE_STEP * scale) & (
            info["cash"] == account.cash.astype(wealth.dtype)
        )

    def no_crossed_book(state: Any) -> Any:
        book = state.env_state.book
        has_both = jnp.any(book.valid[0]) & jnp.any(book.valid[1])
        bid = jnp.max(jnp.where(book.valid[0], book.price[0], 0))
        ask = jnp.min(jnp.where(book.valid[1], book.price[1], jnp.iinfo(jnp.int32).max))
        return ~has_both | (bid < ask)

    def volume_conserved(state: Any) -> Any:
        book, account = state.env_state.book, state.env_state.account
        sizes_ok = jnp.all(jnp.where(book.valid, book.size >= 1, book.size == 0))
        mine = book.valid & (book.owner == 0)
        per_side = jnp.sum(mine, axis=1, dtype=jnp.int32)
        own_sizes = jnp.all(jnp.where(mine, book.size <= order_size, True))
        position = account.inventory == account.bought - account.sold
        within = jnp.abs(account.inventory) <= max_inventory
        return sizes_ok & jnp.all(per_side <= 1) & own_sizes & position & within

    def trade_log_consistent(state: Any) -> Any:
        trades = state.env_state.trades
        mask = state.observation["trades"]["mask"]
        n = mask.shape[0]
        marked = jnp.sum(mask, dtype=jnp.int32) == trades.count
        first = mask == (jnp.arange(n) < trades.count).astype(mask.dtype)
        sizes = jnp.where(trades.count >= n, jnp.all(trades.size >= 1), True)
        sides = jnp.all((mask == 0) | (jnp.abs(state.observation["trades"]["values"][:, 2]) == 1.0))
        return marked & jnp.all(first) & sizes & sides

    return {
        "wealth_identity": wealth_identity,
        "no_crossed_book": no_crossed_book,
        "volume_conserved": volume_conserved,
        "trade_log_consistent": trade_log_consistent,
    }
