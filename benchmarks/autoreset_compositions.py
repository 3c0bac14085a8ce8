"""What an auto-reset costs however it is composed with `vmap` (issue 37).

For each env and batch size N, one jitted `lax.scan` of `--steps` steps of N envs with
random actions (drawn one step ahead, `parallax.action_scan`), in five compositions:

- `VmapAutoResetWrapper(env, N)` (what `make_vec` builds; the reference);
- `VmapWrapper(AutoResetWrapper(env), N)` (what a reader of the 0.4.0 docs writes first);
- `jax.vmap` over `AutoResetWrapper(env)` (PureJaxRL's and gymnax's way);
- nested, `jax.vmap` over `--seeds` seeds of `VmapAutoResetWrapper(env, N / seeds)`;
- nested, `jax.vmap(jax.vmap(AutoResetWrapper(env)))` over `seeds x N / seeds` envs (what
  `jit(vmap(train))` runs).

Two more programs, with no auto-reset at all (episodes run on past their end), give the
ceiling of the nested ones: `jax.vmap(env.step)` over N envs and `jax.vmap(jax.vmap(env.step))`
over `seeds x N / seeds`. Their ratio (`nested_ceiling`) is what XLA's code for the env's own
step loses under a nested vmap, which no auto-reset can win back.

Every program steps N envs in all. The calls are interleaved (one call of each program per
round, `--rounds` rounds after a warm-up call); reported per program: env steps/s, median
and best of the rounds, and the ratio to the reference measured in the same round (the
median of the per-round ratios, and best over best). Episodes are the finance envs' short
benchmark episodes (`_common.ENV_KWARGS`) and GridWorld's 50-step time limit, so resets
happen inside every timed call.

    python benchmarks/autoreset_compositions.py                       # N in {1024, 4096}
    python benchmarks/autoreset_compositions.py --envs GridWorld-v0 --sizes 64 --steps 20
    python benchmarks/autoreset_compositions.py --json benchmarks/results/autoreset_compositions.json
"""

from __future__ import annotations

import argparse
import platform
import statistics
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from _common import (
    ENV_KWARGS,
    add_cpu_threads_option,
    apply_cpu_threads,
    interleaved_seconds,
    write_json,
)

ENVS = ("Trading-v0", "Portfolio-v0", "MarketMaking-v0", "OptimalExecution-v0", "GridWorld-v0")
REFERENCE = "VmapAutoResetWrapper"
COMPOSITIONS = (
    REFERENCE,
    "VmapWrapper(AutoResetWrapper)",
    "vmap(AutoResetWrapper)",
    "vmap(VmapAutoResetWrapper)",
    "vmap(vmap(AutoResetWrapper))",
)
BARE = ("vmap(step), no reset", "vmap(vmap(step)), no reset")


def _env(name: str) -> Any:
    import parallax

    if name == "GridWorld-v0":
        return parallax.TimeLimit(parallax.make(name), 50)
    return parallax.make(name, **ENV_KWARGS[name])


def consumed(state: Any) -> Any:
    """The episodes that ended, plus a count that reads every reward and observation (always
    0 here), so that XLA cannot drop the work of a step that `done` does not depend on."""
    read = [state.reward, *jax.tree.leaves(state.observation)]
    huge = sum(jnp.sum(jnp.abs(x.astype(jnp.float32)) > 3e38, dtype=jnp.int32) for x in read)
    return jnp.sum(state.done, dtype=jnp.int32) + huge


