"""`OptimalExecution-v0`: liquidate a block of shares under market impact (Almgren-Chriss), in JAX.

- `OptimalExecutionEnv`: the env, with sekai 0.2.0's `OptimalExecutionEnv` keywords, defaults,
  spaces, dynamics, rewards and info keys.
- `OptimalExecutionParams`: its numeric parameters, a pytree that `reset`/`step` accept per
  call (vmap it for domain randomisation without a retrace).
- `OptimalExecutionState`: the raw state (`inventory`, the mid's `move` since arrival,
  `shortfall`, the episode key, the next step's draw).
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
from ._common import ParamsMethods, float_dtype, numeric_action, static_int
from ._env_parts import SessionEnv
from ._validation import Bound

__all__ = ["SLOTS", "OptimalExecutionEnv", "OptimalExecutionParams", "OptimalExecutionState"]

SLOTS = rng.SlotTable(
    rng.Slot(0, "MID", "every step t", "0", "normal(0, 1)"),
)
"""Draws of step `t` (0-based: `state.step_count` before the step). The reset state itself
is deterministic; each state carries the draws of the step that follows it."""

SOLD_OUT = 1e-9
"""Inventory below `SOLD_OUT * initial_inventory` after a sale is set to 0 (sold out)."""


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class OptimalExecutionParams(ParamsMethods):
    """Numeric parameters of `OptimalExecutionEnv` (sekai's keyword names and defaults).

    Every field is a pytree leaf (a Python float or a scalar array), so a batch of params
    (leaves with a leading axis) can be vmapped over `reset`/`step`. Values are not
    validated here; the env's constructor validates the ones it stores (including
    `temporary_impact > permanent_impact * tau / 2`).

    Attributes:
        initial_inventory: `X0 > 0`, shares to sell.
        s0: arrival mid price `> 0`.
        sigma: volatility `>= 0`, price units per sqrt(time).
        total_time: horizon `T > 0`; the period is `tau = total_time / n_steps`.
        permanent_impact: `gamma >= 0`; the mid falls by `gamma * shares` after a sale.
        temporary_impact: `eta > 0`; a sale executes `eta * shares / tau` below the mid.
        fixed_cost: `epsilon >= 0` per share (half the spread).
        risk_aversion: `lambda >= 0`; the running penalty `lambda sigma**2 tau inventory**2`.

    Example:
        >>> from parallax.finance import OptimalExecutionParams
        >>> OptimalExecutionParams(risk_aversion=0.0).replace(sigma=0.5).sigma
        0.5
    """

    initial_inventory: Any = 1e6
    s0: Any = 50.0
    sigma: Any = 0.95
    total_time: Any = 5.0
    permanent_impact: Any = 2.5e-7
    temporary_impact: Any = 2.5e-6
    fixed_cost: Any = 0.0625
    risk_aversion: Any = 1e-6


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class OptimalExecutionState:
    """Raw state of `OptimalExecutionEnv` (the `env_state` of its `State`).

    Attributes:
        inventory: shares left, default float dtype, scalar.
        move: the mid's move since arrival, `mid - s0`, default float dtype, scalar. Prices
            are kept relative to `s0` so that float32 does not cancel ~50 - ~50 in the
            execution price, the reward and the observation.
        shortfall: cumulative implementation shortfall in dollars, default float dtype.
        episode_key: uint32 `(2,)`, the `parallax.rng` episode key of every draw.
        mid_normal: scalar default float dtype, the mid's normal of the next step (slot `MID`
            at step `step_count`), drawn when the state is made (see `MarketMakingState`).
    """

    inventory: Array
    move: Array
    shortfall: Array
    episode_key: Array
    mid_normal: Array


_BOUNDS: dict[str, Bound] = {
    "initial_inventory": ">0",
    "s0": ">0",
    "sigma": ">=0",
    "total_time": ">0",
    "permanent_impact": ">=0",
    "temporary_impact": ">0",
    "fixed_cost": ">=0",
    "risk_aversion": ">=0",
}
"""The constructor's bound on each numeric parameter (also applied by `env.name = value`)."""


