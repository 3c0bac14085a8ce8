"""Invariants and scripted policies of `LimitOrderBookEnv`, for the battery.

- `lob_invariants(env)`: `{name: fn(state) -> bool array}`, the form of
  `parallax.finance._invariants.invariants_for`; `LimitOrderBookEnv.invariants` returns it,
  so the sweep finds it on the env.
- `lob_scripted_policies(env)`: two scripted policies with their exact outcomes, the form
  of `parallax.finance._invariants.scripted_policies_for`, which returns them for the env
  (the battery's `scripted_policies` check finds them there).
- `scripted_policy`, `quote_policies`: one such policy that sends a fixed action, and the
  two of both book envs (`LimitOrderBook-v0` and its market) from their outcomes.

Each function reads only the `State` it is given and the env's static configuration, so it
runs under `jit` and `vmap`. The wealth identity allows relative `1e-5` of the magnitudes
(float32 rounding of one product and one sum); the others are exact integer identities.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

__all__ = ["lob_invariants", "lob_scripted_policies"]

_ONE_STEP = 1e-5


def scripted_policy(
    action: Any, expect: Any, measure: Any, num_steps: int, description: str
) -> dict[str, Any]:
    """A scripted policy that sends `action` at every step, for `num_steps` steps; `expect`
    and `measure` read its trajectory."""
    return {
        "policy": lambda key, state: jnp.asarray(action),
        "expect": expect,
        "measure": measure,
        "num_steps": num_steps,
        "description": description,
    }


def quote_policies(
    hold: Any,
    buy: Any,
    expect: tuple[Any, Any],
    measure: Any,
    num_steps: int,
    descriptions: tuple[str, str],
) -> dict[str, dict[str, Any]]:
    """The book envs' `never_quote_stays_flat` (`hold` at every step) and
    `market_buy_stops_at_the_limit` (`buy`), with their `expect` and `descriptions` in that
    order and one `measure` (the inventory)."""
    never_quote, market_buy = expect
    return {
        "never_quote_stays_flat": scripted_policy(
            hold, never_quote, measure, num_steps, descriptions[0]
        ),
        "market_buy_stops_at_the_limit": scripted_policy(
            buy, market_buy, measure, num_steps, descriptions[1]
        ),
    }


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
        first = mask == (jnp.arange(n, dtype=jnp.int32) < trades.count).astype(mask.dtype)
        sizes = jnp.where(trades.count >= n, jnp.all(trades.size >= 1), True)
        sides = jnp.all((mask == 0) | (jnp.abs(state.observation["trades"]["values"][:, 2]) == 1.0))
        return marked & jnp.all(first) & sizes & sides

    return {
        "wealth_identity": wealth_identity,
        "no_crossed_book": no_crossed_book,
        "volume_conserved": volume_conserved,
        "trade_log_consistent": trade_log_consistent,
    }


# -- scripted policies ---------------------------------------------------------------------------
def _steps(x: Any) -> Any:
    """`x[t + 1] - x[t]` along the trajectory's time axis (the change each step made)."""
    return x[1:] - x[:-1]


def _account_flat(account: Any, info: Any) -> Any:
    """Inventory, cash, bought, sold and `info`'s fills, wealth and cash all exactly 0, per
    state (and per trader for the market's accounts)."""
    return (
        (account.inventory == 0)
        & (account.cash == 0)
        & (account.bought == 0)
        & (account.sold == 0)
        & (info["fills"] == 0)
        & (info["wealth"] == 0)
        & (info["cash"] == 0)
    )


def _bought_within_limit(account: Any, action_mask: Any, size: int, limit: int) -> Any:
    """Per state (and trader): inventory in `[0, limit]`, all of it bought, nothing sold,
    cash not above 0, and the mask allowing a buy (market buy, bid levels >= 1) exactly
    while `inventory + size <= limit`."""
    inventory = account.inventory
    can_buy = inventory + size <= limit
    bid_mask, _, market_mask = action_mask
    mask_ok = (market_mask[..., 2] == can_buy) & jnp.all(
        bid_mask[..., 1:] == can_buy[..., None], axis=-1
    )
    return (
        (inventory >= 0)
        & (inventory <= limit)
        & (account.sold == 0)
        & (account.bought == inventory)
        & (account.cash <= 0)
        & mask_ok
    )


