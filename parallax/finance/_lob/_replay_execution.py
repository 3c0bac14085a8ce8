"""`LimitOrderBookReplayExecution-v0`: sell a block of shares within a replayed LOBSTER window.

- `ExecutionReplayParams`, `LimitOrderBookReplayExecutionEnv`: the env (JAX-LOB's execution
  task on our replay: a market sell and a resting limit sell each step, the rest sold at market
  at the last step, scored against the arrival mid).
- `twap_policy(env)`, `immediate_policy(env)`: the two baselines, `f(state) -> action`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, ArrayLike, PRNGKeyArray

from ... import _spaces as spaces
from ..._core import State
from .._common import ParamsMethods, check_step_inputs, float_dtype, resolve_params
from ._book import ASK, cancel, submit_order
from ._book_queries import best_quotes
from ._decision import AGENT, _append, book_mid2
from ._obs import observation_space, shared_rows
from ._replay_env import REPLAY_STATIC, ReplayBase, ReplayState, _positive_int

__all__ = [
    "ExecutionReplayParams",
    "LimitOrderBookReplayExecutionEnv",
    "immediate_policy",
    "twap_policy",
]

_BPS = 1e4


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ExecutionReplayParams(ParamsMethods):
    """`LimitOrderBookReplayExecutionEnv` has no numeric parameters to vary per episode."""


class LimitOrderBookReplayExecutionEnv(ReplayBase):
    """Sell `quantity` shares within a window of a replayed LOBSTER day.

    The book is the replay of `LimitOrderBookReplay-v0` (`_replay.py`'s rules). Each step:

    1. the agent's resting sell order (if any) is cancelled;
    2. `round(action[0] * remaining)` shares are sold by a market order (what the bids cannot
       take is not sold);
    3. `round(action[1] * rest)` of the rest rest as one limit sell at the best ask (one tick
       above the best bid when the ask side is empty, the window's opening mid when both are);
    4. `messages_per_step` historical messages are applied; a historical execution on the ask
       side fills the agent's order first where it had priority, and a historical buy that
       reaches its price trades with it.

    At the last step the action is overridden: everything left is sold at market before the
    messages. The agent never buys.

    - **Action**: `Box(0, 1, (2,))`: the fraction of the remaining shares sold at market, and
      the fraction of the rest resting at the best ask. `noop_action` (`[0, 0]`) places and
      cancels nothing (except at the last step).
    - **Observation**: `{"book": float32 (levels, 4), "trades": {...}, "agent": float32 (4,)}`:
      `LimitOrderBook-v0`'s book rows and recent trades (ticks relative to the mid), and the
      remaining fraction, the fraction of steps left, the resting order's fraction of
      `quantity`, and the mid's move since arrival in basis points.
    - **Reward**: the step's implementation shortfall in basis points of the arrival value,
      `(proceeds - shares sold * arrival mid) / (quantity * arrival mid) * 1e4`; at the last
      step, shares the book could not take are charged at their arrival value (sold at 0).
      The episode's return is `info["shortfall_bps"]` at the end (higher is better).
    - **Termination** after `n_steps` steps.
    - **info**: the replay's `message_index`, `timestamp`, `best_bid`, `best_ask` (as
      `LimitOrderBookReplay-v0`), `remaining`, `sold` (int32 shares), `proceeds` (ticks),
      `arrival_mid` (ticks), `vwap` (ticks, 0 before any sale), `shortfall_bps` (the return
      so far), `fills`, `rejected` and `overflow`.

    Args:
        data: the day, from `parallax.finance.lob.load_lobster`.
        quantity: shares to sell, int >= 1 (default 1,000).
        tick, n_steps, messages_per_step, levels, max_trades, capacity, sampler: as
            `LimitOrderBookReplayEnv` (defaults 100, 20, 50, 5, 16, derived, "random").

    Raises:
        TypeError: `data` missing or not a `LobsterData`; a non-integer integer argument.
        ValueError: an argument out of range, naming it; `quantity * the day's highest price`
            beyond int32 ticks.
    """

    static_params: ClassVar[dict[str, str]] = {**REPLAY_STATIC, "quantity": "it fixes the task"}

    def __init__(
        self,
        *,
        data: Any = None,
        quantity: int = 1_000,
        tick: int = 100,
        n_steps: int = 20,
        messages_per_step: int = 50,
        levels: int = 5,
        max_trades: int = 16,
        capacity: int | None = None,
        sampler: Any = "random",
    ) -> None:
        self._init_replay(
            data, tick, n_steps, messages_per_step, levels, max_trades, capacity, sampler
        )
        self.quantity = _positive_int("quantity", quantity)
        highest = max(int(self.day.rows[:, 2].max()), int(self.day.rows[:, 0].max()), 1)
        if self.quantity * (highest + 1) > np.iinfo(np.int32).max:
            raise ValueError(
                f"quantity * the day's highest price ({highest} ticks) must fit in int32 "
                f"ticks, got quantity={quantity!r}"
            )
        self.params = ExecutionReplayParams()
        self.action_space = spaces.Box(0.0, 1.0, (2,), jnp.float32)
        self.observation_space = observation_space(self.levels, self.max_trades, agent=4)
        self.noop_action = np.zeros(2, np.float32)
        self._built = True

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(quantity={self.quantity}, messages={len(self.day)}, "
            f"n_steps={self.n_steps}, messages_per_step={self.messages_per_step}, "
            f"capacity={self.capacity})"
        )

    def _set_param(self, name: str, value: Any) -> ExecutionReplayParams:  # pragma: no cover
        raise AttributeError(name)  # no numeric parameters

    @property
    def invariants(self) -> dict[str, Any]:
        """The execution's accounting identities (see `_replay_checks.py`)."""
        from ._replay_checks import execution_invariants

        return execution_invariants(self)

    @property
    def scripted_policies(self) -> dict[str, dict[str, Any]]:
        """Waiting, and selling everything at once (see `_replay_checks.py`)."""
        from ._replay_checks import execution_scripted_policies

        return execution_scripted_policies(self)

    def step(
        self, state: State, action: ArrayLike, params: ExecutionReplayParams | None = None
    ) -> State:
        """Sell, rest, replay the step's messages, and score the shortfall.

        Args:
            state: the current state.
            action: `(market fraction, resting fraction)`, 2 floats (clipped to `[0, 1]`).
            params: accepted for the protocol (there are none).
        """
        check_step_inputs(self, action, any_shape=True)
        resolve_params(params, self.params)
        fdt = float_dtype()
        es: ReplayState = state.env_state
        a = jnp.clip(jnp.asarray(action, fdt).reshape(2), 0.0, 1.0)
        k = state.step_count
        last = k + 1 >= self.n_steps
        a = jnp.where(last, jnp.array([1.0, 0.0], fdt), a)
        before = es.account
        book, _ = cancel(es.book, before.ask_id)
        reference = self._reference(es)

        # the market sell, then the resting sell: one loop body, one compiled matching
        def order(carry: Any, i: Array) -> tuple[Any, None]:
            book, account, log, n = carry
            left = self.quantity - account.sold
            fraction = jnp.where(i == 0, a[0], a[1])
            size = jnp.round(fraction * left.astype(fdt)).astype(jnp.int32)
            size = jnp.clip(size, 0, left)
            has_bid, has_ask, bid, ask = best_quotes(book)
            price = jnp.where(has_ask, ask, jnp.where(has_bid, bid + 1, reference))
            book, fills = submit_order(book, ASK, price, size, AGENT, is_market=i == 0)
            qty = jnp.sum(fills.size, dtype=jnp.int32)
            value = jnp.sum(fills.size * fills.price, dtype=jnp.int32)
            account = dataclasses.replace(
                account,
                inventory=account.inventory - qty,
                cash=account.cash + value,
                sold=account.sold + qty,
                ask_id=jnp.where(fills.rested, fills.taker_id, account.ask_id),
            )
            log = _append(log, fills.price, fills.size, fills.taker_side, fills.count)
            return (book, account, log, n + fills.count), None

        account = dataclasses.replace(before, ask_id=jnp.asarray(0, jnp.int32))
        carry = (book, account, es.trades, jnp.asarray(0, jnp.int32))
        (book, account, trades, n), _ = lax.scan(order, carry, jnp.arange(2, dtype=jnp.int32))
        es = dataclasses.replace(es, book=book, account=account, trades=trades)
        es, fills, rejected = self._replay(es, k)
        arrival = self._arrival(es, fdt)
        sold = (es.account.sold - before.sold).astype(fdt)
        proceeds = (es.account.cash - before.cash).astype(fdt)
        unsold = jnp.where(last, (self.quantity - es.account.sold).astype(fdt), 0.0)
        reward = (proceeds - sold * arrival - unsold * arrival) / (self.quantity * arrival) * _BPS
        return self._state(es, k + 1, reward, n + fills, rejected, last, state.key)

    def _arrival(self, es: ReplayState, fdt: Any) -> Array:
        """The arrival mid (ticks): the mid of the book the window opened on."""
        row = jnp.asarray(self.day.rows)[es.start - 1]
        both = (row[1, 0] > 0) & (row[3, 0] > 0)
        mid2 = jnp.where(both, row[0, 0] + row[2, 0], 2 * self._reference(es))
        return mid2.astype(fdt) * 0.5

    def _state(
        self,
        es: ReplayState,
        k: Array,
        reward: Array,
        fills: Array,
        rejected: Array,
        terminated: Any,
        key: PRNGKeyArray,
    ) -> State:
        fdt = float_dtype()
        book, account = es.book, es.account
        reference = self._reference(es)
        arrival = self._arrival(es, fdt)
        mid = book_mid2(book, reference).astype(fdt) * 0.5
        sold = account.sold
        remaining = self.quantity - sold
        proceeds = account.cash.astype(fdt)
        value = self.quantity * arrival
        ended = jnp.asarray(terminated)
        shortfall = (
            (
                proceeds
                - sold.astype(fdt) * arrival
                - jnp.where(ended, remaining, 0).astype(fdt) * arrival
            )
            / value
            * _BPS
        )
        mine = book.valid[1] & (book.owner[1] == AGENT)
        resting = jnp.sum(jnp.where(mine, book.size[1], 0), dtype=jnp.int32)
        rows, values, present = shared_rows(
            book, es.trades, mid_price=reference, levels=self.levels, fdt=fdt
        )
        left = self._time_left_at(k, fdt)
        agent = jnp.stack(
            [
                remaining.astype(fdt) / self.quantity,
                left,
                resting.astype(fdt) / self.quantity,
                (mid - arrival) / arrival * _BPS,
            ]
        ).astype(jnp.float32)
        info = {
            **self._replay_info(es, k),
            "remaining": remaining,
            "sold": sold,
            "proceeds": proceeds,
            "arrival_mid": arrival,
            "vwap": jnp.where(sold > 0, proceeds / jnp.maximum(sold, 1).astype(fdt), 0.0),
            "shortfall_bps": shortfall,
            **self._counts_info(es, fills, rejected),
        }
        return State(
            env_state=es,
            observation={
                "book": rows,
                "trades": {"values": values, "mask": present.astype(jnp.int8)},
                "agent": agent,
            },
            reward=jnp.asarray(reward, fdt),
            termination=ended,
            truncation=jnp.bool_(False),
            info=info,
            step_count=k,
            key=key,
        )


def twap_policy(env: Any) -> Any:
    """TWAP: sell `remaining / steps left` at market every step (`f(state) -> action`).

    Works on a wrapped or batched env's state (it reads `step_count`).
    """
    n_steps = _unwrapped(env).n_steps

    def policy(state: Any) -> Array:
        left = jnp.maximum(n_steps - state.step_count, 1).astype(float_dtype())
        fraction = (1.0 / left).astype(jnp.float32)
        return jnp.stack([fraction, jnp.zeros_like(fraction)], axis=-1)

    return policy


def immediate_policy(env: Any) -> Any:
    """Immediate execution: sell everything at market at the first step."""
    _unwrapped(env)

    def policy(state: Any) -> Array:
        ones = jnp.ones_like(state.step_count, jnp.float32)
        return jnp.stack([ones, jnp.zeros_like(ones)], axis=-1)

    return policy


def _unwrapped(env: Any) -> LimitOrderBookReplayExecutionEnv:
    base = env
    while hasattr(base, "env") and not isinstance(base, LimitOrderBookReplayExecutionEnv):
        base = base.env
    if not isinstance(base, LimitOrderBookReplayExecutionEnv):
        raise TypeError(
            f"the policy needs a LimitOrderBookReplayExecutionEnv, got {type(env).__name__}"
        )
    return base
