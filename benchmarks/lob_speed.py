"""Throughput of `LimitOrderBook-v0`: Parallax (a jitted `lax.scan` over `make_vec`) vs sekai
0.2.0's env stepped in a Python loop, in env steps/s and background flow events/s.

The measurement is `parallax.bench.benchmark(..., compare="sekai")`, the one behind
`parallax bench LimitOrderBook-v0 --compare sekai`, so the two agree by construction:

- ours: `make_vec("LimitOrderBook-v0", N)` (auto-reset on), uniform random actions drawn
  inside the scan (`parallax.random_actions`; masked choices are no-ops in the env), a
  compiled call of `--steps` steps, called once to warm up and then `--repeats` times;
- sekai: it has no native vector env for this id, so `--sekai-envs` of the N envs are each
  stepped in turn by a Python loop with random legal actions (from `action_mask()`),
  `--sekai-steps` steps per call; a Python loop's cost per env step does not depend on N,
  so its throughput is per env step;
- `--cpu-devices K`: ours split over K CPU devices (`parallax.set_cpu_devices`), each
  stepping its N/K envs alone in a `jax.shard_map`: K programs at once, one a core;
- the calls are interleaved (ours, theirs, theirs, ours, ...); the ratio is the median of
  the per-call ratios, and the best call of each side is reported beside it;
- events: the flow's Poisson events (limit orders, market orders, cancellations; refills
  of an emptied side do not count). Ours are counted by an untimed replay of the timed
  calls through a wrapper that reads the flow's own count (`events_exact` says the replay
  ended in the timed rollout's state); sekai's in one more, untimed call of its loop.

    python benchmarks/lob_speed.py                 # N = 1024, writes benchmarks/results/lob_speed.json
    python benchmarks/lob_speed.py --quick                       # tiny sizes, writes nothing
    python benchmarks/lob_speed.py --cpu-devices 2   # ours as 2 CPU devices of N/2 envs each

The JSON holds the `benchmark` result, the load average before and after, and the CPU time
of the process (user + system) beside the wall time, since the machine may be shared.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path
from typing import Any

from _common import add_cpu_threads_option, apply_cpu_threads

ENV_ID = "LimitOrderBook-v0"
RESULTS = Path(__file__).resolve().parent / "results" / "lob_speed.json"
# --quick: sessions of 2 steps (resets inside the calls), a small book; the sizes of
# tests/test_bench_cli.py's LimitOrderBook-v0 test, so the two share compiled programs
QUICK = {"num_envs": 2, "steps": 3, "repeats": 2, "sekai_envs": 1, "sekai_steps": 2}
QUICK_ENV_KWARGS: dict[str, Any] = {
    "session_length": 2.0,
    "warmup": 1.0,
    "levels": 2,
    "max_trades": 2,
    "capacity": 32,
}


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _load() -> list[float] | None:
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def measure(
    num_envs: int,
    steps: int,
    repeats: int,
    sekai_envs: int,
    sekai_steps: int,
    env_kwargs: dict[str, Any],
    seed: int = 0,
    devices: int = 1,
) -> dict[str, Any]:
    """One comparison, with the machine's state around it."""
    import jax

    from parallax.bench import benchmark

    load_before, cpu_before, wall_before = _load(), _cpu_seconds(), time.perf_counter()
    result = benchmark(
        ENV_ID,
        num_envs,
        steps=steps,
        repeats=repeats,
        compare="sekai",
        seed=seed,
        env_kwargs=env_kwargs,
        progress=False,
        competitor_steps=sekai_steps,
        competitor_envs=sekai_envs,
        devices=devices,
    )
    return {
        "meta": {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "jax": jax.__version__,
            "backend": jax.default_backend(),
            "load_average_before": load_before,
            "load_average_after": _load(),
            "wall_seconds": time.perf_counter() - wall_before,
            "cpu_seconds": _cpu_seconds() - cpu_before,
            "command": " ".join(["python", "benchmarks/lob_speed.py", *sys.argv[1:]]),
        },
        "result": result,
    }


def summary(report: dict[str, Any]) -> str:
    """The lines printed after a run."""
    from parallax.bench import format_table

    r, meta = report["result"], report["meta"]
    best_ours = r["num_envs"] * r["steps"] / min(r["seconds"])
    best_theirs = r["competitor_num_envs"] * r["competitor_steps"] / min(r["competitor_seconds"])
    return "\n".join(
        [
            format_table([r]),
            f"ratio (median of per-call ratios) {r['ratio']:.3g}x; best call vs best call "
            f"{best_ours / best_theirs:.3g}x; events/s ratio {r.get('events_ratio') or 0:.3g}x",
            f"load average {meta['load_average_before']} -> {meta['load_average_after']}; "
            f"cpu {meta['cpu_seconds']:.0f} s in {meta['wall_seconds']:.0f} s wall",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=1024, help="batch size N")
    parser.add_argument("--steps", type=int, default=10, help="our env steps per timed call")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per side")
    parser.add_argument("--sekai-envs", type=int, default=16, help="envs sekai's loop times")
    parser.add_argument("--sekai-steps", type=int, default=50, help="sekai steps per call")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"tiny sizes ({QUICK}, sessions of 2 steps), to check that it runs",
    )
    parser.add_argument(
        "--json",
        default=None,
        help=f"where to write the results (default: {RESULTS.relative_to(RESULTS.parents[2])}; "
        "with --quick, nowhere)",
    )
    add_cpu_threads_option(parser)
    parser.add_argument(
        "--cpu-devices",
        type=int,
        default=1,
        help="ours split over this many CPU devices, each stepping N/K envs alone "
        "(parallax.set_cpu_devices; `parallax bench --cpu-devices`; default 1)",
    )
    args = parser.parse_args(argv)
    for name in ("num_envs", "steps", "repeats", "sekai_envs", "sekai_steps", "cpu_devices"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive int")
    apply_cpu_threads(args)  # before JAX's first computation
    if args.cpu_devices > 1:
        import parallax

        # (JAX may have started, in a test: `benchmark` then checks it has enough devices)
        with contextlib.suppress(RuntimeError):
            parallax.set_cpu_devices(args.cpu_devices)
    sizes = {
        "num_envs": args.num_envs,
        "steps": args.steps,
        "repeats": args.repeats,
        "sekai_envs": args.sekai_envs,
        "sekai_steps": args.sekai_steps,
    }
    env_kwargs: dict[str, Any] = {}
    if args.quick:
        sizes, env_kwargs = dict(QUICK), dict(QUICK_ENV_KWARGS)
    if sizes["num_envs"] % args.cpu_devices:
        parser.error(f"--num-envs must be divisible by --cpu-devices {args.cpu_devices}")
    report = measure(**sizes, env_kwargs=env_kwargs, devices=args.cpu_devices)
    report["meta"]["quick"] = args.quick
    report["meta"]["cpu_threads"] = args.cpu_threads
    report["meta"]["cpu_devices"] = args.cpu_devices
    print(summary(report))
    if args.json is not None or not args.quick:  # a quick check never replaces the results
        out = Path(args.json) if args.json is not None else RESULTS
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1))
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
