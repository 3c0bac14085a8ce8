"""Invariants and scripted policies of the bundled finance envs, for the battery.

- `invariants_for(env)`: `{name: fn(state) -> bool array}` for a `TradingEnv`,
  `PortfolioEnv`, `MarketMakingEnv` or `OptimalExecutionEnv` (None for any other env); the
  limit order book envs' (`LimitOrderBookEnv`, `LimitOrderBookMarketEnv`) come from
  `parallax.finance._lob._invariants` and `._market_invariants`.
  `parallax.testing`'s invariant sweep evaluates them on every state of many envs and steps.
- `scripted_policies_for(env)`: `{name: {"policy", "expect", "num_steps", "measure",
  "description"}}`, two per env: a policy `policy(key, state) -> action` for one instance,
  and `expect(trajectory) -> bool array` on the trajectory it produces from a reset
  (`trajectory.states` leads with `num_steps + 1` states, the reset state first; after the
  episode ends the last state repeats), with `measure(trajectory)` the value shown on failure.

Each function reads only the `State` it is given (its `env_state`, `info` and
`observation`) and the env's static configuration and parameters, so it is pure and runs
under `jit` and `vmap`. Float identities carry an explicit tolerance: relative `1e-5` of
the magnitudes involved for one-step identities (float32 rounding of a few operations), and
`1e-4` for identities accumulated over an episode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

__all__ = ["invariants_for", "scripted_policies_for"]

Invariant = Callable[[Any], Any]

_ONE_STEP = 1e-5
_EPISODE = 1e-4


def _close(a: Any, b: Any, rel: float, scale: Any = 0.0) -> Any:
    """`|a - b| <= rel * (1 + |a| + |b| + |scale|)`, NaN-safe (a NaN is not close)."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    return jnp.abs(a - b) <= rel * (1.0 + jnp.abs(a) + jnp.abs(b) + jnp.abs(scale))


def _named(*checks: Invariant) -> dict[str, Invariant]:
    """The checks keyed by their function names, in order."""
    return {check.__name__: check for check in checks}


def _previous(series: Any) -> Any:
    """The series one step back along axis 0 (its first value repeated at the start)."""
    return jnp.concatenate([series[:1], series[:-1]])


def _kind(env: Any) -> str | None:
    name = type(env).__name__
    known = (
        "TradingEnv",
        "PortfolioEnv",
        "MarketMakingEnv",
        "OptimalExecutionEnv",
        "LimitOrderBookEnv",
        "LimitOrderBookMarketEnv",
    )
    for base in type(env).__mro__:
        if base.__name__ in known and base.__module__.startswith("parallax.finance"):
            return base.__name__
    return name if name in known else None


# -- invariants --------------------------------------------------------------------------------
def _trading_invariants(env: Any) -> dict[str, Invariant]:
    positions = np.asarray(env.params.positions)
    low = 0.0 if positions.min() >= 0 else -np.inf
    high = 1.0 if positions.max() <= 1 else np.inf

    def equity_nonnegative(state: Any) -> Any:
        equity = state.env_state.equity
        return jnp.isfinite(equity) & (equity >= 0)

    def position_within_bounds(state: Any) -> Any:
        position = state.env_state.position
        return jnp.isfinite(position) & (position >= low) & (position <= high)

    def info_reports_state(state: Any) -> Any:
        es, info = state.env_state, state.info
        return (info["equity"] == es.equity) & (info["position"] == es.position)

    def observation_ends_with_position(state: Any) -> Any:
        position = state.env_state.position.astype(state.observation.dtype)
        return state.observation[-1] == position

    return _named(
        equity_nonnegative,
        position_within_bounds,
        info_reports_state,
        observation_ends_with_position,
    )


