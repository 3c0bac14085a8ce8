"""`benchmarks/device_check.py`, the script for a lent GPU: its `--quick` run writes the
documented JSON and the plot, and an env stops where memory or the time budget ends.

The quick run is a child process, as `python benchmarks/device_check.py` runs on the
device, with one CPU device (no conftest XLA_FLAGS). `--quick` measures one size, N = 2^4:
compiling is most of its time (13 programs, the order book's the slowest, compiled at
XLA's -O0), and each size more would add about 15 s on a 2-core machine. Its programs go
into this suite's compile cache; nothing here asserts on speed. The sweep over sizes and
the stopping rules (out of memory, the time budget) run in this process, on a stand-in
for `parallax.bench.benchmark`.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import jax
import pytest
from test_benchmarks import BENCHMARKS, load

# the quick run is a module fixture: its tests on one xdist worker, so it runs once
pytestmark = [
    pytest.mark.xdist_group("device_check"),
    pytest.mark.slow,  # whole benchmark-script runs in subprocesses (`make test-slow`)
]

ENVS = [
    "Trading-v0",
    "Portfolio-v0",
    "MarketMaking-v0",
    "OptimalExecution-v0",
    "gymnax/CartPole-v1",
    "LimitOrderBook-v0",
]
MIN_LOG2 = MAX_LOG2 = 4  # --quick's one size
SIZES = [2**k for k in range(MIN_LOG2, MAX_LOG2 + 1)]
ROW_KEYS = {
    "num_envs", "steps", "steps_per_s", "steps_per_s_min", "steps_per_s_max", "compile_s",
    "reset_s", "state_bytes", "program_bytes", "peak_bytes", "episodes_ended", "error",
}  # fmt: skip


def _finite_positive(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x > 0


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, str]:
    out = tmp_path_factory.mktemp("device_check") / "x.json"
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PJRT_NPROC")}
    env["JAX_COMPILATION_CACHE_DIR"] = jax.config.jax_compilation_cache_dir or str(
        BENCHMARKS.parent / ".jax_cache"
    )
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    command = [sys.executable, str(BENCHMARKS / "device_check.py"), "--quick", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text()), out, done.stdout


def test_quick_run_measures_every_env_at_every_size(quick_run):
    report, _, stdout = quick_run
    assert report["schema"] == 1 and report["quick"] is True and report["stopped"] is None
    assert report["args"] == {
        "budget_s": 300.0, "hard_limit_s": 330.0, "min_log2": MIN_LOG2, "max_log2": MAX_LOG2,
        "repeats": 3, "envs": ENVS,
    }  # fmt: skip
    datetime.datetime.fromisoformat(report["created"])
    assert list(report["envs"]) == ENVS
    for env_id, rows in report["envs"].items():
        assert [r["num_envs"] for r in rows] == SIZES, env_id
        for r in rows:
            assert set(r) == ROW_KEYS and r["error"] is None, (env_id, r)
            assert r["steps"] == 8
            for key in ("steps_per_s", "steps_per_s_min", "steps_per_s_max", "compile_s"):
                assert _finite_positive(r[key]), (env_id, key, r[key])
            assert r["steps_per_s_min"] <= r["steps_per_s"] <= r["steps_per_s_max"]
            assert _finite_positive(r["reset_s"]) and r["state_bytes"] > 0
            assert _finite_positive(r["program_bytes"])
            assert r["peak_bytes"] is None  # the CPU has no device memory statistics
            assert isinstance(r["episodes_ended"], int) and r["episodes_ended"] >= 0
        assert f"{env_id:<20} N=2^{MIN_LOG2}" in stdout
    # the order book's quick sessions last 2 steps: episodes end inside every timed call
    assert all(r["episodes_ended"] > 0 for r in report["envs"]["LimitOrderBook-v0"])
    assert report["wall_s"] > 0


def test_quick_run_has_the_ppo_figure(quick_run):
    ppo = quick_run[0]["ppo"]
    assert ppo["error"] is None and ppo["env"] == "OptimalExecution-v0"
    assert (ppo["num_envs"], ppo["num_updates"], ppo["update_epochs"]) == (16, 3, 2)
    assert ppo["env_steps"] == 3 * 16 * ppo["num_steps"]
    assert _finite_positive(ppo["compile_s"]) and len(ppo["seconds"]) == 2
    assert ppo["steps_per_s"] == pytest.approx(ppo["env_steps"] / statistics.median(ppo["seconds"]))
    assert ppo["updates_per_s"] == pytest.approx(3 / statistics.median(ppo["seconds"]))
    assert ppo["peak_bytes"] is None


def test_quick_run_describes_the_machine(quick_run):
    m = quick_run[0]["machine"]
    assert m["backend"] == "cpu" and m["device_count"] == 1 and len(m["devices"]) == 1
    assert m["memory_limit_bytes"] is None  # memory_stats() is None on the CPU
    assert m["jax_version"] == jax.__version__ and m["jaxlib_version"]
    assert m["cpu_count"] == os.cpu_count() and m["cpu_threads"] is None
    assert m["compilation_cache"]  # the test's: its compile times may be cache loads
    assert m["xla_flags"] == "--xla_backend_optimization_level=0"  # --quick's
    for key in ("load_average_start", "load_average_end"):
        assert len(m[key]) == 3 and all(x >= 0 for x in m[key])
    if Path("/proc/cpuinfo").exists():
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
        assert m["cpu_model"] == model
        assert set(m["cpu_flags"]) == {"avx2", "avx512f", "amx_tile", "amx_bf16", "amx_int8"}
        assert all(isinstance(v, bool) for v in m["cpu_flags"].values())
        assert m["host_memory_bytes"] > 0


def test_quick_run_draws_the_plot_next_to_the_json(quick_run):
    report, out, _ = quick_run
    png = out.with_suffix(".png")
    assert report["plot"] == str(png)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


# -- the stopping rules, on a stand-in for the measurement ----------------------------------
def _fake_result(num_envs: int, steps: int, seconds: float) -> dict:
    rate = num_envs * steps / seconds
    return {
        "steps_per_second": rate, "steps_per_second_min": rate, "steps_per_second_max": rate,
        "compile_seconds": 0.01, "reset_seconds": 0.01, "state_bytes": 10 * num_envs,
        "program_bytes": None, "device_memory": {"peak_bytes_in_use": 100 * num_envs},
        "episodes_ended": 0,
    }  # fmt: skip


def test_an_env_stops_at_the_first_size_that_runs_out_of_memory(monkeypatch):
    import parallax.bench

    device_check = load("device_check")
    seen = []

    def fake(env_id, n, *, steps, **kwargs):
        seen.append(n)
        if n >= 64:
            raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8 GiB")
        return _fake_result(n, steps, 1e-3)

    monkeypatch.setattr(parallax.bench, "benchmark", fake)
    rows = device_check.measure_env(
        "X-v0", [16, 32, 64, 128], repeats=1, quick_steps=4, quick=True, deadline=math.inf
    )
    assert seen == [16, 32, 64]  # nothing tried after the first failure
    assert [r["num_envs"] for r in rows] == [16, 32, 64]
    assert rows[0]["peak_bytes"] == 1600 and rows[0]["program_bytes"] is None
    assert rows[2]["error"].startswith("out of memory: RuntimeError: RESOURCE_EXHAUSTED")
    assert rows[2]["steps_per_s"] is None and rows[2]["compile_s"] is None
    # another error is a failure, not a memory limit
    monkeypatch.setattr(parallax.bench, "benchmark", lambda *a, **k: 1 / 0)
    (row,) = device_check.measure_env(
        "X-v0", [16, 32], repeats=1, quick_steps=4, quick=True, deadline=math.inf
    )
    assert row["error"] == "failed: ZeroDivisionError: division by zero"


def test_an_env_stops_before_a_size_whose_predicted_time_does_not_fit(monkeypatch):
    import time

    import parallax.bench

    device_check = load("device_check")
    seen = []

    def fake(env_id, n, *, steps, **kwargs):
        seen.append(n)
        return _fake_result(n, steps, 5.0 * n / 16)  # "5 s a call" at N = 16 (not slept)

    monkeypatch.setattr(parallax.bench, "benchmark", fake)
    # N = 32 predicts a warm-up and a timed call of 10 s each, and compile and reset: 20 s,
    # over the 15 s left
    common = {"repeats": 1, "quick_steps": 4, "quick": True}
    rows = device_check.measure_env(
        "X-v0", [16, 32, 64], deadline=time.perf_counter() + 15, **common
    )
    assert seen == [16]
    assert rows[0]["error"] is None and rows[1]["num_envs"] == 32
    assert rows[1]["error"].startswith("time budget: predicted 20.0 s")
    assert device_check.predicted_seconds(rows[0], 32, 4, 1) == pytest.approx(1.5 * 0.02 + 20)
    # a first row is not started with less than FIRST_ROW_S left
    (row,) = device_check.measure_env("X-v0", [16], deadline=time.perf_counter() + 5, **common)
    assert seen == [16] and row["error"].startswith("time budget: ")
    assert row["error"].endswith("s left for a first row")


def test_the_watchdog_ends_a_run_that_outlasts_its_hard_limit(monkeypatch, tmp_path):
    import threading

    import parallax.bench

    device_check = load("device_check")
    exits, fired = [], threading.Event()

    class Stopped(BaseException):
        """What stands in for the process's end in the main thread."""

    def fake(env_id, n, *, steps, **kwargs):
        if n == 8:
            return _fake_result(n, steps, 1e-4)
        fired.wait(30)  # a measurement that outlasts the hard limit
        raise Stopped

    monkeypatch.setattr(parallax.bench, "benchmark", fake)
    monkeypatch.setattr(device_check, "_exit", lambda code: (exits.append(code), fired.set()))
    out = tmp_path / "cut.json"
    argv = ["--quick", "--no-ppo", "--envs", "Trading-v0", "--min-log2", "3", "--max-log2", "5"]
    with pytest.raises(Stopped):
        device_check.main([*argv, "--hard-limit-s", "1", "--out", str(out)])
    assert exits == [3]
    report = json.loads(out.read_text())
    assert report["stopped"] == "the watchdog ended the run at 1 s (--hard-limit-s)"
    assert report["args"]["hard_limit_s"] == 1.0
    first, cut = report["envs"]["Trading-v0"]
    assert first["num_envs"] == 8 and first["error"] is None
    assert cut["num_envs"] == 16 and cut["error"] == "time budget: cut off by the watchdog at 1 s"
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("error", "memory"),
    [
        (RuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 123 bytes"), True),
        (RuntimeError("INTERNAL: Failed to allocate request for 2.0GiB on device"), True),
        (MemoryError(), True),
        (ValueError("num_envs must be a positive int"), False),
    ],
)
def test_out_of_memory_reads_the_error(error, memory):
    assert load("device_check").out_of_memory(error) is memory


