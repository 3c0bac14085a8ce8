"""What an export costs: steps/s of a rollout through each export vs the bare Parallax env.

The same finance env (short episodes from `_common.ENV_KWARGS`, so auto-resets happen inside
every timed run) runs N copies in one jitted `lax.scan` of `--steps` steps with uniformly
random actions drawn inside the scan by `jax.random`, four ways:

- `parallax`: `VmapAutoResetWrapper(env, N)` (what `make_vec` builds), the reference;
- `per-env`: `VmapWrapper(AutoResetWrapper(env), N)`, Parallax with the auto-reset that
  gymnax's and Jumanji's APIs imply (every env computes a reset on every step): the
  exports' cost split into "their auto-reset convention" and "the export layer";
- `gymnax`: `jax.vmap(to_gymnax(env).step)`, gymnax's auto-reset (PureJaxRL's loop);
- `brax`: `brax.envs.training.wrap(to_brax(env), episode_length=...)`, brax's batching,
  episode counter and auto-reset (what brax's trainers run);
- `jumanji`: `jumanji.wrappers.VmapAutoResetWrapper(to_jumanji(TimeLimit(env, T)))`.

Timed calls alternate between the variants (parallax, per-env, gymnax, ..., parallax, ...),
each continuing from its own last state; reported per variant: the median env steps/s and
`ratio` = median of the per-round ratios export / parallax (1.0 = free; the target is an
export cost under 10%, ratio >= 0.9).

    python benchmarks/exports_overhead.py                       # OptimalExecution-v0, N=1024
    python benchmarks/exports_overhead.py --env MarketMaking-v0 --num-envs 4096 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from _common import ENV_KWARGS

import parallax
from parallax import AutoResetWrapper, TimeLimit, VmapAutoResetWrapper, VmapWrapper
from parallax.adapters import to_brax, to_gymnax, to_jumanji

VARIANTS = ("parallax", "per-env", "gymnax", "brax", "jumanji")


def _actions(key: jax.Array, space: Any, n: int) -> jax.Array:
    low, high = jnp.asarray(space.low), jnp.asarray(space.high)
    return jax.random.uniform(key, (n, *space.shape), minval=low, maxval=high)


def build(variant: str, env_id: str, n: int, steps: int) -> tuple[Any, Callable[..., Any]]:
    """(first carry, jitted `run(carry, key) -> carry`) of `variant` for `n` envs."""
    env = parallax.make(env_id, **ENV_KWARGS[env_id])
    space = env.action_space
    horizon = int(next(iter(ENV_KWARGS[env_id].values())))
    keys = jax.random.split(jax.random.key(0), n)

    if variant == "parallax":
        vec = VmapAutoResetWrapper(env, n)
        first: Any = vec.reset(key=jax.random.key(0))

        def one(carry: Any, key: jax.Array) -> Any:
            return vec.step(carry, _actions(key, space, n))

    elif variant == "per-env":
        per_env = VmapWrapper(AutoResetWrapper(env), n)
        first = per_env.reset(key=jax.random.key(0))

        def one(carry: Any, key: jax.Array) -> Any:
            return per_env.step(carry, _actions(key, space, n))

    elif variant == "gymnax":
        genv = to_gymnax(env)
        params = genv.default_params
        raw = jax.vmap(jax.random.key_data)(keys)
        first = (jax.vmap(genv.reset, in_axes=(0, None))(raw, params)[1], jax.random.key(1))

        def one(carry: Any, key: jax.Array) -> Any:
            # PureJaxRL's loop: one carried rng, split into a key per env every step
            states, rng = carry
            rng, sub = jax.random.split(rng)
            step_keys = jax.vmap(jax.random.key_data)(jax.random.split(sub, n))
            out = jax.vmap(genv.step, in_axes=(0, 0, 0, None))(
                step_keys, states, _actions(key, space, n), params
            )
            return (out[1], rng)

    elif variant == "brax":
        from brax.envs.wrappers import training

        benv = training.wrap(to_brax(env), episode_length=horizon, action_repeat=1)
        with jax.numpy_dtype_promotion("standard"):  # brax's wrappers mix int and float
            first = benv.reset(jax.vmap(jax.random.key_data)(keys))
        unit = parallax.spaces.Box(-1.0, 1.0, space.shape)

        def one(carry: Any, key: jax.Array) -> Any:
            with jax.numpy_dtype_promotion("standard"):
                return benv.step(carry, _actions(key, unit, n))

    elif variant == "jumanji":
        from jumanji.wrappers import VmapAutoResetWrapper as JumanjiVmapAutoReset

        jenv = JumanjiVmapAutoReset(to_jumanji(TimeLimit(env, 10 * horizon)))
        with jax.numpy_dtype_promotion("standard"):
            first = jenv.reset(keys)[0]

        def one(carry: Any, key: jax.Array) -> Any:
            with jax.numpy_dtype_promotion("standard"):
                return jenv.step(carry, _actions(key, space, n))[0]

    else:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")

    @jax.jit
    def run(carry: Any, key: jax.Array) -> Any:
        return jax.lax.scan(lambda c, k: (one(c, k), None), carry, jax.random.split(key, steps))[0]

    return first, run


def measure(
    env_id: str, n: int, steps: int, repeats: int, variants: tuple[str, ...] = VARIANTS
) -> dict[str, Any]:
    """Interleaved timings of every variant; ratios against `parallax`."""
    built = {v: build(v, env_id, n, steps) for v in variants}
    carries = {
        v: jax.block_until_ready(built[v][1](built[v][0], jax.random.key(1))) for v in variants
    }
    seconds: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(repeats):
        for v in variants:
            start = time.perf_counter()
            carries[v] = jax.block_until_ready(built[v][1](carries[v], jax.random.key(2 + r)))
            seconds[v].append(time.perf_counter() - start)
    out: dict[str, Any] = {"env": env_id, "num_envs": n, "steps": steps, "repeats": repeats}
    for v in variants:
        rates = [n * steps / s for s in seconds[v]]
        out[v] = {"steps_per_second": statistics.median(rates)}
        if v != "parallax" and "parallax" in variants:
            ratios = [p / s for p, s in zip(seconds["parallax"], seconds[v])]
            out[v]["ratio"] = statistics.median(ratios)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="OptimalExecution-v0", choices=sorted(ENV_KWARGS))
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if "parallax" not in args.variants:
        parser.error("--variants must include parallax (the reference)")
    result = measure(args.env, args.num_envs, args.steps, args.repeats, tuple(args.variants))
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.env}, N={args.num_envs}, {args.steps} steps, {args.repeats} rounds")
        for v in args.variants:
            row = result[v]
            ratio = f"{row['ratio']:.2f}x" if "ratio" in row else "(reference)"
            print(f"  {v:<9} {row['steps_per_second'] / 1e6:8.2f} M steps/s  {ratio}")
    return result


if __name__ == "__main__":
    main()