def _portfolio_invariants(env: Any) -> dict[str, Invariant]:
    long_only = not bool(getattr(env, "allow_short", False))

    def weights_sum_to_one(state: Any) -> Any:
        weights = state.env_state.weights
        return _close(jnp.sum(weights), 1.0, _ONE_STEP * weights.shape[-1])

    def weights_within_bounds(state: Any) -> Any:
        weights = state.env_state.weights
        ok = jnp.all(jnp.isfinite(weights))
        if long_only:  # static configuration, not a traced value
            ok &= jnp.all((weights >= 0) & (weights <= 1))
        return ok

    def value_nonnegative(state: Any) -> Any:
        value = state.env_state.portfolio_value
        return jnp.isfinite(value) & (value >= 0)

    def observation_reports_weights(state: Any) -> Any:
        weights = state.env_state.weights.astype(state.observation["weights"].dtype)
        return jnp.all(state.observation["weights"] == weights)

    return _named(
        weights_sum_to_one, weights_within_bounds, value_nonnegative, observation_reports_weights
    )


def _market_making_invariants(env: Any) -> dict[str, Invariant]:
    limit, size = int(env.max_inventory), int(env.order_size)

    def inventory_within_limits(state: Any) -> Any:
        inventory = state.env_state.inventory
        return (inventory >= -limit) & (inventory <= limit)

    def inventory_in_order_units(state: Any) -> Any:
        return state.env_state.inventory % size == 0

    def wealth_identity(state: Any) -> Any:
        es = state.env_state
        marked = es.inventory.astype(es.cash.dtype) * es.mid
        return _close(state.info["wealth"], es.cash + marked, _ONE_STEP, marked)

    def observation_reports_inventory(state: Any) -> Any:
        inventory = state.env_state.inventory.astype(state.observation.dtype)
        return _close(state.observation[0] * limit, inventory, _ONE_STEP)

    return _named(
        inventory_within_limits,
        inventory_in_order_units,
        wealth_identity,
        observation_reports_inventory,
    )


def _execution_invariants(env: Any) -> dict[str, Invariant]:
    x0 = env.params.initial_inventory
    n_steps = int(env.n_steps)

    def inventory_within_bounds(state: Any) -> Any:
        inventory = state.env_state.inventory
        return (inventory >= 0) & (inventory <= x0)

    def sold_out_by_the_horizon(state: Any) -> Any:
        return (state.step_count < n_steps) | (state.env_state.inventory == 0)

    def terminated_when_sold_out(state: Any) -> Any:
        return (state.env_state.inventory > 0) | state.termination

    def shares_sold_nonnegative(state: Any) -> Any:
        return state.info["shares_sold"] >= 0

    return _named(
        inventory_within_bounds,
        sold_out_by_the_horizon,
        terminated_when_sold_out,
        shares_sold_nonnegative,
    )


def _lob_invariants(env: Any) -> dict[str, Invariant]:
    from ._lob._invariants import lob_invariants

    return lob_invariants(env)


def _lob_market_invariants(env: Any) -> dict[str, Invariant]:
    from ._lob._market_invariants import market_invariants

    return market_invariants(env)


_INVARIANTS = {
    "TradingEnv": _trading_invariants,
    "PortfolioEnv": _portfolio_invariants,
    "MarketMakingEnv": _market_making_invariants,
    "OptimalExecutionEnv": _execution_invariants,
    "LimitOrderBookEnv": _lob_invariants,
    "LimitOrderBookMarketEnv": _lob_market_invariants,
}


def invariants_for(env: Any) -> dict[str, Invariant] | None:
    """The invariants of a bundled finance env (unwrapped), or None for any other env.

    Example:
        >>> import jax
        >>> from parallax.finance import MarketMakingEnv
        >>> from parallax.finance._invariants import invariants_for
        >>> env = MarketMakingEnv()
        >>> checks = invariants_for(env)
        >>> state = env.reset(key=jax.random.key(0))
        >>> sorted(name for name, fn in checks.items() if bool(fn(state)))[:2]
        ['inventory_in_order_units', 'inventory_within_limits']
    """
    kind = _kind(env)
    return None if kind is None else _INVARIANTS[kind](env)


