"""Normals per second: ``parallax.rng`` (counter-based) vs ``jax.random`` (key splitting), on CPU.

Both sides generate the same number of float32 standard normals, ``num_envs x draws x
steps``, in one jitted ``lax.scan`` over steps with a ``vmap`` over envs, and sum them into
the carry so nothing is optimised away:

- ``jax.random``: each env carries a key; every step it does ``key, sub = split(key)`` and
  draws ``normal(sub, (draws,))`` (the usual functional-RNG pattern);
- ``parallax.rng``: each env has an episode key (derived once); every step it draws
  ``normal_vector(episode_key, t, SLOT, draws)`` (no key state at all).

Each timing is the best of ``--repeats`` calls after a warm-up call that compiles; the two
sides alternate call by call so that machine load affects both alike. Prints both
throughputs, the ratio of the best times, and the median ratio of back-to-back pairs (more
robust on a busy machine); ``--json`` also writes them to a file.

    python benchmarks/rng_speed.py [--num-envs 4096] [--draws 8] [--steps 256] [--repeats 10]
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import platform
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
from _common import write_json

from parallax import rng

SLOT = 3


def make_jax_random(num_envs: int, draws: int, steps: int) -> Callable[[jax.Array], jax.Array]:
    """Jitted rollout drawing normals with per-env, per-step key splitting."""

    def run(keys: jax.Array) -> jax.Array:
        def body(carry, _):
            keys, acc = carry
            pairs = jax.vmap(jax.random.split)(keys)  # (N, 2) keys
            z = jax.vmap(lambda k: jax.random.normal(k, (draws,), jnp.float32))(pairs[:, 1])
            return (pairs[:, 0], acc + z), None

        acc = jnp.zeros((num_envs, draws), jnp.float32)
        (_, acc), _ = jax.lax.scan(body, (keys, acc), None, length=steps)
        return acc

    return jax.jit(run)


def make_parallax(num_envs: int, draws: int, steps: int) -> Callable[[jax.Array], jax.Array]:
    """Jitted rollout drawing normals as pure functions of (episode key, step, slot, index)."""

    def run(episode_keys: jax.Array) -> jax.Array:
        def body(acc, t):
            z = jax.vmap(lambda ek: rng.normal_vector(ek, t, SLOT, draws))(episode_keys)
            return acc + z, None

        acc = jnp.zeros((num_envs, draws), jnp.float32)
        acc, _ = jax.lax.scan(body, acc, jnp.arange(steps, dtype=jnp.uint32))
        return acc

    return jax.jit(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--draws", type=int, default=8, help="normals per env per step")
    parser.add_argument("--steps", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", type=str, default=None, help="also write results here")
    args = parser.parse_args()

    n, d, t = args.num_envs, args.draws, args.steps
    total = n * d * t
    keys = jax.random.split(jax.random.key(0), n)
    episode_keys = rng.episode_key(keys)
    sides = {
        "jax.random (split per env per step)": (make_jax_random(n, d, t), keys),
        "parallax.rng (counter-based)": (make_parallax(n, d, t), episode_keys),
    }
    for fn, arg in sides.values():  # compile + warm up
        jax.block_until_ready(fn(arg))
    best = dict.fromkeys(sides, float("inf"))
    pair_ratios = []
    for _ in range(args.repeats):
        took = {}
        for name, (fn, arg) in sides.items():
            start = time.perf_counter()
            jax.block_until_ready(fn(arg))
            took[name] = time.perf_counter() - start
            best[name] = min(best[name], took[name])
        first, second = took.values()
        pair_ratios.append(first / second)

    rates = {name: total / sec for name, sec in best.items()}
    names = list(sides)
    ratio = rates[names[1]] / rates[names[0]]
    print(f"device: {jax.devices()[0].device_kind} ({platform.processor() or platform.machine()})")
    print(f"{n} envs x {d} normals x {t} steps = {total:,} float32 normals per call")
    print(f"{'method':<40} {'best s':>9} {'normals/s':>14}")
    for name in names:
        print(f"{name:<40} {best[name]:>9.4f} {rates[name]:>14,.0f}")
    median = sorted(pair_ratios)[len(pair_ratios) // 2]
    print(
        f"ratio parallax.rng / jax.random: {ratio:.2f}x (best times), {median:.2f}x (median of pairs)"
    )
    write_json(
        args.json,
        {
            "num_envs": n,
            "draws": d,
            "steps": t,
            "normals_per_second": rates,
            "ratio": ratio,
            "median_pair_ratio": median,
            "device": jax.devices()[0].device_kind,
        },
        indent=2,
    )


if __name__ == "__main__":
    main()
