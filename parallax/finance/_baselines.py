"""Closed-form baselines for MarketMaking-v0 and OptimalExecution-v0, as pure JAX functions.

- `avellaneda_stoikov_quotes`: the Avellaneda-Stoikov (2008) bid and ask prices.
- `avellaneda_stoikov_action`: the same quotes as a MarketMaking-v0 action (offsets from the
  mid, clipped to `[0, max_offset]`, float32), as sekai's `avellaneda_stoikov_action()`.
- `almgren_chriss_trajectory`: the Almgren-Chriss (2000) optimal holdings `x_0 .. x_N`.
- `almgren_chriss_actions`: that schedule as OptimalExecution-v0 actions (the fraction of the
  remaining inventory sold at each step), as sekai's `almgren_chriss_actions()`.
- `expected_shortfall`: the closed-form mean and variance of the implementation shortfall of a
  static schedule, as sekai's `expected_shortfall(trades)`.
- `avellaneda_stoikov_policy(env)` / `almgren_chriss_policy(env)`: `f(state) -> action` for a
  (possibly wrapped or batched) env, usable inside `jit`, `vmap` and `lax.scan` rollouts.
- `planning_args(p)` / `shortfall_args(p)`: the keywords of the Almgren-Chriss functions held
  by an `OptimalExecutionParams` (for the env's methods and `almgren_chriss_policy`).

Every function works with the default float dtype (float64 under `jax_enable_x64`, else
float32), is elementwise in its scalar arguments (so it broadcasts and vmaps over parameter
batches), has no Python branches on values, and is jitted (with `n_steps` static), so eager
calls compile once per shape and dtype.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

from ._common import divide, float_dtype

if TYPE_CHECKING:  # imported lazily at run time to keep `parallax.finance` imports cheap
    from .._core import State
    from ._execution import OptimalExecutionParams
    from ._market_making import MarketMakingParams

__all__ = [
    "almgren_chriss_actions",
    "almgren_chriss_policy",
    "almgren_chriss_trajectory",
    "avellaneda_stoikov_action",
    "avellaneda_stoikov_policy",
    "avellaneda_stoikov_quotes",
    "expected_shortfall",
]

LINEAR_KAPPA_T = 1e-8
"""Below this `kappa * total_time` the Almgren-Chriss schedule is the straight line (TWAP)."""


def _float(x: ArrayLike) -> Array:
    """`x` as an array of the default float dtype (float64 under x64, else float32)."""
    return jnp.asarray(x, dtype=float_dtype())


def _check_steps(n_steps: Any) -> int:
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 1:
        raise ValueError(f"n_steps must be an int >= 1, got {n_steps!r}")
    return n_steps


def _trailing(x: Array) -> Array:
    """`x` with a trailing axis, to broadcast against a last axis (scalars pass through)."""
    return x[..., None] if x.ndim else x


@jax.jit
def _as_offsets(
    q: ArrayLike, tau: ArrayLike, sigma: ArrayLike, gamma: ArrayLike, k: ArrayLike
) -> tuple[Array, Array]:
    """Unclipped optimal (bid, ask) distances from the mid, in sekai's operation order, for
    the inventory `q`, the time left `tau`, `sigma`, the risk aversion `gamma` and the fill
    decay `k`."""
    q = _float(q)
    tau = _float(tau)
    sigma, gamma, k = _float(sigma), _float(gamma), _float(k)
    positive = gamma > 0
    safe_gamma = jnp.where(positive, gamma, 1.0)
    skew = q * gamma * sigma**2 * tau
    spread = jnp.where(
        positive,
        gamma * sigma**2 * tau + (2 / safe_gamma) * jnp.log(1 + safe_gamma / k),
        2 / k,
    )
    return spread / 2 + skew, spread / 2 - skew


@jax.jit
def avellaneda_stoikov_quotes(
    mid: ArrayLike,
    inventory: ArrayLike,
    time_remaining: ArrayLike,
    *,
    sigma: ArrayLike,
    risk_aversion: ArrayLike,
    fill_decay: ArrayLike,
) -> tuple[Array, Array]:
    """The Avellaneda-Stoikov optimal bid and ask prices (not clipped).

    With `gamma = risk_aversion`, `k = fill_decay` and `tau = time_remaining`, the reservation
    price is `r = mid - inventory * gamma * sigma**2 * tau` and the optimal spread
    `gamma * sigma**2 * tau + (2 / gamma) * ln(1 + gamma / k)` (`2 / k` when `gamma = 0`);
    the quotes are `r -/+ spread / 2`.

    Args:
        mid: mid price, float, any shape (broadcast with the others).
        inventory: signed inventory in units, int or float.
        time_remaining: session time left, `(n_steps - t) * dt`.
        sigma: volatility of the mid (price units per sqrt time), `>= 0`.
        risk_aversion: `gamma >= 0`.
        fill_decay: `k > 0` of the fill intensity `A * exp(-k * delta)`.

    Returns:
        `(bid, ask)`, arrays of the default float dtype at the broadcast shape.

    Example:
        >>> from parallax.finance import avellaneda_stoikov_quotes
        >>> bid, ask = avellaneda_stoikov_quotes(
        ...     100.0, 0, 1.0, sigma=2.0, risk_aversion=0.1, fill_decay=1.5)
        >>> round(float(ask - bid), 4)
        1.6908
    """
    bid_offset, ask_offset = _as_offsets(
        inventory, time_remaining, sigma, risk_aversion, fill_decay
    )
    m = _float(mid)
    return m - bid_offset, m + ask_offset


@jax.jit
def avellaneda_stoikov_action(
    inventory: ArrayLike,
    time_remaining: ArrayLike,
    *,
    sigma: ArrayLike,
    risk_aversion: ArrayLike,
    fill_decay: ArrayLike,
    max_offset: ArrayLike,
) -> Array:
    """The Avellaneda-Stoikov quotes as a MarketMaking-v0 action, as sekai computes it.

    The (bid, ask) distances from the mid of `avellaneda_stoikov_quotes`, clipped to
    `[0, max_offset]` and cast to float32 (the env's action space).

    Args:
        inventory: signed inventory, any shape `B` (int or float).
        time_remaining: session time left `(n_steps - t) * dt`, broadcast with `inventory`.
        sigma, risk_aversion, fill_decay: the env parameters (see `avellaneda_stoikov_quotes`).
        max_offset: the action space's upper bound.

    Returns:
        float32 array of shape `B + (2,)`: `[bid offset, ask offset]`.

    Example:
        >>> from parallax.finance import avellaneda_stoikov_action
        >>> avellaneda_stoikov_action(
        ...     3, 0.5, sigma=2.0, risk_aversion=0.1, fill_decay=1.5, max_offset=5.0).tolist()
        [1.3453857898712158, 0.1453857421875]
    """
    bid_offset, ask_offset = _as_offsets(
        inventory, time_remaining, sigma, risk_aversion, fill_decay
    )
    hi = _float(max_offset)
    quotes = jnp.stack([bid_offset, ask_offset], axis=-1)
    return jnp.clip(quotes, 0.0, _trailing(hi)).astype(jnp.float32)


def almgren_chriss_trajectory(
    *,
    n_steps: int,
    initial_inventory: ArrayLike = 1e6,
    total_time: ArrayLike = 5.0,
    sigma: ArrayLike = 0.95,
    permanent_impact: ArrayLike = 2.5e-7,
    temporary_impact: ArrayLike = 2.5e-6,
    risk_aversion: ArrayLike = 1e-6,
) -> Array:
    """The Almgren-Chriss optimal holdings at `t_j = j * tau`, `j = 0 .. n_steps`.

    With `tau = total_time / n_steps`, `eta~ = temporary_impact - permanent_impact * tau / 2`
    and `kappa~^2 = risk_aversion * sigma**2 / eta~`, `kappa = 2 asinh(tau kappa~ / 2) / tau`
    and `x_j = X0 sinh(kappa (T - t_j)) / sinh(kappa T)`, evaluated without overflow; when
    `kappa T < 1e-8` the schedule is the straight line `X0 (1 - t_j / T)` (TWAP). Same
    formulas and cut-off as sekai's `OptimalExecutionEnv.almgren_chriss_trajectory()`; the
    defaults are the env's.

    Args:
        n_steps: number of trading periods, a static int `>= 1` (fixes the output shape).
        initial_inventory: `X0 > 0` shares.
        total_time: horizon `T > 0`.
        sigma: volatility `>= 0` (price units per sqrt time).
        permanent_impact: `gamma >= 0`.
        temporary_impact: `eta`, with `eta > gamma * tau / 2`.
        risk_aversion: `lambda >= 0`.

    Returns:
        `(n_steps + 1,)` array of the default float dtype, from `X0` down to 0. Scalar
        parameters only; `jax.vmap` it for a batch of parameters.

    Example:
        >>> from parallax.finance import almgren_chriss_trajectory
        >>> x = almgren_chriss_trajectory(n_steps=5, risk_aversion=0.0)
        >>> [round(float(v)) for v in x]
        [1000000, 800000, 600000, 400000, 200000, 0]
    """
    args = (initial_inventory, total_time, sigma, permanent_impact, temporary_impact, risk_aversion)
    return _trajectory(_check_steps(n_steps), *map(_float, args))


@functools.partial(jax.jit, static_argnums=0)
def _trajectory(
    n_steps: int, x0: Array, horizon: Array, sigma: Array, gamma: Array, eta: Array, lam: Array
) -> Array:
    tau = divide(horizon, n_steps)
    t = jnp.arange(n_steps + 1, dtype=tau.dtype) * tau
    eta_tilde = eta - 0.5 * gamma * tau
    kappa_tilde_sq = lam * sigma**2 / eta_tilde
    positive = kappa_tilde_sq > 0
    safe_sq = jnp.where(positive, kappa_tilde_sq, 1.0)
    kappa = jnp.where(positive, 2.0 * jnp.arcsinh(0.5 * tau * jnp.sqrt(safe_sq)) / tau, 0.0)
    linear = kappa * horizon < LINEAR_KAPPA_T
    straight = x0 * (1 - t / horizon)
    # sinh(a) / sinh(b) as exp(a - b) * expm1(-2a) / expm1(-2b): finite for any kappa * T.
    a = kappa * (horizon - t)
    b = jnp.where(linear, 1.0, kappa * horizon)
    ratio = jnp.exp(a - b) * (jnp.expm1(-2.0 * a) / jnp.expm1(-2.0 * b))
    # Holdings are >= 0; at t_N = T a fused multiply-add in `T - t` can leave -1e-11.
    return jnp.maximum(jnp.where(linear, straight, x0 * ratio), 0.0)


def almgren_chriss_actions(
    *,
    n_steps: int,
    initial_inventory: ArrayLike = 1e6,
    total_time: ArrayLike = 5.0,
    sigma: ArrayLike = 0.95,
    permanent_impact: ArrayLike = 2.5e-7,
    temporary_impact: ArrayLike = 2.5e-6,
    risk_aversion: ArrayLike = 1e-6,
) -> Array:
    """The Almgren-Chriss schedule as OptimalExecution-v0 actions.

    Action `j` is the fraction of the holdings `x_j` sold at step `j`,
    `(x_j - x_{j+1}) / x_j` (1 where `x_j = 0`), clipped to `[0, 1]`: the env sells that
    fraction of its remaining inventory, so following these actions reproduces the
    trajectory (the env sells whatever is left on the last step).

    Args:
        n_steps, initial_inventory, total_time, sigma, permanent_impact, temporary_impact,
        risk_aversion: as in `almgren_chriss_trajectory`.

    Returns:
        float32 array `(n_steps, 1)`, row `j` the action at step `j`.

    Example:
        >>> from parallax.finance import almgren_chriss_actions
        >>> almgren_chriss_actions(n_steps=4, risk_aversion=0.0)[:, 0].tolist()
        [0.25, 0.3333333432674408, 0.5, 1.0]
    """
    args = (initial_inventory, total_time, sigma, permanent_impact, temporary_impact, risk_aversion)
    return _actions(_check_steps(n_steps), *map(_float, args))


@functools.partial(jax.jit, static_argnums=0)
def _actions(n_steps: int, *args: Array) -> Array:
    x = _trajectory(n_steps, *args)
    held = x[:-1]
    sold = held - x[1:]
    positive = held > 0
    fractions = jnp.where(positive, sold / jnp.where(positive, held, 1.0), 1.0)
    return jnp.clip(fractions, 0.0, 1.0).astype(jnp.float32).reshape(-1, 1)


def expected_shortfall(
    trades: ArrayLike,
    *,
    n_steps: int | None = None,
    initial_inventory: ArrayLike = 1e6,
    total_time: ArrayLike = 5.0,
    sigma: ArrayLike = 0.95,
    permanent_impact: ArrayLike = 2.5e-7,
    temporary_impact: ArrayLike = 2.5e-6,
    fixed_cost: ArrayLike = 0.0625,
) -> tuple[Array, Array]:
    """Closed-form mean and variance of the implementation shortfall of a static schedule.

    For shares `n_j` sold at steps `j = 1 .. N` (holdings after each sale
    `x_j = X0 - sum_{i<=j} n_i`):
    `mean = gamma X0**2 / 2 + epsilon sum |n_j| + (eta~ / tau) sum n_j**2` and
    `variance = sigma**2 tau sum x_j**2`, with `tau = total_time / n_steps` and
    `eta~ = eta - gamma tau / 2` (Almgren and Chriss 2000, eqs. 19-20; as sekai).

    Args:
        trades: shares sold per step, float `(N,)` (or `(..., N)`, summed over the last axis).
        n_steps: the env's number of steps, which sets `tau`; defaults to `N`.
        initial_inventory, total_time, sigma, permanent_impact, temporary_impact: as in
            `almgren_chriss_trajectory`.
        fixed_cost: `epsilon >= 0`, the fixed cost per share (half the bid-ask spread).

    Returns:
        `(mean, variance)`, arrays of the default float dtype (shape `trades.shape[:-1]`).

    Example:
        >>> import jax.numpy as jnp
        >>> from parallax.finance import almgren_chriss_trajectory, expected_shortfall
        >>> x = almgren_chriss_trajectory(n_steps=25)
        >>> mean, var = expected_shortfall(x[:-1] - x[1:])
        >>> round(float(mean) / 1e6, 3), round(float(jnp.sqrt(var)) / 1e6, 3)
        (0.959, 0.802)
    """
    n = _float(trades)
    if n.ndim < 1:
        raise ValueError(f"trades must have at least one axis, got shape {n.shape}")
    steps = _check_steps(n.shape[-1] if n_steps is None else n_steps)
    args = (initial_inventory, total_time, sigma, permanent_impact, temporary_impact, fixed_cost)
    return _shortfall(steps, n, *map(_float, args))


@functools.partial(jax.jit, static_argnums=0)
def _shortfall(
    n_steps: int,
    n: Array,
    x0: Array,
    horizon: Array,
    sigma: Array,
    gamma: Array,
    eta: Array,
    epsilon: Array,
) -> tuple[Array, Array]:
    tau = divide(horizon, n_steps)
    x_after = _trailing(x0) - jnp.cumsum(n, axis=-1)
    eta_tilde = eta - 0.5 * gamma * tau
    mean = (
        0.5 * gamma * x0**2
        + epsilon * jnp.abs(n).sum(axis=-1)
        + eta_tilde / tau * jnp.square(n).sum(axis=-1)
    )
    variance = sigma**2 * tau * jnp.square(x_after).sum(axis=-1)
    return mean, variance


def _unwrapped_params(env: Any, params: Any) -> Any:
    return env.params if params is None else params


_MARKET = ("initial_inventory", "total_time", "sigma", "permanent_impact", "temporary_impact")
"""The `OptimalExecutionParams` fields every Almgren-Chriss function here takes."""


def planning_args(p: OptimalExecutionParams) -> dict[str, Any]:
    """The keywords of `almgren_chriss_trajectory` / `almgren_chriss_actions` held by `p`
    (all but `n_steps`): the market of `_MARKET` and `risk_aversion`."""
    return {**{name: getattr(p, name) for name in _MARKET}, "risk_aversion": p.risk_aversion}


def shortfall_args(p: OptimalExecutionParams) -> dict[str, Any]:
    """The keywords of `expected_shortfall` held by `p` (all but `n_steps`): the market of
    `_MARKET` and `fixed_cost`."""
    return {**{name: getattr(p, name) for name in _MARKET}, "fixed_cost": p.fixed_cost}


def avellaneda_stoikov_policy(
    env: Any, params: MarketMakingParams | None = None
) -> Callable[[State], Array]:
    """`f(state) -> action`: the Avellaneda-Stoikov quotes of `env` in that state.

    Works for a `MarketMakingEnv` and for wrapped or batched versions of it (`TimeLimit`,
    `AutoResetWrapper`, `VmapWrapper`, `make_vec`): it reads the inventory from
    `state.env_state` and the time from `state.step_count`, elementwise, so a batched state
    gives a batch of actions `(num_envs, 2)`. Pure and jit-able; use it in a `lax.scan`.

    Args:
        env: a `MarketMakingEnv`, or a wrapper that forwards its attributes.
        params: `MarketMakingParams` to quote with; `env.params` when omitted.

    Returns:
        A function from a state to a float32 action of shape `state.step_count.shape + (2,)`.

    Example:
        >>> import jax
        >>> import parallax
        >>> from parallax.finance import avellaneda_stoikov_policy
        >>> env = parallax.make("MarketMaking-v0", n_steps=10)
        >>> policy = avellaneda_stoikov_policy(env)
        >>> def body(state, _):
        ...     state = env.step(state, policy(state))
        ...     return state, state.reward
        >>> _, rewards = jax.lax.scan(body, env.reset(key=jax.random.key(0)), length=10)
        >>> rewards.shape
        (10,)
    """
    n_steps, max_offset = env.n_steps, env.max_offset

    def policy(state: State) -> Array:
        p = _unwrapped_params(env, params)
        dt = divide(_float(p.total_time), n_steps)
        remaining = _float(n_steps - state.step_count) * dt
        return avellaneda_stoikov_action(
            state.env_state.inventory,
            remaining,
            sigma=p.sigma,
            risk_aversion=p.risk_aversion,
            fill_decay=p.fill_decay,
            max_offset=max_offset,
        )

    return policy


def almgren_chriss_policy(
    env: Any, params: OptimalExecutionParams | None = None
) -> Callable[[State], Array]:
    """`f(state) -> action`: the Almgren-Chriss schedule of `env`, indexed by the step.

    The schedule (`almgren_chriss_actions` for the env's parameters) is static, so the
    policy looks up row `state.step_count` (clamped to the last row). Works for a
    `OptimalExecutionEnv` and wrapped or batched versions of it; a batched state gives
    actions `(num_envs, 1)`.

    Args:
        env: the `OptimalExecutionEnv` (or a wrapper forwarding its attributes) to plan for.
        params: the `OptimalExecutionParams` of the plan (default `env.params`).

    Returns:
        The policy: state in, float32 action `state.step_count.shape + (1,)` out.

    Example:
        >>> import jax, parallax
        >>> from parallax.finance import almgren_chriss_policy
        >>> env = parallax.make("OptimalExecution-v0")
        >>> first = env.reset(key=jax.random.key(0))
        >>> policy = almgren_chriss_policy(env)
        >>> state = env.step(first, policy(first))
        >>> round(float(state.info["shares_sold"]) / 1e3)
        114
    """
    n_steps = env.n_steps

    def policy(state: State) -> Array:
        p = _unwrapped_params(env, params)
        actions = almgren_chriss_actions(n_steps=n_steps, **planning_args(p))
        row = jnp.clip(state.step_count, 0, n_steps - 1)
        return actions[row]

    return policy
