"""`LimitOrderBook-v0`: make markets or trade in a simulated limit order book, in JAX.

- `LimitOrderBookEnv`: the env, with sekai 0.2.0's `LimitOrderBookEnv` keywords, defaults,
  validation, spaces, mechanics, reward, termination and info keys.
- `LimitOrderBookParams`: its numeric parameters (the flow's and the inventory penalty), a
  pytree that `reset`/`step` accept per call.
- `LimitOrderBookState`: the raw state (the book, the agent's account, the trade log).
- `LimitOrderBookEnvState`: the `State` subclass it returns, with the `action_mask`.
- `BookEnv`: the settings and the reset's warm-up it shares with the market env.
- `QuotingEnv`: its decision, masks and state, which `LimitOrderBookReplay-v0` shares.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
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
    opaque,
    resolve_params,
)
from .._validation import finite_number
from ._book import Book
from ._decision import (
    AGENT,
    Account,
    TradeLog,
    account_info,
    apply_decision,
    book_flow_fills,
    book_mid2,
    decision_masks,
    empty_log,
    log_flow_trades,
    new_account,
    wealth_change,
)
from ._flow import run_flow, warm_up
from ._flow_draws import FLOW_SLOTS
from ._flow_params import FlowParams
from ._obs import observation_space, observe
from ._settings import BookSettings, book_settings

__all__ = [
    "LimitOrderBookEnv",
    "LimitOrderBookEnvState",
    "LimitOrderBookParams",
    "LimitOrderBookState",
]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class LimitOrderBookParams(ParamsMethods):
    """Numeric parameters of `LimitOrderBookEnv`.

    Attributes:
        flow: the background flow's parameters (`FlowParams`, sekai's
            `ZeroIntelligenceFlow` keywords).
        inventory_penalty: running penalty per squared lot of inventory per unit of time,
            `>= 0` (default 0.01).
    """

    flow: Any = dataclasses.field(default_factory=FlowParams)
    inventory_penalty: Any = 0.01


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class LimitOrderBookState:
    """Raw state of `LimitOrderBookEnv` (the `env_state` of its `State`).

    Attributes:
        book: the order book (`Book`), background orders and the agent's quotes.
        account: the agent's inventory, cash (int32 ticks), quote ids and fill totals.
        trades: the last `max_trades` trades of the session (`TradeLog`).
        episode_key: uint32 `(2,)`, the `parallax.rng` key of every draw of the flow.
        overflow: bool `()`, sticky: the book ran out of slots or a flow run hit its event
            bound, so the session no longer equals sekai's unbounded engine.
    """

    book: Book
    account: Account
    trades: TradeLog
    episode_key: Array
    overflow: Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class LimitOrderBookEnvState(State):
    """A `State` with sekai's per-dimension action masks (bool: bid `(K+1,)`, ask `(K+1,)`,
    market `(3,)`)."""

    action_mask: tuple[Array, Array, Array]


class BookEnv(BookSettings):
    """`BookSettings` and the opening of a reset, which both book envs share (the flow's
    `warm_up` is looked up in this module: a benchmark records its stats here)."""

    def _warm_up(
        self, key: PRNGKeyArray, params: LimitOrderBookParams | None
    ) -> tuple[Array, Book, Array]:
        """A reset's opening, shared: check `key`, seed the book from its episode key and run
        the warm-up under `params` (`self.params` when None).

        Returns:
            `(episode_key, book, overflow)`: the flow's key, the book at the session's start,
            and whether seeding or the warm-up overflowed.
        """
        check_reset_key(self, key)
        p = resolve_params(params, self.params)
        fdt = float_dtype()
        ek = rng.episode_key(key)
        book, stats = warm_up(
            self.capacity,
            p.flow,
            ek,
            mid=self.mid_price,
            warmup=jnp.asarray(self.warmup, fdt),
            max_events=self.warmup_max_events,
        )
        return ek, book, book.overflow | stats.truncated


class QuotingEnv:
    """`LimitOrderBook-v0`'s decision, which `LimitOrderBookReplay-v0` makes too: the action
    clipped into `MultiDiscrete([K + 1, K + 1, 3])` and carried out, its masks, and the
    `LimitOrderBookEnvState` both return."""

    max_quote_offset: int
    order_size: int
    max_inventory: int

    def action_mask(self, state: LimitOrderBookEnvState) -> tuple[Array, Array, Array]:
        """sekai's per-dimension masks (bool): no buying at the long limit, no selling at the
        short one (level 0 and holding are always allowed)."""
        return self._mask(state.env_state.account)

    def _mask(self, account: Account) -> tuple[Array, Array, Array]:
        return decision_masks(account, self.order_size, self.max_inventory, self.max_quote_offset)

    def _decide(
        self, book: Book, account: Account, trades: TradeLog, action: ArrayLike, mid_price: Any
    ) -> tuple[Book, Account, TradeLog, Array]:
        """Clip `action` into the space and carry it out (`apply_decision`, `mid_price` the
        reference of an empty book): the book, account and trades after it, and its fills."""
        a = jnp.asarray(action).reshape(3).astype(jnp.int32)
        k = self.max_quote_offset
        a = jnp.clip(a, 0, jnp.array([k, k, 2], jnp.int32))
        return apply_decision(
            book,
            account,
            trades,
            a,
            order_size=self.order_size,
            max_inventory=self.max_inventory,
            mid_price=mid_price,
        )

    def _quote_state(
        self,
        env_state: Any,
        observation: dict[str, Any],
        reward: Array,
        terminated: Any,
        info: dict[str, Any],
        k: Array,
        key: PRNGKeyArray,
    ) -> LimitOrderBookEnvState:
        """The state after `k` steps, never truncated, with the masks of `env_state.account`."""
        return LimitOrderBookEnvState(
            env_state=env_state,
            observation=observation,
            reward=jnp.asarray(reward, float_dtype()),
            termination=jnp.asarray(terminated),
            truncation=jnp.bool_(False),
            info=info,
            step_count=k,
            key=key,
            action_mask=self._mask(env_state.account),
        )


class LimitOrderBookEnv(QuotingEnv, BookEnv, FinanceEnv):
    """Make markets or trade in a simulated limit order book, against background order flow.

    sekai 0.2.0's `LimitOrderBook-v0` on the array book (`parallax.finance._lob`). Every
    `decision_interval` units of time the agent chooses where to rest a bid and an ask (or
    not to quote) and whether to send a market order; in between, the zero-intelligence
    background flow (limit orders, market orders and cancellations as Poisson events) moves
    the book and may fill the agent's resting quotes. A quote left at its level keeps its
    place in the queue; a moved one goes to the back.

    A decision runs in this order (sekai's): (1) a market buy (sell) allowed by the
    inventory limit cancels the agent's own resting ask (bid), then executes `order_size`
    lots; (2) the bid, then the ask, is kept, moved, placed or cancelled (level 0, or the
    inventory limit, cancels); a placed quote that crosses fills at once; (3) the flow runs
    until the next decision time.

    - **Action**: `MultiDiscrete([K + 1, K + 1, 3])`, `K = max_quote_offset`: the bid level
      (0 none, 1 join the best bid of the other traders, k: k - 1 ticks behind it; one tick
      inside the opposite best when there is none), the ask level, and a market order (0
      sell, 1 none, 2 buy). A quote at its level stays put, and a level-1 quote stays while
      it is the best price itself. `state.action_mask` (and `action_mask(state)`) disables
      buying at the long limit and selling at the short one; masked choices are no-ops.
    - **Observation** (`PyTreeSpace` dict): `"book"` float32 `(levels, 4)`: bid offset from
      the mid, bid size, ask offset, ask size of the best levels (zeros where missing);
      `"trades"`: `{"values": float32 (max_trades, 3), "mask": int8 (max_trades,)}`, the
      last trades of the session oldest first (price offset from the current mid, size,
      aggressor side +1 buy / -1 sell), sekai's `MaskedBox`; `"agent"` float32 `(6,)`:
      inventory / max_inventory, fraction of the session left, bid resting, ask resting,
      volume queued ahead of the bid and of the ask.
    - **Reward**: the change in `cash + inventory * mid` (ticks) minus
      `inventory_penalty * inventory**2 * dt`.
    - **Termination** after `n_steps = ceil(session_length / decision_interval)` steps (the
      last may be shorter); never truncates. Stepping on after the end keeps the clock at the
      session end (no events, `dt` 0); sekai raises there.
    - **info**: `timestamp` (session time), `dt` (the time the step covered), `mid_price`,
      `spread` (int32; 0 when a side is empty, where sekai gives None), `inventory` (int32),
      `cash`, `wealth`, `fills` (int32, the agent's executions in the step), `overflow`
      (bool, sticky: see `LimitOrderBookState`); floats in the default float dtype.

    Randomness: the flow's draws (`FLOW_SLOTS`) at step `k` for the interval after decision
    `k` (0: the initial book and the warm-up). Under x64 an episode equals sekai's fed the same
    draws, event by event.

    Args:
        flow: the background flow (`FlowParams`; default `FlowParams()`, sekai's
            `ZeroIntelligenceFlow()`).
        mid_price: initial mid price in ticks, int `>= 2 * (max_quote_offset + levels)`
            (default 10,000).
        session_length: length of the session, finite `> 0` (default 300).
        decision_interval: time between decisions, finite `> 0` (default 1).
        levels: book levels observed, int `>= 1` (default 5).
        max_quote_offset: farthest quote level `K`, int `>= 1` (default 5).
        order_size: lots per quote or market order, int `>= 1` (default 1).
        max_inventory: absolute inventory limit, int `>= 1` (default 20).
        inventory_penalty: running penalty, finite `>= 0` (default 0.01).
        max_trades: recent trades observed, int `>= 1` (default 16).
        warmup: time the book evolves before the session, finite `>= 0` (default 20).
        capacity: ours: slots per side of the array book; by default derived from the
            flow (`default_capacity` over the warm-up and the session, one slot a side kept
            for the agent): 64 for sekai's default flow, 176 for `cancel_rate=0.1`. A
            `flow` passed in `params` at reset keeps the env's capacity.
        max_events: ours: bound on the flow's loop per decision (default from the rates,
            `default_max_events`); reaching it sets `info["overflow"]`.

    Raises:
        ValueError: an argument out of range, with sekai's rule, naming the argument.
        TypeError: a non-integer integer argument or a `flow` that is not a `FlowParams`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax.finance._lob import LimitOrderBookEnv
        >>> env = LimitOrderBookEnv(session_length=5.0, warmup=2.0)
        >>> state = env.reset(key=jax.random.key(0))
        >>> state = env.step(state, jnp.array([1, 1, 1]))
        >>> state.observation["book"].shape, int(state.step_count)
        ((5, 4), 1)
    """

    attribute_params = ("inventory_penalty",)
    static_params: ClassVar[dict[str, str]] = {
        "mid_price": "it fixes the initial book",
        "session_length": "it fixes the episode length",
        "decision_interval": "it fixes the episode length",
        "levels": "it fixes the observation shape",
        "max_quote_offset": "it fixes the action space",
        "order_size": "it is the int32 unit of every order",
        "max_inventory": "it bounds the inventory and scales the observation",
        "max_trades": "it fixes the observation shape",
        "warmup": "it fixes the warm-up's event bound",
        "capacity": "it fixes the book's shape",
        "max_events": "it fixes the compiled loop bound",
    }
    episode_equity_key = "wealth"
    SLOTS = FLOW_SLOTS

    def __init__(
        self,
        *,
        flow: FlowParams | None = None,
        mid_price: int = 10_000,
        session_length: float = 300.0,
        decision_interval: float = 1.0,
        levels: int = 5,
        max_quote_offset: int = 5,
        order_size: int = 1,
        max_inventory: int = 20,
        inventory_penalty: float = 0.01,
        max_trades: int = 16,
        warmup: float = 20.0,
        capacity: int | None = None,
        max_events: int | None = None,
    ) -> None:
        # sekai's order: decision_interval, then the core's checks
        interval = finite_number("decision_interval", decision_interval, ">0")
        flow, penalty = self._init_book_settings(
            **book_settings(locals()),
            min_capacity=2,
            capacity_rule="2",
            reserved=1,
            flow_interval=interval,
        )
        self.params = LimitOrderBookParams(flow=flow, inventory_penalty=penalty)
        self.decision_interval = interval
        length, warm = self.session_length, self.warmup
        self.n_steps = int(np.ceil(length / interval - 1e-9))
        # sekai's dt: the whole interval, except a last step shorter by more than 1e-9.
        full = Fraction(interval) * (1 - Fraction(1, 10**9))
        left = Fraction(length) - (self.n_steps - 1) * Fraction(interval)
        self.last_dt = interval if left >= full else float(left)
        # The observation's two ratios as tables, computed as sekai does (float64, then
        # float32): exact, and equal in a batch (XLA:CPU's vectorised division is not
        # correctly rounded, so a batched division can differ from a single one).
        offsets = np.minimum(np.arange(self.n_steps + 1) * interval, length)
        elapsed = (warm + offsets) - warm
        self._time_left = np.maximum(1.0 - elapsed / length, 0.0).astype(np.float32)
        limit = self.max_inventory
        self._inventory_ratio = (np.arange(-limit, limit + 1) / limit).astype(np.float32)
        k = self.max_quote_offset + 1
        self.action_space = spaces.MultiDiscrete(np.array([k, k, 3]))
        self.observation_space = observation_space(self.levels, self.max_trades)
        self._built = True

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(session_length={self.session_length}, "
            f"decision_interval={self.decision_interval}, levels={self.levels}, "
            f"max_quote_offset={self.max_quote_offset}, capacity={self.capacity}, "
            f"params={self.params})"
        )

    # -- parameters ------------------------------------------------------------------------
    def _params(self, params: LimitOrderBookParams | None) -> LimitOrderBookParams:
        return resolve_params(params, self.params)

    def _set_param(self, name: str, value: Any) -> LimitOrderBookParams:
        return self.params.replace(**{name: finite_number(name, value, ">=0")})

    @property
    def invariants(self) -> dict[str, Any]:
        """The invariants the battery's sweep checks on every state (see `_invariants.py`)."""
        from ._invariants import lob_invariants

        return lob_invariants(self)

    # -- protocol --------------------------------------------------------------------------
    def reset(
        self, *, key: PRNGKeyArray, params: LimitOrderBookParams | None = None
    ) -> LimitOrderBookEnvState:
        """Seed the book, run the warm-up, and open the session (no position, no quotes).

        Args:
            key: a JAX PRNG key; the flow's draws come from `parallax.rng.episode_key(key)`.
            params: parameters for this episode; `self.params` when omitted.

        Returns:
            The first state (reward 0, both flags False, `step_count` 0).
        """
        ek, book, overflow = self._warm_up(key, params)
        env_state = LimitOrderBookState(
            book=book,
            account=new_account(),
            trades=empty_log(self.max_trades),
            episode_key=ek,
            overflow=overflow,
        )
        fdt = float_dtype()
        zero = jnp.zeros((), fdt)
        return self._state(
            env_state,
            jnp.asarray(0, jnp.int32),
            zero,
            jnp.asarray(self.decision_interval, fdt),
            jnp.asarray(0, jnp.int32),
            jnp.bool_(False),
            key,
        )

    def step(
        self,
        state: LimitOrderBookEnvState,
        action: ArrayLike,
        params: LimitOrderBookParams | None = None,
    ) -> LimitOrderBookEnvState:
        """Carry out the decision, run the flow to the next decision time, and score it.

        Args:
            state: the current state.
            action: `(bid level, ask level, market)`, integers (3 elements); values are
                clipped into the action space.
            params: parameters for this step; `self.params` when omitted.

        Returns:
            The next state.
        """
        check_step_inputs(self, action, any_shape=True)
        p = self._params(params)
        fdt = float_dtype()
        es: LimitOrderBookState = state.env_state
        mid2_before = book_mid2(es.book, self.mid_price)
        before = es.account
        book, account, trades, n_fills = self._decide(
            es.book, es.account, es.trades, action, self.mid_price
        )
        k = state.step_count + 1
        start = self._clock(state.step_count, fdt)
        until = self._clock(k, fdt)
        book, stats = run_flow(
            book,
            p.flow,
            es.episode_key,
            k,
            start,
            until,
            max_events=self.max_events,
            max_trades=self.max_trades,
            num_agents=1,
        )
        account = book_flow_fills(account, stats)
        trades = log_flow_trades(trades, stats)
        n_fills = n_fills + stats.agent_fills[AGENT]
        dt = jnp.where(
            k < self.n_steps,
            self.decision_interval,
            jnp.where(k == self.n_steps, self.last_dt, 0.0),
        ).astype(fdt)
        inventory = account.inventory.astype(fdt)
        penalty = (p.inventory_penalty * (inventory * inventory)) * dt
        # The change in cash + inventory * mid, exactly (ints and half-ints), then the penalty
        # (sekai's single rounding in float64).
        mid_after = book_mid2(book, self.mid_price).astype(fdt) * 0.5
        mid_before = mid2_before.astype(fdt) * 0.5
        gain = wealth_change(before, account, mid_before, mid_after, fdt)
        reward = gain - penalty
        env_state = LimitOrderBookState(
            book=book,
            account=account,
            trades=trades,
            episode_key=es.episode_key,
            overflow=es.overflow | book.overflow | stats.truncated,
        )
        return self._state(env_state, k, reward, dt, n_fills, k >= self.n_steps, state.key)

    # -- helpers ---------------------------------------------------------------------------
    def _clock(self, k: Array, fdt: Any) -> Array:
        """The book time after `k` decisions: `warmup + min(k * decision_interval, length)`."""
        offset = jnp.minimum(k.astype(fdt) * self.decision_interval, self.session_length)
        # barriers: no fused multiply-add, which a batched compile may form and a single one
        # not (sekai's sum, then its difference from the start, are rounded separately)
        return opaque(jnp.asarray(self.warmup, fdt) + opaque(offset))

    def _observe(self, env_state: LimitOrderBookState, k: Array, fdt: Any) -> dict[str, Any]:
        left = jnp.asarray(self._time_left)[jnp.minimum(k, self.n_steps)].astype(fdt)
        return observe(
            env_state.book,
            env_state.account,
            env_state.trades,
            left,
            self._inventory_ratio,
            mid_price=self.mid_price,
            levels=self.levels,
        )

    def _state(
        self,
        env_state: LimitOrderBookState,
        k: Array,
        reward: Array,
        dt: Array,
        n_fills: Array,
        terminated: Any,
        key: PRNGKeyArray,
    ) -> LimitOrderBookEnvState:
        """The state after `k` decisions; one builder for reset and step."""
        fdt = float_dtype()
        info = {
            "timestamp": self._clock(k, fdt) - jnp.asarray(self.warmup, fdt),
            "dt": jnp.asarray(dt, fdt),
            **account_info(env_state.book, env_state.account, self.mid_price, fdt),
            "fills": jnp.asarray(n_fills, jnp.int32),
            "overflow": env_state.overflow,
        }
        observation = self._observe(env_state, k, fdt)
        return self._quote_state(env_state, observation, reward, terminated, info, k, key)
