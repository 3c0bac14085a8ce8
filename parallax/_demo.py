"""`make demo`: what Parallax is for, in two minutes on a CPU.

1. Jitted `lax.scan` rollouts of thousands of vmapped environments (4096 copies of each
   finance env and of GridWorld, random actions), with their throughput in env steps/s.
2. A short PPO training (`parallax.train`, the whole training in one `jit`) on
   OptimalExecution-v0, with a progress bar and the learning progress, ending with the
   trained policy against the closed-form Almgren-Chriss schedule, selling everything at
   once and a random policy, on the same episodes.

Run it with `make demo` or `python -m parallax._demo [--quick]` from a source checkout (the
PPO lives in `examples/`).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import jax
import jax.numpy as jnp

import parallax

THROUGHPUT_ENVS = (
    "GridWorld-v0",
    "Trading-v0",
    "Portfolio-v0",
    "MarketMaking-v0",
    "OptimalExecution-v0",
)


def _load_ppo() -> Any:
    from . import train

    return train


def throughput(env_id: str, num_envs: int, num_steps: int) -> tuple[float, float]:
    """(compile + first run seconds, env steps per second of a second, timed run)."""
    env = parallax.make_vec(env_id, num_envs, max_episode_steps=200)
    space = env.action_space

    def policy(key: jax.Array, state: Any) -> Any:
        return jax.vmap(lambda k: space.sample(key=k))(jax.random.split(key, num_envs))

    @jax.jit
    def run(key: jax.Array) -> jax.Array:
        _, traj = parallax.rollout(env, policy, key, num_steps, keep_info=False)
        return jnp.sum(traj.reward)

    start = time.perf_counter()
    jax.block_until_ready(run(jax.random.key(0)))
    first = time.perf_counter() - start
    start = time.perf_counter()
    jax.block_until_ready(run(jax.random.key(1)))
    seconds = time.perf_counter() - start
    return first, num_envs * num_steps / seconds


def main(argv: list[str] | None = None) -> None:
    """Run the demo (see the module docstring)."""
    parser = argparse.ArgumentParser(description="Parallax demo: fast rollouts, then PPO")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke test)")
    args = parser.parse_args(argv)
    num_envs, num_steps = (256, 16) if args.quick else (4096, 100)
    devices = ", ".join(sorted({d.platform for d in jax.devices()}))
    print(f"Parallax {parallax.__version__} on JAX {jax.__version__} ({devices})\n")
    print(
        f"1. Jitted lax.scan rollouts: {num_envs} vmapped envs x {num_steps} steps, "
        "random actions, auto-reset after 200 steps"
    )
    for env_id in THROUGHPUT_ENVS:
        first, rate = throughput(env_id, num_envs, num_steps)
        print(f"   {env_id:22s} {rate:14,.0f} env steps/s   (compile + first run {first:5.1f} s)")

    ppo = _load_ppo()
    total = 16_000 if args.quick else 120_000
    config = ppo.preset("OptimalExecution-v0", total_steps=total)
    print(
        f"\n2. PPO on OptimalExecution-v0 (liquidate 1M shares in 25 steps), {config.num_envs} "
        f"envs, {config.num_updates} updates, {total:,} env steps, all in one jit"
    )
    result = ppo.run(config, seed=0, progress=True)
    print(
        "\n   Mean episode reward on the same 256 episodes (basis points of the position's "
        "value; higher is better):"
    )
    rows = [
        ("PPO (trained here)", result["mean_episode_reward"]),
        ("Almgren-Chriss (closed form)", result["baseline_reward"]),
        ("random fractions", result["random_policy_reward"]),
        ("sell everything at once", result["sell_all_reward"]),
    ]
    for name, value in rows:
        print(f"   {name:30s} {value:10.1f}")
    gap = abs(result["mean_episode_reward"] - result["baseline_reward"]) / abs(
        result["baseline_reward"]
    )
    print(
        f"\n   PPO is {100 * gap:.1f}% from the Almgren-Chriss optimum after "
        f"{result['train_seconds']:.0f} s of training (compile included)."
    )


if __name__ == "__main__":
    main()