# -- scripted policies ---------------------------------------------------------------------------
def _constant(action: Any) -> Callable[[Any, Any], Any]:
    value = jnp.asarray(action)
    return lambda key, state: value


def _script(
    action: Any, expect: Any, measure: Any, num_steps: int, description: str
) -> dict[str, Any]:
    """A scripted policy's entry: the constant `action`, its `expect` and `measure`."""
    return {
        "policy": _constant(action),
        "expect": expect,
        "measure": measure,
        "num_steps": num_steps,
        "description": description,
    }


def _after_first(traj: Any, ok: Any) -> Any:
    """`ok` on every step after the first (index >= 2 of the states), vacuous elsewhere."""
    index = jnp.arange(jnp.shape(ok)[0])
    return jnp.where(index >= 2, ok, True)


def _trading_scripts(env: Any) -> dict[str, dict[str, Any]]:
    positions = np.asarray(env.params.positions)
    steps = min(int(env.episode_length), 32)
    scripts: dict[str, dict[str, Any]] = {}
    flat = np.flatnonzero(positions == 0)
    if flat.size:

        def flat_keeps_equity(traj: Any) -> Any:
            info = traj.states.info
            return (info["equity"] == 1.0) & (info["cost"] == 0) & (traj.states.reward == 0)

        scripts["always_flat_keeps_equity"] = _script(
            np.int32(flat[0]),
            flat_keeps_equity,
            lambda traj: traj.states.info["equity"],
            steps,
            "always holding no position keeps equity at 1, with no cost and zero reward",
        )
    full = np.flatnonzero(positions == 1)
    if full.size:

        def long_tracks_price(traj: Any) -> Any:
            info = traj.states.info
            equity, price = info["equity"], info["price"]
            prev_equity = _previous(equity)
            prev_price = _previous(price)
            # fully long stays fully long (no trade, no cost): equity moves with the price
            ok = _close(equity * prev_price, prev_equity * price, _ONE_STEP)
            return _after_first(traj, ok | traj.states.done)

        scripts["always_long_tracks_price"] = _script(
            np.int32(full[0]),
            long_tracks_price,
            lambda traj: traj.states.info["equity"] / traj.states.info["price"],
            steps,
            "always fully long: after the first trade, equity changes by the price ratio each step",
        )
    return scripts


def _portfolio_scripts(env: Any) -> dict[str, dict[str, Any]]:
    n = int(env.n_assets)
    steps = min(int(env.episode_length), 32)
    cash = np.zeros(n + 1, np.float32)
    cash[-1] = 1.0
    first = np.zeros(n + 1, np.float32)
    first[0] = 1.0

    def cash_keeps_value(traj: Any) -> Any:
        value = traj.states.env_state.portfolio_value
        return (value == 1.0) & (traj.states.reward == 0)

    def hold_tracks_asset(traj: Any) -> Any:
        value = traj.states.env_state.portfolio_value
        prev = _previous(value)
        ret = traj.states.info["asset_returns"][:, 0]
        ok = _close(value, prev * (1 + ret), _ONE_STEP)
        return _after_first(traj, ok | traj.states.done)

    return {
        "all_cash_keeps_value": _script(
            cash,
            cash_keeps_value,
            lambda traj: traj.states.env_state.portfolio_value,
            steps,
            "all cash: the portfolio value stays 1 and the reward 0",
        ),
        "hold_first_asset_tracks_it": _script(
            first,
            hold_tracks_asset,
            lambda traj: traj.states.env_state.portfolio_value,
            steps,
            "all in asset 0: after the first trade the value grows by that "
            "asset's return each step",
        ),
    }


