"""The closed-form baselines: Avellaneda-Stoikov quotes and Almgren-Chriss schedules.

Each is checked three ways: against sekai 0.2.0's own methods (`avellaneda_stoikov_action`,
`almgren_chriss_trajectory`, `almgren_chriss_actions`, `expected_shortfall`), against the
closed-form formulas written out independently here, and as a policy in our envs, where it
must beat a naive policy in expectation.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sekai
from _finance_env_cases import CUSTOM_EXECUTION_MARKET

import parallax
from parallax.finance import (
    MarketMakingEnv,
    OptimalExecutionEnv,
    OptimalExecutionParams,
    almgren_chriss_actions,
    almgren_chriss_policy,
    almgren_chriss_trajectory,
    avellaneda_stoikov_action,
    avellaneda_stoikov_policy,
    avellaneda_stoikov_quotes,
    expected_shortfall,
)

AC_CASES = {
    "default": {},
    "risk_neutral": {"risk_aversion": 0.0},  # TWAP
    "urgent": {"risk_aversion": 1e-3},  # kappa T ~ 70: holdings fall ~e^-2.8 per step
    "nearly_neutral": {"risk_aversion": 1e-22},  # kappa T just above/below the TWAP cut
    "custom": {**CUSTOM_EXECUTION_MARKET, "risk_aversion": 2e-6},
}

_MARKET = ("initial_inventory", "total_time", "sigma", "permanent_impact", "temporary_impact")


def _market_and(env: OptimalExecutionEnv, last: str) -> dict[str, Any]:
    """`n_steps`, the market parameters and the parameter `last` of `env`, as keywords."""
    return {
        "n_steps": env.n_steps,
        **{name: getattr(env.params, name) for name in (*_MARKET, last)},
    }


def _planning(env: OptimalExecutionEnv) -> dict[str, Any]:
    """The keywords of `almgren_chriss_trajectory` and `almgren_chriss_actions`."""
    return _market_and(env, "risk_aversion")


@pytest.mark.parametrize("name", sorted(AC_CASES))
def test_almgren_chriss_matches_sekai(name: str, x64: bool) -> None:
    kwargs = AC_CASES[name]
    env = OptimalExecutionEnv(**kwargs)
    ref = sekai.make("OptimalExecution-v0", **kwargs)
    x = almgren_chriss_trajectory(**_planning(env))
    want = ref.almgren_chriss_trajectory()
    assert x.shape == (env.n_steps + 1,) and x.dtype == (jnp.float64 if x64 else jnp.float32)
    rtol = 1e-12 if x64 else 1e-5
    np.testing.assert_allclose(x, want, rtol=rtol, atol=rtol * float(want[0]))
    actions = almgren_chriss_actions(**_planning(env))
    assert actions.shape == (env.n_steps, 1) and actions.dtype == jnp.float32
    np.testing.assert_allclose(actions, ref.almgren_chriss_actions(), rtol=2e-7 if x64 else 2e-5)
    np.testing.assert_array_equal(env.almgren_chriss_actions(), actions)
    trades = np.asarray(want[:-1] - want[1:])
    mean, var = expected_shortfall(trades, **_shortfall_args(env))
    want_mean, want_var = ref.expected_shortfall(trades)
    np.testing.assert_allclose([mean, var], [want_mean, want_var], rtol=1e-12 if x64 else 1e-5)


def _shortfall_args(env: OptimalExecutionEnv) -> dict[str, Any]:
    """The keywords of `expected_shortfall`."""
    return _market_and(env, "fixed_cost")


def test_almgren_chriss_schedule_sells_the_whole_block_along_the_sinh_curve() -> None:
    """x_j = X0 sinh(kappa (T - t_j)) / sinh(kappa T), with cosh(kappa tau) = 1 + kappa~^2 tau^2 / 2."""
    with jax.enable_x64(True):
        x0, horizon, n, sigma, gamma, eta, lam = 1e6, 5.0, 25, 0.95, 2.5e-7, 2.5e-6, 1e-6
        x = np.asarray(
            almgren_chriss_trajectory(
                n_steps=n, initial_inventory=x0, total_time=horizon, sigma=sigma,
                permanent_impact=gamma, temporary_impact=eta, risk_aversion=lam,
            )
        )  # fmt: skip
        tau = horizon / n
        kappa_tilde_sq = lam * sigma**2 / (eta - gamma * tau / 2)
        kappa = math.acosh(1 + kappa_tilde_sq * tau**2 / 2) / tau
        t = np.arange(n + 1) * tau
        np.testing.assert_allclose(
            x, x0 * np.sinh(kappa * (horizon - t)) / np.sinh(kappa * horizon), rtol=1e-9
        )
        assert x[0] == x0 and abs(x[-1]) < 1e-6
        assert (np.diff(x) < 0).all()
        np.testing.assert_allclose((x[:-1] - x[1:]).sum(), x0, rtol=1e-12)
        # Risk aversion front-loads the sales relative to TWAP.
        assert x[1] < x0 * (1 - 1 / n)


def test_almgren_chriss_stays_finite_where_sinh_overflows() -> None:
    """kappa T ~ 1e4 > 710: sinh(kappa T) overflows float64; the schedule is still exact."""
    with jax.enable_x64(True):
        kwargs = {"risk_aversion": 1.0, "sigma": 100.0, "n_steps": 200}
        env = OptimalExecutionEnv(**kwargs)
        ref = sekai.make("OptimalExecution-v0", **kwargs)
        x = almgren_chriss_trajectory(**_planning(env))
        assert bool(jnp.isfinite(x).all()) and float(x[0]) == 1e6 and float(x[-1]) == 0.0
        np.testing.assert_allclose(x, ref.almgren_chriss_trajectory(), rtol=1e-12, atol=1e-300)
        actions = almgren_chriss_actions(**_planning(env))
        # atol: XLA flushes subnormal holdings (< 1e-308 shares) to 0, a fraction of 1.
        np.testing.assert_allclose(actions, ref.almgren_chriss_actions(), rtol=1e-7, atol=1e-6)
        assert float(actions.min()) > 0.999  # sell almost everything at once


def test_expected_shortfall_is_the_closed_form() -> None:
    with jax.enable_x64(True):
        trades = np.array([4e5, 3e5, 2e5, 1e5])
        x0, horizon, sigma, gamma, eta, eps = 1e6, 2.0, 0.5, 1e-7, 1e-6, 0.05
        mean, var = expected_shortfall(
            trades, initial_inventory=x0, total_time=horizon, sigma=sigma,
            permanent_impact=gamma, temporary_impact=eta, fixed_cost=eps,
        )  # fmt: skip
        tau = horizon / 4
        eta_tilde = eta - gamma * tau / 2
        after = x0 - np.cumsum(trades)
        want_mean = gamma * x0**2 / 2 + eps * trades.sum() + eta_tilde / tau * (trades**2).sum()
        np.testing.assert_allclose(mean, want_mean, rtol=1e-12)
        np.testing.assert_allclose(var, sigma**2 * tau * (after**2).sum(), rtol=1e-12)
        # A batch of schedules at once, and the Almgren-Chriss one beats selling at once.
        sell_now = np.array([x0, 0.0, 0.0, 0.0])
        both = np.stack([trades, sell_now])
        means, _ = expected_shortfall(
            both, initial_inventory=x0, total_time=horizon, sigma=sigma,
            permanent_impact=gamma, temporary_impact=eta, fixed_cost=eps,
        )  # fmt: skip
        assert means.shape == (2,) and float(means[0]) == float(mean) and means[1] > means[0]


def test_avellaneda_stoikov_matches_sekai(x64: bool) -> None:
    kwargs = {"sigma": 1.5, "risk_aversion": 0.3, "fill_decay": 0.7, "max_offset": 2.0}
    env = MarketMakingEnv(n_steps=50, **kwargs)
    ref = sekai.make("MarketMaking-v0", n_steps=50, **kwargs)
    vec = sekai.make_vec("MarketMaking-v0", 6, vectorization_mode="native", n_steps=50, **kwargs)
    inventories = np.array([0, 3, -4, 17, -50, 1])
    steps = np.array([0, 10, 49, 25, 3, 50])
    vec.inventory[:], vec._t[:] = inventories, steps
    remaining = (50 - steps) * env.dt
    ours = avellaneda_stoikov_action(
        inventories, remaining, sigma=1.5, risk_aversion=0.3, fill_decay=0.7, max_offset=2.0
    )
    assert ours.shape == (6, 2) and ours.dtype == jnp.float32
    np.testing.assert_allclose(ours, vec.avellaneda_stoikov_action(), rtol=1e-6, atol=1e-7)
    for i in range(6):
        ref.inventory, ref._t = int(inventories[i]), int(steps[i])
        np.testing.assert_allclose(ours[i], ref.avellaneda_stoikov_action(), rtol=1e-6, atol=1e-7)
    # The offsets are clipped, some of them here (inventory 17 and -50).
    assert float(ours.max()) == 2.0 and float(ours.min()) == 0.0
    # gamma = 0: symmetric quotes at 1/k.
    flat = avellaneda_stoikov_action(
        5, 1.0, sigma=1.5, risk_aversion=0.0, fill_decay=0.7, max_offset=9.0
    )
    np.testing.assert_allclose(flat, [1 / 0.7, 1 / 0.7], rtol=1e-6)


def test_avellaneda_stoikov_quotes_are_reservation_price_plus_minus_half_spread() -> None:
    with jax.enable_x64(True):
        mid, q, tau, sigma, gamma, k = 101.0, -3.0, 0.4, 2.0, 0.1, 1.5
        bid, ask = avellaneda_stoikov_quotes(
            mid, q, tau, sigma=sigma, risk_aversion=gamma, fill_decay=k
        )
        reservation = mid - q * gamma * sigma**2 * tau
        spread = gamma * sigma**2 * tau + 2 / gamma * math.log(1 + gamma / k)
        np.testing.assert_allclose(
            [bid, ask], [reservation - spread / 2, reservation + spread / 2], rtol=1e-14
        )


def test_baselines_run_under_jit_and_vmap_over_parameters(x64: bool) -> None:
    params = OptimalExecutionParams(risk_aversion=jnp.array([0.0, 1e-6, 1e-5]))
    plan = jax.jit(
        jax.vmap(lambda lam: almgren_chriss_actions(n_steps=25, risk_aversion=lam)[:, 0])
    )(params.risk_aversion)
    assert plan.shape == (3, 25)
    np.testing.assert_allclose(plan[0, :3], [1 / 25, 1 / 24, 1 / 23], rtol=1e-6)
    assert bool((plan[2, :5] > plan[1, :5]).all())  # more risk aversion sells faster
    quotes = jax.jit(jax.vmap(lambda g: avellaneda_stoikov_action(
        2, 0.5, sigma=2.0, risk_aversion=g, fill_decay=1.5, max_offset=5.0)))(jnp.array([0.0, 0.1, 1.0]))  # fmt: skip
    assert quotes.shape == (3, 2) and bool(jnp.isfinite(quotes).all())


def _episode_returns(env: Any, policy: Any, choices: Any, num_envs: int, seed: int) -> np.ndarray:
    """Total reward of one episode in each of `num_envs` envs, for each `choice`.

    `policy(state, choice)` picks the action; all choices share one compiled, vmapped scan
    and the same keys (so the same market noise). Returns `(len(choices), num_envs)`.
    """

    @jax.jit
    def run(choice: Any, keys: jax.Array) -> jax.Array:
        def episode(key: jax.Array) -> jax.Array:
            def body(state: parallax.State, _: None) -> tuple[parallax.State, jax.Array]:
                nxt = env.step(state, policy(state, choice))
                return nxt, jnp.where(state.done, 0.0, nxt.reward)

            return jax.lax.scan(body, env.reset(key=key), length=env.n_steps)[1].sum()

        return jax.vmap(episode)(keys)

    keys = jax.random.split(jax.random.key(seed), num_envs)
    return np.stack([np.asarray(run(c, keys)) for c in choices])


def test_avellaneda_stoikov_beats_wide_and_naive_quotes() -> None:
    """Over 256 default sessions the A-S quotes earn more than fixed quotes, by many SEs."""
    env = MarketMakingEnv()
    quotes = avellaneda_stoikov_policy(env)

    def policy(state: parallax.State, offset: jax.Array) -> jax.Array:
        return jnp.where(offset < 0, quotes(state), jnp.full((2,), offset))  # -1: A-S

    # Never filled (max_offset), or filled often for a thin edge (0.2).
    choices = [jnp.float32(-1.0), jnp.float32(env.max_offset), jnp.float32(0.2)]
    as_returns, *fixed = _episode_returns(env, policy, choices, 256, seed=0)
    for other in fixed:
        diff = as_returns - other
        stderr = diff.std() / math.sqrt(len(diff))
        assert diff.mean() > 5 * stderr, (as_returns.mean(), other.mean(), stderr)
    assert as_returns.mean() > 0


def test_almgren_chriss_beats_selling_everything_at_once() -> None:
    env = OptimalExecutionEnv()
    schedule = almgren_chriss_policy(env)

    def policy(state: parallax.State, choice: jax.Array) -> jax.Array:
        twap = 1.0 / (env.n_steps - state.step_count).astype(jnp.float32)
        options = jnp.stack([schedule(state)[0], jnp.float32(1.0), twap])
        return options[choice][None]  # 0: Almgren-Chriss, 1: sell at once, 2: TWAP

    ac, dump, twap = _episode_returns(env, policy, [0, 1, 2], 128, seed=1)
    # Returns are minus (shortfall + risk penalty) in basis points: AC maximises them.
    assert ac.mean() > dump.mean() + 100 and ac.mean() > twap.mean()
    np.testing.assert_allclose(dump, dump[0], rtol=1e-5)  # selling at once has no risk


def test_policies_work_on_batched_wrapped_envs() -> None:
    for env_id, make_policy, width in (
        ("MarketMaking-v0", avellaneda_stoikov_policy, 2),
        ("OptimalExecution-v0", almgren_chriss_policy, 1),
    ):
        vec = parallax.make_vec(env_id, 3, n_steps=5)
        policy = make_policy(vec)

        @jax.jit
        def act_twice(key: jax.Array, vec: Any = vec, policy: Any = policy) -> jax.Array:
            state = vec.reset(key=key)
            return policy(vec.step(state, policy(state)))

        action = act_twice(jax.random.key(0))
        assert action.shape == (3, width) and bool(vec.action_space.contains(action[0]))


def test_following_the_almgren_chriss_actions_reproduces_the_holdings() -> None:
    env = OptimalExecutionEnv(n_steps=5, sigma=0.0)
    policy = almgren_chriss_policy(env)

    @jax.jit
    def holdings(key: jax.Array) -> jax.Array:
        def body(state: parallax.State, _: None) -> tuple[parallax.State, jax.Array]:
            nxt = env.step(state, policy(state))
            return nxt, nxt.info["inventory"]

        return jax.lax.scan(body, env.reset(key=key), length=5)[1]

    held = holdings(jax.random.key(0))
    np.testing.assert_allclose(held, env.almgren_chriss_trajectory()[1:], rtol=1e-6, atol=1.0)
