"""`LimitOrderBookReplay-v0`: quote and trade against a replayed LOBSTER day, in JAX.

- `ReplayBase`: what both replay envs share: the day, the window sampling, `reset` (the
  snapshot book), the message loop of a step and the replay's `info` keys.
- `ReplayState`: the raw state (the book, the agent's account, the trade log, the window).
- `LimitOrderBookReplayParams`, `LimitOrderBookReplayEnv`: the env, with `LimitOrderBook-v0`'s
  decision (quotes and market orders) and reward.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, ArrayLike, PRNGKeyArray

from ... import _spaces as spaces
from ... import rng
from ..._core import State
from .._common import (
    FinanceEnv,
    ParamsMethods,
    check_reset_key,
    check_step_inputs,
    float_dtype,
    resolve_params,
)
from .._samplers import FixedStart, RandomStart, SequentialStart, as_sampler
from .._validation import finite_number
from ._book import Book
from ._book_queries import best_quotes
from ._decision import (
    Account,
    TradeLog,
    _append,
    account_info,
    book_mid2,
    credit,
    empty_log,
    new_account,
    wealth_change,
)
from ._env import LimitOrderBookEnvState, QuotingEnv
from ._lobster import LOBSTER_ASK_DUMMY, LOBSTER_BID_DUMMY
from ._messages import CLIPPED, OK
from ._obs import observation_space, observe
from ._replay import ReplayDay, agent_trades, prepare_day, replay_message, snapshot_book
from ._settings import _static_int

__all__ = [
    "LimitOrderBookReplayEnv",
    "LimitOrderBookReplayParams",
    "ReplayBase",
    "ReplayState",
]

START = 0
"""The `parallax.rng` slot of the window draw (step 0, index 0)."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ReplayState:
    """Raw state of the replay envs (the `env_state` of their `State`).

    Attributes:
        book: the replayed book with the agent's orders in it.
        account: the agent's inventory, cash (int32 ticks), order ids and fill totals.
        trades: the last `max_trades` trades (historical executions and the agent's).
        start: int32 `()`, the window's first message (the book opened on row `start - 1`).
        episode_key: uint32 `(2,)`, the `parallax.rng` key of the window draw.
        overflow: bool `()`, sticky: an order found no free slot (raise `capacity`).
    """

    book: Book
    account: Account
    trades: TradeLog
    start: Array
    episode_key: Array
    overflow: Array


REPLAY_STATIC: dict[str, str] = {
    "tick": "it fixes the price grid",
    "n_steps": "it fixes the episode length",
    "messages_per_step": "it fixes the compiled loop",
    "levels": "it fixes the observation shape",
    "max_trades": "it fixes the observation shape",
    "capacity": "it fixes the book's shape",
}
"""The read-only settings both replay envs share, and why."""


def _x64() -> bool:
    """Whether 64-bit types are on (`jax_enable_x64`) right now."""
    return bool(np.dtype(jax.dtypes.canonicalize_dtype(jnp.int64)) == np.int64)


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    n = _static_int(name, value)
    if n < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return n


