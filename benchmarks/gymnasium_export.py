"""Host-side speed of the Gymnasium export against Gymnasium's own CartPole.

`GymnasiumEnv` and `GymnasiumVectorEnv` hand NumPy to a Python loop, one jitted call and
one device-to-host transfer per step, so what they cost is per-call overhead, not the
environment's arithmetic. This script times the loop a Gymnasium user writes:

- single: `env.step(action)` in a Python loop (reset when an episode ends), for
  `GymnasiumEnv(TimeLimit(make(ENV), 100))` and for `gymnasium.make("CartPole-v1")`;
- vector: `envs.step(actions)` for `GymnasiumVectorEnv(make_vec(ENV, N, max_episode_steps=100))`
  (next-step auto-reset, Gymnasium's default) and for `SyncVectorEnv` over `N` CartPoles.

Reported: steps per second (env-steps for the vector case: calls x N), best of `--repeats`
rounds, and the ratio Parallax / Gymnasium (1.0 = as fast as Gymnasium's own CartPole).
Actions are drawn before timing, so sampling is not measured on either side.

    python benchmarks/gymnasium_export.py
    python benchmarks/gymnasium_export.py --steps 2000 --num-envs 64 --json out.json
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium

import parallax
from parallax.adapters import GymnasiumEnv, GymnasiumVectorEnv


def _time_single(env: Any, steps: int, repeats: int) -> float:
    """Best steps/s of `steps` single-env steps (auto-reset by hand)."""
    actions = [env.action_space.sample() for _ in range(steps)]
    env.reset(seed=0)
    for action in actions[:50]:  # warm-up: compile and first transfers
        *_, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    best = float("inf")
    for _ in range(repeats):
        env.reset(seed=0)
        start = time.perf_counter()
        for action in actions:
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
        best = min(best, time.perf_counter() - start)
    return steps / best


def _time_vector(envs: Any, steps: int, repeats: int) -> float:
    """Best env-steps/s of `steps` vector steps (`num_envs` env-steps each)."""
    actions = [envs.action_space.sample() for _ in range(steps)]
    envs.reset(seed=0)
    for action in actions[:20]:
        envs.step(action)
    best = float("inf")
    for _ in range(repeats):
        envs.reset(seed=0)
        start = time.perf_counter()
        for action in actions:
            envs.step(action)
        best = min(best, time.perf_counter() - start)
    return steps * envs.num_envs / best


def run(env_id: str, steps: int, num_envs: int, repeats: int) -> dict[str, Any]:
    """Both cases; steps/s for each side and the ratios."""
    cases: dict[str, tuple[Callable[[], Any], Callable[[], Any], Callable[..., float]]] = {
        "single": (
            lambda: GymnasiumEnv(parallax.TimeLimit(parallax.make(env_id), 100)),
            lambda: gymnasium.make("CartPole-v1"),
            _time_single,
        ),
        "vector": (
            lambda: GymnasiumVectorEnv(parallax.make_vec(env_id, num_envs, max_episode_steps=100)),
            lambda: gymnasium.vector.SyncVectorEnv(
                [lambda: gymnasium.make("CartPole-v1") for _ in range(num_envs)]
            ),
            _time_vector,
        ),
    }
    results: dict[str, Any] = {"env": env_id, "steps": steps, "num_envs": num_envs}
    for name, (ours, theirs, timer) in cases.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parallax_rate = timer(ours(), steps, repeats)
            gymnasium_rate = timer(theirs(), steps, repeats)
        results[name] = {
            "parallax_steps_per_s": parallax_rate,
            "gymnasium_cartpole_steps_per_s": gymnasium_rate,
            "ratio": parallax_rate / gymnasium_rate,
        }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="GridWorld-v0", help="a registered Parallax id")
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)
    results = run(args.env, args.steps, args.num_envs, args.repeats)
    print(f"{'case':<8} {'parallax steps/s':>17} {'gymnasium CartPole':>19} {'ratio':>7}")
    for name in ("single", "vector"):
        r = results[name]
        print(
            f"{name:<8} {r['parallax_steps_per_s']:>17,.0f} "
            f"{r['gymnasium_cartpole_steps_per_s']:>19,.0f} {r['ratio']:>7.2f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
