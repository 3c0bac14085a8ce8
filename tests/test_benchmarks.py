"""The scripts in `benchmarks/` run and report what they claim, at tiny sizes.

Nothing here asserts on speed: only that the comparisons count the same work on both
sides and that the profile reads the compiled program correctly.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
from pathlib import Path
from types import ModuleType

import jax
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str) -> ModuleType:
    if str(BENCHMARKS) not in sys.path:  # as `python benchmarks/<name>.py` has it
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_profile_step_counts_the_reset_conditional_only_in_the_auto_resetting_stack(
    tmp_path: Path,
) -> None:
    out = tmp_path / "profile.json"
    profile_step = load("profile_step")
    argv = ["Trading-v0", "--num-envs", "8", "--steps", "12", "--repeats", "1", "--top", "3"]
    assert profile_step.main([*argv, "--json", str(out)]) == 0
    (result,) = json.loads(out.read_text())
    full, bare = result["full"], result["bare"]
    # the no-reset path of make_vec's step runs inside one conditional; vmap(step) has none
    assert full["kernels_per_step"].get("conditional") == 1
    assert "conditional" not in bare["kernels_per_step"]
    assert sum(full["kernels_per_step"].values()) > sum(bare["kernels_per_step"].values())
    for part in (full, bare):
        top = part["profile"]["top"]
        assert 1 <= len(top) <= 3
        assert all(0.0 < k["share"] <= 1.0 and k["what"] for k in top)
        assert [k["share"] for k in top] == sorted((k["share"] for k in top), reverse=True)
    assert full["profile"]["conditional_share"] > 0.0
    assert bare["profile"]["conditional_share"] == 0.0


def test_kernels_per_step_rejects_a_program_without_that_scan() -> None:
    profile_step = load("profile_step")
    with pytest.raises(RuntimeError, match="no while loop with 7 iterations"):
        profile_step.kernels_per_step("ENTRY %main () -> f32[] {\n}\n", 7)


def test_finance_vs_sekai_times_the_same_episodes_on_both_sides(tmp_path: Path) -> None:
    pytest.importorskip("sekai", reason="sekai is a test extra (pip install parallax-rl[test])")
    out = tmp_path / "fvs.json"
    finance_vs_sekai = load("finance_vs_sekai")
    argv = ["--ids", "Trading-v0", "--num-envs", "4", "--steps", "100", "--sekai-steps", "100"]
    argv += ["--min-seconds", "1e9", "--rounds", "1", "--json", str(out)]
    assert finance_vs_sekai.main(argv) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["id"] == "Trading-v0" and row["num_envs"] == 4
    (round_,) = row["rounds"]
    ours, native = round_["parallax"], round_["sekai_native"]
    assert ours["steps"] == native["steps"] == 100
    # 50-step episodes: every env ends two inside the 100 steps, on both sides
    assert ours["episodes_ended"] == native["episodes_ended"] == 4 * 2
    assert row["ratio_vs_native"] == pytest.approx(
        ours["steps_per_s"] / native["steps_per_s"], rel=1e-9
    )


@pytest.mark.xdist_group("lob_bench")  # with test_bench_cli's LOB tests: the same programs
@pytest.mark.slow  # two whole `--quick` runs of the book's benchmark (`make test-slow`)
def test_lob_speed_writes_the_comparison_with_the_machines_load(tmp_path: Path) -> None:
    out = tmp_path / "lob.json"
    lob_speed = load("lob_speed")
    assert lob_speed.main(["--quick", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    meta, r = report["meta"], report["result"]
    assert meta["quick"] is True and len(meta["load_average_before"]) == 3
    assert meta["cpu_seconds"] > 0 and meta["wall_seconds"] > 0
    assert r["env"] == "LimitOrderBook-v0" and r["env_kwargs"] == lob_speed.QUICK_ENV_KWARGS
    assert r["competitor"] == "sekai loop" and r["competitor_ignored_env_kwargs"] == ["capacity"]
    assert (r["num_envs"], r["steps"], r["repeats"]) == (2, 3, 2)
    assert (r["competitor_num_envs"], r["competitor_steps"]) == (1, 2)
    assert r["ratio"] > 0 and r["events_exact"] is True
    assert r["events_per_step"] > 0 and r["competitor_events_per_step"] > 0
    assert "flow events/s" in lob_speed.summary(report)
    # split over two CPU devices (conftest gives this process four): the same events, and
    # the split rollout ends in the one-device state (`events_exact`)
    assert lob_speed.main(["--quick", "--cpu-devices", "2", "--json", str(out)]) == 0
    split = json.loads(out.read_text())
    assert split["meta"]["cpu_devices"] == 2 and split["result"]["devices"] == 2
    assert split["result"]["events_exact"] is True
    assert split["result"]["events_per_call"] == r["events_per_call"]
    assert "split over 2 devices" in lob_speed.summary(split)


def test_exports_overhead_runs_every_export_against_the_bare_env() -> None:
    exports = load("exports_overhead")
    result = exports.measure("OptimalExecution-v0", 4, steps=6, repeats=1)
    assert result["parallax"]["steps_per_second"] > 0 and "ratio" not in result["parallax"]
    for variant in ("per-env", "gymnax", "brax", "jumanji"):
        assert result[variant]["steps_per_second"] > 0 and result[variant]["ratio"] > 0
    # every variant advanced its own copies of the env (the carries are real rollouts)
    first, run = exports.build("gymnax", "OptimalExecution-v0", 4, 6)
    states = run(first, jax.random.key(0))[0]
    assert int(states.parallax_state.step_count.max()) > 0


def test_autoreset_compositions_times_every_composition_on_the_same_episodes(
    tmp_path: Path,
) -> None:
    bench = load("autoreset_compositions")
    out = tmp_path / "compositions.json"
    argv = ["--envs", "GridWorld-v0", "--sizes", "64", "--steps", "60", "--rounds", "1"]
    results = bench.main([*argv, "--json", str(out)])
    assert json.loads(out.read_text())["cases"].keys() == {"GridWorld-v0/N=64"}
    row = results["cases"]["GridWorld-v0/N=64"]
    assert set(bench.COMPOSITIONS) <= set(row)
    assert row["episodes_ended"]["per_call"] >= 64  # the time limit of 50 ended every episode
    for composition in bench.COMPOSITIONS:
        assert row[composition]["median_steps_per_s"] > 0
    assert row[bench.REFERENCE]["median_ratio"] == 1.0
    for bare in bench.BARE:  # the no-reset programs that bound the nested ones
        assert row[bare]["median_steps_per_s"] > 0
    assert row["nested_ceiling"]["median_ratio"] > 0
    assert "| GridWorld-v0 | 64 |" in bench.table(results)


def test_competitors_refuse_what_they_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    competitors = load("competitors")
    common = {"autoreset": True, "max_episode_steps": None, "seed": 0, "env_kwargs": {}}
    with pytest.raises(ValueError, match="name must be one of"):
        competitors.make_runner("gym", "GridWorld-v0", 2, 4, sample=None, **common)
    for name in ("gymnax", "parallax-rl"):
        with pytest.raises(ValueError, match="'gymnax/NAME' id, got 'GridWorld-v0'"):
            competitors.make_runner(
                name, "GridWorld-v0", 2, 4, sample=None, parallax_rl_python="x", **common
            )
    monkeypatch.delenv("PARALLAX_RL_PYTHON", raising=False)
    with pytest.raises(ValueError, match="--parallax-rl-python PATH"):
        competitors.make_runner("parallax-rl", "gymnax/CartPole-v1", 2, 4, sample=None, **common)


def test_the_parallax_rl_worker_reports_a_failure_to_the_runner() -> None:
    # Our own interpreter is not a parallax-rl 0.4.0 venv: the worker file starts (isolated,
    # by path) and fails on a 0.4.0-only module, and the runner says so.
    competitors = load("competitors")
    runner = competitors.make_runner(
        "parallax-rl",
        "gymnax/CartPole-v1",
        2,
        4,
        autoreset=True,
        max_episode_steps=None,
        seed=0,
        env_kwargs={},
        sample=None,
        parallax_rl_python=sys.executable,
    )
    assert runner.cfg["name"] == "CartPole-v1" and runner.cfg["max_episode_steps"] == 500
    try:
        with pytest.raises(
            RuntimeError,
            match=r"parallax-rl worker .* stopped: .*No module named 'parallax\.(adapters|wrappers)",
        ):
            runner.prepare()
    finally:
        runner.close()
    assert runner.worker is None


def test_thread_handoffs_runs_each_pool_size_in_its_own_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("reads per-thread counters from /proc")
    monkeypatch.delenv("XLA_FLAGS", raising=False)  # one CPU device, as a user has
    out = tmp_path / "handoffs.json"
    handoffs = load("thread_handoffs")
    argv = ["--envs", "GridWorld-v0", "--num-envs", "8", "--steps", "16", "--calls", "2"]
    assert handoffs.main([*argv, "--threads", "1", "--json", str(out)]) == 0
    default, one = json.loads(out.read_text())
    assert [default["threads"], one["threads"]] == [None, 1]
    # each child sized XLA's pool as asked (the default: one thread per usable CPU)
    assert one["pool_threads"] == 1
    assert default["pool_threads"] == len(os.sched_getaffinity(0))
    # CPU time comes in clock ticks: on a coarse clock a call this small may count 0, and the
    # ratios are then NaN rather than an error
    if default["cpu_ms_per_call"] > 0:
        assert default["cpu_vs_default"] == 1.0
        assert one["cpu_vs_default"] == one["cpu_ms_per_call"] / default["cpu_ms_per_call"]
    else:
        assert math.isnan(default["cpu_vs_default"]) and math.isnan(one["cpu_vs_default"])
    for row in (default, one):
        assert len(row["calls"]) == 2 and row["steps"] == 16 and row["num_envs"] == 8
        assert all(c["cpu_s"] >= 0 and c["wall_s"] > 0 for c in row["calls"])
        assert row["busy_threads_last_call"]  # some thread of the child ran the last call
