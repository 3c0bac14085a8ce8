"""The measurement behind `parallax bench`: time a jitted `lax.scan` rollout of a batched env.

- `benchmark(env_id, num_envs, ...)`: one measurement (one batch size), the dict that
  `parallax bench --json` prints;
- our side, the batched env and its compiled rollout, is `_bench_runner.ParallaxRunner`;
- `COMPETITORS`, `load_competitors(name)`: what `compare=` accepts, and where its runner
  comes from: `benchmarks/competitors.py` of a source checkout, not the wheel.

How a measurement runs. Ours: `parallax.make_vec(ID, N, ...)` is reset once, then a jitted
`lax.scan` of `steps` steps with random actions is compiled ahead of time (its compile
time reported), called once to warm up, then timed `repeats` times, each call continuing
from the state the previous one returned (the state buffer is donated). The competitor's
repeats are interleaved with ours (ours, theirs, theirs, ours, ...) so that both see the
same machine load; `ratio` is the median of the per-repeat ratios ours / theirs (per env
step: a competitor that times fewer envs than N, sekai's Python loop, says how many env
steps a call takes).

Devices. With `devices=k > 1` our batch is split over `k` devices (`ParallaxRunner`); with
`single_device=True` as well, the same rollout on one device is timed beside it, its
repeats interleaved with the others (`parallax bench --devices k` does both), so that
the result holds the one-device and the `k`-device figures of one run, each with its
device count (`single_device`, `speedup_over_single_device`).

Flow events. For an env with a background event loop (`LimitOrderBook-v0`), the
competitors' module counts the events our timed calls ran, by an untimed replay, and the
competitor's per env step; the result then has `events_per_second` and its relatives.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import statistics
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import jax

from ._bench_runner import ParallaxRunner, _device_memory, _peak_rss_bytes
from ._cpu import cpu_threads
from ._project import source_url

COMPETITORS = ("sekai", "gymnax", "parallax-rl")
_COMPETITORS_MODULE = "benchmarks.competitors"

__all__ = ["COMPETITORS", "benchmark", "load_competitors"]


# -- helpers --------------------------------------------------------------------------------


def _summary(seconds: list[float], env_steps: int) -> dict[str, float]:
    rates = [env_steps / s for s in seconds]
    return {
        "median": float(statistics.median(rates)),
        "min": float(min(rates)),
        "max": float(max(rates)),
    }


def _events(
    counted: dict[str, Any],
    seconds: list[float],
    env_steps: int,
    their_per_step: float | None,
    result: dict[str, Any],
) -> dict[str, Any]:
    """The event fields of a result: `counted` per call (the warm-up call first), our
    timed `seconds`, and the competitor's events per env step (or None)."""
    timed = counted["per_call"][1:]
    rates = [e / s for e, s in zip(timed, seconds, strict=True)]
    out: dict[str, Any] = {
        "events": sum(timed),
        "events_per_call": timed,
        "events_per_step": sum(timed) / (env_steps * len(timed)),
        "events_per_second": float(statistics.median(rates)),
        "events_per_second_min": float(min(rates)),
        "events_per_second_max": float(max(rates)),
        "events_exact": counted["exact"],
        "events_counted_by": counted["counted_by"],
    }
    if their_per_step is not None and "competitor_steps_per_second" in result:
        theirs = their_per_step * result["competitor_steps_per_second"]
        out.update(
            competitor_events_per_step=their_per_step,
            competitor_events_per_second=theirs,
            events_ratio=out["events_per_second"] / theirs if theirs > 0 else None,
        )
    return out


def _single_device(
    seconds: list[float],
    compile_seconds: float | None,
    ended: int,
    split_seconds: list[float],
    env_steps: int,
    their_steps: int | None,
    result: dict[str, Any],
) -> dict[str, Any]:
    """The one-device figures of a split run (`benchmark(..., single_device=True)`): its
    timed `seconds`, beside the split rollout's `split_seconds` of the same repeats (and
    the competitor's, of `their_steps` env steps a call, when there is one)."""
    rate = _summary(seconds, env_steps)
    one: dict[str, Any] = {
        "devices": 1,
        "steps_per_second": rate["median"],
        "steps_per_second_min": rate["min"],
        "steps_per_second_max": rate["max"],
        "seconds": seconds,
        "compile_seconds": compile_seconds,
        "episodes_ended": ended,
    }
    if their_steps is not None:
        one["ratio"] = float(
            statistics.median(
                (t / their_steps) / (o / env_steps)
                for o, t in zip(seconds, result["competitor_seconds"])
            )
        )
    if "events_per_call" in result:  # the same trajectory: the split run's event counts
        rates = [e / s for e, s in zip(result["events_per_call"], seconds, strict=True)]
        one["events_per_second"] = float(statistics.median(rates))
    speedup = statistics.median(one_s / split_s for one_s, split_s in zip(seconds, split_seconds))
    return {"single_device": one, "speedup_over_single_device": float(speedup)}


