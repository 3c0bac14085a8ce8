"""`parallax bench`: time a jitted `lax.scan` rollout of a batched env, against a competitor.

Holds:

- `main(argv)`: the command line, `parallax bench ID [--num-envs N ...] [--steps T] ...`
  (see `parallax bench --help`);
- `benchmark(env_id, num_envs, ...)`: one measurement (one batch size) as the dict that
  `--json` prints;
- the timed rollout is `parallax.action_scan` with `parallax.random_actions` (defined in
  `parallax._actions`, re-exported here for the benchmark scripts);
- `COMPETITORS`: what `--compare` accepts: `sekai` (sekai's native vector env, same
  process), `gymnax` (gymnax's own vmapped `env.step` with its internal auto-reset, same
  process) and `parallax-rl` (the published parallax-rl 0.4.0 stack, in a separate virtual
  environment given by `--parallax-rl-python` or `$PARALLAX_RL_PYTHON`, through a
  subprocess: its import name clashes with ours).

How a measurement runs. Ours: `parallax.make_vec(ID, N, ...)` is reset once, then a jitted
`lax.scan` of `--steps` steps with random actions is compiled ahead of time (its compile
time reported), called once to warm up, then timed `--repeats` times, each call continuing
from the state the previous one returned (the state buffer is donated). The competitor's
repeats are interleaved with ours (ours, theirs, theirs, ours, ...) so that both see the
same machine load; `ratio` is the median of the per-repeat ratios ours / theirs.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._actions import ActionSampler, action_scan, random_actions
from ._cli import DefaultsHelpFormatter
from ._validate import positive_int

COMPETITORS = ("sekai", "gymnax", "parallax-rl")
__all__ = ["COMPETITORS", "ActionSampler", "action_scan", "benchmark", "main", "random_actions"]


# -- helpers --------------------------------------------------------------------------------
def _tree_bytes(tree: Any) -> int:
    total = 0
    for leaf in jax.tree.leaves(tree):
        if hasattr(leaf, "dtype") and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        total += int(np.prod(np.shape(leaf), dtype=np.int64)) * np.dtype(leaf.dtype).itemsize
    return total


def _peak_rss_bytes() -> int:
    # ru_maxrss is in KiB on Linux, bytes on macOS.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def _device_memory() -> dict[str, int] | None:
    try:
        stats = jax.devices()[0].memory_stats()
    except Exception:  # backends without memory statistics raise or return None
        return None
    if not stats:
        return None
    keep = ("bytes_in_use", "peak_bytes_in_use", "bytes_limit")
    return {k: int(stats[k]) for k in keep if k in stats}


def _program_bytes(compiled: Any) -> dict[str, int] | None:
    try:
        analysis = compiled.memory_analysis()
    except Exception:  # not every backend/version provides it
        return None
    if analysis is None:
        return None
    names = {
        "argument_bytes": "argument_size_in_bytes",
        "output_bytes": "output_size_in_bytes",
        "temp_bytes": "temp_size_in_bytes",
        "generated_code_bytes": "generated_code_size_in_bytes",
    }
    return {k: int(getattr(analysis, v)) for k, v in names.items() if hasattr(analysis, v)}


def _summary(seconds: list[float], env_steps: int) -> dict[str, float]:
    rates = [env_steps / s for s in seconds]
    return {
        "median": float(statistics.median(rates)),
        "min": float(min(rates)),
        "max": float(max(rates)),
    }


# -- runners: one side of a comparison ------------------------------------------------------
class _ParallaxRunner:
    """Our side: `make_vec(...)`, a donated jitted scan of `steps` steps, compiled AOT."""

    label = "parallax"

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        steps: int,
        *,
        autoreset: bool,
        max_episode_steps: int | None,
        seed: int,
        env_kwargs: dict[str, Any],
    ) -> None:
        from ._registry import make_vec

        self.num_envs, self.steps, self.seed = num_envs, steps, seed
        self.vec = make_vec(env_id, num_envs, max_episode_steps, autoreset, **env_kwargs)
        self.sample = random_actions(self.vec.action_space, num_envs)
        self.compiled: Any = None
        self.state: Any = None
        self.offset = 0
        self.extra: dict[str, Any] = {}

    def _rollout(self, state: Any, episode_key: jax.Array, start: jax.Array) -> Any:
        ts = start + jnp.arange(self.steps, dtype=jnp.uint32)
        return action_scan(self.vec.step, state, self.sample, episode_key, ts)

    def prepare(self) -> float:
        from . import rng

        key = jax.random.key(self.seed)
        t0 = time.perf_counter()
        self.state = jax.block_until_ready(jax.jit(lambda k: self.vec.reset(key=k))(key))
        self.extra["reset_seconds"] = time.perf_counter() - t0
        self.episode_key = rng.episode_key(jax.random.fold_in(key, 1))
        start = jnp.uint32(0)
        t0 = time.perf_counter()
        lowered = jax.jit(self._rollout, donate_argnums=0).lower(
            self.state, self.episode_key, start
        )
        self.compiled = lowered.compile()
        compile_seconds = time.perf_counter() - t0
        self.extra["state_bytes"] = _tree_bytes(self.state)
        self.extra["program_bytes"] = _program_bytes(self.compiled)
        self.run()  # warm-up call: first-touch allocation, thread pools
        return compile_seconds

    def run(self) -> tuple[float, int]:
        start = jnp.uint32(self.offset)
        t0 = time.perf_counter()
        self.state, ended = self.compiled(self.state, self.episode_key, start)
        ended = int(jax.block_until_ready(ended))
        jax.block_until_ready(self.state)
        seconds = time.perf_counter() - t0
        self.offset = (self.offset + self.steps) % 2**32
        return seconds, ended

    def close(self) -> None:
        self.state = None


class _SekaiRunner:
    """sekai's native vector env, random actions from its `batch_action_space`."""

    label = "sekai native"

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        steps: int,
        *,
        autoreset: bool,
        max_episode_steps: int | None,
        seed: int,
        env_kwargs: dict[str, Any],
    ) -> None:
        try:
            import sekai
        except ModuleNotFoundError as error:
            if error.name != "sekai":
                raise
            raise ImportError("--compare sekai needs sekai: pip install sekai==0.2.0") from None
        kwargs = dict(env_kwargs)
        if max_episode_steps is not None:
            kwargs["max_episode_steps"] = max_episode_steps
        try:
            self.vec = sekai.make_vec(
                env_id,
                num_envs=num_envs,
                vectorization_mode="native",
                vector_kwargs={"autoreset": autoreset},
                **kwargs,
            )
        except Exception as error:
            raise ValueError(f"sekai cannot build {env_id!r} natively: {error}") from error
        self.steps, self.seed = steps, seed
        self.extra: dict[str, Any] = {"version": getattr(sekai, "__version__", None)}

    def prepare(self) -> float | None:
        """Reset and warm up; sekai compiles nothing (None)."""
        self.vec.reset(seed=self.seed)
        self.actions = self.vec.batch_action_space
        self.actions.seed(self.seed)
        for _ in range(3):  # warm-up
            self.vec.step(self.actions.sample())
        return None

    def run(self) -> tuple[float, int]:
        ended = 0
        t0 = time.perf_counter()
        for _ in range(self.steps):
            result = self.vec.step(self.actions.sample())
            ended += int(np.count_nonzero(result.terminated | result.truncated))
        return time.perf_counter() - t0, ended

    def close(self) -> None:
        self.vec.close()