class ReplayBase(FinanceEnv):
    """The replay machinery both replay envs share (see `_replay.py` for the rules).

    An episode is `n_steps` steps of `messages_per_step` historical messages each, from a
    window start `s >= 1` drawn by the sampler; the book opens on orderbook row `s - 1`.
    `_init_replay` validates and sets the settings; subclasses set the action space, the
    decision, the reward and `_state` (the state after `k` steps, which `reset` builds too).
    """

    day: ReplayDay
    tick: int
    n_steps: int
    messages_per_step: int
    levels: int
    max_trades: int
    capacity: int
    sampler: Any
    n_valid: int
    _state: Callable[..., State]
    """`_state(es, k, reward, fills, rejected, terminated, key)`: each env's builder of the
    state after `k` steps, for `reset` and `step`."""

    def _init_replay(
        self,
        data: Any,
        tick: int,
        n_steps: int,
        messages_per_step: int,
        levels: int,
        max_trades: int,
        capacity: int | None,
        sampler: Any,
    ) -> None:
        if data is None:
            raise TypeError(
                f"{type(self).__name__} needs data=: a LOBSTER day from "
                "parallax.finance.lob.load_lobster(message_file, orderbook_file, levels=...)"
            )
        tick = _positive_int("tick", tick)
        day = prepare_day(data, tick)
        n_steps = _positive_int("n_steps", n_steps)
        per_step = _positive_int("messages_per_step", messages_per_step)
        n_valid = len(day) - n_steps * per_step
        if n_valid < 1:
            raise ValueError(
                f"n_steps * messages_per_step = {n_steps * per_step} must be < the day's "
                f"{len(day)} messages (a window starts at message >= 1), got n_steps={n_steps}, "
                f"messages_per_step={per_step}"
            )
        least = day.levels + 2
        if capacity is None:
            capacity = least + day.max_resting + 2
        elif _positive_int("capacity", capacity) < least:
            raise ValueError(
                f"capacity must be >= the file's levels + 2 = {least} (the snapshot and the "
                f"agent's orders), got {capacity!r}"
            )
        self.sampler = as_sampler(sampler)
        if isinstance(self.sampler, FixedStart | SequentialStart) and self.sampler.start >= n_valid:
            raise ValueError(
                f"sampler start {self.sampler.start} is beyond the last window position "
                f"{n_valid - 1} (window starts 1..{n_valid})"
            )
        self.day = day
        self.tick = tick
        self.n_steps = n_steps
        self.messages_per_step = per_step
        self.levels = _positive_int("levels", levels)
        self.max_trades = _positive_int("max_trades", max_trades)
        self.capacity = int(capacity)
        self.n_valid = n_valid
        self._time_left = (1.0 - np.arange(n_steps + 1) / n_steps).astype(np.float32)

    @property
    def empty_bid(self) -> int:
        """`info["best_bid"]` of an empty bid side: LOBSTER's -9999999999 under x64, else
        int32's minimum (LOBSTER's value does not fit in int32)."""
        return LOBSTER_BID_DUMMY if _x64() else int(np.iinfo(np.int32).min)

    @property
    def empty_ask(self) -> int:
        """`info["best_ask"]` of an empty ask side: LOBSTER's 9999999999 under x64, else
        int32's maximum."""
        return LOBSTER_ASK_DUMMY if _x64() else int(np.iinfo(np.int32).max)

    # -- windows ---------------------------------------------------------------------------
    @property
    def reset_uses_previous(self) -> bool:
        """True with a `SequentialStart` sampler: the next window follows the previous one."""
        return isinstance(self.sampler, SequentialStart)

    def _window_start(self, episode_key: Array, start: Any, previous: Any) -> Array:
        """The window's first message: `start`, or the sampler's position + 1."""
        if start is not None:
            if isinstance(start, int | np.integer) and not 1 <= start <= self.n_valid:
                raise ValueError(f"start must be a message in 1..{self.n_valid}, got {start}")
            return jnp.asarray(start, jnp.int32)
        sampler = self.sampler
        if isinstance(sampler, RandomStart):
            return 1 + rng.randint(episode_key, 0, START, 0, self.n_valid, dtype=jnp.int32)
        if isinstance(sampler, SequentialStart) and previous is not None:
            position = previous.env_state.start - 1
            stride = sampler.stride or self.n_steps * self.messages_per_step
            return 1 + sampler.next_position(position, n_valid=self.n_valid, episode_length=stride)
        return jnp.asarray(1 + sampler.start, jnp.int32)

    def _open(self, key: PRNGKeyArray, start: Any, previous: Any) -> ReplayState:
        """The state at a window's start: the snapshot book, no position, no trades."""
        check_reset_key(self, key)
        ek = rng.episode_key(key)
        s = self._window_start(ek, start, previous)
        book = snapshot_book(jnp.asarray(self.day.rows)[s - 1], self.capacity)
        return ReplayState(
            book=book,
            account=new_account(),
            trades=empty_log(self.max_trades),
            start=s,
            episode_key=ek,
            overflow=jnp.bool_(False),
        )

    def reset(
        self,
        *,
        key: PRNGKeyArray,
        start: Any = None,
        params: Any = None,
        previous: Any = None,
    ) -> State:
        """Open a window: the snapshot book of the message before it, no position, nothing
        traded.

        Args:
            key: a JAX PRNG key (the random sampler's draw comes from it).
            start: optional first message of the window, `1..n_valid` (an int or traced).
            params: parameters for this episode; `self.params` when omitted.
            previous: the finished episode's state (read by a sequential sampler).
        """
        resolve_params(params, self.params)
        es = self._open(key, start, previous)
        zero = jnp.asarray(0, jnp.int32)
        return self._state(es, zero, jnp.zeros((), float_dtype()), zero, zero, False, key)

    def _reference(self, es: ReplayState) -> Array:
        """The mid in ticks of the book the window opened on (the reference when a side of
        the book is empty and nothing has traded)."""
        return jnp.asarray(self.day.reference)[es.start - 1]

    # -- the message loop ------------------------------------------------------------------
    def _replay(self, es: ReplayState, k: Array) -> tuple[ReplayState, Array, Array]:
        """Apply the messages of step `k` (0-based) to the book; book the agent's fills.

        Returns:
            `(state, fills, rejected)`: the agent's executions, and the messages that could
            not apply (a status other than `OK` and `CLIPPED`, see `parallax.finance.lob`).
        """
        messages, origin = jnp.asarray(self.day.messages), jnp.asarray(self.day.origin)
        first = es.start + k * self.messages_per_step

        def body(carry: Any, j: Array) -> tuple[Any, None]:
            book, account, log, fills, rejected = carry
            i = first + j
            book, r = replay_message(book, messages[i], origin[i], es.start, tick=self.tick)
            bought, sold, cash, n = agent_trades(r)
            account = credit(account, bought, sold, cash)
            took = (r.agent_size > 0).astype(jnp.int32)
            log = _append(log, r.agent_price[None], r.agent_size[None], -r.side[None], took)
            log = _append(log, r.fills.price, r.fills.size, r.fills.taker_side, r.fills.count)
            bad = (r.status != OK) & (r.status != CLIPPED)
            return (book, account, log, fills + n, rejected + bad.astype(jnp.int32)), None

        zero = jnp.asarray(0, jnp.int32)
        carry = (es.book, es.account, es.trades, zero, zero)
        steps = jnp.arange(self.messages_per_step, dtype=jnp.int32)
        (book, account, log, fills, rejected), _ = lax.scan(body, carry, steps)
        es = dataclasses.replace(
            es, book=book, account=account, trades=log, overflow=es.overflow | book.overflow
        )
        return es, fills, rejected

    def _replay_info(self, es: ReplayState, k: Array) -> dict[str, Array]:
        """`message_index`, `timestamp`, `best_bid`, `best_ask` after `k` steps."""
        book = es.book
        index = es.start - 1 + k * self.messages_per_step
        wide = jnp.int64 if _x64() else jnp.int32
        has_bid, has_ask, bid, ask = best_quotes(book)
        bid = bid.astype(wide) * self.tick
        ask = ask.astype(wide) * self.tick
        return {
            "message_index": index,
            "timestamp": jnp.asarray(self.day.times, float_dtype())[index],
            "best_bid": jnp.where(has_bid, bid, jnp.asarray(self.empty_bid, wide)),
            "best_ask": jnp.where(has_ask, ask, jnp.asarray(self.empty_ask, wide)),
        }

    def _counts_info(self, es: ReplayState, fills: Any, rejected: Any) -> dict[str, Array]:
        """`info`'s last keys: `fills`, `rejected` and `overflow`."""
        return {
            "fills": jnp.asarray(fills, jnp.int32),
            "rejected": jnp.asarray(rejected, jnp.int32),
            "overflow": es.overflow,
        }

    def _time_left_at(self, k: Array, fdt: Any) -> Array:
        """The fraction of the window's steps left after `k` steps (float `fdt`)."""
        return jnp.asarray(self._time_left)[jnp.minimum(k, self.n_steps)].astype(fdt)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class LimitOrderBookReplayParams(ParamsMethods):
    """Numeric parameters of `LimitOrderBookReplayEnv`.

    Attributes:
        inventory_penalty: penalty per squared lot of inventory per step, `>= 0` (default 0).
    """

    inventory_penalty: Any = 0.0