def _buy_steps(account: Any, market_mask: Any, size: int) -> Any:
    """Per step (and trader): 0 to `size` lots added, cash paid exactly when lots are added,
    and nothing added from a state whose mask forbids the market buy."""
    added, paid = _steps(account.inventory), _steps(account.cash)
    return (
        (added >= 0)
        & (added <= size)
        & ((added > 0) == (paid < 0))
        & (market_mask[:-1, ..., 2] | (added == 0))
    )


def _no_agent_orders(book: Any, owners: Any) -> Any:
    """No resting order of `owners` (an int or an int array) in the book, per state."""
    ids = jnp.asarray(owners, jnp.int32).reshape((1,) * book.owner.ndim + (-1,))
    mine = jnp.expand_dims(book.valid, -1) & (jnp.expand_dims(book.owner, -1) == ids)
    return ~jnp.any(mine.reshape(mine.shape[0], -1), axis=1)


def lob_scripted_policies(env: Any) -> dict[str, dict[str, Any]]:
    """Scripted policies of a `LimitOrderBookEnv`, the form of
    `parallax.finance._invariants.scripted_policies_for` (which returns them for the env).

    Each runs `min(n_steps, 32)` steps from a reset (the whole session of a short one) and
    states an exact consequence of sekai's rules:

    - `never_quote_stays_flat`: action `[0, 0, 1]` (no bid, no ask, no market order) at every
      step: the agent never has an order in the book, so no fill can reach it: inventory,
      cash, bought, sold, `info["fills"]`, `info["wealth"]` and the reward are exactly 0 in
      every state (the reward is the wealth change, 0, minus the penalty on 0 lots, 0).
    - `market_buy_stops_at_the_limit`: action `[0, 0, 2]` (a market buy, no quotes) at every
      step: the agent never rests an order and never sells, so `sold` stays 0, `bought`
      equals the inventory, and each step adds between 0 and `order_size` lots (0 when the
      ask side is short of lots) and takes cash exactly when it adds lots; the inventory
      never exceeds `max_inventory`; the action mask allows a buy (market buy, and bid
      levels >= 1) exactly while `inventory + order_size <= max_inventory`, and a step from
      a state whose mask forbids the buy adds nothing.
    """
    limit, size = int(env.max_inventory), int(env.order_size)
    steps = min(int(env.n_steps), 32)
    hold = np.array([0, 0, 1], np.int32)
    buy = np.array([0, 0, 2], np.int32)

    def never_quote(traj: Any) -> Any:
        states = traj.states
        flat = _account_flat(states.env_state.account, states.info) & (states.reward == 0)
        return flat & _no_agent_orders(states.env_state.book, 0)

    def market_buy(traj: Any) -> Any:
        states = traj.states
        account = states.env_state.account
        per_state = _bought_within_limit(account, states.action_mask, size, limit)
        per_state = per_state & _no_agent_orders(states.env_state.book, 0)
        per_step = _buy_steps(account, states.action_mask[2], size)
        return jnp.concatenate([per_state, per_step])

    descriptions = (
        "never quoting nor trading ([0, 0, 1]): no order of the agent rests, no fill; "
        "inventory, cash, fills, wealth and reward stay exactly 0",
        "a market buy every step ([0, 0, 2]): each step adds 0 to order_size lots and pays "
        "for them, nothing is sold, the inventory never exceeds max_inventory and the mask "
        "forbids buying exactly at the limit",
    )
    return quote_policies(
        hold,
        buy,
        (never_quote, market_buy),
        lambda traj: traj.states.env_state.account.inventory,
        steps,
        descriptions,
    )
