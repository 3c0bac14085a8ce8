"""Why a rollout's speed varies from call to call on the CPU: XLA's thread pool hands it off.

For each env and N, one child process per pool size (XLA's default, one thread per CPU,
and `--threads` values set with `parallax.set_cpu_threads`) builds `parallax bench`'s own
rollout (`ParallaxRunner`: `make_vec`, auto-reset, random actions, a donated scan of
`--steps` steps) and times `--calls` calls. Per call it records the wall time, the CPU
time of the whole process (all threads), and the context switches (`getrusage`), and
after the calls, per thread, which threads ran and how often they slept.

CPU time and context switches barely move with the machine's load, unlike wall time, so
they carry the conclusion on a shared machine: with XLA's default pool the scan moves
between two pool threads about every other step (hundreds of sleeps and wake-ups per
call) and the process burns about twice the CPU time of the one-thread run for the same
work.

    python benchmarks/thread_handoffs.py [--envs Trading-v0 ...] [--num-envs 1024 4096]
        [--steps 1000] [--calls 7] [--threads 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

from _common import write_json

FINANCE = ("Trading-v0", "Portfolio-v0", "MarketMaking-v0", "OptimalExecution-v0")
# `parallax bench`'s settings in docs/performance.md: short episodes, so resets happen
EPISODES = {"MarketMaking-v0": {"n_steps": 50}, "OptimalExecution-v0": {"n_steps": 25}}


def _per_thread() -> dict[str, tuple[str, int, int]]:
    """tid -> (name, voluntary switches, CPU ticks) of this process's threads (Linux)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/self/task/{tid}/status") as f:
                fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        out[tid] = (name, int(fields["voluntary_ctxt_switches"]), int(stat[11]) + int(stat[12]))
    return out


def child(env_id: str, num_envs: int, steps: int, calls: int, threads: int | None) -> dict:
    """One measurement, in this process (which must not have started JAX yet)."""
    import parallax
    from parallax._bench_runner import ParallaxRunner

    if threads is not None:
        parallax.set_cpu_threads(threads)
    kwargs = EPISODES.get(env_id, {"episode_length": 50} if env_id in FINANCE else {})
    runner = ParallaxRunner(
        env_id, num_envs, steps, autoreset=True, max_episode_steps=None, seed=0, env_kwargs=kwargs
    )
    runner.prepare()  # compile and one warm-up call
    rows = []
    for _ in range(calls):
        before, cpu0, t0 = (
            resource.getrusage(resource.RUSAGE_SELF),
            time.process_time(),
            time.perf_counter(),
        )
        runner.run()
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        after = resource.getrusage(resource.RUSAGE_SELF)
        rows.append(
            {
                "wall_s": wall,
                "cpu_s": cpu,
                "voluntary_switches": after.ru_nvcsw - before.ru_nvcsw,
                "involuntary_switches": after.ru_nivcsw - before.ru_nivcsw,
            }
        )
    threads_before = _per_thread()
    runner.run()
    threads_after = _per_thread()
    busy = [
        {
            "name": name,
            "sleeps": sleeps - threads_before[tid][1],
            "ticks": ticks - threads_before[tid][2],
        }
        for tid, (name, sleeps, ticks) in threads_after.items()
        if tid in threads_before
        and (sleeps - threads_before[tid][1] or ticks - threads_before[tid][2])
    ]
    env_steps = num_envs * steps
    return {
        "env": env_id,
        "num_envs": num_envs,
        "steps": steps,
        "threads": threads,
        "pool_threads": sum(1 for n, _, _ in threads_after.values() if n == "tf_XLAEigen"),
        "calls": rows,
        "cpu_ms_per_call": 1e3 * statistics.median(r["cpu_s"] for r in rows),
        "switches_per_step": statistics.median(r["voluntary_switches"] for r in rows) / steps,
        "steps_per_cpu_second": _per(env_steps, min(r["cpu_s"] for r in rows)),
        "steps_per_second_best": env_steps / min(r["wall_s"] for r in rows),
        "steps_per_second_median": env_steps / statistics.median(r["wall_s"] for r in rows),
        "busy_threads_last_call": busy,
    }


def _per(numerator: float, denominator: float) -> float:
    """`numerator / denominator`, NaN when the denominator is 0: CPU time is counted in clock
    ticks, which a tiny run (the test's) may not reach on a coarse clock."""
    return numerator / denominator if denominator > 0 else float("nan")


def _spawn(env_id: str, n: int, steps: int, calls: int, threads: int | None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PJRT_NPROC"}
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import thread_handoffs as t; "
        "print(json.dumps(t.child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), "
        "int(sys.argv[5]), None if sys.argv[6] == 'default' else int(sys.argv[6]))))"
    )
    args = [str(a) for a in (env_id, n, steps, calls, "default" if threads is None else threads)]
    here = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run(
        [sys.executable, "-c", code, here, *args], capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        raise RuntimeError(f"{env_id} N={n} threads={threads}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=list(FINANCE))
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1024])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=7)
    parser.add_argument("--threads", type=int, nargs="+", default=[1], help="pool sizes to try")
    parser.add_argument("--json", default=None, metavar="PATH")
    args = parser.parse_args(argv)
    results = []
    for env_id in args.envs:
        for n in args.num_envs:
            rows = [_spawn(env_id, n, args.steps, args.calls, t) for t in [None, *args.threads]]
            base = rows[0]
            for row in rows:
                row["cpu_vs_default"] = _per(row["cpu_ms_per_call"], base["cpu_ms_per_call"])
                label = "default" if row["threads"] is None else f"{row['threads']} thread(s)"
                print(
                    f"{env_id:20s} N={n:<6d} {label:12s} pool {row['pool_threads']}  "
                    f"CPU {row['cpu_ms_per_call']:8.1f} ms/call ({row['cpu_vs_default']:.2f}x)  "
                    f"sleeps/step {row['switches_per_step']:5.2f}  "
                    f"wall best {row['steps_per_second_best'] / 1e6:6.1f} M/s  "
                    f"median {row['steps_per_second_median'] / 1e6:6.1f} M/s",
                    flush=True,
                )
            results.extend(rows)
    write_json(args.json, results, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