class LimitOrderBookReplayEnv(QuotingEnv, ReplayBase):
    """Quote and trade in a replayed LOBSTER day: the historical messages move the book, and
    the agent's orders are matched in it with price-time priority.

    Every step the agent makes `LimitOrderBook-v0`'s decision (a bid level, an ask level, a
    market order), then `messages_per_step` historical messages are applied (`_replay.py`'s
    rules: the orders from before the window live in the snapshot book, and a historical
    execution fills the agent's order first where it had priority). With `noop_action` at every
    step the book after each message is the orderbook file's (as deep as the file shows).

    - **Action**: `MultiDiscrete([K + 1, K + 1, 3])`, `K = max_quote_offset`, as
      `LimitOrderBook-v0` (bid level: 0 none, 1 join the best bid of the others, k: k - 1 ticks
      behind; the ask level; the market order: 0 sell, 1 none, 2 buy, `order_size` lots).
      `noop_action` (`[0, 0, 1]`) places and cancels nothing.
    - **Observation**: `LimitOrderBook-v0`'s `{"book", "trades", "agent"}` (prices in ticks
      relative to the mid; the agent's time left is the fraction of the window's steps left).
    - **Reward**: the change in `cash + inventory * mid` (ticks) minus
      `inventory_penalty * inventory**2`.
    - **Termination** after `n_steps` steps; never truncates.
    - **info**: `message_index` (int32, the last message applied: an index into the loaded
      day; `start - 1` at reset), `timestamp` (its LOBSTER time), `best_bid` and `best_ask`
      (LOBSTER price units, int64 under x64 else int32; an empty side reads `empty_bid` /
      `empty_ask`: LOBSTER's -9999999999 / 9999999999 under x64, int32's limits without),
      `mid_price`, `spread` (ticks), `inventory`, `cash`, `wealth`, `fills` (the agent's
      executions in the step), `rejected` (messages that could not apply, e.g. a cancel of an
      order the agent's trading removed) and `overflow` (sticky).

    Args:
        data: the day, from `parallax.finance.lob.load_lobster`.
        tick: LOBSTER price units per tick, int >= 1 (default 100: one cent).
        n_steps: steps per episode, int >= 1 (default 100).
        messages_per_step: historical messages per step, int >= 1 (default 10).
        levels: book levels observed, int >= 1 (default 5).
        max_quote_offset: farthest quote level `K`, int >= 1 (default 5).
        order_size: shares per quote or market order, int >= 1 (default 100).
        max_inventory: absolute inventory limit, int >= 1 (default 1,000).
        inventory_penalty: finite >= 0 (default 0).
        max_trades: recent trades observed, int >= 1 (default 16).
        capacity: slots per side; default the file's levels + the most of its orders resting
            on one side at once + 4 (a replay that needs more sets `overflow`).
        sampler: window starts: `"random"` (default), `"sequential"`, an int position (window
            start `position + 1`), or a sampler from `parallax.finance`.

    Raises:
        TypeError: `data` missing or not a `LobsterData`; a non-integer integer argument.
        ValueError: an argument out of range, naming it; a day too short for one window.

    Example:
        >>> import pathlib, tempfile
        >>> import jax
        >>> from parallax.finance import LimitOrderBookReplayEnv
        >>> from parallax.finance.lob import load_lobster
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "m.csv").write_text(
        ...     "34200.0,1,1,100,1000100,-1\\n34200.1,1,2,50,999900,1\\n34200.2,3,1,100,1000100,-1\\n")
        >>> _ = (d / "b.csv").write_text(
        ...     "1000100,100,-9999999999,0\\n1000100,100,999900,50\\n9999999999,0,999900,50\\n")
        >>> env = LimitOrderBookReplayEnv(data=load_lobster(d / "m.csv", d / "b.csv", levels=1),
        ...                               n_steps=2, messages_per_step=1, sampler=0)
        >>> state = env.reset(key=jax.random.key(0))
        >>> state = env.step(state, env.noop_action)
        >>> int(state.info["message_index"]), int(state.info["best_bid"]), int(state.info["best_ask"])
        (1, 999900, 1000100)
    """

    attribute_params = ("inventory_penalty",)
    static_params: ClassVar[dict[str, str]] = {
        **REPLAY_STATIC,
        "max_quote_offset": "it fixes the action space",
        "order_size": "it is the int32 unit of every order",
        "max_inventory": "it bounds the inventory",
    }
    episode_equity_key = "wealth"

    def __init__(
        self,
        *,
        data: Any = None,
        tick: int = 100,
        n_steps: int = 100,
        messages_per_step: int = 10,
        levels: int = 5,
        max_quote_offset: int = 5,
        order_size: int = 100,
        max_inventory: int = 1_000,
        inventory_penalty: float = 0.0,
        max_trades: int = 16,
        capacity: int | None = None,
        sampler: Any = "random",
    ) -> None:
        self._init_replay(
            data, tick, n_steps, messages_per_step, levels, max_trades, capacity, sampler
        )
        self.max_quote_offset = _positive_int("max_quote_offset", max_quote_offset)
        self.order_size = _positive_int("order_size", order_size)
        self.max_inventory = _positive_int("max_inventory", max_inventory)
        if self.order_size * self.max_inventory > 2**24:
            raise ValueError(
                "order_size * max_inventory must be <= 2**24 (int32 cash in ticks), got "
                f"{self.order_size} * {self.max_inventory}"
            )
        penalty = finite_number("inventory_penalty", inventory_penalty, ">=0")
        self.params = LimitOrderBookReplayParams(inventory_penalty=penalty)
        limit = self.max_inventory
        self._inventory_ratio = (np.arange(-limit, limit + 1) / limit).astype(np.float32)
        k = self.max_quote_offset + 1
        self.action_space = spaces.MultiDiscrete(np.array([k, k, 3]))
        self.observation_space = observation_space(self.levels, self.max_trades)
        self.noop_action = np.array([0, 0, 1], np.int32)
        self._built = True

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(messages={len(self.day)}, n_steps={self.n_steps}, "
            f"messages_per_step={self.messages_per_step}, capacity={self.capacity}, "
            f"params={self.params})"
        )

    def _set_param(self, name: str, value: Any) -> LimitOrderBookReplayParams:
        return self.params.replace(**{name: finite_number(name, value, ">=0")})

    @property
    def invariants(self) -> dict[str, Any]:
        """`LimitOrderBook-v0`'s invariants and the replay's clock (see `_replay_checks.py`)."""
        from ._replay_checks import replay_invariants

        return replay_invariants(self)

    @property
    def scripted_policies(self) -> dict[str, dict[str, Any]]:
        """`LimitOrderBook-v0`'s scripted policies, which hold on a replayed day too."""
        from ._invariants import lob_scripted_policies

        return lob_scripted_policies(self)

    def step(
        self,
        state: LimitOrderBookEnvState,
        action: ArrayLike,
        params: LimitOrderBookReplayParams | None = None,
    ) -> LimitOrderBookEnvState:
        """Make the decision, replay the step's messages, and score the change in wealth.

        Args:
            state: the current state.
            action: `(bid level, ask level, market)`, 3 integers (clipped into the space).
            params: parameters for this step; `self.params` when omitted.
        """
        check_step_inputs(self, action, any_shape=True)
        p = resolve_params(params, self.params)
        fdt = float_dtype()
        es: ReplayState = state.env_state
        reference = self._reference(es)
        before = es.account
        mid_before = book_mid2(es.book, reference).astype(fdt) * 0.5
        book, account, trades, n_fills = self._decide(
            es.book, es.account, es.trades, action, reference
        )
        es = dataclasses.replace(es, book=book, account=account, trades=trades)
        es, fills, rejected = self._replay(es, state.step_count)
        k = state.step_count + 1
        mid_after = book_mid2(es.book, reference).astype(fdt) * 0.5
        gain = wealth_change(before, es.account, mid_before, mid_after, fdt)
        inventory = es.account.inventory.astype(fdt)
        reward = gain - p.inventory_penalty * (inventory * inventory)
        return self._state(es, k, reward, n_fills + fills, rejected, k >= self.n_steps, state.key)

    def _state(
        self,
        es: ReplayState,
        k: Array,
        reward: Array,
        fills: Array,
        rejected: Array,
        terminated: Any,
        key: PRNGKeyArray,
    ) -> LimitOrderBookEnvState:
        """The state after `k` steps; one builder for reset and step."""
        fdt = float_dtype()
        book, account = es.book, es.account
        reference = self._reference(es)
        info = {
            **self._replay_info(es, k),
            **account_info(book, account, reference, fdt),
            **self._counts_info(es, fills, rejected),
        }
        left = self._time_left_at(k, fdt)
        observation = observe(
            book,
            account,
            es.trades,
            left,
            self._inventory_ratio,
            mid_price=reference,
            levels=self.levels,
        )
        return self._quote_state(es, observation, reward, terminated, info, k, key)