# -- our side -------------------------------------------------------------------------------


# -- the competitors ------------------------------------------------------------------------
def _checkout_roots() -> list[Path]:
    """Source checkouts that may hold `benchmarks/`: the one this package was imported from
    (an editable install), then the current directory. A root must hold `pyproject.toml`, so
    a `site-packages` folder never counts."""
    roots = [Path(__file__).resolve().parents[1], Path.cwd()]
    return [root for root in dict.fromkeys(roots) if (root / "pyproject.toml").is_file()]


def load_competitors(name: str) -> ModuleType:
    """The module that holds the competitors' runners: `benchmarks/competitors.py`.

    The runners (sekai's native vector env, raw gymnax, parallax-rl 0.4.0) are developer
    tools kept out of the wheel. They are found in the source checkout this package was
    imported from (`pip install -e .`), or in the current directory when that is a checkout.

    Args:
        name: the competitor asked for (for the error message).

    Raises:
        ImportError: no checkout with `benchmarks/competitors.py` was found (an installed
            wheel); the message says how to run the comparison.
    """
    if _COMPETITORS_MODULE in sys.modules:
        return sys.modules[_COMPETITORS_MODULE]
    roots = _checkout_roots()
    for root in roots:
        path = root / "benchmarks" / "competitors.py"
        if path.is_file():
            spec = importlib.util.spec_from_file_location(_COMPETITORS_MODULE, path)
            if spec is None or spec.loader is None:  # pragma: no cover - a .py file loads
                continue
            module = importlib.util.module_from_spec(spec)
            sys.modules[_COMPETITORS_MODULE] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[_COMPETITORS_MODULE]
                raise
            return module
    raise ImportError(
        f"--compare {name} needs the competitors' runners, which live in benchmarks/ of a "
        "source checkout and are not part of the installed package (looked in the checkout "
        f"of {Path(__file__).resolve().parent} and in the current directory {Path.cwd()}). "
        f"To run the comparison: git clone {source_url()}; cd parallax; "
        'pip install -e ".[test]"; then run `parallax bench ID --compare '
        f"{name}` from that folder. Without --compare, parallax bench measures your env here."
    )