def _market_making_scripts(env: Any) -> dict[str, dict[str, Any]]:
    steps = min(int(env.n_steps), 32)

    def no_quotes_no_position(traj: Any) -> Any:
        es = traj.states.env_state
        return (es.inventory == 0) & (es.cash == 0) & (traj.states.reward == 0)

    def at_mid_no_spread(traj: Any) -> Any:
        es = traj.states.env_state
        wealth = traj.states.info["wealth"]
        prev_wealth = _previous(wealth)
        prev_mid = _previous(es.mid)
        marked = es.inventory.astype(es.mid.dtype) * (es.mid - prev_mid)
        # fills at the mid earn nothing: wealth moves only with the inventory's mark
        ok = _close(wealth - prev_wealth, marked, _ONE_STEP, jnp.abs(es.cash) + jnp.abs(wealth))
        return ok | traj.states.done

    return {
        "never_quote_stays_flat": _script(
            np.full(2, np.nan, np.float32),
            no_quotes_no_position,
            lambda traj: traj.states.env_state.inventory,
            steps,
            "never quoting (NaN offsets): no fills, inventory and cash stay 0, reward 0",
        ),
        "quote_at_mid_earns_no_spread": _script(
            np.zeros(2, np.float32),
            at_mid_no_spread,
            lambda traj: traj.states.info["wealth"],
            steps,
            "quoting at the mid (zero offsets): wealth changes only by "
            "inventory times the mid's move",
        ),
    }


def _execution_scripts(env: Any) -> dict[str, dict[str, Any]]:
    p = env.params
    n_steps = int(env.n_steps)
    tau = p.total_time / n_steps
    full_impact = p.initial_inventory * (
        p.fixed_cost + p.temporary_impact * p.initial_inventory / tau
    )

    def sell_all_costs_full_impact(traj: Any) -> Any:
        s1 = traj.states
        shortfall = s1.info["implementation_shortfall"][1]
        return (
            _close(shortfall, full_impact, _ONE_STEP)
            & (s1.env_state.inventory[1] == 0)
            & s1.termination[1]
        )

    def wait_sells_at_the_horizon(traj: Any) -> Any:
        inventory, count = traj.states.env_state.inventory, traj.states.step_count
        before = (count >= n_steps) | (inventory == p.initial_inventory)
        at_end = (count < n_steps) | ((inventory == 0) & traj.states.termination)
        return before & at_end

    return {
        "sell_all_at_once_costs_full_impact": _script(
            np.ones(1, np.float32),
            sell_all_costs_full_impact,
            lambda traj: traj.states.info["implementation_shortfall"][1],
            1,
            "selling everything at step 0 ends the episode with shortfall "
            "X0 * (fixed_cost + temporary_impact * X0 / tau)",
        ),
        "never_sell_liquidates_at_the_horizon": _script(
            np.zeros(1, np.float32),
            wait_sells_at_the_horizon,
            lambda traj: traj.states.env_state.inventory,
            n_steps,
            "selling nothing keeps the inventory until the last step, which "
            "sells all of it and ends the episode",
        ),
    }


def _lob_scripts(env: Any) -> dict[str, dict[str, Any]]:
    from ._lob._invariants import lob_scripted_policies

    return lob_scripted_policies(env)


def _lob_market_scripts(env: Any) -> dict[str, dict[str, Any]]:
    from ._lob._market_invariants import market_scripted_policies

    return market_scripted_policies(env)


_SCRIPTS = {
    "TradingEnv": _trading_scripts,
    "PortfolioEnv": _portfolio_scripts,
    "MarketMakingEnv": _market_making_scripts,
    "OptimalExecutionEnv": _execution_scripts,
    "LimitOrderBookEnv": _lob_scripts,
    "LimitOrderBookMarketEnv": _lob_market_scripts,
}


def scripted_policies_for(env: Any) -> dict[str, dict[str, Any]] | None:
    """The scripted policies of a bundled finance env (unwrapped), or None for other envs."""
    kind = _kind(env)
    return None if kind is None else _SCRIPTS[kind](env)
