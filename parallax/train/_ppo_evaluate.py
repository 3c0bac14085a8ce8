"""Scoring a trained PPO policy, and `run`: train, evaluate, report, with a progress bar.

- `make_evaluate(config)`: the trained policy (deterministic), a uniformly random policy
  and, on the finance envs, the closed-form policy, each over the same episodes.
- `Progress`: a tqdm bar over the updates plus a learning-progress line now and then.
- `run(config, seed)`: trains, evaluates and returns the JSON-able result dict
  (`examples/ppo.py` is its command-line front end).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import parallax
from parallax import NormalizeObservation, rollout

from ._ppo import FINANCE_BASELINES, Config, eval_horizon, make_eval_env, true_action_space
from ._ppo_network import ActionHead, _features, actor
from ._ppo_train import _require_report, make_train


# -- evaluation ---------------------------------------------------------------------------------------
def _episode_return(traj: parallax.Trajectory) -> jax.Array:
    """Mean over envs of the return of each env's first episode."""
    done = traj.done.astype(jnp.int32)
    alive = (jnp.cumsum(done, axis=0) - done) == 0
    return jnp.mean(jnp.sum(jnp.where(alive, traj.reward, 0.0), axis=0))


def make_evaluate(config: Config) -> Callable[..., dict[str, jax.Array]]:
    """`evaluate(key, params, env_state)`: mean first-episode reward of each policy.

    Every policy runs `num_eval_envs` episodes from the same reset key (hence the same
    market noise for the finance envs). The trained policy acts deterministically (the
    Gaussian mean or the most likely action) on observations normalised with the frozen
    training statistics.
    """
    env = make_eval_env(config)
    true_space = true_action_space(config)
    head = ActionHead(true_space, config.init_log_std)
    horizon = eval_horizon(config, env)
    n = config.num_eval_envs
    baseline_name = FINANCE_BASELINES.get(config.env_id)

    def evaluate(key: jax.Array, params: dict[str, Any], train_state: Any) -> dict[str, jax.Array]:
        reset_key, key = jax.random.split(key)
        kwargs = {}
        if config.normalize_observation:
            kwargs["statistics"] = NormalizeObservation.statistics(train_state)
        state = env.reset(key=reset_key, **kwargs)

        def run(policy: Callable[..., Any]) -> jax.Array:
            _, traj = rollout(env, policy, key, horizon, state=state, keep_info=False)
            return _episode_return(traj)

        def trained(k: jax.Array, s: Any) -> jax.Array:
            return head.to_action(head.mode(actor(params, _features(s.observation))))

        def uniform(k: jax.Array, s: Any) -> jax.Array:
            return jax.vmap(lambda kk: true_space.sample(key=kk))(jax.random.split(k, n))

        out = {"mean_episode_reward": run(trained), "random_policy_reward": run(uniform)}
        if baseline_name is not None:
            import parallax.finance as finance

            closed_form = getattr(finance, baseline_name)(env)
            out["baseline_reward"] = run(lambda k, s: closed_form(s))
        if config.env_id == "OptimalExecution-v0":
            out["sell_all_reward"] = run(lambda k, s: jnp.ones((n, 1), jnp.float32))
        return out

    return evaluate


# -- command line -------------------------------------------------------------------------------------
class Progress:
    """A tqdm bar over the updates plus a learning-progress line every `every` updates."""

    def __init__(self, config: Config, every: int | None = None, file: Any = None) -> None:
        from tqdm.auto import tqdm

        self.config = config
        self.file = file if file is not None else sys.stderr
        self.bar = tqdm(total=config.num_updates, desc=config.env_id, unit="update", file=self.file)
        self.every = every or max(1, config.num_updates // 10)
        self.last = float("nan")

    def __call__(self, update: Any, mean_return: Any, num_episodes: Any) -> None:
        update = int(np.max(update))
        value = (
            float(np.nanmean(np.asarray(mean_return)))
            if np.any(np.isfinite(mean_return))
            else float("nan")
        )
        if math.isfinite(value):
            self.last = value
        self.bar.update(1)
        self.bar.set_postfix(train_return=f"{self.last:.2f}")
        if (update + 1) % self.every == 0 or update + 1 == self.config.num_updates:
            steps = (update + 1) * self.config.num_envs * self.config.num_steps
            self.bar.write(
                f"update {update + 1:4d}/{self.config.num_updates}  steps {steps:9d}  "
                f"mean training return {self.last:10.3f}",
                file=self.file,
            )

    def close(self) -> None:
        self.bar.close()


def run(
    config: Config, seed: int = 0, progress: bool = True, *, require_report: Any = None
) -> dict[str, Any]:
    """Train and evaluate; returns the JSON-able result dict.

    `require_report`: as in `make_train` (checked before anything is built).
    """
    _require_report(config, require_report)  # before the progress bar opens
    bar = Progress(config) if progress else None
    train = jax.jit(make_train(config, on_update=bar))
    evaluate = jax.jit(make_evaluate(config))
    start = time.perf_counter()
    out = jax.block_until_ready(train(jax.random.key(seed)))
    seconds = time.perf_counter() - start
    if bar is not None:
        bar.close()
    scores = evaluate(jax.random.key(10_000 + seed), out["params"], out["env_state"])
    curve = np.asarray(out["metrics"]["mean_return"])
    finite = curve[np.isfinite(curve)]
    result = {
        "env": config.env_id,
        "seed": seed,
        "total_steps": config.num_updates * config.num_envs * config.num_steps,
        **{k: round(float(v), 4) for k, v in scores.items()},
        "final_training_return": round(float(finite[-1]), 4) if finite.size else None,
        "train_seconds": round(seconds, 2),
        "eval_episodes": config.num_eval_envs,
    }
    return result
