"""Stable-Baselines3 2.9.2 checks and trains on `GymnasiumEnv` exports, with no shim (issue 38).

SB3 needs PyTorch, whose Linux wheel from PyPI depends on NVIDIA's CUDA libraries (about
3 GB of wheels; the whole virtual environment is about 6 GB), so these tests run in a
virtual environment of their own, `make clients-sb3` (`.venv-sb3`, the `sb3` extra: SB3
2.9.2, torch 2.14.1, Gymnasium 1.3), not in `make test`'s. torch runs on the CPU, on one
thread (`conftest.py`). The main suite does not collect this folder (`tests/conftest.py`).

What runs: SB3's own env checker; SB3's A2C on `GridWorld-v0` and PPO on `Trading-v0`, each
on SB3's `make_vec_env` (a `DummyVecEnv` of `Monitor`-ed `GymnasiumEnv`s), evaluated with
SB3's `evaluate_policy` over the same seeded episodes as the baselines they are compared
with. Our `GymnasiumVectorEnv` is not used: SB3 takes only its own `VecEnv` type, and given a
`gymnasium.vector.VectorEnv` its constructor raises ("not a Gymnasium environment").

The thresholds, measured with the settings below (seed 0 is the one the tests run):

- `GridWorld-v0` (50-step limit; the reward `exp(-distance to the goal)` each step, the
  episode ends on the goal, so the best return comes from waiting next to it): A2C
  (SB3's defaults, 8 envs, 60k steps, about 15 s) must reach 3 times the uniform random
  policy's mean return over 50 episodes (random: 3.86). Measured on seeds 0 to 5: 15.0,
  15.4, 15.5, 15.2, 15.6 and 16.1 (3.9 to 4.2 times random). With 30k steps A2C reached
  6.7 to 13.0 (seeds 0 to 4), and PPO with 60k steps 8.1 and 11.6 (seeds 0 and 1), so
  A2C at 60k is the quick, steady choice.
- `Trading-v0` with a trending market (drift 50% a year, volatility 10%; sekai's default
  costs of 0.1% of the traded amount), 252-step episodes: PPO (4 envs, 10,240 steps, about
  6 s) must come within 0.05 of holding the long position throughout (the best constant
  policy there), over 20 episodes. Measured on seeds 0 to 5: 0.452 every time, the
  buy-and-hold return itself (the policy learns to stay long); the untrained deterministic
  policy got -0.47 to 0.12 and the uniform random policy -0.21. The default market (5%
  drift, 20% volatility) has nothing to learn in 10k steps beyond not trading, which an
  untrained deterministic policy may already do by chance (one seed's got +0.01 against the
  random policy's -0.21), so it is checked (`check_env`), not trained on.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.env_checker import check_env
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

import parallax
from parallax.adapters import GymnasiumEnv

SEED = 0
EVAL_SEED = 1000
# SB3's checker recommends a [-1, 1] Box for continuous actions. OptimalExecution-v0's action
# is the fraction of the remaining inventory to sell, in [0, 1] by definition; SB3's policies
# clip their actions into the space (PPO) or squash them onto it (SAC, TD3), so [0, 1] works
BOX_RANGE = "We recommend you to use a symmetric and normalized Box action space (range=[-1, 1])"


def _gridworld():
    return GymnasiumEnv(parallax.TimeLimit(parallax.make("GridWorld-v0"), 50))


def _trending_trading():
    return GymnasiumEnv(parallax.make("Trading-v0", mu=0.5, sigma=0.1))


class _Constant:
    """An SB3 policy stand-in (`predict`) that always takes `action`, or a uniform random one."""

    def __init__(self, space, action=None):
        self.space, self.action = space, action

    def predict(self, obs, state=None, episode_start=None, deterministic=False):
        if self.action is None:
            return np.array([self.space.sample() for _ in range(len(obs))]), None
        return np.full(len(obs), self.action), None


def _evaluate(policy, make, episodes):
    """SB3's `evaluate_policy` over the same seeded episodes for every policy it is given."""
    env = make_vec_env(make, n_envs=1, seed=EVAL_SEED)
    mean, _ = evaluate_policy(policy, env, n_eval_episodes=episodes, deterministic=True)
    env.close()
    return float(mean)


def _random_return(make, episodes):
    space = make().action_space
    space.seed(SEED)
    return _evaluate(_Constant(space), make, episodes)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (_gridworld, []),
        (lambda: GymnasiumEnv(parallax.make("Trading-v0")), []),
        (lambda: GymnasiumEnv(parallax.make("OptimalExecution-v0")), [BOX_RANGE]),
    ],
    ids=["GridWorld-v0", "Trading-v0", "OptimalExecution-v0"],
)
def test_sb3_check_env_passes_with_no_unexplained_warning(make, expected):
    env = make()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, warn=True)
    messages = [str(w.message) for w in caught]
    assert len(messages) == len(expected), messages
    assert all(m.startswith(e) for m, e in zip(messages, expected)), messages


def test_a2c_learns_gridworld_through_make_vec_env():
    venv = make_vec_env(_gridworld, n_envs=8, seed=SEED)
    model = A2C("MlpPolicy", venv, seed=SEED, device="cpu")
    model.learn(60_000)
    learned, random = _evaluate(model, _gridworld, 50), _random_return(_gridworld, 50)
    assert random > 1.0, random  # positive rewards: the comparison is a ratio
    assert learned >= 3.0 * random, (learned, random)


def test_ppo_runs_end_to_end_on_trading_and_learns_to_follow_the_trend():
    venv = make_vec_env(_trending_trading, n_envs=4, seed=SEED)
    model = PPO("MlpPolicy", venv, n_steps=256, batch_size=256, n_epochs=4, seed=SEED, device="cpu")
    long = int(np.argmax(parallax.make("Trading-v0").params.positions))  # the position +1
    episodes = 20
    before = _evaluate(model, _trending_trading, episodes)
    model.learn(10_240)
    after = _evaluate(model, _trending_trading, episodes)
    hold = _evaluate(_Constant(model.action_space, long), _trending_trading, episodes)
    random = _random_return(_trending_trading, episodes)
    assert np.isfinite([before, after, hold, random]).all()
    # `predict` on the export's own observation gives an action of its space
    env = _trending_trading()
    obs, _ = env.reset(seed=SEED)
    action, _ = model.predict(obs, deterministic=True)
    assert env.action_space.contains(int(action)), action
    assert hold > 0.3 > 0.0 > random, (hold, random)  # the trend pays, trading at random costs
    assert after >= hold - 0.05, (after, hold)
    assert after > before + 0.2, (after, before)  # seed 0's untrained policy: -0.17