class _GymnaxRunner:
    """gymnax's own `jax.vmap(env.step)` (with its internal auto-reset) in a jitted scan."""

    label = "gymnax vmap"

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        steps: int,
        *,
        autoreset: bool,
        max_episode_steps: int | None,
        seed: int,
        env_kwargs: dict[str, Any],
        sample: ActionSampler,
    ) -> None:
        namespace, _, name = env_id.partition("/")
        if namespace != "gymnax" or not name:
            raise ValueError(f"--compare gymnax needs a 'gymnax/NAME' id, got {env_id!r}")
        if not autoreset:
            raise ValueError("--compare gymnax needs auto-reset (gymnax always auto-resets)")
        from .adapters._imports import require

        gymnax = require("gymnax", extra="gymnax", needed_by="--compare gymnax")
        env_kwargs = {k: v for k, v in env_kwargs.items() if k != "params"}
        self.env, params = gymnax.make(name, **env_kwargs)
        if max_episode_steps is not None:
            params = params.replace(max_steps_in_episode=max_episode_steps)
        self.params = params
        self.num_envs, self.steps, self.seed, self.sample = num_envs, steps, seed, sample
        self.offset = 0
        self.extra: dict[str, Any] = {}

    def _rollout(self, env_state: Any, episode_key: jax.Array, start: jax.Array) -> Any:
        env, params, n = self.env, self.params, self.num_envs
        base = jax.random.key(self.seed + 1)
        step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

        def gymnax_step(carry: Any, action: Any) -> Any:
            env_state, t, _ = carry
            keys = jax.random.split(jax.random.fold_in(base, t), n)
            out = step(keys, env_state, action, params)
            # gymnax 1.0.1 returns (obs, state, reward, terminated, truncated, info);
            # older versions (obs, state, reward, done, info)
            done = out[3] | out[4] if len(out) == 6 else out[3]
            return out[1], t + 1, done

        ts = start + jnp.arange(self.steps, dtype=jnp.uint32)
        first = (env_state, start, jnp.zeros((n,), jnp.bool_))
        (env_state, _, _), ended = action_scan(
            gymnax_step,
            first,
            self.sample,
            episode_key,
            ts,
            count_done=lambda c: jnp.sum(c[2], dtype=jnp.int32),
        )
        return env_state, ended

    def prepare(self) -> float:
        from . import rng

        key = jax.random.key(self.seed)
        keys = jax.random.split(key, self.num_envs)
        reset = jax.jit(jax.vmap(self.env.reset, in_axes=(0, None)))
        _, self.state = jax.block_until_ready(reset(keys, self.params))
        self.episode_key = rng.episode_key(jax.random.fold_in(key, 1))
        t0 = time.perf_counter()
        self.compiled = (
            jax.jit(self._rollout, donate_argnums=0)
            .lower(self.state, self.episode_key, jnp.uint32(0))
            .compile()
        )
        compile_seconds = time.perf_counter() - t0
        self.run()
        return compile_seconds

    def run(self) -> tuple[float, int]:
        t0 = time.perf_counter()
        self.state, ended = self.compiled(self.state, self.episode_key, jnp.uint32(self.offset))
        ended = int(jax.block_until_ready(ended))
        jax.block_until_ready(self.state)
        self.offset = (self.offset + self.steps) % 2**32
        return time.perf_counter() - t0, ended

    def close(self) -> None:
        self.state = None


