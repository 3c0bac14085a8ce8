"""PPO's configuration and environments: what `parallax.train`'s trainer is built from.

- `Config`: the hyper-parameters and the environment (frozen and hashable, so it can be a
  static argument); `PRESETS` and `preset(env_id, **overrides)`: tuned values for the
  bundled envs.
- `make_env` (the training env: statistics and normalisation over an auto-resetting vector
  env), `make_eval_env` (one episode per env, frozen observation statistics),
  `true_action_space`, `eval_horizon`, and `FINANCE_BASELINES` (each finance env's
  closed-form policy).

PPO on Parallax environments, the whole training inside one `jax.jit` (PureJaxRL style):
`make_train(config)` returns a pure `train(key)`: it builds the wrapped vector env, collects
rollouts with `parallax.rollout`, computes GAE advantages (bootstrapping from the true
terminal observation on truncation), and runs clipped-PPO minibatch updates with optax, all
in one `lax.scan` that `jax.jit` compiles once and `jax.vmap` can run over seeds.
`make_evaluate(config)` scores the trained policy, a uniformly random policy and, for the
finance envs, the closed-form policy (Almgren-Chriss for OptimalExecution-v0,
Avellaneda-Stoikov for MarketMaking-v0) on the same episodes (same reset keys, so the same
market noise).

`run(config, seed)` trains and evaluates and returns a JSON-able dict: `env`, `seed`,
`total_steps`, `mean_episode_reward` (trained policy, deterministic actions),
`random_policy_reward`, `baseline_reward` (finance envs), `sell_all_reward`
(OptimalExecution-v0), `train_seconds`, and the learning curve's last training return.
`examples/ppo.py` is the command-line front end.

Where the code lives: the configuration and envs here, the policy and value networks
(`ActionHead`, `init_params`, `actor`, `critic`) in `_ppo_network`, the training loop
(`gae`, `Learner`, `make_learner`, `make_train`) in `_ppo_train`, and evaluation and the
front end (`make_evaluate`, `Progress`, `run`) in `_ppo_evaluate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import parallax
from parallax import (
    ClipAction,
    NormalizeObservation,
    NormalizeReward,
    RecordEpisodeStatistics,
    TimeLimit,
    VmapAutoResetWrapper,
    VmapWrapper,
    spaces,
)

FINANCE_BASELINES = {
    "OptimalExecution-v0": "almgren_chriss_policy",
    "MarketMaking-v0": "avellaneda_stoikov_policy",
}


@dataclass(frozen=True)
class Config:
    """PPO hyper-parameters and the environment (hashable, so it can be a static argument)."""

    env_id: str = "GridWorld-v0"
    env_kwargs: tuple[tuple[str, Any], ...] = ()
    max_episode_steps: int | None = None
    num_envs: int = 16
    num_steps: int = 32
    total_steps: int = 100_000
    update_epochs: int = 4
    num_minibatches: int = 4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    lr: float = 3e-4
    anneal_lr: bool = True
    hidden: int = 64
    init_log_std: float = -0.5
    normalize_observation: bool = True
    normalize_reward: bool = True
    num_eval_envs: int = 256
    eval_steps: int | None = None

    @property
    def num_updates(self) -> int:
        """Number of rollout + update iterations."""
        return max(1, self.total_steps // (self.num_envs * self.num_steps))

    @property
    def minibatch_size(self) -> int:
        """Transitions per minibatch."""
        return self.num_envs * self.num_steps // self.num_minibatches


PRESETS: dict[str, dict[str, Any]] = {
    "GridWorld-v0": {"max_episode_steps": 50, "total_steps": 100_000},
    "gymnax/CartPole-v1": {
        "num_envs": 4,
        "num_steps": 128,
        "total_steps": 500_000,
        "lr": 2.5e-4,
        "normalize_observation": False,
        "normalize_reward": False,
        "eval_steps": 500,
        "num_eval_envs": 64,
    },
    "OptimalExecution-v0": {
        "num_envs": 32,
        "num_steps": 25,
        "total_steps": 300_000,
        "gamma": 1.0,
        "lr": 1e-3,
        "ent_coef": 0.0,
        "update_epochs": 8,
    },
    "MarketMaking-v0": {
        "num_envs": 32,
        "num_steps": 100,
        "total_steps": 2_000_000,
        "gamma": 1.0,
        "lr": 1e-3,
        "ent_coef": 0.0,
        "update_epochs": 8,
        "init_log_std": -1.0,
    },
}


def preset(env_id: str, **overrides: Any) -> Config:
    """The `Config` for `env_id`: the preset's values, then `overrides` (None ignored)."""
    values = {**PRESETS.get(env_id, {}), **{k: v for k, v in overrides.items() if v is not None}}
    return Config(env_id=env_id, **values)


# -- environment ------------------------------------------------------------------------------------
def _base_env(config: Config) -> Any:
    env = parallax.make(config.env_id, **dict(config.env_kwargs))
    if isinstance(env.action_space, spaces.Box):
        env = ClipAction(env)
    if config.max_episode_steps is not None:
        env = TimeLimit(env, config.max_episode_steps)
    return env


def true_action_space(config: Config) -> Any:
    """The env's own action space (`ClipAction` widens it to an unbounded `Box`)."""
    return parallax.make(config.env_id, **dict(config.env_kwargs)).action_space


def make_env(config: Config) -> Any:
    """The training env: statistics and normalisation over an auto-resetting vector env."""
    env: Any = VmapAutoResetWrapper(_base_env(config), config.num_envs)
    env = RecordEpisodeStatistics(env)
    if config.normalize_observation:
        env = NormalizeObservation(env)
    if config.normalize_reward:
        env = NormalizeReward(env, gamma=config.gamma)
    return env


def make_eval_env(config: Config) -> Any:
    """The evaluation env: one episode per env (no auto-reset), frozen observation statistics."""
    env: Any = VmapWrapper(_base_env(config), config.num_eval_envs)
    if config.normalize_observation:
        env = NormalizeObservation(env, update=False)
    return env


def eval_horizon(config: Config, env: Any) -> int:
    """Steps an evaluation runs: `eval_steps`, the env's `n_steps` or `max_episode_steps`."""
    for value in (config.eval_steps, getattr(env, "n_steps", None), config.max_episode_steps):
        if value is not None:
            return int(value)
    raise ValueError(f"{config.env_id}: set eval_steps or max_episode_steps")
