"""`LimitOrderBookMarket-v0`: several traders in one limit order book, each on its own clock.

- `LimitOrderBookMarketEnv`: the multi-agent env, with sekai 0.2.0's `LimitOrderBookMarket`
  keywords, defaults, validation and mechanics, on the `MARLState` protocol.
- `LimitOrderBookMarketState`: its raw state (the book, every trader's account, the trade
  log, the exact session clock and decision times, the rewards not yet delivered).
- `MARKET_SLOTS`: the `parallax.rng` slots of its draws (the flow's, and `JITTER`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, ArrayLike, PRNGKeyArray

from ... import _spaces as spaces
from ... import rng
from ..._core import Agents, MARLState
from .._common import check_step_inputs, float_dtype, opaque, resolve_params
from .._validation import finite_array, finite_number
from ._book import Book
from ._book_queries import best_quotes
from ._decision import (
    Account,
    TradeLog,
    book_mid2,
    credit,
    empty_log,
    log_flow_trades,
    wealth_change,
)
from ._env import BookEnv, LimitOrderBookParams
from ._flow import run_flow
from ._flow_draws import FLOW_SLOTS
from ._flow_params import FlowParams
from ._market_clock import divide, due, schedule
from ._market_decision import apply_trader_decision, new_accounts
from ._obs import agent_row, observation_space, shared_rows
from ._settings import _static_int, book_settings

__all__ = ["MARKET_SLOTS", "LimitOrderBookMarketEnv", "LimitOrderBookMarketState"]

MARKET_SLOTS = rng.SlotTable(
    *FLOW_SLOTS.slots,
    rng.Slot(
        6, "JITTER", "a trader's decision, jitter > 0", "the trader's index", "uniform -> wait"
    ),
)
"""The flow's slots and `JITTER`; the step of each draw is the env step that makes it."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class LimitOrderBookMarketState:
    """Raw state of `LimitOrderBookMarketEnv` (the `env_state` of its `MARLState`).

    Attributes:
        book: the order book: background orders and the traders' quotes (owner = slot).
        accounts: every trader's inventory, cash (int32 ticks), quote ids and fill totals
            (an `Account` whose leaves are `(A,)`).
        trades: the last `max_trades` trades of the session (`TradeLog`).
        episode_key: uint32 `(2,)`, the `parallax.rng` key of every draw.
        clock: float `(2,)`, the session time (since the warm-up) as `hi + lo`, exact.
        next_decision: float `(A, 2)`, each trader's next decision time, likewise.
        pending: float `(A,)`, rewards earned on steps a trader did not act in, not yet
            delivered in `agents.reward`.
        overflow: bool `()`, sticky: the book ran out of slots or a flow run hit its event
            bound, so the session no longer equals sekai's unbounded engine.
    """

    book: Book
    accounts: Account
    trades: TradeLog
    episode_key: Array
    clock: Array
    next_decision: Array
    pending: Array
    overflow: Array


