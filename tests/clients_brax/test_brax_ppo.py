"""brax's own released trainer, `brax.training.agents.ppo.train`, learns on `to_brax` exports.

brax 0.14.2's `ppo.train` calls `jax.device_put_replicated`, which JAX 0.10 removed, so it
cannot run in the test environment (`.venv`, JAX 0.10.2), where
`tests/test_export_brax.py::test_brax_ppo_trains_on_the_export` skips. These tests run in a
virtual environment of their own, `make clients-brax` (`.venv-brax`, the `brax-train` extra:
brax 0.14.2 on JAX 0.9.2, the newest JAX it runs on), together with the main suite's brax
export tests and import tests (see `conftest.py`). The main suite does not collect this
folder (`tests/conftest.py`).

The trained policy is brax's own inference function (`ppo_networks.make_inference_fn`, which
`ppo.train` returns built), deterministic, applied to the flattened Parallax observation;
its actions go through the export's own mapping onto the env's action space. It is evaluated
with `parallax.finance.evaluate` on the Parallax env, over the same episodes (the same key)
as the baselines it is compared with.

The thresholds:

- `OptimalExecution-v0` (sekai's defaults: 25 steps): within 10% of the Almgren-Chriss
  schedule's mean return (rewards are negative: at least 1.1 times it). Measured with seed
  0: about 3% from it; seeds 1 to 4 land 4% to 6% from it. The rewards, about -12 per step,
  are scaled by 0.01 with brax's own `reward_scaling`.
- `Portfolio-v0`, two assets with drifts of +50% and -50% a year (sekai's default
  volatilities 15% and 35%, its default correlation and 0.1% costs): at least 75% of the way
  from the equal-weight portfolio (with cash) to the log-optimal one. With independent
  returns the log-optimal policy is a constant portfolio; its long-only Kelly weight of the
  first asset, `mu / sigma**2`, is above 1, so it holds only the first asset. Measured:
  84% to 93% of the way over seeds 0 to 3. The default market (a drift of 6% for every
  asset) is not used: there the assets differ only in volatility, and over a short episode
  the mean returns of the simple portfolios differ by a few times the noise of their
  evaluation (over 32 steps and 1024 episodes: equal weight +0.006, all cash 0, the uniform
  random policy -0.009, each +-0.0015), and brax's own evaluation of the untrained policy
  gives about -0.004, so no threshold there would show that the trainer learned.
"""

from __future__ import annotations

import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from brax.training.agents.ppo import networks as ppo_networks
from brax.training.agents.ppo import train as ppo

import parallax
from parallax.adapters import to_brax
from parallax.adapters._to_brax import flatten_observation
from parallax.finance import almgren_chriss_policy, evaluate

pytestmark = pytest.mark.standard_promotion  # brax is written for JAX's default numerics

SEED = 0
EPISODES = 1024
EVAL_KEY = 7
PORTFOLIO_DRIFTS = (0.5, -0.5)

NETWORKS = functools.partial(
    ppo_networks.make_ppo_networks,
    policy_hidden_layer_sizes=(32, 32),
    value_hidden_layer_sizes=(64, 64),
)
"""Small networks (brax's defaults are 4 x 32 and 5 x 256)."""


def _train(env, episode_length, **kwargs):
    """`ppo.train` on `to_brax(env)`; the trained policy as a Parallax policy."""
    export = to_brax(env)
    make_policy, params, _ = ppo.train(
        environment=export,
        episode_length=episode_length,
        num_envs=64,
        batch_size=64,
        num_minibatches=4,
        num_updates_per_batch=4,
        entropy_cost=0.0,
        normalize_observations=True,
        network_factory=NETWORKS,
        num_evals=5,
        num_eval_envs=64,
        deterministic_eval=True,
        seed=SEED,
        **kwargs,
    )
    act = make_policy(params, deterministic=True)

    def policy(key, state):  # over evaluate's batch of states
        actions, _ = act(jax.vmap(flatten_observation)(state.observation), key)
        return jax.vmap(export.env_action)(actions)

    return policy


def _mean_return(env, policy):
    report = evaluate(env, policy, jax.random.key(EVAL_KEY), EPISODES)
    return float(np.mean(report["total_reward"]))


def test_the_released_trainer_runs_unpatched_on_this_jax():
    assert "jax.device_put_replicated(" in inspect.getsource(ppo)
    assert callable(jax.device_put_replicated)


def test_ppo_on_optimal_execution_reaches_almgren_chriss():
    env = parallax.make("OptimalExecution-v0")
    policy = _train(
        env,
        episode_length=env.n_steps,
        num_timesteps=1_600_000,
        unroll_length=env.n_steps,
        learning_rate=1e-4,
        discounting=1.0,
        reward_scaling=0.01,
    )
    learned = _mean_return(env, policy)
    almgren_chriss = _mean_return(env, almgren_chriss_policy(env))
    print(f"OptimalExecution-v0: PPO {learned:.1f}, Almgren-Chriss {almgren_chriss:.1f}")
    assert almgren_chriss < 0 and learned >= almgren_chriss * 1.10, (learned, almgren_chriss)


def test_ppo_on_portfolio_approaches_the_log_optimal_portfolio():
    env = parallax.make(
        "Portfolio-v0", n_assets=2, mu=PORTFOLIO_DRIFTS, episode_length=32, lookback=4
    )
    policy = _train(
        env,
        episode_length=32,
        num_timesteps=800_000,
        unroll_length=16,
        learning_rate=3e-4,
        discounting=0.99,
        reward_scaling=10.0,
    )

    def constant(weights):
        return lambda state: jnp.broadcast_to(jnp.asarray(weights), (*state.reward.shape, 3))

    def uniform(key, state):
        return jax.random.uniform(key, (*state.reward.shape, 3))

    learned = _mean_return(env, policy)
    equal = _mean_return(env, constant([1.0, 1.0, 1.0]))  # a third in each asset and in cash
    optimal = _mean_return(env, constant([1.0, 0.0, 0.0]))  # all in the first asset
    random = _mean_return(env, uniform)
    print(
        f"Portfolio-v0: PPO {learned:.4f}, log-optimal {optimal:.4f}, "
        f"equal weight {equal:.4f}, random {random:.4f}"
    )
    assert optimal > equal + 0.04 and equal > random, (optimal, equal, random)
    assert learned >= equal + 0.75 * (optimal - equal), (learned, optimal, equal)
