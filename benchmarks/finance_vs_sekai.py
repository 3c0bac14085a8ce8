"""Throughput of the finance envs: Parallax (jitted `lax.scan` over `make_vec`) vs sekai 0.2.0.

For each env id and batch size N, in the same run on the same machine:

- parallax: `parallax.make_vec(id, N, **kwargs)` (auto-reset on, same-step), uniform random
  actions drawn with `parallax.rng` inside a jitted `lax.scan` of `--steps` steps (each
  step's action drawn one iteration ahead and carried: `parallax.action_scan`), timed
  after a warm-up call that compiles it. Episodes are short (`ENV_KWARGS` in `_common.py`),
  so many end inside the run.
- sekai native: `sekai.make_vec(id, N, vectorization_mode="native", **kwargs)`, random actions
  from `batch_action_space` (as `sekai bench` does), stepped from Python.
- sekai sync: the same with `vectorization_mode="sync"` (N Python envs).

sekai runs are timed for at least `--min-seconds` (or `--sekai-steps` steps, whichever comes
first, after a few warm-up steps). Env steps per second = steps x N / seconds. The three are
timed in `--rounds` interleaved rounds and each side's best round is reported (on a shared
machine the load changes within seconds; interleaving gives both sides the same chances),
with the median of the rounds' own ratios beside it (`median_ratio_vs_*`, the steadier one).
Our jitted rollout returns its whole last state, so that XLA cannot drop the observations
and infos that a learner would read.

    python benchmarks/finance_vs_sekai.py                        # all four envs, N = 16 1024 4096 16384
    python benchmarks/finance_vs_sekai.py --ids Trading-v0 --num-envs 1024 --json out.json

An id whose parallax env cannot be imported yet is skipped with a message. Results are
printed as a table and written as JSON (`--json`, default `benchmarks/results/finance_vs_sekai.json`).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _common import ENV_KWARGS, add_cpu_threads_option, apply_cpu_threads, write_results

ALL_IDS = tuple(ENV_KWARGS)


def _action_sampler(space: Any, num_envs: int) -> Any:
    """Uniform random actions for `num_envs` envs from `parallax.rng` (counter-based, cheap).

    `Discrete(n)`: `randint(n)`; a bounded `Box`: `low + (high - low) * uniform`.
    """
    import jax.numpy as jnp
    import numpy as np

    from parallax import rng, spaces

    if isinstance(space, spaces.Discrete):

        def sample_discrete(episode_key: Any, t: Any) -> Any:
            return rng.randint_vector(episode_key, t, 0, num_envs, space.n, dtype=space.dtype)

        return sample_discrete
    if isinstance(space, spaces.Box) and np.all(np.isfinite(space.low)):
        size = int(np.prod(space.shape))
        low = jnp.asarray(space.low.reshape(-1), jnp.float32)
        width = jnp.asarray((space.high - space.low).reshape(-1), jnp.float32)

        def sample_box(episode_key: Any, t: Any) -> Any:
            u = rng.uniform_vector(episode_key, t, 0, num_envs * size).reshape(num_envs, size)
            return (low + width * u).reshape(num_envs, *space.shape).astype(space.dtype)

        return sample_box
    raise TypeError(f"no random-action sampler for {space!r}")


def _parallax_runner(env_id: str, num_envs: int, steps: int, kwargs: dict[str, Any]) -> Any:
    """A compiled random-action rollout; calling it returns (steps/s, episodes ended)."""
    import jax
    import jax.numpy as jnp

    import parallax
    from parallax import action_scan, rng

    vec = parallax.make_vec(env_id, num_envs, **kwargs)
    sample = _action_sampler(vec.action_space, num_envs)

    @jax.jit
    def run(key: jax.Array) -> tuple[Any, jax.Array]:
        state = vec.reset(key=key)
        action_key = rng.episode_key(jax.random.fold_in(key, 1))
        # Each step's action is drawn one iteration ahead and carried (see action_scan).
        # The whole last state is returned: were only a reduction of it returned, XLA would
        # drop the observations and infos nobody reads from the loop and time less work.
        return action_scan(vec.step, state, sample, action_key, jnp.arange(steps, dtype=jnp.uint32))

    t0 = time.perf_counter()
    jax.block_until_ready(run(jax.random.key(0)))
    compile_s = time.perf_counter() - t0
    calls = [0]

    def timed() -> dict[str, Any]:
        calls[0] += 1
        t0 = time.perf_counter()
        _, ended = jax.block_until_ready(run(jax.random.key(calls[0])))
        elapsed = time.perf_counter() - t0
        return {
            "steps_per_s": steps * num_envs / elapsed,
            "seconds": elapsed,
            "steps": steps,
            "episodes_ended": int(ended),
            "compile_s": compile_s,
        }

    return timed


def _sekai_rate(
    env_id: str, num_envs: int, mode: str, steps: int, min_seconds: float, kwargs: dict[str, Any]
) -> dict[str, Any]:
    import sekai

    vec = sekai.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode, **kwargs)
    try:
        vec.reset(seed=0)
        actions = vec.batch_action_space
        actions.seed(0)
        for _ in range(3):  # warm-up
            vec.step(actions.sample())
        done = 0
        taken = 0
        t0 = time.perf_counter()
        while taken < steps:
            result = vec.step(actions.sample())
            done += int(result.dones.sum())
            taken += 1
            if taken >= 3 and time.perf_counter() - t0 >= min_seconds:
                break
        elapsed = time.perf_counter() - t0
    finally:
        vec.close()
    return {
        "steps_per_s": taken * num_envs / elapsed,
        "seconds": elapsed,
        "steps": taken,
        "episodes_ended": done,
    }


def _importable(env_id: str) -> str | None:
    """None if parallax can build `env_id`, else the reason."""
    import parallax

    try:
        parallax.make(env_id, **ENV_KWARGS.get(env_id, {}))
    except (ImportError, AttributeError) as error:
        return f"{type(error).__name__}: {error}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", nargs="+", default=list(ALL_IDS), help="env ids")
    parser.add_argument(
        "--num-envs", nargs="+", type=int, default=[16, 1024, 4096, 16384], help="batch sizes N"
    )
    parser.add_argument("--steps", type=int, default=500, help="parallax scan length")
    parser.add_argument("--sekai-steps", type=int, default=500, help="most sekai steps per run")
    parser.add_argument("--min-seconds", type=float, default=2.0, help="least sekai time per run")
    parser.add_argument(
        "--modes", nargs="+", default=["native", "sync"], help="sekai vectorization modes"
    )
    parser.add_argument("--sync-max-envs", type=int, default=4096, help="skip sync above this N")
    parser.add_argument(
        "--rounds", type=int, default=3, help="interleaved timing rounds (best of each side)"
    )
    parser.add_argument(
        "--json",
        default=str(Path(__file__).parent / "results" / "finance_vs_sekai.json"),
        help="where to write the results",
    )
    add_cpu_threads_option(parser)
    args = parser.parse_args(argv)
    apply_cpu_threads(args)  # before JAX's first computation

    import jax

    rows: list[dict[str, Any]] = []
    for env_id in args.ids:
        reason = _importable(env_id)
        if reason is not None:
            print(f"skipping {env_id}: the parallax env is not importable ({reason})")
            continue
        kwargs = ENV_KWARGS.get(env_id, {})
        for n in args.num_envs:
            row: dict[str, Any] = {"id": env_id, "num_envs": n, "kwargs": kwargs, "rounds": []}
            modes = [m for m in args.modes if not (m == "sync" and n > args.sync_max_envs)]
            runner = _parallax_runner(env_id, n, args.steps, kwargs)
            # Interleaved rounds, best of each side: the machine may be shared, and its load
            # changes within seconds, so both sides get the same chances.
            for _ in range(args.rounds):
                result = {"parallax": runner()}
                for mode in modes:
                    result[f"sekai_{mode}"] = _sekai_rate(
                        env_id, n, mode, args.sekai_steps, args.min_seconds, kwargs
                    )
                row["rounds"].append(result)
            for side in ["parallax"] + [f"sekai_{m}" for m in modes]:
                row[side] = max((r[side] for r in row["rounds"]), key=lambda r: r["steps_per_s"])
            for mode in modes:
                row[f"ratio_vs_{mode}"] = (
                    row["parallax"]["steps_per_s"] / row[f"sekai_{mode}"]["steps_per_s"]
                )
                # the steadier figure: the median of the rounds' own ratios
                row[f"median_ratio_vs_{mode}"] = statistics.median(
                    r["parallax"]["steps_per_s"] / r[f"sekai_{mode}"]["steps_per_s"]
                    for r in row["rounds"]
                )
            rows.append(row)
            _print_row(row, args.modes)
            sys.stdout.flush()

    meta = {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "x64": bool(jax.config.jax_enable_x64),
        "cpu_threads": args.cpu_threads,
        "parallax_steps": args.steps,
        "rounds": args.rounds,
    }
    write_results(args.json, {"meta": meta, "rows": rows})
    return 0


def _print_row(row: dict[str, Any], modes: list[str]) -> None:
    parts = [f"{row['id']:<20} N={row['num_envs']:<6}"]
    parts.append(f"parallax {row['parallax']['steps_per_s']:>13,.0f}/s")
    for mode in modes:
        key = f"sekai_{mode}"
        if key in row:
            parts.append(
                f"sekai {mode} {row[key]['steps_per_s']:>11,.0f}/s "
                f"(x{row[f'ratio_vs_{mode}']:.1f}, median x{row[f'median_ratio_vs_{mode}']:.1f})"
            )
    parts.append(f"episodes {row['parallax']['episodes_ended']}")
    print("  ".join(parts))


if __name__ == "__main__":
    raise SystemExit(main())