# The published parallax-rl 0.4.0 stack, run by another interpreter (its import name is
# `parallax` too). It prints one JSON object: compile seconds and per-repeat seconds.
_PARALLAX_RL_SCRIPT = r"""
import json, sys, time
import jax, jax.numpy as jnp
import gymnax
import parallax
from parallax.adapters.gymnax import GymnaxAdapter
from parallax.wrappers import AutoResetWrapper, TimeLimit, VmapWrapper
cfg = json.loads(sys.argv[1])
n, steps = cfg["num_envs"], cfg["steps"]
class PatchedAdapter(GymnaxAdapter):
    # parallax-rl 0.4.0 unpacks 5 values; gymnax 1.0.1 returns 6. The published step with
    # only that fixed: (terminated | truncated) becomes its termination, as in 0.4.0.
    def step(self, state, action):
        key, step_key = jax.random.split(state.key)
        obs, env_state, reward, term, trunc, info = self.env.step(
            step_key, state.env_state, action, self.params
        )
        return parallax.State(
            env_state=env_state, observation=obs, reward=reward, termination=term | trunc,
            truncation=jnp.bool_(False),
            info={"discount": jnp.float32(info.get("discount", 1.0))},
            step_count=state.step_count + 1, key=key,
        )
def build(cls):
    env = cls(gymnax.make(cfg["name"])[0])
    return VmapWrapper(AutoResetWrapper(TimeLimit(env, cfg["max_episode_steps"])), n)
env = build(GymnaxAdapter)
def rollout(state, key):
    def body(carry, k):
        state, ended = carry
        a = jax.random.randint(k, (n,), 0, env.action_space.n)
        state = env.step(state, a)
        return (state, ended + jnp.sum(state.termination | state.truncation, dtype=jnp.int32)), None
    (state, ended), _ = jax.lax.scan(body, (state, jnp.int32(0)), jax.random.split(key, steps))
    return state, ended
from importlib.metadata import version
out = {"version": version("parallax-rl")}
try:
    try:
        state = env.reset(key=jax.random.key(cfg["seed"]))
        jax.eval_shape(env.step, state, jnp.zeros((n,), jnp.int32))
    except ValueError as error:
        out["published_error"] = f"{type(error).__name__}: {error}"
        env = build(PatchedAdapter)
        state = env.reset(key=jax.random.key(cfg["seed"]))
    t0 = time.perf_counter()
    run = jax.jit(rollout).lower(state, jax.random.key(0)).compile()
    out["compile_seconds"] = time.perf_counter() - t0
    state, _ = jax.block_until_ready(run(state, jax.random.key(1)))
except Exception as error:
    out["error"] = f"{type(error).__name__}: {error}"
print(json.dumps(out), flush=True)
# then one timed call per line read on stdin, answered with one JSON line
r = 0
for _ in sys.stdin:
    r += 1
    t0 = time.perf_counter()
    state, ended = jax.block_until_ready(run(state, jax.random.key(1 + r)))
    print(json.dumps({"seconds": time.perf_counter() - t0, "ended": int(ended)}), flush=True)
"""


