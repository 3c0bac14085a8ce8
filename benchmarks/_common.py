"""What the benchmark scripts share: the finance envs' short-episode settings, and the
`--cpu-threads` option (`add_cpu_threads_option`, then `apply_cpu_threads` before JAX's
first computation).

Episodes of 50 steps (25 for OptimalExecution-v0) end many times inside a timed run, so
every benchmark of the finance envs measures the auto-reset too. The scripts run as
`python benchmarks/<name>.py`, which puts this folder on `sys.path`.
"""

from __future__ import annotations

import argparse
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
