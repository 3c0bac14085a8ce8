"""No NaN, no inf: the finance envs fuzzed over their documented parameter ranges, in float32.

Each test draws constructor numbers within the documented ranges (extremes included: sigma up
to 5, initial prices from 1e-6 to 1e9, huge inventories) and random actions, runs one
10,000-step episode as a jitted `lax.scan` in float32 (the default), and requires every
observation and reward to be finite. The numbers go in as a params pytree, an argument of
the compiled rollout, so each env structure compiles once and every example reuses it (each
test checks its trace count). Examples are fixed in number and derandomized, so the run is
the same every time and fits the test-time budget.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parallax import finance as pf

STEPS = 10_000
FUZZ = settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _floats(low: float, high: float) -> st.SearchStrategy[float]:
    return st.floats(low, high, allow_nan=False, allow_infinity=False)


def _log_uniform(low: float, high: float) -> st.SearchStrategy[float]:
    """Floats from `low` to `high` spread evenly over their orders of magnitude."""
    return _floats(np.log10(low), np.log10(high)).map(lambda e: float(10.0**e))


SEEDS = st.integers(0, 2**16)
DT = _log_uniform(1e-4, 1.0)  # an hour of a trading year up to a year per step


class Rollout:
    """One jitted episode of `env`, compiled once: `(key, actions, params) -> (obs, rewards)`.

    `traces` counts the compilations, so a test can check that its examples shared one.
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self.traces = 0
        self._run = jax.jit(self._episode)

    def _episode(self, key: jax.Array, actions: Any, params: Any) -> tuple[Any, Any, Any]:
        self.traces += 1
        env = self.env
        first = env.reset(key=key, params=params)

        def body(state: Any, action: Any) -> tuple[Any, Any]:
            state = env.step(state, action, params)
            return state, (state.observation, state.reward)

        _, (obs, rewards) = jax.lax.scan(body, first, actions)
        return first.observation, obs, rewards

    def __call__(self, seed: int, actions: Any, params: Any) -> None:
        """Run one episode and assert that every observation and reward is finite."""
        assert not jax.config.jax_enable_x64  # the fuzzing is about float32
        first, obs, rewards = jax.device_get(
            self._run(jax.random.key(seed), jnp.asarray(actions), params)
        )
        for leaf in jax.tree.leaves((first, obs)):
            assert np.all(np.isfinite(leaf)), "NaN or inf in an observation"
        assert rewards.dtype == np.float32 and rewards.shape == (len(actions),)
        bad = np.flatnonzero(~np.isfinite(rewards))
        assert bad.size == 0, f"{bad.size} non-finite rewards, the first at step {bad[:1]}"
        assert self.traces == 1, "the examples should share one compilation"


def _once(make: Callable[[], Any]) -> Callable[[], Rollout]:
    """A lazily built `Rollout` shared by the examples of one test."""
    cache: list[Rollout] = []

    def get() -> Rollout:
        if not cache:
            cache.append(Rollout(make()))
        return cache[0]

    return get


# ---------------------------------------------------------------------------- Trading-v0
TRADING = _once(lambda: pf.TradingEnv(episode_length=STEPS, lookback=4))


@FUZZ
@given(
    mu=_floats(-5.0, 5.0),
    sigma=_floats(0.0, 5.0),
    s0=_log_uniform(1e-6, 1e9),
    dt=DT,
    positions=st.lists(_floats(-3.0, 3.0), min_size=3, max_size=3),
    rate=_floats(0.0, 0.05),
    seed=SEEDS,
)
def test_trading_stays_finite(mu, sigma, s0, dt, positions, rate, seed):
    run = TRADING()
    params = dataclasses.replace(
        run.env.params,
        mu=np.float64(mu),
        sigma=np.float64(sigma),
        s0=np.float64(s0),
        dt=np.float64(dt),
        positions=np.asarray(positions),
        cost=pf.ProportionalCost(rate),
    )
    actions = np.random.default_rng(seed).integers(0, 3, STEPS).astype(np.int32)
    run(seed, actions, params)