class LimitOrderBookMarketEnv(BookEnv):
    """Several RL traders in one limit order book, each deciding on its own clock.

    sekai 0.2.0's `LimitOrderBookMarket` on the array book. Trader `i` (slot `i`, owner id
    `i` in the book) decides every `decision_intervals[i]` units of time, each wait
    multiplied by a factor uniform in `[1 - jitter, 1 + jitter]`. A `step` carries out the
    decisions of the active traders in slot order (each exactly as in `LimitOrderBookEnv`;
    a market order may fill another trader's quote, never the trader's own), then runs the
    background flow to the next decision time of any trader (or the session end).

    - **Agents**: `num_agents = n_agents` slots; `agents.active` marks the traders whose
      decision time has come (all at reset; decision times within `1e-9` coincide); the
      others' actions are ignored and their observations are zeros.
    - **Action**: `(num_agents, 3)` ints, per trader `(bid level, ask level, market)` as in
      `LimitOrderBookEnv`; clipped into the space; `agents.action_mask` per trader.
    - **Observation**: per trader `LimitOrderBookEnv`'s (the book and the trades are the
      same for all, `"agent"` is the trader's own), leading with `num_agents`.
    - **Reward**: sekai's per-step reward, `wealth change - inventory_penalty * inventory**2
      * dt`, is earned by every trader on every step (`info["step_reward"]`). A trader's
      `agents.reward` on a step it acts is that step's reward plus what it earned on the
      steps since its previous decision, so a learner loses nothing between decisions and
      inactive slots get 0 (the MARL rules). Rewards earned after a trader's last decision
      of the session are only in `info["step_reward"]`.
    - **Termination** when the clock reaches `session_length` (every trader is then active,
      as sekai observes all of them); never truncates. Stepping on after the end keeps the
      clock at the end (no events, `dt` 0); sekai raises there.
    - **info**: `timestamp`, `dt` (the time the step covered), `mid_price`, `spread` (int32,
      0 for an empty side), `overflow`; per trader `(A,)`: `inventory`, `cash`, `wealth`,
      `fills`, `acting` (== `agents.active`), `step_reward`, `next_decision`.

    Randomness: the flow's draws (`FLOW_SLOTS`) at the step index as in `LimitOrderBookEnv`
    (0: the seed book and the warm-up; `k`: the interval after step `k`), and trader `i`'s
    jitter factor at `(step k, JITTER, i)`. Under x64 an episode equals sekai's fed the same
    draws, event by event: the clock is kept exactly, as sekai's fractions.

    Args:
        n_agents: number of traders, int `>= 1` (default 2).
        decision_intervals: each trader's time between decisions, finite `> 0`: one value
            or one per trader (default 1.0).
        jitter: wait factor spread, in `[0, 1)` (default 0).
        flow, mid_price, session_length, levels, max_quote_offset, order_size,
            max_inventory, inventory_penalty, max_trades, warmup, capacity: as in
            `LimitOrderBookEnv` (same defaults; a derived capacity keeps one slot a side
            per trader, and at least `2 + 2 * n_agents`).
        max_events: ours: bound on the flow's loop per step (default from the rates and the
            longest possible wait); reaching it sets `info["overflow"]`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax.finance._lob import LimitOrderBookMarketEnv
        >>> env = LimitOrderBookMarketEnv(2, decision_intervals=[1.0, 2.0], session_length=4.0)
        >>> s = env.reset(key=jax.random.key(0))
        >>> s = env.step(s, jnp.ones((2, 3), jnp.int32))
        >>> s.agents.active.tolist(), float(s.info["timestamp"])
        ([True, False], 1.0)
    """

    check_actions: bool = True
    """Whether `step` checks the action's shape and dtype kind at trace time
    (`parallax.check_action`: integers, `num_agents * 3` of them)."""

    def __init__(
        self,
        n_agents: int = 2,
        *,
        decision_intervals: float | Any = 1.0,
        jitter: float = 0.0,
        flow: FlowParams | None = None,
        mid_price: int = 10_000,
        session_length: float = 300.0,
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
        # sekai's order: n_agents, decision_intervals, jitter, then the core's checks
        agents = _static_int("n_agents", n_agents)
        if agents < 1:
            raise ValueError(f"n_agents must be >= 1, got {agents}")
        intervals = finite_array("decision_intervals", decision_intervals, ">0")
        if intervals.ndim > 1 or intervals.size not in (1, agents):
            raise ValueError(
                f"decision_intervals must be one value or {agents} (one per trader), got "
                f"{decision_intervals!r}"
            )
        jit_ = finite_number("jitter", jitter)
        if not 0.0 <= jit_ < 1.0:
            raise ValueError(f"jitter must be in [0, 1), got {jitter!r}")
        flow, penalty = self._init_book_settings(
            **book_settings(locals()),
            min_capacity=2 + 2 * agents,
            capacity_rule=f"2 + 2 * n_agents = {2 + 2 * agents}",
            reserved=agents,
            flow_interval=float(np.max(intervals)) * (1.0 + jit_),
            interval_within_session=True,
        )
        self.params = LimitOrderBookParams(flow=flow, inventory_penalty=penalty)
        self.num_agents = agents
        self.decision_intervals = tuple(float(x) for x in np.broadcast_to(intervals, (agents,)))
        self.jitter = jit_
        k = self.max_quote_offset + 1
        per_agent_action = spaces.MultiDiscrete(np.array([k, k, 3]))
        per_agent_observation = observation_space(self.levels, self.max_trades)
        self.action_space = spaces.stack_space(per_agent_action, agents)
        self.observation_space = spaces.stack_space(per_agent_observation, agents)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(n_agents={self.num_agents}, "
            f"decision_intervals={self.decision_intervals}, jitter={self.jitter}, "
            f"session_length={self.session_length}, capacity={self.capacity}, "
            f"params={self.params})"
        )

    @property
    def inventory_penalty(self) -> Any:
        """The running inventory penalty (`params.inventory_penalty`)."""
        return self.params.inventory_penalty

    @property
    def invariants(self) -> dict[str, Any]:
        """Per-state invariants (see `_market_invariants.py`)."""
        from ._market_invariants import market_invariants

        return market_invariants(self)

    # -- protocol --------------------------------------------------------------------------
    def reset(self, *, key: PRNGKeyArray, params: LimitOrderBookParams | None = None) -> MARLState:
        """Seed the book, run the warm-up, and open the session: every trader acts at 0.

        Args:
            key: a JAX PRNG key; every draw comes from `parallax.rng.episode_key(key)`.
            params: parameters for this episode; `self.params` when omitted.
        """
        ek, book, overflow = self._warm_up(key, params)
        fdt = float_dtype()
        n = self.num_agents
        env_state = LimitOrderBookMarketState(
            book=book,
            accounts=new_accounts(n),
            trades=empty_log(self.max_trades),
            episode_key=ek,
            clock=jnp.zeros(2, fdt),
            next_decision=jnp.zeros((n, 2), fdt),
            pending=jnp.zeros(n, fdt),
            overflow=overflow,
        )
        zeros = jnp.zeros(n, fdt)
        return self._state(
            env_state,
            jnp.asarray(0, jnp.int32),
            zeros,
            zeros,
            jnp.zeros((), fdt),
            jnp.zeros(n, jnp.int32),
            key,
        )

    def step(
        self, state: MARLState, action: ArrayLike, params: LimitOrderBookParams | None = None
    ) -> MARLState:
        """Carry out the active traders' decisions, then run the flow to the next decision.

        Args:
            state: the current state.
            action: int `(num_agents, 3)`; inactive slots are ignored, active ones clipped
                into the action space.
            params: parameters for this step; `self.params` when omitted.
        """
        check_step_inputs(self, action, any_shape=True)
        p = resolve_params(params, self.params)
        fdt = float_dtype()
        es: LimitOrderBookMarketState = state.env_state
        n = self.num_agents
        active = state.agents.active
        a = jnp.asarray(action).reshape(n, 3)
        if not jnp.issubdtype(a.dtype, jnp.integer):
            a = jnp.nan_to_num(a, nan=0.0, posinf=0.0, neginf=0.0)
        high = jnp.array([self.max_quote_offset, self.max_quote_offset, 2])
        a = jnp.clip(a, 0, high.astype(a.dtype)[None, :]).astype(jnp.int32)
        mid_before = book_mid2(es.book, self.mid_price).astype(fdt) / 2
        before = es.accounts

        def decide(i: Array, carry: tuple[Any, ...]) -> tuple[Any, ...]:
            book, accounts, trades, counts = carry
            out = apply_trader_decision(
                book,
                accounts,
                trades,
                counts,
                i,
                a[i],
                order_size=self.order_size,
                max_inventory=self.max_inventory,
                mid_price=self.mid_price,
            )
            return jax.tree.map(lambda new, old: jnp.where(active[i], new, old), out, carry)

        carry = (es.book, es.accounts, es.trades, jnp.zeros(n, jnp.int32))
        book, accounts, trades, n_fills = lax.fori_loop(0, n, decide, carry)

        # the decision times: clock + wait, exactly
        k = state.step_count + 1
        intervals = jnp.asarray(self.decision_intervals, fdt)
        if self.jitter > 0.0:
            low, high_ = 1.0 - self.jitter, 1.0 + self.jitter
            u = rng.uniform(
                es.episode_key,
                k.astype(jnp.uint32),
                MARKET_SLOTS.JITTER,
                jnp.arange(n, dtype=jnp.uint32),
                dtype=fdt,
            )
            # each product is rounded on its own, as sekai's: the selects (always true) keep
            # XLA's CPU backend from fusing a product into the following sum (one rounding)
            spread = jnp.where(u >= 0, (high_ - low) * u, 0.0)
            wait = jnp.where(u >= 0, intervals * (low + spread), intervals)
        else:
            wait = intervals
        next_decision, until, dt = schedule(
            es.clock, es.next_decision, active, wait, self.session_length
        )

        warm = jnp.asarray(self.warmup, fdt)
        book, stats = run_flow(
            book,
            p.flow,
            es.episode_key,
            k,
            warm + es.clock[0],
            warm + until[0],
            max_events=self.max_events,
            max_trades=self.max_trades,
            num_agents=n,
        )
        accounts = credit(accounts, stats.agent_bought, stats.agent_sold, stats.agent_cash)
        trades = log_flow_trades(trades, stats)
        n_fills = n_fills + stats.agent_fills

        # sekai's reward: the wealth change (exact: ints and half-ints), then the penalty
        mid_after = book_mid2(book, self.mid_price).astype(fdt) / 2
        gain = wealth_change(before, accounts, mid_before, mid_after, fdt)
        inventory = accounts.inventory.astype(fdt)
        # the select keeps XLA's CPU backend from fusing the product into the subtraction (a
        # fused multiply-add rounds once, sekai twice); with no inventory the penalty is 0
        penalty = (p.inventory_penalty * (inventory * inventory)) * dt
        reward = gain - jnp.where(inventory != 0, penalty, 0.0)
        paid = jnp.where(active, es.pending + reward, 0.0)
        pending = jnp.where(active, 0.0, es.pending + reward)

        done = until[0] >= jnp.asarray(self.session_length, fdt) - 1e-9
        env_state = LimitOrderBookMarketState(
            book=book,
            accounts=accounts,
            trades=trades,
            episode_key=es.episode_key,
            clock=until,
            next_decision=next_decision,
            pending=pending,
            overflow=es.overflow | book.overflow | stats.truncated,
        )
        return self._state(
            env_state,
            k,
            paid,
            reward,
            dt,
            n_fills,
            state.key,
            due=due(next_decision, until),
            done=done,
        )

    # -- helpers ---------------------------------------------------------------------------
    def action_mask(self, state: MARLState) -> tuple[Array, Array, Array]:
        """sekai's per-dimension masks per trader (bool `(A, K+1)`, `(A, K+1)`, `(A, 3)`):
        no buying at the long limit, no selling at the short one."""
        return self._mask(state.env_state.accounts)

    def _mask(self, accounts: Account) -> tuple[Array, Array, Array]:
        q = self.order_size
        can_buy = (accounts.inventory + q <= self.max_inventory)[:, None]
        can_sell = (accounts.inventory - q >= -self.max_inventory)[:, None]
        first = (jnp.arange(self.max_quote_offset + 1) == 0)[None, :]
        hold = jnp.ones_like(can_buy)
        return first | can_buy, first | can_sell, jnp.concatenate([can_sell, hold, can_buy], 1)

    def _observe(
        self, env_state: LimitOrderBookMarketState, elapsed: Array, fdt: Any
    ) -> dict[str, Any]:
        """Every trader's observation (`(A, ...)` leaves), before masking."""
        book, accounts = env_state.book, env_state.accounts
        n = self.num_agents
        rows, values, present = shared_rows(
            book, env_state.trades, mid_price=self.mid_price, levels=self.levels, fdt=fdt
        )
        live = elapsed >= 0
        left = jnp.maximum(1.0 - divide(elapsed, self.session_length, live), 0.0)

        def own(account: Account) -> Array:
            ratio = divide(account.inventory.astype(fdt), self.max_inventory, live)
            return agent_row(book, account, ratio, left, fdt)

        return {
            "book": jnp.broadcast_to(rows, (n, *rows.shape)),
            "trades": {
                "values": jnp.broadcast_to(values, (n, *values.shape)),
                "mask": jnp.broadcast_to(present.astype(jnp.int8), (n, present.shape[0])),
            },
            "agent": jax.vmap(own)(accounts),
        }

    def _state(
        self,
        env_state: LimitOrderBookMarketState,
        k: Array,
        paid: Array,
        step_reward: Array,
        dt: Array,
        n_fills: Array,
        key: PRNGKeyArray,
        *,
        due: Array | None = None,
        done: Array | None = None,
    ) -> MARLState:
        """The state after `k` steps; one builder for reset (`due`/`done` None) and step."""
        fdt = float_dtype()
        n = self.num_agents
        done = jnp.bool_(False) if done is None else done
        active = jnp.ones(n, bool) if due is None else due | done
        book, accounts = env_state.book, env_state.accounts
        mid = book_mid2(book, self.mid_price).astype(fdt) / 2
        has_bid, has_ask, bid, ask = best_quotes(book)
        warm = jnp.asarray(self.warmup, fdt)
        elapsed = opaque(warm + env_state.clock[0]) - warm  # sekai: book.time - t0
        cash = accounts.cash.astype(fdt)
        observation = self._observe(env_state, elapsed, fdt)
        observation = jax.tree.map(
            lambda x: jnp.where(active.reshape((n,) + (1,) * (x.ndim - 1)), x, 0), observation
        )
        info = {
            "timestamp": elapsed,
            "dt": jnp.asarray(dt, fdt),
            "mid_price": mid,
            "spread": jnp.where(has_bid & has_ask, ask - bid, 0),
            "overflow": env_state.overflow,
            "inventory": accounts.inventory,
            "cash": cash,
            "wealth": cash + accounts.inventory.astype(fdt) * mid,
            "fills": jnp.asarray(n_fills, jnp.int32),
            "acting": active,
            "step_reward": jnp.asarray(step_reward, fdt),
            "next_decision": env_state.next_decision[:, 0],
        }
        return MARLState(
            env_state=env_state,
            agents=Agents(
                observation=observation,
                active=active,
                reward=jnp.asarray(paid, fdt),
                action_mask=self._mask(accounts),
            ),
            termination=jnp.asarray(done),
            truncation=jnp.bool_(False),
            info=info,
            step_count=k,
            key=key,
        )
