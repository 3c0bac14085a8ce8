"""rejax 0.1.3 trains on Parallax envs through `to_gymnax`, with no shim (issue 38).

rejax is written for gymnax 0.0.x, whose `step` returns five values `(obs, state, reward,
done, info)`; with gymnax 1.0.x it fails on gymnax's own CartPole ("too many values to
unpack"). So these tests run in their own virtual environment, `make clients` (gymnax
0.0.9, rejax 0.1.3, the `clients` extra), where the export follows gymnax 0.0.x: five
values, one `done`, `max_steps_in_episode` in its params. The main suite does not collect
this folder (`tests/conftest.py`), and this folder does not read the main conftest.

The thresholds: PPO and SAC on `OptimalExecution-v0` reach within 10% of the
Almgren-Chriss schedule's mean return; PQN on `GridWorld-v0` and `Trading-v0` clearly beats
the uniform random policy (both measured here, by rejax's own evaluation where it applies).
OptimalExecution-v0's rewards are about -12 per step; they are scaled by `TransformReward`
(a Parallax wrapper; linear, so the comparison with Almgren-Chriss, evaluated on the same
scaled env, is unchanged) rather than by rejax's running reward normalisation, which
would leave the numbers rejax reports in other units than Almgren-Chriss's.

PPO's return on this env moves from seed to seed and from host to host (the same seed on
two CPUs compiles to slightly different floats, and training amplifies them): with 128 envs
and 8 minibatches per epoch, seeds 0-2 ended 7.4%, 9.0% and 4.6% from Almgren-Chriss on one
host, and 33%, 8.6% and 7.2% on another (seeds 3-6 there: 10.7%, 1.1%, 0.7%, 3.0%). So the
PPO test trains seeds 0-6 and asks the median to reach within 10%, and every seed within
50% (an untrained policy is about 500% off, so a broken export still fails).
"""

from __future__ import annotations

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rejax
from rejax.evaluate import evaluate as rejax_evaluate

import parallax
from parallax.adapters import to_gymnax
from parallax.finance import almgren_chriss_policy, evaluate

SCALE = 0.01
EPISODES = 256
SAC_STEPS, SAC_ENVS = 1_000_000, 64


def _execution():
    return parallax.TransformReward(parallax.make("OptimalExecution-v0"), lambda r: r * SCALE)


def _gridworld():
    return parallax.TimeLimit(parallax.make("GridWorld-v0"), 50)


def _final_returns(algo, seeds):
    """Train once per seed (one compiled program), and return rejax's last evaluation of
    each: the mean return over its episodes."""
    train = jax.jit(algo.train)
    finals = []
    for seed in seeds:
        _, (_, returns) = train(jax.random.key(seed))
        finals.append(float(np.mean(returns[-1])))
    return finals


def _final_return(algo, seed=0):
    return _final_returns(algo, [seed])[0]


def _random_return(env):
    params = env.default_params

    def act(obs, rng):
        return env.action_space(params).sample(rng)

    _, returns = rejax_evaluate(
        act, jax.random.key(1), env, params, EPISODES, params.max_steps_in_episode
    )
    return float(np.mean(returns))


@pytest.fixture(scope="module")
def almgren_chriss_return():
    env = _execution()
    report = evaluate(env, almgren_chriss_policy(env), jax.random.key(1), EPISODES)
    return float(np.mean(report["total_reward"]))


def test_the_export_has_the_conventions_of_gymnax_own_envs():
    own, own_params = gymnax.make("CartPole-v1")
    ours = to_gymnax(_gridworld())
    params = ours.default_params
    assert isinstance(own_params.max_steps_in_episode, int)
    assert params.max_steps_in_episode == 50
    assert isinstance(ours.name, str) and isinstance(own.name, str)
    assert ours.num_actions == 4 and isinstance(own.num_actions, int)
    for env, p in ((own, own_params), (ours, params)):
        obs, state = env.reset(jax.random.key(0), p)
        out = env.step(jax.random.key(1), state, env.action_space(p).sample(jax.random.key(2)), p)
        assert len(out) == 5  # gymnax 0.0.x: (obs, state, reward, done, info)
        assert out[0].shape == env.observation_space(p).shape == obs.shape
        assert out[3].dtype == jnp.bool_
        assert type(env.action_space(p)).__name__ == "Discrete"
    execution = to_gymnax(_execution()).default_params
    assert execution.max_steps_in_episode == 25 and float(execution.sigma) == 0.95


