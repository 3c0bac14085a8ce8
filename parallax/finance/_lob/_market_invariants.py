"""Invariants and scripted policies of `LimitOrderBookMarketEnv` (tests and the battery).

- `market_invariants(env)`: `{name: fn(state) -> bool}`; `LimitOrderBookMarketEnv.invariants`
  returns it.
- `market_scripted_policies(env)`: two scripted policies with their exact outcomes, the
  form of `parallax.finance._invariants.scripted_policies_for`, which returns them for the
  env (the battery's `scripted_policies` check finds them there).

Each function reads only the `MARLState` it is given and the env's static configuration, so
it runs under `jit` and `vmap`. The wealth identity allows relative `1e-5` of the magnitudes
(float32 rounding of one product and one sum); the others are exact integer identities.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

from ._invariants import (
    _account_flat,
    _bought_within_limit,
    _buy_steps,
    _no_agent_orders,
    _steps,
    quote_policies,
)

__all__ = ["market_invariants", "market_scripted_policies"]

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


# -- scripted policies ---------------------------------------------------------------------------
def market_scripted_policies(env: Any) -> dict[str, dict[str, Any]]:
    """Scripted policies of a `LimitOrderBookMarketEnv`, every trader doing the same.

    Each runs enough steps for the session to end on the fastest clocks (every trader's
    decisions at the shortest jittered wait, plus one; at most 32) and states an exact
    consequence of sekai's rules:

    - `never_quote_stays_flat`: every trader sends `[0, 0, 1]` (no quotes, no market order):
      no trader ever has an order in the book, so no fill reaches any: every trader's
      inventory, cash, bought, sold, `fills`, `wealth`, `step_reward` and `agents.reward` are
      exactly 0 in every state.
    - `market_buy_stops_at_the_limit`: every trader sends `[0, 0, 2]` (a market buy) at each
      step: no trader rests an order, so a trader's position changes only on a step it acts
      in (an inactive trader's action is ignored), by 0 to `order_size` lots, paying cash
      exactly when it adds lots; nobody sells; every inventory stays within
      `[0, max_inventory]`; each trader's mask allows a buy exactly while `inventory +
      order_size <= max_inventory`, and a step from a state whose mask forbids a trader's
      buy adds nothing to it.
    """
    n, limit, size = env.num_agents, int(env.max_inventory), int(env.order_size)
    fastest = [d * (1.0 - env.jitter) for d in env.decision_intervals]
    steps = min(32, sum(int(np.ceil(env.session_length / d)) for d in fastest) + 1)
    hold = np.tile(np.array([0, 0, 1], np.int32), (n, 1))
    buy = np.tile(np.array([0, 0, 2], np.int32), (n, 1))
    owners = np.arange(n, dtype=np.int32)

    def never_quote(traj: Any) -> Any:
        states = traj.states
        flat = (
            _account_flat(states.env_state.accounts, states.info)
            & (states.info["step_reward"] == 0)
            & (states.agents.reward == 0)
        )
        return jnp.all(flat, axis=1) & _no_agent_orders(states.env_state.book, owners)

    def market_buy(traj: Any) -> Any:
        states = traj.states
        accounts = states.env_state.accounts  # leaves (T + 1, A)
        mask = states.agents.action_mask
        per_state = jnp.all(_bought_within_limit(accounts, mask, size, limit), axis=1)
        per_state = per_state & _no_agent_orders(states.env_state.book, owners)
        # a trader's position changes only on a step it acts in
        acted = states.agents.active[:-1] & ~states.done[:-1, None]
        per_step = _buy_steps(accounts, mask[2], size) & (acted | (_steps(accounts.inventory) == 0))
        return jnp.concatenate([per_state, jnp.all(per_step, axis=1)])

    descriptions = (
        "no trader quotes or trades ([0, 0, 1] each): no trader's order rests, no fill; "
        "every inventory, cash, fills, wealth and reward stays exactly 0",
        "every trader sends a market buy each step ([0, 0, 2] each): a position grows only "
        "on a step its trader acts in, by 0 to order_size lots paid for, nothing is sold, no "
        "inventory exceeds max_inventory and each mask forbids buying exactly at the limit",
    )
    return quote_policies(
        hold,
        buy,
        (never_quote, market_buy),
        lambda traj: traj.states.env_state.accounts.inventory,
        steps,
        descriptions,
    )