def _check_impacts(p: OptimalExecutionParams, n_steps: int) -> OptimalExecutionParams:
    """`p`, unless `temporary_impact <= permanent_impact * tau / 2` (sekai's check)."""
    tau = float(p.total_time) / n_steps
    if float(p.temporary_impact) - 0.5 * float(p.permanent_impact) * tau <= 0:
        raise ValueError(
            "temporary_impact must exceed permanent_impact * tau / 2 (tau = total_time / "
            f"n_steps = {tau!r}), got temporary_impact={p.temporary_impact!r}, "
            f"permanent_impact={p.permanent_impact!r}"
        )
    return p


def _draw(episode_key: Array, k: Array) -> Array:
    """The draw of step `k`: the mid's standard normal (slot `MID`, index 0)."""
    return rng.normal(episode_key, k, SLOTS.MID, 0, dtype=float_dtype())


class OptimalExecutionEnv(SessionEnv):
    """Liquidate a large position over a fixed horizon, trading off impact against risk.

    The Almgren-Chriss (2000) execution model, as sekai 0.2.0's `OptimalExecution-v0`
    (defaults from the paper's example: 1M shares of a $50 stock over 5 days). Each step
    sells `shares`, executed at `mid - epsilon - eta * shares / tau`; the mid then moves by
    `sigma * sqrt(tau) * Z - gamma * shares`.

    - Observation: float32 `(3,)` in `Box([0, 0, -inf], [1, 1, inf])`:
      `[inventory / X0, (n_steps - k) / n_steps, (mid - s0) / (sigma sqrt(total_time))]`
      (the last is 0 when `sigma = 0`).
    - Action: float32 `(1,)` in `Box(0, 1)`, the fraction of the *remaining* inventory to
      sell (clipped); the last step sells whatever is left.
    - Reward, in basis points of `X0 * s0`:
      `1e4 * (shares * (execution_price - s0) - lambda sigma**2 tau inventory**2) / (X0 s0)`
      (in float32 formed from fractions of `X0` and `s0`, so `inventory**2` cannot overflow).
    - Termination when sold out or after `n_steps` steps; never truncates.
    - `info`: `shares_sold`, `execution_price` (NaN after reset), `inventory`, `mid_price`,
      `implementation_shortfall`, `shortfall_bps`, `timestamp` (`k * tau`), `dt` (`tau`),
      all in the default float dtype (float64 under x64, else float32).

    Randomness: `SLOTS` (the mid's normal of step `k`); the reset state is deterministic.
    Numeric parameters live in `params` (an `OptimalExecutionParams`), overridable per
    call; `n_steps` is static.

    Args:
        initial_inventory, s0, sigma, total_time, permanent_impact, temporary_impact,
            fixed_cost, risk_aversion: see `OptimalExecutionParams` (defaults 1e6, 50, 0.95,
            5, 2.5e-7, 2.5e-6, 0.0625, 1e-6).
        n_steps: trading periods, int `>= 1` (default 25).

    Raises:
        ValueError: a parameter out of range, as sekai (naming the parameter), including
            `temporary_impact <= permanent_impact * tau / 2`.
        TypeError: a non-integer `n_steps`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax.finance import OptimalExecutionEnv
        >>> env = OptimalExecutionEnv(n_steps=5)
        >>> state = env.step(env.reset(key=jax.random.key(0)), jnp.array([0.2]))
        >>> float(state.info["shares_sold"]), float(state.observation[0])
        (200000.0, 0.800000011920929)
    """

    SLOTS = SLOTS
    attribute_params = tuple(_BOUNDS)
    _bounds = _BOUNDS
    static_params: ClassVar[dict[str, str]] = {
        "n_steps": "it fixes the episode length and the compiled program"
    }

    def __init__(
        self,
        *,
        initial_inventory: float = 1e6,
        s0: float = 50.0,
        sigma: float = 0.95,
        total_time: float = 5.0,
        n_steps: int = 25,
        permanent_impact: float = 2.5e-7,
        temporary_impact: float = 2.5e-6,
        fixed_cost: float = 0.0625,
        risk_aversion: float = 1e-6,
    ) -> None:
        steps = static_int("n_steps", n_steps)
        if steps < 1:
            raise ValueError(f"n_steps must be >= 1, got {n_steps!r}")
        self.n_steps = steps
        given = {
            "initial_inventory": initial_inventory,
            "s0": s0,
            "sigma": sigma,
            "total_time": total_time,
            "permanent_impact": permanent_impact,
            "temporary_impact": temporary_impact,
            "fixed_cost": fixed_cost,
            "risk_aversion": risk_aversion,
        }
        self.params = _check_impacts(self._checked(OptimalExecutionParams, given), steps)
        self.observation_space = spaces.Box(
            np.array([0.0, 0.0, -np.inf]), np.array([1.0, 1.0, np.inf]), (3,), jnp.float32
        )
        self.action_space = spaces.Box(0.0, 1.0, (1,), jnp.float32)
        self._built = True

    # -- parameters ------------------------------------------------------------------------
    @property
    def tau(self) -> float:
        """Trading period `total_time / n_steps` of the stored params."""
        return float(self.params.total_time) / self.n_steps

    def _set_param(self, name: str, value: Any) -> OptimalExecutionParams:
        return _check_impacts(super()._set_param(name, value), self.n_steps)

    # -- protocol --------------------------------------------------------------------------
    def reset(self, *, key: PRNGKeyArray, params: OptimalExecutionParams | None = None) -> State:
        """Arrive with `X0` shares at mid `s0` (and draw the first step's noise).

        Args:
            key: a JAX PRNG key (every draw of the episode comes from
                `parallax.rng.episode_key(key)`).
            params: the episode's `OptimalExecutionParams` (default `self.params`).

        Returns:
            The first `State`: reward 0, no flag set, `step_count` 0, `execution_price` NaN.
        """
        p, ek = self._reset_params(key, params)
        zero = jnp.zeros((), p.s0.dtype)
        env_state = OptimalExecutionState(
            inventory=p.initial_inventory,
            move=zero,
            shortfall=zero,
            episode_key=ek,
            mid_normal=_draw(ek, jnp.int32(0)),
        )
        nan = jnp.full((), jnp.nan, p.s0.dtype)
        return self._state(env_state, jnp.int32(0), p, zero, nan, zero, jnp.bool_(False), key)

    def step(
        self, state: State, action: ArrayLike, params: OptimalExecutionParams | None = None
    ) -> State:
        """Sell a fraction of the remaining inventory, move the mid, and score the step.

        Args:
            state: the current `State` (from `reset` or `step`).
            action: the fraction to sell, any real dtype, 1 element (clipped to `[0, 1]`).
            params: parameters for this step; `self.params` when omitted (pass the same ones
                as to `reset`).

        Returns:
            The next `State`.
        """
        p, fraction = self._step_action(action, params, 1.0)
        fdt = p.s0.dtype
        z = self.step_noise(state)
        es: OptimalExecutionState = state.env_state
        k = state.step_count
        tau = self._period(p)
        inventory, move = es.inventory, es.move
        shares = jnp.where(k == self.n_steps - 1, inventory, fraction * inventory)
        # The execution price relative to s0 (sekai: `mid - epsilon - eta shares / tau`).
        slippage = jnp.where(
            shares > 0, move - p.fixed_cost - p.temporary_impact * shares / tau, move
        )
        inventory = inventory - shares
        inventory = jnp.where(inventory < SOLD_OUT * p.initial_inventory, 0.0, inventory)
        shortfall = es.shortfall - shares * slippage
        move = move + p.sigma * jnp.sqrt(tau) * z
        move = move - p.permanent_impact * shares
        if fdt == np.float64:
            # sekai's formula, so float64 rewards follow sekai's rounding.
            risk = p.risk_aversion * p.sigma**2 * tau * inventory**2
            reward = 1e4 * (shares * slippage - risk) / (p.initial_inventory * p.s0)
        else:
            # The same value scaled by X0 s0 first: `inventory**2` and `shares * slippage`
            # overflow float32 from X0 ~ 1e19 (-inf rewards); fractions of X0 do not.
            sold, left = shares / p.initial_inventory, inventory / p.initial_inventory
            risk = p.risk_aversion * p.sigma**2 * tau * left * (inventory / p.s0)
            reward = 1e4 * (sold * (slippage / p.s0) - risk)
        terminated = (inventory == 0.0) | (k + 1 >= self.n_steps)
        env_state = OptimalExecutionState(
            inventory=inventory,
            move=move,
            shortfall=shortfall,
            episode_key=es.episode_key,
            mid_normal=_draw(es.episode_key, k + 1),
        )
        return self._state(
            env_state, k + 1, p, shares, p.s0 + slippage, reward, terminated, state.key
        )

    # -- helpers ---------------------------------------------------------------------------
    def step_noise(self, state: State) -> Array:
        """The draw the next `step(state, ...)` uses: the mid's standard normal `z`, scalar.

        Slot `MID`, index 0, at step `state.step_count`, in the default float dtype; what a
        reference harness serves to sekai as `rng.standard_normal()`.
        """
        es: OptimalExecutionState = state.env_state
        return es.mid_normal

    def almgren_chriss_trajectory(self, params: OptimalExecutionParams | None = None) -> Array:
        """The optimal holdings `x_0 .. x_N` for the env's parameters (see the baselines)."""
        p = self.params if params is None else params
        return _baselines.almgren_chriss_trajectory(
            n_steps=self.n_steps, **_baselines.planning_args(p)
        )

    def almgren_chriss_actions(self, params: OptimalExecutionParams | None = None) -> Array:
        """The optimal schedule as actions, float32 `(n_steps, 1)` (see the baselines)."""
        p = self.params if params is None else params
        return _baselines.almgren_chriss_actions(
            n_steps=self.n_steps, **_baselines.planning_args(p)
        )

    def expected_shortfall(
        self, trades: ArrayLike, params: OptimalExecutionParams | None = None
    ) -> tuple[Array, Array]:
        """Closed-form `(mean, variance)` of the shortfall of a static schedule of `trades`."""
        p = self.params if params is None else params
        return _baselines.expected_shortfall(
            trades, n_steps=self.n_steps, **_baselines.shortfall_args(p)
        )

    def _action(self, action: ArrayLike) -> Array:
        return numeric_action(action, 1, "fraction to sell")[0]

    def _state(
        self,
        env_state: OptimalExecutionState,
        k: Array,
        p: OptimalExecutionParams,
        shares: Array,
        execution_price: Array,
        reward: Array,
        terminated: Array,
        key: PRNGKeyArray,
    ) -> State:
        """The `State` for `env_state` after `k` steps; one builder for reset and step."""
        scale = p.sigma * jnp.sqrt(p.total_time)
        moved = jnp.where(scale > 0, env_state.move / jnp.where(scale > 0, scale, 1.0), 0.0)
        inventory_left = env_state.inventory / p.initial_inventory
        observation = jnp.stack([inventory_left, self._time_left(k, p.s0.dtype), moved])
        notional = p.initial_inventory * p.s0
        info = {
            "shares_sold": shares,
            "execution_price": execution_price,
            "inventory": env_state.inventory,
            "mid_price": p.s0 + env_state.move,
            "implementation_shortfall": env_state.shortfall,
            "shortfall_bps": 1e4 * env_state.shortfall / notional,
        }
        return self._session_state(env_state, k, p, observation, info, reward, terminated, key)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_steps={self.n_steps}, params={self.params})"
