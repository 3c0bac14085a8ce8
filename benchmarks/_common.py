"""What the benchmark scripts share: the finance envs' short-episode settings.

Episodes of 50 steps (25 for OptimalExecution-v0) end many times inside a timed run, so
every benchmark of the finance envs measures the auto-reset too. The scripts run as
`python benchmarks/<name>.py`, which puts this folder on `sys.path`.
"""

from __future__ import annotations

from typing import Any

ENV_KWARGS: dict[str, dict[str, Any]] = {
    "Trading-v0": {"episode_length": 50},
    "Portfolio-v0": {"episode_length": 50},
    "MarketMaking-v0": {"n_steps": 50},
    "OptimalExecution-v0": {"n_steps": 25},
}