def test_the_sweep_covers_every_size_and_writes_where_each_env_stopped(monkeypatch, tmp_path):
    import parallax.bench

    device_check = load("device_check")

    def fake(env_id, n, *, steps, **kwargs):
        if env_id == "Portfolio-v0" and n >= 32:
            raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate")
        return _fake_result(n, steps, 1e-4 * n)

    monkeypatch.setattr(parallax.bench, "benchmark", fake)
    out = tmp_path / "sweep" / "d.json"
    argv = ["--quick", "--no-ppo", "--min-log2", "3", "--max-log2", "6", "--out", str(out)]
    assert device_check.main([*argv, "--envs", "Trading-v0", "Portfolio-v0"]) == 0
    report = json.loads(out.read_text())
    assert report["ppo"]["error"] == "skipped: --no-ppo" and report["ppo"]["steps_per_s"] is None
    trading, portfolio = report["envs"]["Trading-v0"], report["envs"]["Portfolio-v0"]
    assert [r["num_envs"] for r in trading] == [8, 16, 32, 64]
    assert all(r["error"] is None and r["steps"] == 8 for r in trading)
    assert [r["num_envs"] for r in portfolio] == [8, 16, 32]
    assert portfolio[-1]["error"].startswith("out of memory:")
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    # a failure that is not memory or time is the exit status 1, the JSON still written
    monkeypatch.setattr(parallax.bench, "benchmark", lambda *a, **k: 1 / 0)
    assert device_check.main([*argv, "--envs", "Trading-v0"]) == 1
    (row,) = json.loads(out.read_text())["envs"]["Trading-v0"]
    assert row["error"].startswith("failed: ZeroDivisionError")
