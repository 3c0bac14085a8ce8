"""A roofline for the finance envs: measured env steps/s against what this machine allows.

For each finance env at batch size N (auto-reset on, as `parallax.make_vec` builds it):

1. the work of one env step, from XLA's cost analysis of the compiled batched step
   (`jax.jit(vec.step).lower(state, action).compile().cost_analysis()`, divided by N):
   flops, transcendental ops (exp, log, ...) and bytes accessed; and the state size (the
   least a step must read and write). Both the bare step (`jax.vmap(env.step)`) and the full
   auto-resetting step are analysed; the HLO of the full step is inventoried (instructions,
   fusions, loops, conditionals);
2. this machine's limits, measured here: memory bandwidth (a jitted `y = a * x + y` over
   arrays much larger than the caches), elementwise arithmetic throughput (a jitted chain of
   fused multiply-adds on a cache-resident array), transcendental throughput (a jitted chain
   of `exp`), dense matmul throughput (for reference), and the fixed cost of one iteration
   of a `lax.scan` (the per-step launch/loop overhead a rollout pays whatever N is);
3. the measured env steps/s of a jitted `lax.scan` rollout (`parallax.bench.benchmark`);
4. the fixed cost of one step of the env's program, whatever N: the time per scan
   iteration with N = 1 (kernel launches, the loop, the reset conditional);
5. the roofline: `min(bandwidth / bytes, flops_peak / flops, exp_rate / transcendentals,
   N / fixed_cost)` env steps/s, which bound applies, and the measured fraction of it.

    python benchmarks/roofline.py [--num-envs 4096] [--steps 100] [--json out.json]

The machine is shared: each peak is the best of several runs, each env rate the median.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import re
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from _common import ENV_KWARGS, run_meta, write_results

IDS = tuple(ENV_KWARGS)


def _best_seconds(fn: Any, *args: Any, repeats: int = 5) -> float:
    jax.block_until_ready(fn(*args))  # compile + warm up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t0)
    return best


def machine_peaks(size: int = 1 << 25, quick: bool = False) -> dict[str, float]:
    """Measured limits of this machine (best of several runs).

    - `bandwidth_bytes_per_s`: `y = a * x + y` over `size` float32 (reads x and y, writes y);
    - `fma_flops_per_s`: 256 chained `x = x * a + b` on 64 Ki float32 (cache resident);
    - `exp_per_s`: 64 chained `x = exp(-x)` on 64 Ki float32;
    - `matmul_flops_per_s`: a 1024 x 1024 float32 matmul;
    - `scan_step_seconds`: one iteration of a `lax.scan` whose body adds 1 to a scalar.
    """
    reps = 2 if quick else 5
    x = jnp.ones((size,), jnp.float32)
    y = jnp.ones((size,), jnp.float32)
    # y is donated and rewritten in place, so no page of a fresh output is first-touched
    axpy = jax.jit(lambda x, y: 1.0001 * x + y, donate_argnums=1)
    y = jax.block_until_ready(axpy(x, y))
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        y = jax.block_until_ready(axpy(x, y))
        best = min(best, time.perf_counter() - t0)
    bandwidth = 3 * 4 * size / best
    del x, y

    small = jnp.linspace(0.0, 1.0, 1 << 16, dtype=jnp.float32)
    fma_chain = 256

    @jax.jit
    def fmas(v: jax.Array) -> jax.Array:
        def body(_: int, v: jax.Array) -> jax.Array:
            for _ in range(8):  # 8 dependent FMAs per iteration, unrolled
                v = v * 0.999 + 0.001
            return v

        return jax.lax.fori_loop(0, fma_chain // 8, body, v)

    fma_rate = 2 * fma_chain * small.size / _best_seconds(fmas, small, repeats=reps)

    exp_chain = 64

    @jax.jit
    def exps(v: jax.Array) -> jax.Array:
        def body(_: int, v: jax.Array) -> jax.Array:
            for _ in range(4):
                v = jnp.exp(-v)
            return v

        return jax.lax.fori_loop(0, exp_chain // 4, body, v)

    exp_rate = exp_chain * small.size / _best_seconds(exps, small, repeats=reps)

    a = jnp.ones((1024, 1024), jnp.float32)
    matmul = jax.jit(lambda a: a @ a)
    matmul_rate = 2 * 1024**3 / _best_seconds(matmul, a, repeats=reps)

    scan_len = 10_000

    @jax.jit
    def tiny_scan(c: jax.Array, xs: jax.Array) -> jax.Array:
        # a body XLA cannot fold away: 16 floats, one multiply-add with this step's input
        return jax.lax.scan(lambda c, x: (c * 0.5 + x, None), c, xs)[0]

    xs = jnp.arange(scan_len, dtype=jnp.float32)
    scan_step = _best_seconds(tiny_scan, jnp.zeros(16, jnp.float32), xs, repeats=reps) / scan_len
    return {
        "bandwidth_bytes_per_s": bandwidth,
        "fma_flops_per_s": fma_rate,
        "exp_per_s": exp_rate,
        "matmul_flops_per_s": matmul_rate,
        "scan_step_seconds": scan_step,
    }


def _cost(compiled: Any) -> dict[str, float]:
    analysis = compiled.cost_analysis()
    if isinstance(analysis, list):  # older JAX: one dict per program
        analysis = analysis[0]
    return {
        "flops": float(analysis.get("flops", 0.0)),
        "transcendentals": float(analysis.get("transcendentals", 0.0)),
        "bytes_accessed": float(analysis.get("bytes accessed", 0.0)),
    }


_OPCODE = re.compile(r"=\s*[^=]*?\s([a-z][a-z0-9\-]*)\(")


def hlo_inventory(compiled: Any) -> dict[str, Any]:
    """Counts of the optimised HLO: instructions, fusions, loops, conditionals, top ops."""
    text = compiled.as_text()
    ops: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        match = _OPCODE.search(line)
        if match and not line.lstrip().startswith(("HloModule", "ENTRY", "%fused", "}")):
            ops[match.group(1)] += 1
    return {
        "instructions": sum(ops.values()),
        "fusions": ops["fusion"],
        "while_loops": ops["while"],
        "conditionals": ops["conditional"],
        "transcendental_ops": sum(
            ops[k] for k in ("exponential", "log", "log-plus-one", "exponential-minus-one")
        )
        + sum(ops[k] for k in ("sqrt", "rsqrt", "power", "tanh", "logistic")),
        "top_ops": dict(ops.most_common(12)),
    }


def analyse_env(env_id: str, num_envs: int, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Per-env-step work of `env_id` at batch size `num_envs` (see the module docstring)."""
    import parallax
    from parallax.bench import random_actions, tree_bytes
    from parallax.rng import episode_key

    vec = parallax.make_vec(env_id, num_envs, **kwargs)
    state = jax.jit(lambda k: vec.reset(key=k))(jax.random.key(0))
    action = jax.jit(random_actions(vec.action_space, num_envs))(
        episode_key(jax.random.key(1)), jnp.uint32(0)
    )
    full = jax.jit(vec.step).lower(state, action).compile()
    bare_env = parallax.make(env_id, **kwargs)
    keys = jax.random.split(jax.random.key(0), num_envs)
    reset = jax.jit(jax.vmap(lambda k: bare_env.reset(key=k))).lower(keys).compile()
    bare_state = reset(keys)
    bare = jax.jit(jax.vmap(bare_env.step)).lower(bare_state, action).compile()
    per_env: dict[str, Any] = {}
    for name, compiled in (("full", full), ("bare", bare), ("reset", reset)):
        per_env.update({f"{name}_{k}": v / num_envs for k, v in _cost(compiled).items()})
    return {
        "state_bytes_per_env": tree_bytes(state) / num_envs,
        "bare_state_bytes_per_env": tree_bytes(bare_state) / num_envs,
        "action_bytes_per_env": tree_bytes(action) / num_envs,
        **per_env,
        "hlo_full_step": hlo_inventory(full),
        "hlo_bare_step": hlo_inventory(bare),
        "hlo_reset": hlo_inventory(reset),
    }


