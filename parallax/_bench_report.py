"""What `parallax bench` shows: the table, and the steps/s-vs-N plot of `--scaling`.

- `format_table(results)`: one row per measurement (and the competitor's columns; with a
  batch split over several devices, a `devices` column and the one-device row beside it);
- `plot_scaling(results, path)`: a log-log plot of env steps/s against `num_envs`;
- `SCALING_SIZES`: the batch sizes `parallax bench ID --scaling` measures by default.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import jax

__all__ = ["SCALING_SIZES", "format_table", "plot_scaling"]

SCALING_SIZES = (1, 4, 16, 64, 256, 1024, 4096)


def plot_scaling(results: Sequence[dict[str, Any]], path: str | os.PathLike[str]) -> str:
    """Save a log-log plot of env steps/s against `num_envs` (median, min..max band).

    Args:
        results: `benchmark` results of one env at several batch sizes.
        path: the image file to write (its suffix picks the format, e.g. `.png`).

    Returns:
        The path written, as a string.

    Raises:
        ImportError: matplotlib is not installed (it is in the `test` and `docs` extras).
    """
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ModuleNotFoundError as error:
        raise ImportError(
            "parallax bench --scaling draws its plot with matplotlib, which is not installed: "
            "pip install matplotlib"
        ) from error
    rows = sorted(results, key=lambda r: r["num_envs"])
    n = [r["num_envs"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.fill_between(
        n,
        [r["steps_per_second_min"] for r in rows],
        [r["steps_per_second_max"] for r in rows],
        alpha=0.25,
        label="min..max over repeats",
    )
    ax.plot(n, [r["steps_per_second"] for r in rows], "o-", label=rows[0]["env"] + " (median)")
    if any("competitor_steps_per_second" in r for r in rows):
        theirs = [r for r in rows if "competitor_steps_per_second" in r]
        ax.plot(
            [r["num_envs"] for r in theirs],
            [r["competitor_steps_per_second"] for r in theirs],
            "s--",
            label=str(theirs[0]["competitor"]),
        )
    device = jax.devices()[0]
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="num_envs",
        ylabel="env steps / s",
        title=f"{rows[0]['env']} on {device.platform.upper()} ({device.device_kind})",
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)


def _fmt_rate(x: float | None) -> str:
    if x is None:
        return "-"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f}{unit}"
    return f"{x:.0f}"


def _rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The table rows of one result: the one-device figures first when the run timed them
    beside a split (`single_device`), then the result's own (its `devices`)."""
    one = result.get("single_device")
    if one is None:
        return [result]
    shown = {**result, **one}  # the competitor's figures are the same for both rows
    if "ratio" not in one:
        shown.pop("ratio", None)
    return [shown, result]


def format_table(results: Sequence[dict[str, Any]]) -> str:
    """A table for people: one row per measurement.

    A result whose batch was split over several devices (`devices` > 1) adds a `devices`
    column; when the same run also timed one device (`single_device`), that row comes
    first, so the one-device and the whole-machine figures (and ratios) stand side by side,
    each with its device count, and a line gives the speed-up.

    Example:
        >>> from parallax.bench import format_table
        >>> row = {"env": "GridWorld-v0", "num_envs": 4, "steps_per_second": 1e6,
        ...        "steps_per_second_min": 9e5, "steps_per_second_max": 1.1e6,
        ...        "compile_seconds": 0.5, "episodes_ended": 3}
        >>> print(format_table([row]).splitlines()[1])
        GridWorld-v0             4      1.00M  900.00k..1.10M      0.50         3
    """
    split = any(r.get("devices", 1) > 1 for r in results)
    devices = f" {'devices':>7}" if split else ""
    header = (
        f"{'env':<20} {'N':>5}{devices} {'steps/s':>10} {'min..max':>15} {'compile s':>9} "
        f"{'episodes':>9}"
    )
    compare = any("competitor" in r for r in results)
    if compare:
        header += f"  {'competitor':<14} {'steps/s':>10} {'ratio':>8}"
    lines = [header]
    for r in (row for result in results for row in _rows(result)):
        spread = f"{_fmt_rate(r['steps_per_second_min'])}..{_fmt_rate(r['steps_per_second_max'])}"
        devices = f" {r.get('devices', 1):>7}" if split else ""
        line = (
            f"{r['env']:<20} {r['num_envs']:>5}{devices} {_fmt_rate(r['steps_per_second']):>10} "
            f"{spread:>15} {r['compile_seconds']:>9.2f} {r['episodes_ended']:>9}"
        )
        if compare and "competitor" in r:
            ratio = f"{r['ratio']:.2f}x" if "ratio" in r else "error"
            line += (
                f"  {r['competitor']:<14} "
                f"{_fmt_rate(r.get('competitor_steps_per_second')):>10} {ratio:>8}"
            )
        lines.append(line)
    for r in results:
        if "events_per_second" in r:
            line = (
                f"{r['env']} N={r['num_envs']}: flow events/s {_fmt_rate(r['events_per_second'])} "
                f"({r['events_per_step']:.1f} per env step)"
            )
            one = r.get("single_device", {})
            if "events_per_second" in one:
                line += (
                    f" on {r['devices']} devices, {_fmt_rate(one['events_per_second'])} on 1 device"
                )
            if "competitor_events_per_second" in r:
                line += (
                    f", {r['competitor']} {_fmt_rate(r['competitor_events_per_second'])} "
                    f"({r['competitor_events_per_step']:.1f} per env step)"
                )
            lines.append(line)
        if "competitor_note" in r:
            lines.append(f"{r['competitor']}: {r['competitor_note']}")
        if r.get("devices", 1) > 1:
            line = (
                f"{r['env']} N={r['num_envs']}: ours split over {r['devices']} devices "
                f"({r['num_envs'] // r['devices']} envs each, jax.shard_map)"
            )
            if "speedup_over_single_device" in r:
                line += (
                    f": {r['speedup_over_single_device']:.2f}x the steps/s of 1 device "
                    "(median of the per-repeat ratios)"
                )
            lines.append(line)
    for r in results:
        if "competitor_error" in r:
            lines.append(f"{r['competitor']} N={r['num_envs']}: {r['competitor_error']}")
    return "\n".join(lines)
