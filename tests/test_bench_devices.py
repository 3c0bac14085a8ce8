"""`parallax bench --devices K|all`, the whole-machine path: the batch split over K CPU
devices, timed beside one device in the same run, and `parallax.use_all_cpu_cores`.

The CLI runs in a child process for the device counts it makes (JAX's CPU devices are
fixed when it starts, and conftest gives this process four); the measurement itself, the
table and the argument checks run here. Tiny sizes only; nothing asserts on speed.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from parallax import _cpu
from parallax._bench import main
from parallax.bench import benchmark, format_table

ROOT = Path(__file__).resolve().parents[1]


def _child_env() -> dict[str, str]:
    """A user's environment: one CPU device (no conftest XLA_FLAGS), this suite's compile
    cache (a re-run loads the programs)."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PJRT_NPROC")}
    env["JAX_COMPILATION_CACHE_DIR"] = jax.config.jax_compilation_cache_dir or str(
        ROOT / ".jax_cache"
    )
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    return env


def _bench(*argv: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "parallax._cli", "bench", *argv, "--no-progress"]
    return subprocess.run(
        command, capture_output=True, text=True, env=_child_env(), cwd=ROOT, timeout=300
    )


def _positive(x: object) -> bool:
    return isinstance(x, float) and math.isfinite(x) and x > 0


def _check_figures(r: dict, num_envs: int, steps: int) -> None:
    rates = [num_envs * steps / s for s in r["seconds"]]
    assert r["steps_per_second"] == pytest.approx(statistics.median(rates))
    assert 0 < r["steps_per_second_min"] <= r["steps_per_second"] <= r["steps_per_second_max"]
    assert _positive(r["steps_per_second"]) and r["compile_seconds"] > 0


def test_devices_2_reports_both_figures_with_their_device_counts_and_ratios():
    argv = ["Trading-v0", "--num-envs", "8", "--steps", "6", "--repeats", "3", "--devices", "2"]
    argv += ["--compare", "sekai", "--env-kwarg", "episode_length=4", "--json"]
    done = _bench(*argv)
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)
    one = r["single_device"]
    assert (r["devices"], one["devices"]) == (2, 1)
    _check_figures(r, 8, 6)
    _check_figures(one, 8, 6)
    assert len(r["seconds"]) == len(one["seconds"]) == len(r["competitor_seconds"]) == 3
    # the speed-up is the median of the per-repeat ratios of the split's rate to one device's
    ratios = [s1 / s2 for s1, s2 in zip(one["seconds"], r["seconds"])]
    assert r["speedup_over_single_device"] == pytest.approx(statistics.median(ratios))
    # each has its own ratio to the same sekai calls, per env step
    theirs = r["competitor_num_envs"] * r["competitor_steps"]
    for figures in (r, one):
        pairs = zip(figures["seconds"], r["competitor_seconds"])
        expected = statistics.median((t / theirs) / (o / 48) for o, t in pairs)
        assert _positive(figures["ratio"]) and figures["ratio"] == pytest.approx(expected)
    # the same episodes on both (episodes of 4 steps end inside each 6-step call)
    assert r["episodes_ended"] == one["episodes_ended"] > 0
    # the table puts them side by side: one device first, each row naming its count
    header, first, second, *notes = format_table([r]).splitlines()
    assert header.split()[:3] == ["env", "N", "devices"]
    assert first.split()[:3] == ["Trading-v0", "8", "1"]
    assert second.split()[:3] == ["Trading-v0", "8", "2"]
    assert (
        first.split()[-1] == f"{one['ratio']:.2f}x" and second.split()[-1] == f"{r['ratio']:.2f}x"
    )
    assert any(
        "split over 2 devices" in line and "the steps/s of 1 device" in line for line in notes
    )


def test_devices_all_makes_one_device_a_physical_core():
    cores = _cpu.physical_cores()
    num_envs = 2 * cores
    done = _bench("GridWorld-v0", "--num-envs", str(num_envs), "--steps", "4", "--repeats", "2",
                  "--devices", "all")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"--devices all: {cores} CPU device(s), one a physical core" in done.stderr
    lines = [line.split() for line in done.stdout.splitlines() if line.startswith("GridWorld")]
    rows = [line for line in lines if line[1].isdigit()]
    notes = [" ".join(line) for line in lines if not line[1].isdigit()]
    if cores == 1:  # nothing to split: today's one-device table
        assert [row[:2] for row in rows] == [["GridWorld-v0", str(num_envs)]]
    else:
        assert [row[:3] for row in rows] == [
            ["GridWorld-v0", str(num_envs), "1"],
            ["GridWorld-v0", str(num_envs), str(cores)],
        ]
        assert all(float(row[3].rstrip("kMG")) > 0 for row in rows)
        (note,) = notes
        assert note.startswith(
            f"GridWorld-v0 N={num_envs}: ours split over {cores} devices (2 envs each, "
            "jax.shard_map): "
        )
        assert note.endswith("the steps/s of 1 device (median of the per-repeat ratios)")