def test_trading_stays_finite_on_a_history_outside_float32s_range():
    # Prices from 1e-60 to 1e60: the float32 copy of the table holds zeros and infs.
    steps = np.random.default_rng(0).normal(0.0, 0.5, 2_000)
    prices = np.exp(np.cumsum(steps) + np.linspace(-138.0, 138.0, 2_000))
    env = pf.TradingEnv(prices, episode_length=1_900, lookback=4, sampler=0)
    run = Rollout(env)
    run(0, np.random.default_rng(1).integers(0, 3, 1_900).astype(np.int32), env.params)


# -------------------------------------------------------------------------- Portfolio-v0
def _correlation(seed: int, n: int) -> np.ndarray:
    """A random valid correlation matrix (a normalised `F F^T + 0.1 I`)."""
    factors = np.random.default_rng(seed).normal(size=(n, n))
    cov = factors @ factors.T + 0.1 * np.eye(n)
    scale = np.sqrt(np.diag(cov))
    return cov / np.outer(scale, scale)


PORTFOLIOS = {
    short: _once(
        lambda short=short: pf.PortfolioEnv(
            n_assets=3, allow_short=short, episode_length=STEPS, lookback=4
        )
    )
    for short in (False, True)
}


@pytest.mark.parametrize("short", [False, True], ids=["long-only", "short"])
@FUZZ
@given(
    mu=st.lists(_floats(-5.0, 5.0), min_size=3, max_size=3),
    sigma=st.lists(_floats(0.0, 5.0), min_size=3, max_size=3),
    dt=DT,
    rate=_floats(0.0, 0.05),
    seed=SEEDS,
)
def test_portfolio_stays_finite(short, mu, sigma, dt, rate, seed):
    run = PORTFOLIOS[short]()
    params = dataclasses.replace(
        run.env.params,
        mu=np.asarray(mu),
        sigma=np.asarray(sigma),
        chol=np.linalg.cholesky(_correlation(seed, 3)),
        dt=np.float64(dt),
        cost=pf.ProportionalCost(rate),
    )
    low = -1.5 if short else -0.5
    size = 3 if short else 4
    actions = np.random.default_rng(seed).uniform(low, 1.5, (STEPS, size)).astype(np.float32)
    run(seed, actions, params)


# ------------------------------------------------------------------------ MarketMaking-v0
MARKET_MAKING = _once(lambda: pf.MarketMakingEnv(n_steps=STEPS))


@FUZZ
@given(
    s0=st.sampled_from([-1.0, 1.0]).flatmap(lambda sign: _log_uniform(1e-6, 1e9).map(sign.__mul__)),
    sigma=_floats(0.0, 5.0),
    total_time=_log_uniform(1e-3, 1e3),
    fill_intensity=_log_uniform(1e-3, 1e4),
    fill_decay=_log_uniform(1e-3, 1e2),
    risk_aversion=_floats(0.0, 10.0),
    seed=SEEDS,
)
def test_market_making_stays_finite(seed, **numbers):
    run = MARKET_MAKING()
    params = run.env.params.replace(**numbers)  # every drawn number but the seed is a param
    rng = np.random.default_rng(seed)
    actions = rng.uniform(-1.0, 7.0, (STEPS, 2)).astype(np.float32)
    actions[rng.random((STEPS, 2)) < 0.01] = np.nan  # a NaN side is no quote
    run(seed, actions, params)


# -------------------------------------------------------------------- OptimalExecution-v0
EXECUTION = _once(lambda: pf.OptimalExecutionEnv(n_steps=STEPS))


@FUZZ
@given(
    initial_inventory=_log_uniform(1.0, 1e30),
    s0=_log_uniform(1e-6, 1e9),
    sigma=_floats(0.0, 5.0),
    total_time=_log_uniform(1e-2, 1e3),
    permanent_impact=_floats(0.0, 1e-5),
    extra_impact=_log_uniform(1e-9, 1e-3),
    fixed_cost=_floats(0.0, 1.0),
    risk_aversion=_floats(0.0, 1e-3),
    seed=SEEDS,
)
def test_optimal_execution_stays_finite(extra_impact, seed, **numbers):
    run = EXECUTION()
    tau = numbers["total_time"] / STEPS
    # the constructor's constraint, temporary_impact > permanent_impact * tau / 2
    temporary_impact = numbers["permanent_impact"] * tau / 2 + extra_impact
    params = run.env.params.replace(**numbers, temporary_impact=temporary_impact)
    actions = np.random.default_rng(seed).uniform(-0.1, 0.01, (STEPS, 1)).astype(np.float32)
    run(seed, actions, params)