def test_a_truncated_episode_is_done_and_auto_resets():
    env = to_gymnax(parallax.TimeLimit(parallax.make("GridWorld-v0"), 2))
    params = env.default_params
    _, state = env.reset(jax.random.key(0), params)
    dones = []
    for i in range(4):
        _, state, _, done, info = env.step(jax.random.key(i), state, 1, params)
        dones.append(bool(done))
        assert bool(info["truncation"]) == (i % 2 == 1)
    assert dones == [False, True, False, True]
    assert int(state.parallax_state.step_count) == 0  # reset by the auto-reset


def test_ppo_on_optimal_execution_reaches_almgren_chriss(almgren_chriss_return):
    env = to_gymnax(_execution())
    algo = rejax.PPO.create(
        env=env,
        env_params=env.default_params,
        total_timesteps=1_600_000,
        eval_freq=400_000,
        num_envs=128,
        num_steps=25,
        num_epochs=4,
        num_minibatches=8,
        learning_rate=1e-3,
        gamma=1.0,
        ent_coef=0.0,
        normalize_observations=True,
    )
    finals = _final_returns(algo, range(7))
    assert np.median(finals) >= almgren_chriss_return * 1.10, (finals, almgren_chriss_return)
    assert min(finals) >= almgren_chriss_return * 1.50, (finals, almgren_chriss_return)


def test_sac_on_optimal_execution_reaches_almgren_chriss(almgren_chriss_return):
    env = to_gymnax(_execution())
    algo = rejax.SAC.create(
        env=env,
        env_params=env.default_params,
        total_timesteps=SAC_STEPS,
        eval_freq=SAC_STEPS // 4,
        num_envs=SAC_ENVS,
        learning_rate=1e-3,
        gamma=1.0,
        num_epochs=2,  # two updates per batch of env steps, on batches of 512
        batch_size=512,
    )
    sac = _final_return(algo)
    assert sac >= almgren_chriss_return * 1.10, (sac, almgren_chriss_return)


@pytest.mark.parametrize(
    ("build", "steps", "gain"),
    [(_gridworld, 100_000, 2.0), (lambda: parallax.make("Trading-v0"), 1_000_000, None)],
    ids=["GridWorld-v0", "Trading-v0"],
)
def test_pqn_learns_discrete_envs(build, steps, gain):
    env = to_gymnax(build())
    algo = rejax.PQN.create(
        env=env,
        env_params=env.default_params,
        total_timesteps=steps,
        eval_freq=steps // 4,
        num_envs=16,
        num_steps=32,
    )
    learned, random = _final_return(algo), _random_return(env)
    if gain is not None:  # GridWorld: rewards are positive (exp(-distance to goal))
        assert learned >= gain * random, (learned, random)
    else:  # Trading-v0 on GBM prices: the random policy loses to costs, the learned one not
        assert random < -0.1 and learned >= random / 2, (learned, random)


def test_vmap_over_seeds_of_train():
    env = to_gymnax(_gridworld())
    algo = rejax.PQN.create(
        env=env,
        env_params=env.default_params,
        total_timesteps=100_000,
        eval_freq=50_000,
        num_envs=16,
        num_steps=32,
    )
    keys = jax.random.split(jax.random.key(0), 2)
    _, (lengths, returns) = jax.jit(jax.vmap(algo.train))(keys)
    assert returns.shape[0] == lengths.shape[0] == 2
    final = np.asarray(returns[:, -1].mean(axis=-1))
    assert np.all(np.isfinite(final)) and final[0] != final[1]
    assert np.all(final >= 2.0 * _random_return(env)), final