# -- one measurement ------------------------------------------------------------------------
def _progress(total: int, description: str, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ModuleNotFoundError:
        return None
    return tqdm(total=total, desc=description, file=sys.stderr, leave=False, disable=None)


def benchmark(
    env_id: str,
    num_envs: int,
    *,
    steps: int = 200,
    repeats: int = 5,
    autoreset: bool = True,
    max_episode_steps: int | None = None,
    compare: str | None = None,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    parallax_rl_python: str | None = None,
    progress: bool = True,
    competitor_steps: int | None = None,
    competitor_envs: int | None = None,
    devices: int = 1,
    single_device: bool = False,
) -> dict[str, Any]:
    """Measure env steps/s of `make_vec(env_id, num_envs, ...)` (and of a competitor).

    Args:
        env_id: a registered id (`parallax.registered_ids()`), e.g. `"Trading-v0"`,
            `"gymnax/CartPole-v1"`.
        num_envs: batch size N, a positive int.
        steps: env steps per timed call (the scan length; the competitor steps as many).
        repeats: timed calls per side (>= 1); medians, minima and maxima are over them.
        autoreset: same-step auto-reset on (True) or off.
        max_episode_steps: a `TimeLimit`, or None.
        compare: None or one of `COMPETITORS`; the competitors' runners are in the
            `benchmarks/` folder of a source checkout (see `load_competitors`).
        seed: int seed of the reset key and of the competitor.
        env_kwargs: the env's keyword arguments (passed to the competitor too).
        parallax_rl_python: interpreter for `compare="parallax-rl"`.
        progress: show a tqdm bar on stderr (when stderr is a terminal).
        competitor_steps: steps per timed call of a sekai competitor (default `steps`);
            a Python loop at small N takes long for the scan lengths a jitted rollout needs.
        competitor_envs: how many envs a sekai Python loop times, for an id sekai cannot
            vectorize natively (default: the competitors' `LOOP_ENVS`, at most N); its
            throughput is per env step.
        devices: our batch split over this many devices, each stepping its slice alone
            (`ParallaxRunner`); on the CPU, `parallax.set_cpu_devices` makes them.
        single_device: with `devices > 1`, also time the same rollout on one device,
            interleaved with the split one (and the competitor), for the side-by-side
            figures in `single_device`; ignored with one device.

    Returns:
        A JSON-serialisable dict: `env`, `num_envs`, `steps`, `repeats`,
        `steps_per_second` (median), `steps_per_second_min`, `steps_per_second_max`,
        `compile_seconds`, `episodes_ended`, `devices`, memory figures, and with `compare`:
        `competitor`, `competitor_steps_per_second` (median, plus `_min`/`_max`),
        `competitor_compile_seconds`, `ratio` (median of per-repeat ratios ours/theirs).
        `competitor_num_envs` (the envs it timed). For an env with a background event
        loop, compared: `events` (in our timed calls), `events_per_call`,
        `events_per_step`, `events_per_second` (median, `_min`, `_max`), `events_exact`,
        `events_counted_by`, and the competitor's `competitor_events_per_step`,
        `competitor_events_per_second` (median) and `events_ratio`. With
        `single_device` and `devices > 1`: `single_device`, a dict of the one-device
        figures (`devices` = 1, `steps_per_second` with `_min`/`_max`, `seconds`,
        `compile_seconds`, `episodes_ended`, and `ratio`, `events_per_second` when
        compared), and `speedup_over_single_device` (median of the per-repeat ratios of
        the split rollout's steps/s to the one device's); the top-level figures are then
        the `devices`-device ones.

    Example:
        >>> from parallax.bench import benchmark
        >>> r = benchmark("GridWorld-v0", 4, steps=4, repeats=1, progress=False)
        >>> r["env"], r["num_envs"], r["steps_per_second"] > 0
        ('GridWorld-v0', 4, True)
    """
    for name, value, least in (("num_envs", num_envs, 1), ("steps", steps, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"benchmark: {name} must be a positive int, got {value!r}")
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ValueError(f"benchmark: repeats must be a positive int, got {repeats!r}")
    if competitor_steps is None:
        competitor_steps = steps
    elif not isinstance(competitor_steps, int) or competitor_steps < 1:
        raise ValueError(
            f"benchmark: competitor_steps must be None or a positive int, got {competitor_steps!r}"
        )
    if competitor_envs is not None and (
        not isinstance(competitor_envs, int)
        or isinstance(competitor_envs, bool)
        or competitor_envs < 1
    ):
        raise ValueError(
            f"benchmark: competitor_envs must be None or a positive int, got {competitor_envs!r}"
        )
    if compare is not None and compare not in COMPETITORS:
        raise ValueError(
            f"benchmark: compare must be None or one of {COMPETITORS}, got {compare!r}"
        )
    if max_episode_steps is not None and (
        not isinstance(max_episode_steps, int) or max_episode_steps < 1
    ):
        raise ValueError(
            f"benchmark: max_episode_steps must be None or a positive int, got {max_episode_steps!r}"
        )
    env_kwargs = dict(env_kwargs or {})
    competitors = None if compare is None else load_competitors(compare)
    common: dict[str, Any] = {
        "autoreset": autoreset,
        "max_episode_steps": max_episode_steps,
        "seed": seed,
        "env_kwargs": env_kwargs,
    }
    ours = ParallaxRunner(env_id, num_envs, steps, devices=devices, **common)
    single = None
    if single_device and ours.devices > 1:
        single = ParallaxRunner(env_id, num_envs, steps, devices=1, **common)
    theirs: Any = None
    if competitors is not None:
        theirs = competitors.make_runner(
            compare,
            env_id,
            num_envs,
            competitor_steps if compare == "sekai" else steps,
            sample=ours.sample,
            parallax_rl_python=parallax_rl_python,
            **({} if competitor_envs is None else {"timed_envs": competitor_envs}),
            **common,
        )
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    bar = _progress(
        (1 + repeats) * (1 + (theirs is not None) + (single is not None)),
        f"{env_id} N={num_envs}",
        progress,
    )
    try:
        compile_seconds = ours.prepare()
        if bar is not None:
            bar.update()
        single_compile = None
        if single is not None:
            single_compile = single.prepare()
            if bar is not None:
                bar.update()
        their_compile = None
        if theirs is not None:
            their_compile = theirs.prepare()
            if bar is not None:
                bar.update()
        ours_s: list[float] = []
        theirs_s: list[float] = []
        single_s: list[float] = []
        ended = their_ended = single_ended = 0
        runners = [runner for runner in (ours, single, theirs) if runner is not None]
        for r in range(repeats):
            # alternate the order so no side always runs first after the others
            for runner in runners if r % 2 == 0 else runners[::-1]:
                seconds, n_ended = runner.run()
                if runner is ours:
                    ours_s.append(seconds)
                    ended += n_ended
                elif runner is single:
                    single_s.append(seconds)
                    single_ended += n_ended
                else:
                    theirs_s.append(seconds)
                    their_ended += n_ended
                if bar is not None:
                    bar.update()
        counter = getattr(competitors, "count_flow_events", None)
        our_events = None if counter is None else counter(ours, 1 + repeats)
        their_events = None
        if our_events is not None and hasattr(theirs, "count_events"):
            their_events = theirs.count_events()
    finally:
        if bar is not None:
            bar.close()
        ours.close()
        if single is not None:
            single.close()
        if theirs is not None:
            theirs.close()
    env_steps = num_envs * steps
    rate = _summary(ours_s, env_steps)
    result: dict[str, Any] = {
        "env": env_id,
        "num_envs": num_envs,
        "steps": steps,
        "repeats": repeats,
        "autoreset": autoreset,
        "max_episode_steps": max_episode_steps,
        "env_kwargs": env_kwargs,
        "dtype": "float64" if jax.config.read("jax_enable_x64") else "float32",
        "backend": jax.default_backend(),
        "cpu_threads": cpu_threads(),
        "devices": devices,
        "steps_per_second": rate["median"],
        "steps_per_second_min": rate["min"],
        "steps_per_second_max": rate["max"],
        "seconds": ours_s,
        "compile_seconds": compile_seconds,
        "reset_seconds": ours.extra["reset_seconds"],
        "episodes_ended": ended,
        "state_bytes": ours.extra["state_bytes"],
        "program_bytes": ours.extra["program_bytes"],
        "device_memory": _device_memory(),
        "peak_rss_bytes": _peak_rss_bytes(),
    }
    if theirs is not None:
        their_steps = getattr(
            theirs,
            "env_steps_per_run",
            num_envs * (competitor_steps if compare == "sekai" else steps),
        )
        their_rate = _summary(theirs_s, their_steps)
        result.update(
            competitor=theirs.label,
            competitor_steps_per_second=their_rate["median"],
            competitor_steps_per_second_min=their_rate["min"],
            competitor_steps_per_second_max=their_rate["max"],
            competitor_seconds=theirs_s,
            competitor_compile_seconds=their_compile,
            competitor_episodes_ended=their_ended,
            competitor_steps=competitor_steps if compare == "sekai" else steps,
            competitor_num_envs=their_steps // (competitor_steps if compare == "sekai" else steps),
            # per repeat: their seconds per env step / ours, then the median
            ratio=float(
                statistics.median(
                    (t / their_steps) / (o / env_steps) for o, t in zip(ours_s, theirs_s)
                )
            ),
            **{f"competitor_{k}": v for k, v in theirs.extra.items()},
        )
    if our_events is not None:
        result.update(_events(our_events, ours_s, env_steps, their_events, result))
    if single is not None:
        result.update(
            _single_device(
                single_s,
                single_compile,
                single_ended,
                ours_s,
                env_steps,
                None if theirs is None else their_steps,
                result,
            )
        )
    result["load_average"] = [load_before, os.getloadavg() if load_before is not None else None]
    result["backend"] = jax.default_backend()
    result["jax_version"] = jax.__version__
    result["machine"] = platform.machine()
    return result