def _gymnax_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gymnax")
    except PackageNotFoundError:
        return "?"


def _parallax_rl_python(explicit: str | None) -> str:
    python = explicit or os.environ.get("PARALLAX_RL_PYTHON")
    if not python:
        raise ValueError(
            "--compare parallax-rl needs the interpreter of a separate virtual environment "
            "with parallax-rl 0.4.0 and gymnax installed: pass --parallax-rl-python PATH or "
            "set $PARALLAX_RL_PYTHON (its import name `parallax` clashes with ours)"
        )
    return python


class _ParallaxRLRunner:
    """The published parallax-rl 0.4.0 stack in a worker process of another interpreter.

    `VmapWrapper(AutoResetWrapper(TimeLimit(GymnaxAdapter(env), M)), N)`, random actions
    from `jax.random`, a jitted scan; the worker waits on its stdin between timed calls, so
    its repeats interleave with ours like the in-process competitors'.
    """

    label = "parallax-rl"

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        steps: int,
        *,
        autoreset: bool,
        max_episode_steps: int | None,
        seed: int,
        env_kwargs: dict[str, Any],
        python: str,
    ) -> None:
        namespace, _, name = env_id.partition("/")
        if namespace != "gymnax" or not name:
            raise ValueError(f"--compare parallax-rl needs a 'gymnax/NAME' id, got {env_id!r}")
        if not autoreset or env_kwargs:
            raise ValueError("--compare parallax-rl needs auto-reset and no --env-kwarg")
        self.cfg = {
            "name": name,
            "num_envs": num_envs,
            "steps": steps,
            "max_episode_steps": 500 if max_episode_steps is None else max_episode_steps,
            "seed": seed,
        }
        self.python = python
        self.extra: dict[str, Any] = {"process": "worker subprocess, interleaved"}
        self.worker: subprocess.Popen[str] | None = None

    def _line(self) -> dict[str, Any]:
        assert self.worker is not None and self.worker.stdout is not None
        for line in self.worker.stdout:
            if line.startswith("{"):
                answer: dict[str, Any] = json.loads(line)
                return answer
        stderr = self.worker.stderr.read() if self.worker.stderr is not None else ""
        tail = " | ".join(stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"the parallax-rl worker ({self.python}) stopped: {tail}")

    def prepare(self) -> float:
        self.worker = subprocess.Popen(
            [self.python, "-I", "-c", _PARALLAX_RL_SCRIPT, json.dumps(self.cfg)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # -I: the current directory (maybe our source tree) is not on its sys.path
        first = self._line()
        self.extra["version"] = first.get("version")
        if "error" in first:
            raise RuntimeError(f"parallax-rl: {first['error']}")
        if "published_error" in first:
            self.extra["note"] = (
                f"the published GymnaxAdapter.step fails with gymnax {_gymnax_version()} "
                f"({first['published_error']}); measured with only that unpacking fixed"
            )
        return float(first["compile_seconds"])

    def run(self) -> tuple[float, int]:
        assert self.worker is not None and self.worker.stdin is not None
        self.worker.stdin.write("run\n")
        self.worker.stdin.flush()
        answer = self._line()
        return float(answer["seconds"]), int(answer["ended"])

    def close(self) -> None:
        if self.worker is not None:
            if self.worker.stdin is not None:
                self.worker.stdin.close()
            try:
                self.worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.worker.kill()
                self.worker.wait()
            for stream in (self.worker.stdout, self.worker.stderr):
                if stream is not None:
                    stream.close()
            self.worker = None


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
        compare: None or one of `COMPETITORS`.
        seed: int seed of the reset key and of the competitor.
        env_kwargs: the env's keyword arguments (passed to the competitor too).
        parallax_rl_python: interpreter for `compare="parallax-rl"`.
        progress: show a tqdm bar on stderr (when stderr is a terminal).
        competitor_steps: steps per timed call of a sekai competitor (default `steps`);
            a Python loop at small N takes long for the scan lengths a jitted rollout needs.

    Returns:
        A JSON-serialisable dict: `env`, `num_envs`, `steps`, `repeats`,
        `steps_per_second` (median), `steps_per_second_min`, `steps_per_second_max`,
        `compile_seconds`, `episodes_ended`, memory figures, and with `compare`:
        `competitor`, `competitor_steps_per_second` (median, plus `_min`/`_max`),
        `competitor_compile_seconds`, `ratio` (median of per-repeat ratios ours/theirs).

    Example:
        >>> from parallax._bench import benchmark
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
    common: dict[str, Any] = {
        "autoreset": autoreset,
        "max_episode_steps": max_episode_steps,
        "seed": seed,
        "env_kwargs": env_kwargs,
    }
    ours = _ParallaxRunner(env_id, num_envs, steps, **common)
    theirs: Any = None
    if compare == "sekai":
        theirs = _SekaiRunner(env_id, num_envs, competitor_steps, **common)
    elif compare == "gymnax":
        theirs = _GymnaxRunner(env_id, num_envs, steps, sample=ours.sample, **common)
    elif compare == "parallax-rl":
        python = _parallax_rl_python(parallax_rl_python)
        theirs = _ParallaxRLRunner(env_id, num_envs, steps, python=python, **common)
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    bar = _progress(
        1 + repeats + (0 if theirs is None else 1 + repeats),
        f"{env_id} N={num_envs}",
        progress,
    )
    try:
        compile_seconds = ours.prepare()
        if bar is not None:
            bar.update()
        their_compile = None
        if theirs is not None:
            their_compile = theirs.prepare()
            if bar is not None:
                bar.update()
        ours_s: list[float] = []
        theirs_s: list[float] = []
        ended = their_ended = 0
        for r in range(repeats):
            # alternate the order so neither side always runs first after the other
            order = [ours, theirs] if r % 2 == 0 else [theirs, ours]
            for runner in order:
                if runner is None:
                    continue
                seconds, n_ended = runner.run()
                if runner is ours:
                    ours_s.append(seconds)
                    ended += n_ended
                else:
                    theirs_s.append(seconds)
                    their_ended += n_ended
                if bar is not None:
                    bar.update()
    finally:
        if bar is not None:
            bar.close()
        ours.close()
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
        their_steps = num_envs * (competitor_steps if compare == "sekai" else steps)
        their_rate = _summary(theirs_s, their_steps)
        result.update(
            competitor=theirs.label,
            competitor_steps_per_second=their_rate["median"],
            competitor_steps_per_second_min=their_rate["min"],
            competitor_steps_per_second_max=their_rate["max"],
            competitor_seconds=theirs_s,
            competitor_compile_seconds=their_compile,
            competitor_episodes_ended=their_ended,
            competitor_steps=their_steps // num_envs,
            # per repeat: their seconds per env step / ours, then the median
            ratio=float(
                statistics.median(
                    (t / their_steps) / (o / env_steps) for o, t in zip(ours_s, theirs_s)
                )
            ),
            **{f"competitor_{k}": v for k, v in theirs.extra.items()},
        )
    result["load_average"] = [load_before, os.getloadavg() if load_before is not None else None]
    result["backend"] = jax.default_backend()
    result["jax_version"] = jax.__version__
    result["machine"] = platform.machine()
    return result


# -- command line ---------------------------------------------------------------------------
def _positive_int(text: str) -> int:
    try:
        return positive_int(int(text), "the value", "parallax bench")
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive int, got {text!r}") from None


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative int, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative int, got {value}")
    return value


def _env_kwarg(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE with KEY a name, got {text!r}")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw  # a bare word is a string: sampler=random
    return key, value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `parallax bench`."""
    parser = argparse.ArgumentParser(
        prog="parallax bench",
        description=(
            "Time a jitted lax.scan rollout of parallax.make_vec(ID, N) with random actions: "
            "compile time and env steps/s (median, min, max over repeats), optionally against "
            "a competitor measured in the same run at the same batch size."
        ),
        epilog=(
            "--json prints one JSON object for one --num-envs value, or a JSON list of such "
            "objects (one per N, in the order given) for several."
        ),
        formatter_class=DefaultsHelpFormatter,
    )
    parser.add_argument("env_id", metavar="ID", help="a registered id (see `parallax list`)")
    parser.add_argument(
        "--num-envs", type=_positive_int, nargs="+", default=[1024], metavar="N", help="batch sizes"
    )
    parser.add_argument(
        "--steps", type=_positive_int, default=200, metavar="T", help="env steps per timed call"
    )
    parser.add_argument(
        "--repeats", type=_positive_int, default=5, metavar="R", help="timed calls per side"
    )
    parser.add_argument(
        "--autoreset",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="same-step auto-reset",
    )
    parser.add_argument(
        "--max-episode-steps", type=_positive_int, default=None, metavar="M", help="a TimeLimit"
    )
    parser.add_argument(
        "--dtype",
        choices=["float32", "float64"],
        default="float32",
        help="float64 enables jax_enable_x64",
    )
    parser.add_argument("--compare", choices=COMPETITORS, default=None, help="competitor")
    parser.add_argument(
        "--parallax-rl-python",
        default=None,
        metavar="PATH",
        help="python of a venv with parallax-rl 0.4.0 (or $PARALLAX_RL_PYTHON)",
    )
    parser.add_argument(
        "--env-kwarg",
        type=_env_kwarg,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an env keyword argument (Python literal or bare string), repeatable",
    )
    parser.add_argument(
        "--seed", type=_non_negative_int, default=0, metavar="S", help="the random actions' seed"
    )
    parser.add_argument(
        "--scaling",
        action="store_true",
        help=(
            f"measure N = {' '.join(map(str, SCALING_SIZES))} (unless --num-envs is given) "
            "and save a steps/s-vs-N plot on this device (needs matplotlib)"
        ),
    )
    parser.add_argument(
        "--plot",
        default=None,
        metavar="PATH",
        help="where --scaling saves its plot (default: bench_scaling_<ID>.png)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


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


def format_table(results: Sequence[dict[str, Any]]) -> str:
    """A table for people: one row per measurement.

    Example:
        >>> from parallax._bench import format_table
        >>> row = {"env": "GridWorld-v0", "num_envs": 4, "steps_per_second": 1e6,
        ...        "steps_per_second_min": 9e5, "steps_per_second_max": 1.1e6,
        ...        "compile_seconds": 0.5, "episodes_ended": 3}
        >>> print(format_table([row]).splitlines()[1])
        GridWorld-v0             4      1.00M  900.00k..1.10M      0.50         3
    """
    header = (
        f"{'env':<20} {'N':>5} {'steps/s':>10} {'min..max':>15} {'compile s':>9} {'episodes':>9}"
    )
    compare = any("competitor" in r for r in results)
    if compare:
        header += f"  {'competitor':<14} {'steps/s':>10} {'ratio':>8}"
    lines = [header]
    for r in results:
        spread = f"{_fmt_rate(r['steps_per_second_min'])}..{_fmt_rate(r['steps_per_second_max'])}"
        line = (
            f"{r['env']:<20} {r['num_envs']:>5} {_fmt_rate(r['steps_per_second']):>10} "
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
        if "competitor_error" in r:
            lines.append(f"{r['competitor']} N={r['num_envs']}: {r['competitor_error']}")
    return "\n".join(lines)


@contextmanager
def _x64(enabled: bool) -> Iterator[None]:
    with jax.enable_x64(enabled):
        yield


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `parallax bench` (routed here by `parallax._cli`).

    Args:
        argv: the arguments after `bench` (None: `sys.argv[1:]`).

    Returns:
        0 on success, 2 when the env or the competitor cannot be built.

    Example:
        >>> from parallax._bench import main
        >>> main(["GridWorld-v0", "--num-envs", "4", "--steps", "4", "--repeats", "1",
        ...       "--json", "--no-progress"])  # doctest: +ELLIPSIS
        {"env": "GridWorld-v0", "num_envs": 4, ...}
        0
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    given = argv if argv is not None else sys.argv[1:]
    sizes = list(args.num_envs)
    if args.scaling and not any(a == "--num-envs" or a.startswith("--num-envs=") for a in given):
        sizes = list(SCALING_SIZES)
    if args.plot is not None and not args.scaling:
        parser.error("--plot needs --scaling")
    plot_path = args.plot or f"bench_scaling_{args.env_id.replace('/', '_')}.png"
    if args.scaling:
        folder = os.path.dirname(os.path.abspath(plot_path))
        if not os.path.isdir(folder):
            parser.error(f"--plot {plot_path!r}: the directory {folder!r} does not exist")
    results = []
    with _x64(args.dtype == "float64"):
        for n in sizes:
            try:
                result = benchmark(
                    args.env_id,
                    n,
                    steps=args.steps,
                    repeats=args.repeats,
                    autoreset=args.autoreset,
                    max_episode_steps=args.max_episode_steps,
                    compare=args.compare,
                    seed=args.seed,
                    env_kwargs=dict(args.env_kwarg),
                    parallax_rl_python=args.parallax_rl_python,
                    progress=not args.no_progress,
                )
            except (KeyError, ValueError, TypeError, ImportError, RuntimeError) as error:
                message = error.args[0] if isinstance(error, KeyError) and error.args else error
                print(f"parallax bench: error: {message}", file=sys.stderr)
                return 2
            results.append(result)
            if not args.json:  # one row as each batch size finishes, the header first
                lines = format_table([result]).splitlines()
                print("\n".join(lines if len(results) == 1 else lines[1:]), flush=True)
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results))
    if args.scaling:
        try:
            written = plot_scaling(results, plot_path)
        except ImportError as error:
            print(f"parallax bench: error: {error}", file=sys.stderr)
            return 2
        print(f"scaling plot: {written}", file=sys.stderr if args.json else sys.stdout)
    return 0
