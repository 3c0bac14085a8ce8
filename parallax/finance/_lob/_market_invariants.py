"""Invariants of `LimitOrderBookMarketEnv`, per state (for tests and the battery's sweep).

- `market_invariants(env)`: `{name: fn(state) -> bool}`; `LimitOrderBookMarketEnv.invariants`
  returns it.

Each function reads only the `MARLState` it is given and the env's static configuration, so
it runs under `jit` and `vmap`. The wealth identity allows relative `1e-5` of the magnitudes
(float32 rounding of one product and one sum); the others are exact integer identities.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

__all__ = ["market_invariants"]

_ONE_STEP = 1e-5


def _best(book: Any) -> tuple[Any, Any, Any]:
    has_both = jnp.any(book.valid[0]) & jnp.any(book.valid[1])
    bid = jnp.max(jnp.where(book.valid[0], book.price[0], 0))
    ask = jnp.min(jnp.where(book.valid[1], book.price[1], jnp.iinfo(jnp.int32).max))
    return has_both, bid, ask


def market_invariants(env: Any) -> dict[str, Callable[[Any], Any]]:
    """The invariants of a `LimitOrderBookMarketEnv`.

    - `wealth_identity`: per trader, `info["wealth"] == cash + inventory * mid`.
    - `no_crossed_book`: after matching, the best bid is below the best ask.
    - `volume_conserved`: per trader, the position is what its fills bought minus sold and
      within `max_inventory`; each trader rests at most one order of at most `order_size`
      lots per side; every resting order has a size >= 1 (an empty slot holds 0).
    - `inactive_slots_zero`: inactive traders' observations are zeros.
    """
    n, max_inventory, order_size = env.num_agents, env.max_inventory, env.order_size

    def wealth_identity(state: Any) -> Any:
        book, accounts, info = state.env_state.book, state.env_state.accounts, state.info
        has_both, bid, ask = _best(book)
        dtype = info["wealth"].dtype
        mid = jnp.where(has_both, (bid + ask).astype(dtype) / 2, info["mid_price"])
        expected = accounts.cash.astype(dtype) + accounts.inventory.astype(dtype) * mid
        wealth = info["wealth"]
        scale = 1.0 + jnp.abs(expected) + jnp.abs(wealth)
        close = jnp.abs(wealth - expected) <= _ONE_STEP * scale
        return jnp.all(close & (info["cash"] == accounts.cash.astype(dtype)))

    def no_crossed_book(state: Any) -> Any:
        has_both, bid, ask = _best(state.env_state.book)
        return ~has_both | (bid < ask)

    def volume_conserved(state: Any) -> Any:
        book, accounts = state.env_state.book, state.env_state.accounts
        sizes_ok = jnp.all(jnp.where(book.valid, book.size >= 1, book.size == 0))
        owners = jnp.arange(n, dtype=jnp.int32)[:, None, None]
        mine = book.valid[None] & (book.owner[None] == owners)  # (A, 2, C)
        per_side = jnp.sum(mine, axis=2, dtype=jnp.int32)
        own_sizes = jnp.all(jnp.where(mine, book.size[None] <= order_size, True))
        position = accounts.inventory == accounts.bought - accounts.sold
        within = jnp.abs(accounts.inventory) <= max_inventory
        return sizes_ok & jnp.all(per_side <= 1) & own_sizes & jnp.all(position & within)

    def inactive_slots_zero(state: Any) -> Any:
        active = state.agents.active
        leaves = [state.agents.observation[k] for k in ("book", "agent")]
        leaves += list(state.agents.observation["trades"].values())
        return jnp.all(
            jnp.stack([jnp.all((x.reshape(n, -1) == 0) | active[:, None]) for x in leaves])
        )

    return {
        "wealth_identity": wealth_identity,
        "no_crossed_book": no_crossed_book,
        "volume_conserved": volume_conserved,
        "inactive_slots_zero": inactive_slots_zero,
    }
