"""`MarketMaking-v0`: quote around a random-walk mid price (Avellaneda-Stoikov), in JAX.

- `MarketMakingEnv`: the env, with sekai 0.2.0's `MarketMakingEnv` keywords, defaults,
  spaces, dynamics, rewards and info keys.
- `MarketMakingParams`: its numeric parameters, a pytree that `reset`/`step` accept per call
  (vmap it for domain randomisation without a retrace).
- `MarketMakingState`: the raw state (`mid`, `inventory`, `cash`, the episode key, the next
  step's draws).
- `SLOTS`: the env's `parallax.rng` slot table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, PRNGKeyArray

from .. import _spaces as spaces
from .. import rng
from .._core import State
from . import _baselines
from ._common import ParamsMethods, divide, evaluated_once, float_dtype, numeric_action, static_int
from ._env_parts import SessionEnv
from ._validation import Bound, finite_number

__all__ = ["SLOTS", "MarketMakingEnv", "MarketMakingParams", "MarketMakingState"]

SLOTS = rng.SlotTable(
    rng.Slot(0, "FILL", "every step t", "0 bid, 1 ask", "uniform [0, 1)"),
    rng.Slot(1, "MID", "every step t", "0", "normal(0, 1)"),
)
"""Draws of step `t` (0-based: `state.step_count` before the step). The reset state itself
is deterministic; each state carries the draws of the step that follows it."""


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class MarketMakingParams(ParamsMethods):
    """Numeric parameters of `MarketMakingEnv` (sekai's keyword names and defaults).

    Every field is a pytree leaf (a Python float or a scalar array), so a batch of params
    (leaves with a leading axis) can be vmapped over `reset`/`step`. Values are not
    validated here; the env's constructor validates the ones it stores.

    Attributes:
        s0: initial mid price (finite, may be negative).
        sigma: volatility of the mid, price units per sqrt(time), `>= 0`.
        total_time: session length `> 0`; the step is `dt = total_time / n_steps`.
        fill_intensity: `A > 0` in the fill intensity `A * exp(-k * offset)`.
        fill_decay: `k > 0` in that intensity.
        risk_aversion: `gamma >= 0`; the running inventory penalty
            `0.5 * gamma * sigma**2 * dt * inventory**2`.

    Example:
        >>> from parallax.finance import MarketMakingParams
        >>> MarketMakingParams().replace(sigma=1.0).sigma
        1.0
    """

    s0: Any = 100.0
    sigma: Any = 2.0
    total_time: Any = 1.0
    fill_intensity: Any = 140.0
    fill_decay: Any = 1.5
    risk_aversion: Any = 0.1


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class MarketMakingState:
    """Raw state of `MarketMakingEnv` (the `env_state` of its `State`).

    Attributes:
        mid: mid price, default float dtype, scalar.
        inventory: signed inventory in units, int32 scalar.
        cash: cash, default float dtype, scalar.
        episode_key: uint32 `(2,)`, the `parallax.rng` episode key of every draw.
        fill_uniforms: `(2,)` default float dtype, the bid and ask fill uniforms of the next
            step (slot `FILL` at step `step_count`).
        mid_normal: scalar default float dtype, the mid's normal of the next step (slot
            `MID` at step `step_count`).

    The next step's draws are made when the state is made and carried in it, so every use
    of them in `step` reads one stored value: XLA would otherwise recompute the hash of a
    draw inside each fusion that reads it (several times slower in a vmapped batch).
    """

    mid: Array
    inventory: Array
    cash: Array
    episode_key: Array
    fill_uniforms: Array
    mid_normal: Array


_BOUNDS: dict[str, Bound] = {
    "s0": None,
    "sigma": ">=0",
    "total_time": ">0",
    "fill_intensity": ">0",
    "fill_decay": ">0",
    "risk_aversion": ">=0",
}
"""The constructor's bound on each numeric parameter (also applied by `env.name = value`)."""


def _draws(episode_key: Array, t: Array) -> tuple[Array, Array]:
    """The draws of step `t`: fill uniforms `(2,)` (slot `FILL`) and the mid's normal (`MID`)."""
    dt = float_dtype()
    u = rng.uniform(episode_key, t, SLOTS.FILL, jnp.arange(2, dtype=jnp.uint32), dtype=dt)
    return u, rng.normal(episode_key, t, SLOTS.MID, 0, dtype=dt)


