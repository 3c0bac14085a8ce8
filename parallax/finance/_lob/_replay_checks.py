"""Invariants and scripted policies of the two replay envs, for the battery.

- `replay_invariants(env)`: `LimitOrderBook-v0`'s invariants, the message clock and the
  best prices of `info` (`LimitOrderBookReplayEnv.invariants`).
- `execution_invariants(env)`, `execution_scripted_policies(env)`: the execution env's
  accounting identities, and two policies with exact outcomes.

Each function reads only the `State` it is given and the env's static settings, so it runs
under `jit` and `vmap`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

from ._decision import AGENT
from ._invariants import lob_invariants, scripted_policy

__all__ = ["execution_invariants", "execution_scripted_policies", "replay_invariants"]


def _message_clock(env: Any) -> Callable[[Any], Any]:
    per_step = env.messages_per_step

    def message_clock(state: Any) -> Any:
        expected = state.env_state.start - 1 + state.step_count * per_step
        return state.info["message_index"] == expected

    return message_clock


def _best_prices(env: Any) -> Callable[[Any], Any]:
    tick = env.tick

    def best_prices_of_the_book(state: Any) -> Any:
        book, info = state.env_state.book, state.info
        wide = info["best_bid"].dtype
        bid = jnp.max(jnp.where(book.valid[0], book.price[0], 0)).astype(wide) * tick
        ask = jnp.min(jnp.where(book.valid[1], book.price[1], np.iinfo(np.int32).max))
        bid_ok = jnp.where(jnp.any(book.valid[0]), info["best_bid"] == bid, info["best_bid"] < 0)
        ask_ok = jnp.where(
            jnp.any(book.valid[1]),
            info["best_ask"] == ask.astype(wide) * tick,
            info["best_ask"] >= np.iinfo(np.int32).max,
        )
        return bid_ok & ask_ok

    return best_prices_of_the_book


def replay_invariants(env: Any) -> dict[str, Callable[[Any], Any]]:
    """The invariants of a `LimitOrderBookReplayEnv`.

    - `LimitOrderBook-v0`'s four (`lob_invariants`): the wealth identity, an uncrossed book,
      conserved volume (one agent order per side, inventory within the limit), the trade log.
    - `message_clock`: `info["message_index"] == start - 1 + step_count * messages_per_step`.
    - `best_prices_of_the_book`: `info["best_bid"]`/`["best_ask"]` are the book's best prices
      in LOBSTER units, or the empty-side values.
    """
    return {
        **lob_invariants(env),
        "message_clock": _message_clock(env),
        "best_prices_of_the_book": _best_prices(env),
    }


def execution_invariants(env: Any) -> dict[str, Callable[[Any], Any]]:
    """The invariants of a `LimitOrderBookReplayExecutionEnv`.

    - `sold_within_quantity`: `0 <= sold <= quantity`, `remaining == quantity - sold`, nothing
      bought, `inventory == -sold`.
    - `one_resting_sell`: no agent order on the bid side, at most one on the ask side, of at
      most the remaining shares.
    - `proceeds_identity`: proceeds (cash) are >= 0, 0 exactly when nothing is sold, and
      `vwap * sold == proceeds` (relative `1e-5`).
    - `message_clock`, `best_prices_of_the_book`: as `replay_invariants`.
    """
    quantity = env.quantity

    def sold_within_quantity(state: Any) -> Any:
        account, info = state.env_state.account, state.info
        return (
            (account.sold >= 0)
            & (account.sold <= quantity)
            & (info["remaining"] == quantity - account.sold)
            & (account.bought == 0)
            & (account.inventory == -account.sold)
        )

    def one_resting_sell(state: Any) -> Any:
        book, info = state.env_state.book, state.info
        mine = book.valid & (book.owner == AGENT)
        asks = jnp.sum(mine[1], dtype=jnp.int32)
        size = jnp.sum(jnp.where(mine[1], book.size[1], 0))
        return ~jnp.any(mine[0]) & (asks <= 1) & (size <= info["remaining"])

    def proceeds_identity(state: Any) -> Any:
        account, info = state.env_state.account, state.info
        cash = account.cash
        positive = (cash >= 0) & ((cash == 0) == (account.sold == 0))
        value = info["vwap"] * account.sold.astype(info["vwap"].dtype)
        close = jnp.abs(value - info["proceeds"]) <= 1e-5 * (1.0 + jnp.abs(info["proceeds"]))
        return positive & close

    return {
        "sold_within_quantity": sold_within_quantity,
        "one_resting_sell": one_resting_sell,
        "proceeds_identity": proceeds_identity,
        "message_clock": _message_clock(env),
        "best_prices_of_the_book": _best_prices(env),
    }


def execution_scripted_policies(env: Any) -> dict[str, dict[str, Any]]:
    """Scripted policies of a `LimitOrderBookReplayExecutionEnv`, each over
    `min(n_steps, 32)` steps from a reset:

    - `waiting_sells_nothing_before_the_end`: `noop_action` every step: before the last step
      the agent has no order in the book, sells nothing, and every reward is exactly 0.
    - `immediate_sells_at_the_first_step`: the whole quantity at market at once: after the
      first step nothing rests, nothing more is sold before the last step (which sells what
      is left), and the first step sold `min(quantity, bid depth at the open)`.
    """
    steps = min(int(env.n_steps), 32)
    quantity, n_steps = int(env.quantity), int(env.n_steps)
    noop = np.zeros(2, np.float32)
    immediate = np.array([1.0, 0.0], np.float32)

    def waiting(traj: Any) -> Any:
        states = traj.states
        before_end = states.step_count < n_steps
        mine = states.env_state.book.valid & (states.env_state.book.owner == AGENT)
        idle = (
            (states.env_state.account.sold == 0)
            & (states.reward == 0)
            & ~jnp.any(mine.reshape(mine.shape[0], -1), axis=1)
        )
        return jnp.where(before_end, idle, True)

    def at_once(traj: Any) -> Any:
        states = traj.states
        sold = states.env_state.account.sold
        book = states.env_state.book
        mine = book.valid & (book.owner == AGENT)
        opening_bids = jnp.sum(jnp.where(book.valid[0, 0], book.size[0, 0], 0))
        first = sold[1] == jnp.minimum(quantity, opening_bids)
        nothing_rests = ~jnp.any(mine[1:].reshape(mine.shape[0] - 1, -1), axis=1)
        no_more = (sold[2:] == sold[1]) | (states.step_count[2:] >= n_steps)  # the last step
        return jnp.concatenate([first[None], nothing_rests, no_more])

    def sold(traj: Any) -> Any:
        return traj.states.env_state.account.sold

    return {
        "waiting_sells_nothing_before_the_end": scripted_policy(
            noop,
            waiting,
            sold,
            steps,
            "noop_action every step: no order, no sale, reward exactly 0 before the last step",
        ),
        "immediate_sells_at_the_first_step": scripted_policy(
            immediate,
            at_once,
            sold,
            steps,
            "everything at market at once: the first step sells what the opening bids take, "
            "nothing rests and nothing more is sold",
        ),
    }