def programs(name: str, num_envs: int, steps: int, seeds: int) -> dict[str, Callable[[], Any]]:
    """Per composition, a compiled `() -> int32` (the episodes that ended, so the scan's
    work is consumed), each from the same env and the same actions."""
    from parallax import (
        AutoResetWrapper,
        VmapAutoResetWrapper,
        VmapWrapper,
        action_scan,
        random_actions,
        rng,
    )

    if num_envs % seeds:
        raise ValueError(f"--seeds {seeds} must divide N={num_envs}")
    env, per_seed = _env(name), num_envs // seeds
    single = AutoResetWrapper(env)
    fused, plain = VmapAutoResetWrapper(env, num_envs), VmapWrapper(single, num_envs)
    inner = VmapAutoResetWrapper(env, per_seed)
    flat_sample = random_actions(env.action_space, num_envs)

    def nested_sample(episode_key: Any, t: Any) -> Any:
        actions = flat_sample(episode_key, t)
        return jax.tree.map(lambda a: a.reshape(seeds, per_seed, *a.shape[1:]), actions)

    keys = jax.random.split(jax.random.key(0), num_envs)
    nested_keys = keys.reshape(seeds, per_seed)
    over_one = jax.vmap(lambda k: single.reset(key=k))
    built: dict[str, tuple[Callable[..., Any], Any, Any]] = {
        REFERENCE: (fused.step, fused.reset(key=keys), flat_sample),
        "VmapWrapper(AutoResetWrapper)": (plain.step, plain.reset(key=keys), flat_sample),
        "vmap(AutoResetWrapper)": (jax.vmap(single.step), over_one(keys), flat_sample),
        "vmap(VmapAutoResetWrapper)": (
            jax.vmap(inner.step),
            jax.vmap(lambda k: inner.reset(key=k))(nested_keys),
            nested_sample,
        ),
        "vmap(vmap(AutoResetWrapper))": (
            jax.vmap(jax.vmap(single.step)),
            jax.vmap(over_one)(nested_keys),
            nested_sample,
        ),
    }
    bare_reset = jax.vmap(lambda k: env.reset(key=k))
    built[BARE[0]] = (jax.vmap(env.step), bare_reset(keys), flat_sample)
    built[BARE[1]] = (
        jax.vmap(jax.vmap(env.step)),
        jax.vmap(bare_reset)(nested_keys),
        nested_sample,
    )
    episode_key = rng.episode_key(jax.random.key(1))
    ts = jnp.arange(steps, dtype=jnp.uint32)
    out = {}
    for composition, (step, state, sample) in built.items():

        def run(state: Any, step: Any = step, sample: Any = sample) -> Any:
            return action_scan(step, state, sample, episode_key, ts, count_done=consumed)[1]

        compiled = jax.jit(run).lower(state).compile()
        out[composition] = lambda compiled=compiled, state=state: compiled(state)
    return out


def measure(
    name: str, num_envs: int, steps: int, rounds: int, seeds: int
) -> dict[str, dict[str, float]]:
    """Interleaved timings of every composition; env steps/s and ratios (see the docstring)."""
    progs = programs(name, num_envs, steps, seeds)
    ended = {c: int(p()) for c, p in progs.items()}  # warm-up call, and the same episodes
    if len({ended[c] for c in COMPOSITIONS}) != 1:
        raise AssertionError(f"{name}: the compositions ended different episodes: {ended}")
    seconds = interleaved_seconds(progs, rounds)
    work = steps * num_envs
    ref = seconds[REFERENCE]
    result = {}
    for composition, times in seconds.items():
        result[composition] = {
            "median_steps_per_s": work / statistics.median(times),
            "best_steps_per_s": work / min(times),
            "median_ratio": statistics.median(r / t for r, t in zip(ref, times, strict=True)),
            "best_ratio": min(ref) / min(times),
        }
    flat, nested = seconds[BARE[0]], seconds[BARE[1]]
    result["nested_ceiling"] = {
        "median_ratio": statistics.median(f / n for f, n in zip(flat, nested, strict=True)),
        "best_ratio": min(flat) / min(nested),
    }
    result["episodes_ended"] = {"per_call": float(ended[REFERENCE])}
    return result


def table(results: dict[str, Any]) -> str:
    """The markdown table of `main`'s results: M steps/s (median, best) and the ratios."""
    head = "| env | N | " + " | ".join(f"`{c}`" for c in COMPOSITIONS) + " | nested ceiling |"
    lines = [head, "|---|---:|" + "---:|" * (len(COMPOSITIONS) + 1)]
    for key, row in results["cases"].items():
        name, n = key.rsplit("/N=", 1)
        cells = []
        for c in COMPOSITIONS:
            r = row[c]
            cell = f"{r['median_steps_per_s'] / 1e6:.1f} M (best {r['best_steps_per_s'] / 1e6:.1f})"
            if c != REFERENCE:
                cell += f", {r['median_ratio']:.2f}x"
            cells.append(cell)
        cells.append(f"{row['nested_ceiling']['median_ratio']:.2f}x")
        lines.append(f"| {name} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=ENVS)
    parser.add_argument("--sizes", nargs="+", type=int, default=[1024, 4096])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seeds", type=int, default=4, help="outer batch of the nested rows")
    parser.add_argument("--json", default=None, help="write the results to this file")
    add_cpu_threads_option(parser)
    args = parser.parse_args(argv)
    apply_cpu_threads(args)
    results: dict[str, Any] = {
        "benchmark": "autoreset_compositions",
        "machine": {"cpus": jax.local_device_count(), "platform": platform.platform()},
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "steps": args.steps,
        "rounds": args.rounds,
        "seeds": args.seeds,
        "cases": {},
    }
    for name in args.envs:
        for n in args.sizes:
            results["cases"][f"{name}/N={n}"] = measure(
                name, n, args.steps, args.rounds, args.seeds
            )
            print(
                f"{name} N={n}: "
                + ", ".join(
                    f"{c} {r['median_ratio']:.2f}x"
                    for c, r in results["cases"][f"{name}/N={n}"].items()
                    if c in COMPOSITIONS and c != REFERENCE
                ),
                flush=True,
            )
    print(table(results))
    write_json(args.json, results, indent=1)
    return results


if __name__ == "__main__":
    main()