def test_a_split_run_times_one_device_beside_it_on_the_same_episodes():
    # conftest gives this process four CPU devices: benchmark() can use two of them here
    assert len(jax.devices()) >= 2
    r = benchmark("GridWorld-v0", 8, steps=5, repeats=3, max_episode_steps=3, progress=False,
                  devices=2, single_device=True)  # fmt: skip
    one = r["single_device"]
    assert r["devices"] == 2 and one["devices"] == 1
    _check_figures(r, 8, 5)
    _check_figures(one, 8, 5)
    assert r["episodes_ended"] == one["episodes_ended"] > 0
    assert "ratio" not in one and "events_per_second" not in one  # nothing compared
    ratios = [s1 / s2 for s1, s2 in zip(one["seconds"], r["seconds"])]
    assert r["speedup_over_single_device"] == pytest.approx(statistics.median(ratios))
    # one device asked for, or single_device off: no second figure
    assert "single_device" not in benchmark(
        "GridWorld-v0", 8, steps=5, repeats=1, progress=False, single_device=True
    )
    assert "single_device" not in benchmark(
        "GridWorld-v0", 8, steps=5, repeats=1, progress=False, devices=2
    )


def test_the_table_has_no_devices_column_without_a_split():
    row = {"env": "X-v0", "num_envs": 8, "steps_per_second": 2e6, "steps_per_second_min": 1e6,
           "steps_per_second_max": 3e6, "compile_seconds": 1.0, "episodes_ended": 0}  # fmt: skip
    assert "devices" not in format_table([row])
    split = {**row, "devices": 4}
    lines = format_table([split]).splitlines()
    assert lines[0].split()[2] == "devices" and lines[1].split()[:3] == ["X-v0", "8", "4"]
    assert "split over 4 devices (2 envs each" in lines[2] and "1 device" not in lines[2]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--devices", "0"], "argument --devices: expected 'all' or an int >= 1"),
        (["--devices", "abc"], "argument --devices: expected 'all' or an int >= 1"),
        (["--devices", "-2"], "argument --devices: expected 'all' or an int >= 1"),
        (["--devices", "1.5"], "argument --devices: expected 'all' or an int >= 1"),
        (["--cpu-devices", "x"], "argument --cpu-devices: expected 'all' or an int >= 1"),
        (["--devices", "3"], "--num-envs 4 is not divisible by --devices 3"),
        (["--devices", "2", "--cpu-devices", "2"], "--devices and --cpu-devices are one option"),
    ],
)
def test_bad_device_counts_are_usage_errors_that_name_the_option(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["GridWorld-v0", "--num-envs", "4", *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "usage: parallax bench" in err and message in err
    if "expected" in message:  # the value given, and the range allowed
        assert f"got {argv[1]!r}" in err
        assert f"'all' is one a physical core, {_cpu.physical_cores()} on this machine" in err


def test_the_help_shows_devices_and_hides_the_old_name(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "--devices K|all" in out and "--cpu-devices" not in out


def test_physical_cores_counts_each_core_once(monkeypatch, tmp_path):
    # four CPUs, two cores of two hardware threads each
    topology = {0: ("0", "0"), 1: ("0", "1"), 2: ("0", "0"), 3: ("0", "1")}
    for cpu, (package, core) in topology.items():
        folder = tmp_path / f"cpu{cpu}" / "topology"
        folder.mkdir(parents=True)
        (folder / "physical_package_id").write_text(package + "\n")
        (folder / "core_id").write_text(core + "\n")
    real = _cpu.Path
    monkeypatch.setattr(
        _cpu, "Path", lambda p: real(str(p).replace("/sys/devices/system/cpu", str(tmp_path)))
    )
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert _cpu.physical_cores() == 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2}, raising=False)
    assert _cpu.physical_cores() == 1  # both threads of one core
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 5}, raising=False)
    assert _cpu.physical_cores() == 4  # no topology for CPU 5: every usable CPU counts


def test_use_all_cpu_cores_refuses_once_jax_has_other_devices():
    have = len(jax.devices("cpu"))
    if _cpu.physical_cores() == have:
        assert _cpu.use_all_cpu_cores() == have  # what JAX already has: nothing to do
    else:
        with pytest.raises(RuntimeError, match="comes too late"):
            _cpu.use_all_cpu_cores()
