"""Where a batched env step spends its time: kernels per step and the most expensive ones.

For each env id, two rollouts of `--steps` steps at `--num-envs` envs, both with random
actions drawn one step ahead (`parallax.action_scan`, as `parallax bench` times them):

- `full`: `parallax.make_vec(id, N, ...)`, the auto-resetting stack
  (`VmapAutoResetWrapper(env, N)`, i.e. `AutoResetWrapper(VmapWrapper(env, N))`);
- `bare`: `jax.vmap(env.step)`, no reset at all (episodes run past their end: a bound, not
  an alternative).

For each it prints

1. the interleaved timing of the two programs (median steps/s of `--repeats` calls and the
   median per-repeat speed ratio bare / full);
2. from the compiled HLO, the kernels one step of the scan launches on the path where no
   env resets (fusions, copies, other ops; inside a conditional, its first branch, the one
   taken when no env is done) and the bytes they write (their results' sizes);
3. from a `jax.profiler` trace of one call, the `--top` kernels by time per step. Profiling
   slows every kernel down, so read those as shares of the step, not as absolute times;
4. from XLA's cost analysis of one env's compiled `reset` and `step` (no vmap, no
   auto-reset): the flops, transcendental ops and bytes of each (`work`), which do not
   depend on the machine's load: e.g. what a reset's warm-up costs against a step.

    python benchmarks/profile_step.py Trading-v0 Portfolio-v0
    python benchmarks/profile_step.py OptimalExecution-v0 --num-envs 4096 --top 8 --json out.json
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import math
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from _common import ENV_KWARGS

import parallax
from parallax import action_scan, random_actions, rng

_SKIP_OPS = {"get-tuple-element", "tuple", "parameter", "constant", "bitcast"}


def _computations(hlo: str) -> dict[str, list[str]]:
    comps: dict[str, list[str]] = {}
    current = None
    for line in hlo.split("\n"):
        head = re.match(r"^(?:ENTRY )?%(\S+) \(", line)
        if head:
            current = head.group(1)
            comps[current] = []
        elif line.startswith("}"):
            current = None
        elif current is not None and line.strip():
            comps[current].append(line)
    return comps


def _bytes(shape: str) -> int:
    """The bytes of an HLO result shape (`f32[1024,31]{1,0}`, or a tuple of such)."""
    total = 0
    for dtype, dims in re.findall(r"\b([a-z]+\d*)\[([\d,]*)\]", shape):
        bits = 8 if dtype == "pred" else int(re.sub(r"\D", "", dtype) or 32)
        total += math.prod(int(d) for d in dims.split(",") if d) * bits // 8
    return total


def step_kernels(hlo: str, scan_length: int) -> list[tuple[str, int]]:
    """`(opcode, bytes written)` of each kernel one iteration of the scan of length
    `scan_length` launches, on the path where no env resets (inside a conditional: its
    first branch, the one taken when no env is done; the conditional itself writes 0)."""
    comps = _computations(hlo)
    loop = re.search(
        r"while\(.*body=%(\S+?),.*\"known_trip_count\":\{\"n\":\"" + str(scan_length) + '"',
        hlo,
    )
    if loop is None:
        raise RuntimeError(f"no while loop with {scan_length} iterations in the program")

    def walk(name: str) -> list[tuple[str, int]]:
        found: list[tuple[str, int]] = []
        for line in comps[name]:
            op = re.match(r"\s*(?:ROOT )?%\S+ = (.*?) ([a-z][a-z0-9-]*)\(", line)
            if not op or op.group(2) in _SKIP_OPS:
                continue
            if op.group(2) == "conditional":
                branches = re.search(r"branch_computations=\{([^}]*)\}", line) or re.search(
                    r"false_computation=%(\S+?),", line
                )
                assert branches is not None
                found.append(("conditional", 0))
                found.extend(walk(branches.group(1).split(",")[0].strip().lstrip("%")))
            else:
                found.append((op.group(2), _bytes(op.group(1))))
        return found

    return walk(loop.group(1))


def kernels_per_step(hlo: str, scan_length: int) -> dict[str, int]:
    """Kernels launched by one iteration of the scan of length `scan_length`, no reset."""
    counts = collections.Counter(op for op, _ in step_kernels(hlo, scan_length))
    return dict(counts.most_common())


def bytes_written_per_step(hlo: str, scan_length: int) -> int:
    """Bytes the kernels of `kernels_per_step` write (their results' sizes), no reset."""
    return sum(written for _, written in step_kernels(hlo, scan_length))


def describe(comps: dict[str, list[str]], kernel: str) -> str:
    """What a kernel computes, from the names JAX recorded in its HLO metadata.

    `comps` is the program's computations (`_computations`). The named functions
    (`jit(name)`) the kernel's instructions came from, most frequent first, or for a copy
    the operand it copies.
    """
    line = next((ln for c in comps.values() for ln in c if f"%{kernel} = " in ln), "")
    if " copy(" in line:
        shape = line.split(" = ", 1)[1].split(" ", 1)[0]
        return f"copy of a {shape}"
    called = re.search(r"calls=%(\S+?)[,}\s]", line)
    lines = comps.get(called.group(1), []) if called else [line]
    names: collections.Counter[str] = collections.Counter()
    for ln in lines:
        op_name = re.search(r'op_name="([^"]+)"', ln)
        if op_name:
            parts = [p for p in op_name.group(1).split("/")[1:] if "jit(" in p]
            names[parts[-1] if parts else op_name.group(1).split("/")[-1]] += 1
    described = ", ".join(n for n, _ in names.most_common(3))
    opcode = re.search(r" ([a-z][a-z0-9-]*)\(", line.split(" = ", 1)[-1])
    return described or (opcode.group(1) if opcode else "not in the program text")


def work(env: Any) -> dict[str, dict[str, float]]:
    """XLA's cost analysis of one env's jitted `reset` and `step` (a random action)."""
    key = jax.random.key(0)
    state = env.reset(key=key)
    action = env.action_space.sample(key=jax.random.key(1))
    out: dict[str, dict[str, float]] = {}
    for name, fn, args in (
        ("reset", lambda k: env.reset(key=k), (key,)),
        ("step", env.step, (state, action)),
    ):
        cost = jax.jit(fn).lower(*args).compile().cost_analysis()
        cost = dict((cost[0] if isinstance(cost, list) else cost) or {})
        out[name] = {
            "flops": float(cost.get("flops", 0.0)),
            "transcendentals": float(cost.get("transcendentals", 0.0)),
            "bytes": float(cost.get("bytes accessed", 0.0)),
        }
    return out


def top_kernels(compiled: Any, args: tuple[Any, ...], steps: int, top: int) -> dict[str, Any]:
    """The `top` kernels of one profiled call, by time per scan step.

    Loops and conditionals are events that enclose the kernels they run: they are left out
    of the kernel list and of the total the shares are taken of; the conditionals' own
    time (the reset branch or the copies of the branch taken when no env is done) is
    reported as `conditional_share`.
    """
    with tempfile.TemporaryDirectory() as trace_dir:
        with jax.profiler.trace(trace_dir):
            jax.block_until_ready(compiled(*args))
        (path,) = glob.glob(f"{trace_dir}/**/*.trace.json.gz", recursive=True)
        with gzip.open(path) as trace:
            events = json.load(trace)["traceEvents"]
    total: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    conditional = 0.0
    for event in events:
        name = event.get("name", "")
        if (
            event.get("ph") != "X"
            or "::" in name
            or name.startswith(("$", "Thunk", "Pjit", "while"))
        ):
            continue
        if name.startswith(("cond", "conditional")):
            conditional += event["dur"]
            continue
        total[name] += event["dur"]
        calls[name] += 1
    everything = sum(total.values())
    return {
        "kernel_us_per_step": everything / steps,
        "conditional_share": conditional / everything,
        "top": [
            {
                "kernel": name,
                "us_per_step": us / steps,
                "share": us / everything,
                "calls": calls[name],
            }
            for name, us in total.most_common(top)
        ],
    }


def profile(env_id: str, num_envs: int, steps: int, repeats: int, top: int) -> dict[str, Any]:
    kwargs = ENV_KWARGS.get(env_id, {})
    env = parallax.make(env_id, **kwargs)
    vec = parallax.make_vec(env_id, num_envs, **kwargs)
    sample = random_actions(vec.action_space, num_envs)
    ts = jnp.arange(steps, dtype=jnp.uint32)
    variants = {
        "full": (vec.step, lambda k: vec.reset(key=k)),
        "bare": (
            jax.vmap(env.step),
            lambda k: jax.vmap(lambda kk: env.reset(key=kk))(jax.random.split(k, num_envs)),
        ),
    }
    programs = {}
    for name, (step, reset) in variants.items():
        state = jax.jit(reset)(jax.random.key(0))

        def rollout(state: Any, key: Any, step: Any = step) -> Any:
            return action_scan(step, state, sample, rng.episode_key(key), ts)

        compiled = jax.jit(rollout).lower(state, jax.random.key(1)).compile()
        jax.block_until_ready(compiled(state, jax.random.key(1)))
        programs[name] = (compiled, state)
    seconds: dict[str, list[float]] = {name: [] for name in programs}
    for r in range(repeats):  # interleaved, so that machine load hits both alike
        for name, (compiled, state) in programs.items():
            start = time.perf_counter()
            jax.block_until_ready(compiled(state, jax.random.key(r + 2)))
            seconds[name].append(time.perf_counter() - start)
    result: dict[str, Any] = {
        "env": env_id,
        "num_envs": num_envs,
        "steps": steps,
        "env_kwargs": kwargs,
        "bare_over_full": statistics.median(
            f / b for f, b in zip(seconds["full"], seconds["bare"], strict=True)
        ),
    }
    result["work"] = work(env)
    for name, (compiled, state) in programs.items():
        hlo = compiled.as_text() or ""
        comps = _computations(hlo)
        profiled = top_kernels(compiled, (state, jax.random.key(0)), steps, top)
        for kernel in profiled["top"]:
            kernel["what"] = describe(comps, kernel["kernel"])
        result[name] = {
            "steps_per_s": num_envs * steps / statistics.median(seconds[name]),
            "kernels_per_step": kernels_per_step(hlo, steps),
            "bytes_written_per_step": bytes_written_per_step(hlo, steps),
            "profile": profiled,
        }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*", default=list(ENV_KWARGS))
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--top", type=int, default=6)
    parser.add_argument("--json", help="also write the results as JSON to this path")
    args = parser.parse_args(argv)
    results = []
    for env_id in args.ids:
        res = profile(env_id, args.num_envs, args.steps, args.repeats, args.top)
        results.append(res)
        print(f"{env_id}, N = {args.num_envs}: bare vmap(step) {res['bare_over_full']:.2f}x full")
        for what, cost in res["work"].items():
            print(
                f"  one {what}: {cost['flops']:.0f} flops, {cost['transcendentals']:.0f} "
                f"transcendentals, {cost['bytes']:.0f} bytes"
            )
        for name in ("full", "bare"):
            part = res[name]
            kernels = part["kernels_per_step"]
            print(
                f"  {name}: {part['steps_per_s'] / 1e6:.2f} M steps/s, "
                f"{sum(kernels.values())} kernels per step {kernels}, "
                f"{part['bytes_written_per_step'] / 1e3:.0f} kB written"
            )
            prof = part["profile"]
            if prof["conditional_share"]:
                print(f"    {100 * prof['conditional_share']:5.1f}%  (the reset conditional)")
            for k in prof["top"]:
                print(f"    {100 * k['share']:5.1f}%  {k['kernel']}: {k['what']}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
