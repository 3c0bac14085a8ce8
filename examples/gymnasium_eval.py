"""Evaluate a random policy on a Parallax environment through the Gymnasium API only.

The loop below is plain Gymnasium code: it would run unchanged on `gymnasium.make(...)`.
`GymnasiumEnv` is the only Parallax-specific line; it compiles the env's `reset` and `step`
with `jax.jit` once and hands back NumPy arrays.

    python examples/gymnasium_eval.py --episodes 20 --max-steps 50
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

from parallax import TimeLimit
from parallax.adapters import GymnasiumEnv
from parallax.envs import GridWorld


def evaluate(env: gym.Env, episodes: int, seed: int = 0) -> np.ndarray:
    """Returns of `episodes` episodes of a uniformly random policy (Gymnasium API only)."""
    env.action_space.seed(seed)
    returns = []
    for episode in range(episodes):
        env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            action = env.action_space.sample()  # a policy would read the observation here
            _observation, reward, terminated, truncated, _info = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return np.asarray(returns)


def main(episodes: int = 20, max_steps: int = 50) -> float:
    """Evaluate on `TimeLimit(GridWorld(), max_steps)`; print and return the mean return."""
    env = GymnasiumEnv(TimeLimit(GridWorld(), max_steps=max_steps))
    returns = evaluate(env, episodes)
    print(
        f"random policy on GridWorld: mean return {returns.mean():.3f} "
        f"+- {returns.std():.3f} over {episodes} episodes"
    )
    return float(returns.mean())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--max-steps", type=int, default=50)
    args = parser.parse_args()
    main(args.episodes, args.max_steps)
