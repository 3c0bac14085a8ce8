"""What the benchmark scripts share: the finance envs' short-episode settings, the
`--cpu-threads` option (`add_cpu_threads_option`, then `apply_cpu_threads` before JAX's
first computation), `interleaved_seconds` for timing programs against each other, and the
`--json` result files (`write_json`; `run_meta` and `write_results` for the files with a
`meta` block).

Episodes of 50 steps (25 for OptimalExecution-v0) end many times inside a timed run, so
every benchmark of the finance envs measures the auto-reset too. The scripts run as
`python benchmarks/<name>.py`, which puts this folder on `sys.path`.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV_KWARGS: dict[str, dict[str, Any]] = {
    "Trading-v0": {"episode_length": 50},
    "Portfolio-v0": {"episode_length": 50},
    "MarketMaking-v0": {"n_steps": 50},
    "OptimalExecution-v0": {"n_steps": 25},
}


def add_cpu_threads_option(parser: argparse.ArgumentParser) -> None:
    """Add `--cpu-threads K`, the size of XLA:CPU's thread pool."""
    parser.add_argument(
        "--cpu-threads",
        type=int,
        default=None,
        help="XLA:CPU's thread pool size (parallax.set_cpu_threads; default: one per CPU)",
    )


def apply_cpu_threads(args: argparse.Namespace) -> None:
    """Size XLA:CPU's pool as `--cpu-threads` asks; call it before JAX's first computation."""
    if args.cpu_threads is not None:
        import parallax

        parallax.set_cpu_threads(args.cpu_threads)


def interleaved_seconds(
    programs: dict[str, Callable[[], Any]], rounds: int
) -> dict[str, list[float]]:
    """Seconds of `rounds` calls of each program (to its results being ready), one call of
    every program per round, so that a drift in the machine's speed hits them all alike."""
    import jax

    seconds: dict[str, list[float]] = {name: [] for name in programs}
    for _ in range(rounds):
        for name, program in programs.items():
            start = time.perf_counter()
            jax.block_until_ready(program())
            seconds[name].append(time.perf_counter() - start)
    return seconds


def write_json(path: str | None, data: Any, *, indent: int) -> None:
    """Write `data` to `path` as JSON indented by `indent`; nothing when `path` is empty."""
    if path:
        with open(path, "w") as f:
            json.dump(data, f, indent=indent)


def run_meta() -> dict[str, Any]:
    """The JAX version and backend, CPU count and load average of this run."""
    import jax

    return {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def write_results(path: str, payload: Any) -> None:
    """Write `payload` to `path` (making its folder) as JSON indented by 2, and say so."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=2))
    print(f"wrote {path}")
