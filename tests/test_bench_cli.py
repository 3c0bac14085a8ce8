"""`parallax bench`: the JSON and table outputs, the sekai comparison, argument checks, and
the random-action sampler. Tiny sizes only; nothing here asserts on speed."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import parallax
from parallax import _bench_timing, _cli, random_actions, rng, spaces
from parallax._bench import main
from parallax.bench import benchmark, format_table, tree_bytes

ROOT = Path(__file__).resolve().parents[1]

KEYS = {
    "env",
    "num_envs",
    "steps",
    "repeats",
    "dtype",
    "steps_per_second",
    "steps_per_second_min",
    "steps_per_second_max",
    "seconds",
    "compile_seconds",
    "episodes_ended",
    "state_bytes",
    "peak_rss_bytes",
}
COMPARE_KEYS = {
    "competitor",
    "competitor_steps_per_second",
    "competitor_steps_per_second_min",
    "competitor_steps_per_second_max",
    "competitor_seconds",
    "competitor_episodes_ended",
    "ratio",
}


def _check_rates(result: dict, prefix: str = "") -> None:
    seconds = result[f"{prefix}seconds"]
    assert len(seconds) == result["repeats"] and all(s > 0 for s in seconds)
    rates = [result["num_envs"] * result["steps"] / s for s in seconds]
    assert result[f"{prefix}steps_per_second"] == pytest.approx(statistics.median(rates))
    assert result[f"{prefix}steps_per_second_min"] == pytest.approx(min(rates))
    assert result[f"{prefix}steps_per_second_max"] == pytest.approx(max(rates))
    assert 0 < min(rates) <= statistics.median(rates) <= max(rates)


def test_json_is_one_object_with_the_measurement_in_float64(capsys):
    # --dtype float64 turns x64 on for the run (float32 runs: the sekai test below)
    dtype = "float64"
    args = ["GridWorld-v0", "--num-envs", "3", "--steps", "6", "--repeats", "2"]
    code = main([*args, "--max-episode-steps", "3", "--dtype", dtype, "--json", "--no-progress"])
    assert code == 0
    r = json.loads(capsys.readouterr().out)
    assert isinstance(r, dict) and set(r) >= KEYS and not COMPARE_KEYS & set(r)
    assert r["env"] == "GridWorld-v0" and r["num_envs"] == 3 and r["steps"] == 6
    assert r["dtype"] == dtype
    _check_rates(r)
    assert r["compile_seconds"] > 0 and r["state_bytes"] > 0 and r["peak_rss_bytes"] > 0
    # a 3-step time limit ends every episode twice in 6 steps, on each of 2 repeats
    assert r["episodes_ended"] == 2 * 2 * 3


def test_the_parallax_command_prints_one_table_row_per_batch_size(capsys):
    argv = ["bench", "GridWorld-v0", "--num-envs", "1", "2", "--steps", "2", "--repeats", "1"]
    assert _cli.main([*argv, "--no-autoreset", "--no-progress"]) == 0
    header, *rows = capsys.readouterr().out.strip().splitlines()
    assert header.split()[:3] == ["env", "N", "steps/s"]
    assert [row.split()[:2] for row in rows] == [["GridWorld-v0", "1"], ["GridWorld-v0", "2"]]


def test_several_batch_sizes_give_a_json_list_in_order(capsys, monkeypatch):
    # The measurement itself is tested above; this checks how main() reports several N.
    from parallax import _bench

    def fake_benchmark(env_id, num_envs, **kwargs):
        return {"env": env_id, "num_envs": num_envs, "steps_per_second": float(num_envs)}

    monkeypatch.setattr(_bench, "benchmark", fake_benchmark)
    assert main(["GridWorld-v0", "--num-envs", "3", "1", "2", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert [r["num_envs"] for r in results] == [3, 1, 2]
    assert main(["GridWorld-v0", "--num-envs", "5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_envs"] == 5


def test_compare_sekai_on_a_finance_env(capsys):
    code = main(
        [
            "Trading-v0",
            "--num-envs",
            "4",
            "--steps",
            "8",
            "--repeats",
            "2",
            "--compare",
            "sekai",
            "--env-kwarg",
            "episode_length=5",
            "--json",
            "--no-progress",
        ]
    )
    assert code == 0
    r = json.loads(capsys.readouterr().out)
    assert isinstance(r, dict) and set(r) >= KEYS | COMPARE_KEYS
    assert r["env"] == "Trading-v0" and r["competitor"] == "sekai native"
    assert r["dtype"] == "float32"
    assert r["env_kwargs"] == {"episode_length": 5}
    _check_rates(r)
    _check_rates(r, "competitor_")
    pairs = zip(r["seconds"], r["competitor_seconds"])
    assert r["ratio"] == pytest.approx(statistics.median(t / o for o, t in pairs))
    # episodes of 5 steps end inside the 16 timed steps, on both sides
    assert r["episodes_ended"] > 0 and r["competitor_episodes_ended"] > 0


# the LOB's programs take long to compile: these tests and test_benchmarks' lob_speed test
# build the same env at the same sizes, in one worker, so all but the first load them
LOB_GROUP = pytest.mark.xdist_group("lob_bench")


@LOB_GROUP
@pytest.mark.slow  # a whole `parallax bench --compare sekai` run on the book (`make test-slow`)
def test_compare_sekai_on_the_limit_order_book_counts_the_flow_events(capsys):
    # sekai has no native vector env for it: 1 of our 2 envs is timed in its Python loop.
    # Sessions of 2 steps, so resets (and their warm-ups) happen inside the timed calls.
    kwargs = ["session_length=2.0", "warmup=1.0", "levels=2", "max_trades=2", "capacity=32"]
    argv = ["LimitOrderBook-v0", "--num-envs", "2", "--steps", "3", "--repeats", "2"]
    argv += ["--compare", "sekai", "--competitor-envs", "1", "--competitor-steps", "2"]
    argv += [arg for kwarg in kwargs for arg in ("--env-kwarg", kwarg)]
    assert main([*argv, "--json", "--no-progress"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert set(r) >= KEYS | COMPARE_KEYS
    assert r["competitor"] == "sekai loop" and "Python loop" in r["competitor_note"]
    assert r["competitor_num_envs"] == 1 and r["competitor_steps"] == 2
    _check_rates(r)
    their_rates = [2 / s for s in r["competitor_seconds"]]  # 1 env x 2 steps per call
    assert r["competitor_steps_per_second"] == pytest.approx(statistics.median(their_rates))
    # the ratio is per env step: their seconds per env step over ours, median of the calls
    pairs = zip(r["seconds"], r["competitor_seconds"])
    assert r["ratio"] == pytest.approx(statistics.median((t / 2) / (o / 6) for o, t in pairs))
    assert r["episodes_ended"] > 0 and r["competitor_episodes_ended"] > 0
    # events: the replay ran the timed trajectory again, and its counts add up
    assert r["events_exact"] is True
    assert len(r["events_per_call"]) == 2 and sum(r["events_per_call"]) == r["events"]
    assert r["events_per_step"] == pytest.approx(r["events"] / (2 * 2 * 3))
    rates = [e / s for e, s in zip(r["events_per_call"], r["seconds"])]
    assert r["events_per_second"] == pytest.approx(statistics.median(rates))
    theirs = r["competitor_events_per_step"] * r["competitor_steps_per_second"]
    assert r["competitor_events_per_second"] == pytest.approx(theirs)
    assert r["events_ratio"] == pytest.approx(r["events_per_second"] / theirs)
    # sekai's default flow: 24 + 0.5 n events per unit of time with n resting orders, and
    # 2 units of session per 1 unit of warm-up; both sides count the same kind of event
    for per_step in (r["events_per_step"], r["competitor_events_per_step"]):
        assert 24 * 1.5 <= per_step <= 150
    assert 0.5 < r["events_per_step"] / r["competitor_events_per_step"] < 2
    table = format_table([r])
    assert "flow events/s" in table and "per env step" in table


@LOB_GROUP
@pytest.mark.slow  # the book's reset, step and flow run op by op (`make test-slow`)
def test_flow_event_counter_reads_the_events_of_the_steps_flow():
    from parallax.finance._lob import FlowParams, run_flow

    competitors = _bench_timing.load_competitors("sekai")
    env = parallax.make(
        "LimitOrderBook-v0", session_length=2.0, warmup=1.0, levels=2, max_trades=2, capacity=32
    )
    counted = competitors.FlowEventCounter(env)
    state = counted.reset(key=jax.random.key(3))
    step = counted.step(state, jnp.array([0, 0, 1]))  # no quote, no market order
    # the same interval of the flow on the same book, run directly
    book, stats = run_flow(
        state.env_state.book, FlowParams(), state.env_state.episode_key, 1, 1.0, 2.0,
        max_events=env.max_events, max_trades=env.max_trades, num_agents=1,
    )  # fmt: skip
    assert int(step.info["flow_events"]) == int(stats.events) > 0
    assert np.array_equal(np.asarray(step.env_state.book.seq), np.asarray(book.seq))
    assert int(state.info["flow_events"]) > 0  # the reset's warm-up
    assert "flow_events" not in env.step(state, jnp.array([0, 0, 1])).info  # the env is untouched


def test_the_competitors_come_from_the_checkouts_benchmarks_folder():
    module = _bench_timing.load_competitors("sekai")
    assert Path(module.__file__) == ROOT / "benchmarks" / "competitors.py"
    assert set(module.NAMES) == set(_bench_timing.COMPETITORS)
    assert _bench_timing.load_competitors("gymnax") is module  # loaded once
    import parallax

    # the package itself holds no competitor: no sekai, no subprocess, no code in strings
    package = Path(parallax.__file__).parent
    for path in package.rglob("_bench*.py"):
        text = path.read_text()
        assert "import sekai" not in text and "subprocess" not in text, path


def test_compare_without_a_checkout_says_how_to_run_it(capsys, monkeypatch):
    # as from an installed wheel: no benchmarks/ next to the package nor in the cwd
    monkeypatch.setattr(_bench_timing, "_checkout_roots", lambda: [])
    monkeypatch.delitem(sys.modules, "benchmarks.competitors", raising=False)
    argv = ["GridWorld-v0", "--compare", "sekai", "--num-envs", "2", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "parallax bench: error: --compare sekai needs the competitors' runners" in err
    assert "benchmarks/" in err and "git clone https://" in err and "pip install -e" in err
    with pytest.raises(ImportError, match="--compare gymnax"):
        benchmark("GridWorld-v0", 2, compare="gymnax", progress=False)


def test_checkout_roots_are_folders_with_a_pyproject(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not a checkout: only the one this package comes from
    assert _bench_timing._checkout_roots() == [ROOT]
    (tmp_path / "pyproject.toml").write_text("")
    assert _bench_timing._checkout_roots() == [ROOT, tmp_path]


def test_tree_bytes_counts_every_array_and_key_data(x64):
    tree = {
        "a": jnp.zeros((4, 3), jnp.float32),
        "b": (jnp.int32(1), np.zeros(5, np.float64)),
        "keys": jax.random.split(jax.random.key(0), 6),
        "none": None,
    }
    key_bytes = jax.random.key_data(tree["keys"]).nbytes
    assert key_bytes > 0
    assert tree_bytes(tree) == 4 * 3 * 4 + 4 + 5 * 8 + key_bytes
    assert tree_bytes({}) == 0


def test_a_bad_id_or_competitor_exits_with_status_2(capsys):
    assert main(["NoSuchEnv-v0", "--num-envs", "2", "--no-progress"]) == 2
    assert "NoSuchEnv-v0" in capsys.readouterr().err
    assert main(["GridWorld-v0", "--compare", "sekai", "--num-envs", "2", "--no-progress"]) == 2
    assert "sekai" in capsys.readouterr().err
    assert main(["GridWorld-v0", "--compare", "gymnax", "--num-envs", "2", "--no-progress"]) == 2
    assert "gymnax/NAME" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["GridWorld-v0", "--num-envs", "0"],
        ["GridWorld-v0", "--steps", "-1"],
        ["GridWorld-v0", "--repeats", "x"],
        ["GridWorld-v0", "--compare", "gym"],
        ["GridWorld-v0", "--dtype", "float16"],
        ["GridWorld-v0", "--env-kwarg", "no_equals_sign"],
    ],
)
def test_invalid_arguments_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "usage: parallax bench" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"num_envs": 0}, "num_envs"),
        ({"steps": 0}, "steps"),
        ({"repeats": 0}, "repeats"),
        ({"compare": "gym"}, "compare"),
        ({"max_episode_steps": 0}, "max_episode_steps"),
        ({"competitor_steps": 0}, "competitor_steps"),
    ],
)
def test_benchmark_validates_its_arguments(kwargs, name):
    args = {"num_envs": 2, **kwargs}
    with pytest.raises(ValueError, match=name):
        benchmark("GridWorld-v0", **args)


def test_random_actions_validates_num_envs():
    with pytest.raises(ValueError, match="num_envs"):
        random_actions(spaces.Discrete(2), 0)


ACTION_SPACES = {
    "discrete": spaces.Discrete(3),
    "discrete-shaped": spaces.Discrete(2, shape=(3,)),
    "box": spaces.Box(np.array([-1.0, 0.0]), np.array([1.0, 5.0])),
    "box-half-open": spaces.Box(np.array([0.0, -np.inf]), np.array([np.inf, 1.0])),
    "box-unbounded": spaces.Box(-np.inf, np.inf, (2, 2)),
    "box-float64": spaces.Box(0.0, 1.0, (2,), dtype=np.float64),
    "multi-discrete": spaces.MultiDiscrete([2, 5, 3]),
    "multi-binary": spaces.MultiBinary(4),
    "tree": spaces.PyTreeSpace({"move": spaces.Discrete(4), "size": spaces.Box(0.0, 1.0, (1,))}),
}


def test_random_actions_lie_in_their_space_and_vary(x64):
    # every kind of space at once (one compile): a PyTreeSpace of all of them
    space, n = spaces.PyTreeSpace(ACTION_SPACES), 64
    sample = jax.jit(random_actions(space, n))
    ek = rng.episode_key(jax.random.key(3))
    first, second = sample(ek, jnp.uint32(0)), sample(ek, jnp.uint32(1))
    for name, leaf_space in ACTION_SPACES.items():
        for actions in (first[name], second[name]):
            assert all(leaf.shape[0] == n for leaf in jax.tree.leaves(actions)), name
            inside = jax.vmap(leaf_space.contains)(actions)
            assert inside.shape == (n,) and bool(inside.all()), name
        flat_first = np.concatenate([np.ravel(x) for x in jax.tree.leaves(first[name])])
        flat_second = np.concatenate([np.ravel(x) for x in jax.tree.leaves(second[name])])
        assert not np.array_equal(flat_first, flat_second), name  # a new step, new actions
        assert len(np.unique(flat_first)) > 1, name  # not one value for every env


def test_random_actions_of_a_single_space_have_the_batch_shape_and_dtype():
    sample = random_actions(spaces.Box(-1.0, 1.0, (2, 3)), 5)
    actions = sample(rng.episode_key(jax.random.key(0)), jnp.uint32(7))
    assert actions.shape == (5, 2, 3) and actions.dtype == jnp.float32


def test_format_table_has_a_competitor_column_only_when_compared():
    row = {
        "env": "X-v0",
        "num_envs": 8,
        "steps_per_second": 2.5e6,
        "steps_per_second_min": 2e6,
        "steps_per_second_max": 3e6,
        "compile_seconds": 1.25,
        "episodes_ended": 7,
    }
    plain = format_table([row]).splitlines()
    assert "competitor" not in plain[0] and plain[1].split() == [
        "X-v0",
        "8",
        "2.50M",
        "2.00M..3.00M",
        "1.25",
        "7",
    ]
    compared = {**row, "competitor": "sekai native", "competitor_steps_per_second": 5e4}
    compared["ratio"] = 50.0
    line = format_table([compared]).splitlines()[1]
    assert line.split()[-3:] == ["native", "50.00k", "50.00x"]


def test_scaling_measures_each_size_and_saves_a_plot(tmp_path, capsys):
    plot = tmp_path / "scaling.png"
    argv = ["GridWorld-v0", "--scaling", "--num-envs", "2", "8", "--steps", "4"]
    assert main([*argv, "--repeats", "1", "--no-progress", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert f"scaling plot: {plot}" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("GridWorld-v0")]
    assert [int(row[1]) for row in rows] == [2, 8]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_scaling_defaults_to_the_documented_sizes(monkeypatch, tmp_path):
    import parallax._bench as bench

    seen = []

    def fake(env_id, n, **kwargs):
        seen.append(n)
        rate = 1000.0 * n
        return {"env": env_id, "num_envs": n, "steps_per_second": rate,
                "steps_per_second_min": rate, "steps_per_second_max": rate,
                "compile_seconds": 0.0, "episodes_ended": 0}  # fmt: skip

    monkeypatch.setattr(bench, "benchmark", fake)
    assert main(["GridWorld-v0", "--scaling", "--plot", str(tmp_path / "s.png")]) == 0
    assert seen == list(bench.SCALING_SIZES)


def test_plot_without_scaling_and_a_missing_folder_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["GridWorld-v0", "--plot", str(tmp_path / "s.png")])
    assert exit_info.value.code == 2
    assert "--plot needs --scaling" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["GridWorld-v0", "--scaling", "--plot", str(tmp_path / "nope" / "s.png")])
    assert exit_info.value.code == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(
    "module",
    [
        "parallax.bench",
        "parallax._bench",
        "parallax._bench_timing",
        "parallax._bench_runner",
        "parallax._bench_report",
    ],
)
def test_docstring_examples_run(module, capsys):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, (result, capsys.readouterr().out)
