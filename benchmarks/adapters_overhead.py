"""Compile and step cost of each adapter against the raw library it wraps.

Each case runs the same program twice, once on the raw library (with its own batching and
auto-reset) and once on the adapter under `VmapAutoResetWrapper(...)`:
`jax.jit` of a `lax.scan` of `num_steps` vmapped steps with uniformly random actions drawn
inside the scan. Reported per case and batch size N:

- compile: seconds to trace, lower and compile the program (first call, best of 1);
- step: wall time of one call after compilation, best of `--repeats` interleaved rounds
  (raw, adapter, raw, adapter, ...), divided by `num_steps * N`: nanoseconds per env-step;
- ratio: adapter / raw (1.0 = no overhead; the target is "not measurably slower").

Cases:

- gymnax CartPole-v1: raw `jax.vmap(env.step)` (gymnax's step, auto-reset included) vs
  `VmapAutoResetWrapper(TimeLimit(GymnaxAdapter(env), 500), N)`;
- brax fast: raw `brax.envs.training.wrap(env, episode_length=1000)` vs
  `VmapAutoResetWrapper(BraxAdapter(env, episode_length=1000), N)`;
- playground PendulumSwingup (`impl="jax"`): raw `wrapper.wrap_for_brax_training(env,
  episode_length=1000)` vs `VmapAutoResetWrapper(MJXAdapter(env, 1000), N)`.

The auto-resets differ in kind, which is part of what is measured: gymnax's and brax's
compute a reset state every step and select it (`where`), playground's (and brax's)
restore a cached first state; `AutoResetWrapper` over `VmapWrapper` skips the reset when no
env finished (`lax.cond`) and otherwise resets with a fresh key.

    python benchmarks/adapters_overhead.py                # N in {16, 1024, 4096}
    python benchmarks/adapters_overhead.py --quick        # N in {16, 256}, fewer steps
    python benchmarks/adapters_overhead.py --cases gymnax --sizes 16 1024
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from parallax import TimeLimit, VmapAutoResetWrapper


@dataclass
class Case:
    """A raw program and an adapter program, each `fn(key) -> scalar` for N envs."""

    name: str
    build: Callable[[int, int], tuple[Callable[[Any], Any], Callable[[Any], Any]]]
    sizes: tuple[int, ...]
    num_steps: int


def _standard(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*args: Any) -> Any:
        with jax.numpy_dtype_promotion("standard"):
            return fn(*args)

    return wrapped


def _scan(init: Callable[[Any], Any], step: Callable[[Any, Any], Any], num_steps: int):
    """`key -> checksum` running `num_steps` steps; actions come from `step` itself."""

    def program(key: Any) -> Any:
        carry = init(key)

        def body(carry: Any, k: Any) -> tuple[Any, Any]:
            carry, reward = step(carry, k)
            return carry, jnp.sum(reward)

        _, rewards = jax.lax.scan(body, carry, jax.random.split(key, num_steps))
        return jnp.sum(rewards)

    return program


def gymnax_case(n: int, num_steps: int):
    import gymnax

    from parallax.adapters import GymnaxAdapter

    env, params = gymnax.make("CartPole-v1")
    vec = VmapAutoResetWrapper(TimeLimit(GymnaxAdapter(env), 500), n)

    def raw_init(key: Any) -> Any:
        _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, n), params)
        return state

    def raw_step(state: Any, key: Any) -> Any:
        k_act, k_env = jax.random.split(key)
        action = jax.random.randint(k_act, (n,), 0, 2)
        _, state, reward, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            jax.random.split(k_env, n), state, action, params
        )
        return state, reward

    def ours_step(state: Any, key: Any) -> Any:
        action = jax.random.randint(key, (n,), 0, 2)
        state = vec.step(state, action)
        return state, state.reward

    return (
        _scan(raw_init, _standard(raw_step), num_steps),
        _scan(lambda k: vec.reset(key=k), ours_step, num_steps),
    )


def _box_actions(key: Any, n: int, size: int) -> Any:
    return jax.random.uniform(key, (n, size), minval=-1.0, maxval=1.0)


def _brax_training_scans(raw: Any, vec: Any, size: int, n: int, num_steps: int):
    """The two programs of a case with `size` box actions: `raw`, a batched env wrapped for
    brax training, and our `vec` stack of the same env."""

    def raw_step(state: Any, key: Any) -> Any:
        state = raw.step(state, _box_actions(key, n, size))
        return state, state.reward

    def ours_step(state: Any, key: Any) -> Any:
        state = vec.step(state, _box_actions(key, n, size))
        return state, state.reward

    # brax's wrappers need raw keys when batched (EpisodeWrapper reads `rng.shape[:-1]`)
    raw_init = lambda key: raw.reset(jax.random.key_data(jax.random.split(key, n)))  # noqa: E731
    return (
        _scan(_standard(raw_init), _standard(raw_step), num_steps),
        _scan(lambda k: vec.reset(key=k), ours_step, num_steps),
    )


def brax_case(n: int, num_steps: int):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # jaxopt, imported by brax
        import brax.envs
        from brax.envs.wrappers import training

    from parallax.adapters import BraxAdapter

    env = brax.envs.get_environment("fast")
    raw = training.wrap(env, episode_length=1000)
    vec = VmapAutoResetWrapper(BraxAdapter(env, episode_length=1000), n)
    return _brax_training_scans(raw, vec, env.action_size, n, num_steps)


def playground_case(n: int, num_steps: int):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # jaxopt, imported by brax
        from mujoco_playground import registry, wrapper

    from parallax.adapters import MJXAdapter

    env = registry.load("PendulumSwingup", config_overrides={"impl": "jax"})
    raw = wrapper.wrap_for_brax_training(env, episode_length=1000)
    vec = VmapAutoResetWrapper(MJXAdapter(env, episode_length=1000), n)
    return _brax_training_scans(raw, vec, env.action_size, n, num_steps)


def _compile(program: Callable[[Any], Any]) -> tuple[Any, float]:
    key = jax.random.key(0)
    start = time.perf_counter()
    compiled = jax.jit(program).lower(key).compile()
    jax.block_until_ready(compiled(key))
    return compiled, time.perf_counter() - start


def _time(compiled: Any, key: Any) -> float:
    start = time.perf_counter()
    jax.block_until_ready(compiled(key))
    return time.perf_counter() - start


def run(case: Case, repeats: int) -> list[dict[str, Any]]:
    rows = []
    for n in case.sizes:
        raw_program, ours_program = case.build(n, case.num_steps)
        raw, raw_compile = _compile(raw_program)
        ours, ours_compile = _compile(ours_program)
        best_raw = best_ours = float("inf")
        for r in range(repeats):  # interleaved, so machine load hits both alike
            key = jax.random.key(r + 1)
            best_raw = min(best_raw, _time(raw, key))
            best_ours = min(best_ours, _time(ours, key))
        per = 1e9 / (case.num_steps * n)
        rows.append(
            {
                "case": case.name,
                "N": n,
                "raw_compile_s": raw_compile,
                "adapter_compile_s": ours_compile,
                "raw_ns_per_env_step": best_raw * per,
                "adapter_ns_per_env_step": best_ours * per,
                "step_ratio": best_ours / best_raw,
                "compile_ratio": ours_compile / raw_compile,
            }
        )
        row = rows[-1]
        print(
            f"{case.name:<28} N={n:<5} compile raw {raw_compile:6.2f}s adapter "
            f"{ours_compile:6.2f}s (x{row['compile_ratio']:.2f})  step raw "
            f"{row['raw_ns_per_env_step']:9.1f}ns adapter {row['adapter_ns_per_env_step']:9.1f}ns"
            f"  ratio {row['step_ratio']:.3f}",
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["gymnax", "brax", "playground"])
    parser.add_argument("--sizes", nargs="+", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None, help="scan length")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="N in {16, 256}, short scans")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON to PATH")
    args = parser.parse_args(argv)
    sizes = tuple(args.sizes) if args.sizes else ((16, 256) if args.quick else (16, 1024, 4096))
    steps = args.steps or (20 if args.quick else 100)
    builders = {
        "gymnax": ("gymnax CartPole-v1", gymnax_case, sizes, steps),
        "brax": ("brax fast", brax_case, sizes, steps),
        # MJX on a CPU is ~1000x slower per step: smaller batches and scans
        "playground": (
            "playground PendulumSwingup",
            playground_case,
            tuple(s for s in sizes if s <= 1024) or (16,),
            max(steps // 10, 5),
        ),
    }
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; best of {args.repeats}")
    rows: list[dict[str, Any]] = []
    for name in args.cases:
        title, build, case_sizes, case_steps = builders[name]
        rows.extend(run(Case(title, build, case_sizes, case_steps), args.repeats))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