def roofline(
    work: dict[str, Any],
    peaks: dict[str, float],
    num_envs: int,
    measured: float,
    resets_per_step: float,
) -> dict[str, Any]:
    """The limits (env steps/s) that each resource sets, the binding one, and the fraction.

    The work of an env step is the bare step plus `resets_per_step` (episodes ended per env
    step, measured) resets. XLA's analysis of the full auto-resetting step is not used for
    the limit: it counts every branch of the reset conditional, although at run time the
    reset branch runs only on steps where an env is done, and then only for up to
    `max_resets_per_step` envs.
    """
    per_step = {
        k: work[f"bare_{k}"] + resets_per_step * work[f"reset_{k}"]
        for k in ("flops", "transcendentals", "bytes_accessed")
    }
    limits = {
        "memory (XLA bytes accessed)": peaks["bandwidth_bytes_per_s"]
        / max(per_step["bytes_accessed"], 1.0),
        "memory (state in + out)": peaks["bandwidth_bytes_per_s"]
        / (2 * work["state_bytes_per_env"] + work["action_bytes_per_env"]),
        "compute (elementwise ops)": peaks["fma_flops_per_s"] / max(per_step["flops"], 1.0),
        "compute (transcendentals)": peaks["exp_per_s"] / max(per_step["transcendentals"], 1.0),
        "per-step overhead (scan)": num_envs / peaks["scan_step_seconds"],
        "per-step fixed cost of this env's program": num_envs / work["fixed_step_seconds"],
    }
    bound = min(limits, key=limits.__getitem__)
    return {
        "work_per_env_step": per_step,
        "resets_per_env_step": resets_per_step,
        "limits_steps_per_s": limits,
        "bound": bound,
        "roofline_steps_per_s": limits[bound],
        "measured_steps_per_s": measured,
        "fraction_of_roofline": measured / limits[bound],
    }