class MarketMakingEnv(SessionEnv):
    """Quote a bid and an ask around a moving mid price and manage inventory risk.

    The Avellaneda-Stoikov (2008) market-making model, as sekai 0.2.0's `MarketMaking-v0`:
    the mid follows arithmetic Brownian motion `S <- S + sigma * sqrt(dt) * Z`; a quote at
    distance `delta` from the mid fills within a step with probability
    `1 - exp(-A * exp(-k * delta) * dt)`, independently on each side, for `order_size`
    units at the quoted price, unless that side is at its inventory limit.

    - Observation: float32 `(2,)` in `Box([-1, 0], [1, 1])`:
      `[inventory / max_inventory, (n_steps - t) / n_steps]`.
    - Action: float32 `(2,)` in `Box(0, max_offset)`, the (bid, ask) distances from the mid;
      values outside are clipped (`inf` to `max_offset`). A NaN offset means no quote on that
      side: it never fills, its `info` quote is NaN, the other side is unaffected (sekai
      raises `InvalidAction` on a non-finite action; wrap the env in
      `parallax.CheckedWrapper` to stop on one). Eager and jitted steps agree.
    - Reward: change in mark-to-market wealth `cash + inventory * mid` minus
      `0.5 * risk_aversion * sigma**2 * dt * inventory**2` (inventory after the fills).
    - Termination after `n_steps` steps; never truncates.
    - `info`: `mid_price`, `inventory` (int32), `cash`, `wealth`, `bid`, `ask` (NaN after
      reset), `bid_filled`, `ask_filled` (bool), `timestamp` (`t * dt`), `dt`; floats in
      the default float dtype (float64 under x64, else float32).

    Randomness: `SLOTS` (fill uniforms and the mid's normal of step `t`); the reset state is
    deterministic. Numeric parameters live in `params` (a `MarketMakingParams`), overridable
    per call; `n_steps`, `max_inventory`, `order_size` and `max_offset` are static.

    Args:
        s0, sigma, total_time, fill_intensity, fill_decay, risk_aversion: see
            `MarketMakingParams` (defaults 100, 2, 1, 140, 1.5, 0.1).
        n_steps: steps per session, int `>= 1` (default 200).
        max_inventory: inventory limit on either side, int `>= 1` (default 50).
        order_size: units per fill, int `>= 1` (default 1).
        max_offset: largest quote distance, finite `>= 0` (default 5).

    Raises:
        ValueError: a parameter out of range, as sekai (naming the parameter).
        TypeError: a non-integer `n_steps`, `max_inventory` or `order_size`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax.finance import MarketMakingEnv
        >>> env = MarketMakingEnv(n_steps=10)
        >>> state = env.reset(key=jax.random.key(0))
        >>> state = env.step(state, jnp.array([0.5, 0.5]))
        >>> state.observation.tolist(), int(state.step_count)
        ([0.0, 0.8999999761581421], 1)
    """

    SLOTS = SLOTS
    attribute_params = tuple(_BOUNDS)
    _bounds = _BOUNDS
    static_params: ClassVar[dict[str, str]] = {
        "n_steps": "it fixes the episode length and the compiled program",
        "max_inventory": "it scales the observation and bounds the inventory",
        "order_size": "it is the int32 unit of every fill",
        "max_offset": "it fixes the action space",
    }
    episode_equity_key = "wealth"

    def __init__(
        self,
        *,
        s0: float = 100.0,
        sigma: float = 2.0,
        total_time: float = 1.0,
        n_steps: int = 200,
        fill_intensity: float = 140.0,
        fill_decay: float = 1.5,
        risk_aversion: float = 0.1,
        max_inventory: int = 50,
        order_size: int = 1,
        max_offset: float = 5.0,
    ) -> None:
        steps = static_int("n_steps", n_steps)
        limit = static_int("max_inventory", max_inventory)
        size = static_int("order_size", order_size)
        if steps < 1 or limit < 1 or size < 1:
            raise ValueError(
                "n_steps, max_inventory and order_size must be >= 1, got "
                f"n_steps={n_steps!r}, max_inventory={max_inventory!r}, order_size={order_size!r}"
            )
        if limit > 2**30 or size > 2**30:
            raise ValueError(
                f"max_inventory and order_size must be <= 2**30 (int32 inventory), got "
                f"max_inventory={limit}, order_size={size}"
            )
        given = {
            "s0": s0,
            "sigma": sigma,
            "total_time": total_time,
            "fill_intensity": fill_intensity,
            "fill_decay": fill_decay,
            "risk_aversion": risk_aversion,
        }
        self.params = self._checked(MarketMakingParams, given)
        self.n_steps = steps
        self.max_inventory = limit
        self.order_size = size
        self.max_offset = finite_number("max_offset", max_offset, ">=0")
        self.observation_space = spaces.Box(
            np.array([-1.0, 0.0]), np.array([1.0, 1.0]), (2,), jnp.float32
        )
        self.action_space = spaces.Box(0.0, self.max_offset, (2,), jnp.float32)
        self._built = True

    # -- parameters ------------------------------------------------------------------------
    @property
    def dt(self) -> float:
        """Step length `total_time / n_steps` of the stored params."""
        return float(self.params.total_time) / self.n_steps

    # -- protocol --------------------------------------------------------------------------
    def reset(self, *, key: PRNGKeyArray, params: MarketMakingParams | None = None) -> State:
        """Start a session: mid `s0`, no inventory, no cash (and the first step's draws).

        Args:
            key: a JAX PRNG key; the episode's draws come from `parallax.rng.episode_key(key)`.
            params: parameters for this episode; `self.params` when omitted.

        Returns:
            The first `State` (reward 0, both flags False, `step_count` 0).
        """
        p, ek = self._reset_params(key, params)
        u, z = _draws(ek, jnp.int32(0))
        env_state = MarketMakingState(
            mid=p.s0,
            inventory=jnp.int32(0),
            cash=jnp.zeros((), p.s0.dtype),
            episode_key=ek,
            fill_uniforms=u,
            mid_normal=z,
        )
        nan = jnp.full((), jnp.nan, p.s0.dtype)
        no = jnp.bool_(False)
        return self._state(
            env_state, jnp.int32(0), p, nan, nan, no, no, jnp.zeros((), p.s0.dtype), no, key
        )

    def step(
        self, state: State, action: ArrayLike, params: MarketMakingParams | None = None
    ) -> State:
        """Quote, fill, move the mid, and score the step.

        Args:
            state: the current `State` (from `reset` or `step`).
            action: `(bid offset, ask offset)`, any real dtype, 2 elements (clipped to
                `[0, max_offset]`; a NaN side does not quote).
            params: parameters for this step; `self.params` when omitted (pass the same ones
                as to `reset`).

        Returns:
            The next `State`.
        """
        p, offsets = self._step_action(action, params, self.max_offset)
        offsets = evaluated_once(offsets)
        fdt = p.s0.dtype
        u, z = self.step_noise(state)
        es: MarketMakingState = state.env_state
        t = state.step_count
        dt = self._period(p)
        mid, inventory, cash = es.mid, es.inventory, es.cash
        bid, ask = mid - offsets[0], mid + offsets[1]
        q = self.order_size
        can_buy = inventory + q <= self.max_inventory
        can_sell = inventory - q >= -self.max_inventory
        p_fill = 1.0 - jnp.exp(-p.fill_intensity * jnp.exp(-p.fill_decay * offsets) * dt)
        # A NaN offset is no quote on that side: it never fills (sekai refuses the action).
        quoted = ~jnp.isnan(offsets)
        bid_filled = can_buy & quoted[0] & (u[0] < p_fill[0])
        ask_filled = can_sell & quoted[1] & (u[1] < p_fill[1])
        # Bid first, then ask, in sekai's order of operations.
        cash = jnp.where(bid_filled, cash - q * bid, cash)
        cash = jnp.where(ask_filled, cash + q * ask, cash)
        inventory = inventory + q * bid_filled.astype(jnp.int32) - q * ask_filled.astype(jnp.int32)
        move = p.sigma * jnp.sqrt(dt) * z
        inv = inventory.astype(fdt)
        penalty = 0.5 * p.risk_aversion * p.sigma**2 * dt * inv**2
        if fdt == np.float64:
            # sekai's formula, so float64 rewards follow sekai's rounding.
            before = es.cash + es.inventory.astype(fdt) * mid
            reward = (cash + inv * (mid + move)) - before - penalty
        else:
            # The same value without the cancellation of two wealths (~1e4) in float32:
            # fills earn their offsets, the new inventory earns the mid's move.
            earned = q * (
                jnp.where(bid_filled, offsets[0], 0.0) + jnp.where(ask_filled, offsets[1], 0.0)
            )
            reward = earned + inv * move - penalty
        next_u, next_z = _draws(es.episode_key, t + 1)
        env_state = MarketMakingState(
            mid=mid + move,
            inventory=inventory,
            cash=cash,
            episode_key=es.episode_key,
            fill_uniforms=next_u,
            mid_normal=next_z,
        )
        return self._state(
            env_state,
            t + 1,
            p,
            bid,
            ask,
            bid_filled,
            ask_filled,
            reward,
            t + 1 >= self.n_steps,
            state.key,
        )

    # -- helpers ---------------------------------------------------------------------------
    def step_noise(self, state: State) -> tuple[Array, Array]:
        """The draws the next `step(state, ...)` uses: `(u (2,), z ())`, default float dtype.

        `u` are the bid and ask fill uniforms (slot `FILL`, index 0 and 1), `z` the mid's
        standard normal (slot `MID`), all at step `state.step_count` (carried in the state,
        see `MarketMakingState`). This is what a reference harness serves to sekai as
        `rng.random(2)` and `rng.standard_normal()`.
        """
        es: MarketMakingState = state.env_state
        return es.fill_uniforms, es.mid_normal

    def fill_probability(
        self, offset: ArrayLike, params: MarketMakingParams | None = None
    ) -> Array:
        """Probability `1 - exp(-A * exp(-k * offset) * dt)` that a quote fills in one step.

        Args:
            offset: distance from the mid, float, any shape.
            params: `self.params` when omitted.

        Returns:
            Array of the default float dtype, shaped like `offset`.
        """
        p = self._params(params)
        d = jnp.asarray(offset, p.s0.dtype)
        dt = self._period(p)
        return 1.0 - jnp.exp(-p.fill_intensity * jnp.exp(-p.fill_decay * d) * dt)

    def avellaneda_stoikov_action(
        self, state: State, params: MarketMakingParams | None = None
    ) -> Array:
        """The closed-form optimal (bid, ask) distances in `state`, float32 `(..., 2)`.

        Same as sekai's `avellaneda_stoikov_action()`; see
        `parallax.finance.avellaneda_stoikov_policy` for the policy form.
        """
        return _baselines.avellaneda_stoikov_policy(self, params)(state)

    def _action(self, action: ArrayLike) -> Array:
        return numeric_action(action, 2, "bid offset, ask offset")

    def _state(
        self,
        env_state: MarketMakingState,
        t: Array,
        p: MarketMakingParams,
        bid: Array,
        ask: Array,
        bid_filled: Array,
        ask_filled: Array,
        reward: Array,
        terminated: Array,
        key: PRNGKeyArray,
    ) -> State:
        """The `State` for `env_state` after `t` steps; one builder for reset and step."""
        fdt = p.s0.dtype
        inv = env_state.inventory.astype(fdt)
        observation = jnp.stack([divide(inv, self.max_inventory), self._time_left(t, fdt)])
        info = {
            "mid_price": env_state.mid,
            "inventory": env_state.inventory,
            "cash": env_state.cash,
            "wealth": env_state.cash + inv * env_state.mid,
            "bid": bid,
            "ask": ask,
            "bid_filled": bid_filled,
            "ask_filled": ask_filled,
        }
        return self._session_state(env_state, t, p, observation, info, reward, terminated, key)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(n_steps={self.n_steps}, max_inventory={self.max_inventory}, "
            f"order_size={self.order_size}, max_offset={self.max_offset}, params={self.params})"
        )