def autoreset_probes(
    env_id: str, num_envs: int, kwargs: dict[str, Any], steps: int = 200, repeats: int = 9
) -> dict[str, Any]:
    """Where the auto-reset time goes: variants of the batched step, timed interleaved.

    - `as is`: `VmapAutoResetWrapper(env, N)` (partial resets, `K = N // 16`);
    - `K=None`: the same with `max_resets_per_step=None` (reset all or none);
    - `no per-step key fold_in`: as is, with the wrapper's derivation of the next episode's
      key (`next_episode_key`, a `fold_in`) replaced by the identity. A cost probe only:
      the key schedule is then invalid. Before commit 6481e38 the wrapper computed it for
      all N envs on every step; since then only for the envs that reset, so this variant
      should match `as is`;
    - `bare`: `jax.vmap(env.step)`, no reset at all (episodes run past their end).

    Returns env steps/s (median) of each and its speed relative to `as is` (median of
    per-repeat ratios).
    """
    import statistics

    import parallax
    from parallax import VmapAutoResetWrapper, action_scan, next_episode_key, random_actions, rng

    # the probe below swaps the key derivation for the identity where the auto-reset looks
    # it up: the module that defines the public `parallax.next_episode_key`
    autoreset = importlib.import_module(next_episode_key.__module__)

    env = parallax.make(env_id, **kwargs)
    ek = rng.episode_key(jax.random.key(1))

    def compile_roll(step: Any, reset: Any, sample: Any) -> list[Any]:
        state = jax.jit(reset)(jax.random.key(0))

        def roll(state: Any, start: jax.Array) -> Any:
            ts = start + jnp.arange(steps, dtype=jnp.uint32)
            return action_scan(step, state, sample, ek, ts)[0]

        return [jax.jit(roll, donate_argnums=0).lower(state, jnp.uint32(0)).compile(), state]

    def stack(k: Any) -> tuple[Any, Any, Any]:
        vec = VmapAutoResetWrapper(env, num_envs, max_resets_per_step=k)
        return vec.step, lambda key: vec.reset(key=key), random_actions(vec.action_space, num_envs)

    variants = {"as is (K=N/16)": compile_roll(*stack("auto"))}
    variants["K=None"] = compile_roll(*stack(None))
    original = autoreset.next_episode_key
    autoreset.next_episode_key = lambda key: key  # type: ignore[assignment]
    try:
        variants["no per-step key fold_in (probe)"] = compile_roll(*stack("auto"))
    finally:
        autoreset.next_episode_key = original
    variants["bare vmap(step), no reset"] = compile_roll(
        jax.vmap(env.step),
        lambda key: jax.vmap(lambda k: env.reset(key=k))(jax.random.split(key, num_envs)),
        random_actions(env.action_space, num_envs),
    )
    names = list(variants)
    times: dict[str, list[float]] = {k: [] for k in names}
    for k in names:
        variants[k][1] = jax.block_until_ready(variants[k][0](variants[k][1], jnp.uint32(0)))
    for r in range(repeats):
        for k in names if r % 2 == 0 else names[::-1]:
            t0 = time.perf_counter()
            start = jnp.uint32(steps * (r + 1))
            variants[k][1] = jax.block_until_ready(variants[k][0](variants[k][1], start))
            times[k].append(time.perf_counter() - t0)
    base = times[names[0]]
    return {
        k: {
            "steps_per_s": num_envs * steps / statistics.median(times[k]),
            "speed_vs_as_is": statistics.median(b / t for b, t in zip(base, times[k])),
            "fusions": variants[k][0].as_text().count(" fusion("),
        }
        for k in names
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", nargs="+", default=list(IDS))
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smaller peak measurements")
    parser.add_argument(
        "--probes-only",
        action="store_true",
        help="only the auto-reset cost probes (see autoreset_probes), at --num-envs",
    )
    parser.add_argument("--json", default=str(Path(__file__).parent / "results" / "roofline.json"))
    args = parser.parse_args(argv)

    from parallax.bench import benchmark

    if args.probes_only:
        probes = {}
        for env_id in args.ids:
            probes[env_id] = autoreset_probes(env_id, args.num_envs, ENV_KWARGS.get(env_id, {}))
            for name, p in probes[env_id].items():
                print(
                    f"{env_id:<20} N={args.num_envs} {name:<34} {p['steps_per_s']:>13,.0f}/s "
                    f" x{p['speed_vs_as_is']:.2f} vs as is  ({p['fusions']} fusions)",
                    flush=True,
                )
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"num_envs": args.num_envs, "probes": probes}))
        return 0

    peaks = machine_peaks(size=1 << (22 if args.quick else 25), quick=args.quick)
    print(
        "machine: bandwidth {:.1f} GB/s, FMA {:.1f} GFLOP/s, exp {:.2f} G/s, "
        "matmul {:.1f} GFLOP/s, scan step {:.2f} us".format(
            peaks["bandwidth_bytes_per_s"] / 1e9,
            peaks["fma_flops_per_s"] / 1e9,
            peaks["exp_per_s"] / 1e9,
            peaks["matmul_flops_per_s"] / 1e9,
            peaks["scan_step_seconds"] * 1e6,
        )
    )
    rows = []
    for env_id in args.ids:
        kwargs = ENV_KWARGS.get(env_id, {})
        work = analyse_env(env_id, args.num_envs, kwargs)
        run = benchmark(
            env_id,
            args.num_envs,
            steps=args.steps,
            repeats=args.repeats,
            env_kwargs=kwargs,
            progress=False,
        )
        # the fixed cost of one step of this env's program (kernel launches, loop, the
        # reset conditional): the time per scan iteration with a single env
        one = benchmark(
            env_id,
            1,
            steps=20 * args.steps,
            repeats=args.repeats,
            env_kwargs=kwargs,
            progress=False,
        )
        work["fixed_step_seconds"] = 1.0 / one["steps_per_second"]
        resets = run["episodes_ended"] / (args.num_envs * args.steps * args.repeats)
        line = roofline(work, peaks, args.num_envs, run["steps_per_second"], resets)
        rows.append({"env": env_id, "num_envs": args.num_envs, "kwargs": kwargs, **work, **line})
        print(
            f"{env_id:<20} {run['steps_per_second']:>12,.0f} steps/s  "
            f"ops/step {line['work_per_env_step']['flops']:>7,.0f}  "
            f"transc {line['work_per_env_step']['transcendentals']:>5.1f}  "
            f"bytes {line['work_per_env_step']['bytes_accessed']:>6,.0f}  "
            f"state {work['state_bytes_per_env']:.0f} B  "
            f"fixed {1e6 * work['fixed_step_seconds']:.1f} us/step  "
            f"bound: {line['bound']} {line['roofline_steps_per_s']:,.0f}/s  "
            f"-> {100 * line['fraction_of_roofline']:.1f}%"
        )
    write_results(args.json, {"meta": run_meta(), "peaks": peaks, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
