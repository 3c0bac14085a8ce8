"""The other side of `parallax bench ID --compare NAME`: the competitors' runners.

`parallax bench` measures the user's own env anywhere; the competitors live here, in the
source checkout, because they are developer tools (they import sekai, gymnax's internals, or
run a published parallax-rl release in another interpreter) and stay out of the wheel. The
command finds this module in the checkout that holds the running `parallax` package (an
editable install) or in the current directory, and says how to get one when neither has it.

- `make_runner(name, env_id, num_envs, steps, ...)`: the runner of one competitor;
- `SekaiRunner`: sekai's native vector env (`sekai.make_vec(..., vectorization_mode=
  "native")`), random actions from its `batch_action_space`, same process;
- `SekaiLoopRunner`: for ids sekai cannot vectorize natively (`LimitOrderBook-v0`): sekai's
  env stepped in a Python loop, `timed_envs` of the N envs (per-env-step throughput), with
  random legal actions from its action masks;
- `count_flow_events(runner, calls)`: the background events that our limit order book's
  timed calls ran, counted by an untimed replay (`FlowEventCounter`); the sekai loop
  runner's `count_events()` counts sekai's in one more, untimed call;
- `GymnaxRunner`: gymnax's own `jax.vmap(env.step)` with its internal auto-reset in a jitted
  `lax.scan`, with our actions (`parallax.action_scan`), same process;
- `ParallaxRLRunner`: the published parallax-rl 0.4.0 stack in `parallax_rl_worker.py`, run
  by the interpreter of a separate virtual environment (its import name clashes with ours).

A runner (a `parallax._bench_runner.Runner`: its constructor takes `env_id, num_envs, steps`
and the keywords `autoreset, max_episode_steps, seed, env_kwargs`, passed on as `**common`,
and stores them) has `label`, `extra` (a dict reported as `competitor_<key>`), `prepare() ->
compile seconds or None` (build, compile, warm up), `run() -> (seconds, episodes ended)`
(one timed call of `steps` steps) and `close()`; `parallax.bench.benchmark` interleaves its
`run` calls with ours. A runner that times fewer envs than N says how many env steps one
call takes (`env_steps_per_run`), and one that can count the flow's events has
`count_events() -> events per env step`.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from parallax import Wrapper, action_scan, make_vec, rng
from parallax._bench_runner import Runner, ScanRunner
from parallax._wrappers.base import step_env

NAMES = ("sekai", "gymnax", "parallax-rl")
WORKER = Path(__file__).resolve().with_name("parallax_rl_worker.py")
OURS_ONLY = frozenset({"capacity", "max_events"})
"""Keywords of our limit order book that sekai's has not (the array book's bounds: they
change nothing while no book overflows), left out of the sekai loop's envs."""
LOOP_ENVS = 16
"""How many of the N envs `SekaiLoopRunner` times by default (a Python loop's cost per env
step does not depend on N, and N = 1024 books take minutes per call)."""

__all__ = [
    "LOOP_ENVS",
    "NAMES",
    "OURS_ONLY",
    "FlowEventCounter",
    "GymnaxRunner",
    "ParallaxRLRunner",
    "SekaiLoopRunner",
    "SekaiRunner",
    "count_flow_events",
    "find_parallax_rl_python",
    "make_runner",
]


def _import_sekai() -> Any:
    try:
        import sekai
    except ModuleNotFoundError as error:
        if error.name != "sekai":
            raise
        raise ImportError("--compare sekai needs sekai: pip install sekai==0.2.0") from None
    return sekai


class SekaiRunner(Runner):
    """sekai's native vector env, random actions from its `batch_action_space`."""

    label = "sekai native"

    def __init__(self, env_id: str, num_envs: int, steps: int, **common: Any) -> None:
        super().__init__(env_id, num_envs, steps, **common)
        sekai = _import_sekai()
        kwargs = dict(self.env_kwargs)
        if self.max_episode_steps is not None:
            kwargs["max_episode_steps"] = self.max_episode_steps
        try:
            self.vec = sekai.make_vec(
                env_id,
                num_envs=num_envs,
                vectorization_mode="native",
                vector_kwargs={"autoreset": self.autoreset},
                **kwargs,
            )
        except Exception as error:
            raise ValueError(f"sekai cannot build {env_id!r} natively: {error}") from error
        self.extra["version"] = getattr(sekai, "__version__", None)

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


class _CountingGenerator:
    """A numpy `Generator` that counts its `standard_exponential` draws (one per waiting
    time of sekai's flow), forwarding every call unchanged."""

    def __init__(self, generator: np.random.Generator) -> None:
        self.generator = generator
        self.exponentials = 0

    def standard_exponential(self, *args: Any, **kwargs: Any) -> Any:
        self.exponentials += 1
        return self.generator.standard_exponential(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.generator, name)


class _CountingFlow:
    """sekai's flow, counting its events: each run of its event loop draws one waiting time
    per event plus the one that crosses the end time, so a run had `exponentials - 1`."""

    def __init__(self, flow: Any) -> None:
        self.flow = flow
        self.events = 0

    def advance(self, book: Any, generator: Any, until: float) -> Any:
        proxy = _CountingGenerator(generator)
        fills = self.flow.advance(book, proxy, until)
        self.events += proxy.exponentials - 1
        return fills

    def __getattr__(self, name: str) -> Any:
        return getattr(self.flow, name)


class SekaiLoopRunner(Runner):
    """sekai's env stepped in a Python loop, for ids without a native vector env.

    `timed_envs` of the N envs (`LOOP_ENVS` by default) are built with `sekai.make`, seeded
    `seed, seed + 1, ...`, and each stepped in turn with a random legal action (uniform over
    the choices its `action_mask()` allows, per dimension; the action space's `sample()`
    for an env without masks); a finished episode is reset in the same call, as auto-reset
    does. A Python loop costs the same per env step whatever N, so the throughput is
    reported per env step (`env_steps_per_run = timed_envs * steps`).
    """

    label = "sekai loop"

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        steps: int,
        *,
        timed_envs: int | None = None,
        **common: Any,
    ) -> None:
        super().__init__(env_id, num_envs, steps, **common)
        env_kwargs, max_episode_steps = self.env_kwargs, self.max_episode_steps
        sekai = _import_sekai()
        count = min(num_envs, LOOP_ENVS if timed_envs is None else timed_envs)
        if count < 1:
            raise ValueError(f"timed_envs must be a positive int, got {timed_envs!r}")
        kwargs = {k: v for k, v in env_kwargs.items() if k not in OURS_ONLY}
        try:
            self.envs = [
                sekai.make(env_id, max_episode_steps=max_episode_steps, **kwargs)
                for _ in range(count)
            ]
        except Exception as error:
            raise ValueError(f"sekai cannot build {env_id!r}: {error}") from error
        self.env_steps_per_run = count * steps
        self.extra["version"] = getattr(sekai, "__version__", None)
        self.extra["ignored_env_kwargs"] = sorted(set(env_kwargs) - set(kwargs))
        self.extra["note"] = (
            f"sekai has no native vector env for {env_id}: {count} of the {num_envs} envs "
            "stepped in a Python loop, throughput per env step"
            + ("" if self.autoreset else "; finished episodes are reset all the same")
        )

    def _action(self, env: Any) -> Any:
        masks = env.unwrapped.action_mask() if hasattr(env.unwrapped, "action_mask") else None
        if masks is None:
            return env.action_space.sample()
        action = np.empty(len(masks), np.int64)
        for i, mask in enumerate(masks):
            allowed = np.flatnonzero(mask)
            action[i] = allowed[self.generator.integers(len(allowed))]
        return action

    def prepare(self) -> float | None:
        """Reset (seeded) and warm up; sekai compiles nothing (None)."""
        self.generator = np.random.default_rng(self.seed)
        for i, env in enumerate(self.envs):
            env.reset(seed=self.seed + i)
            env.action_space.seed(self.seed + i)
        for env in self.envs:  # warm-up
            self._step(env)
        return None

    def _step(self, env: Any) -> int:
        result = env.step(self._action(env))
        if result.terminated or result.truncated:
            env.reset()
            return 1
        return 0

    def run(self) -> tuple[float, int]:
        ended = 0
        envs, step = self.envs, self._step
        t0 = time.perf_counter()
        for _ in range(self.steps):
            for env in envs:
                ended += step(env)
        return time.perf_counter() - t0, ended

    def count_events(self) -> float | None:
        """Background events per env step, counted in one more (untimed) call.

        Each env's flow (`env.unwrapped.core.flow`) is swapped for a counting one for the
        call (`_CountingFlow`; the warm-up of an episode reset inside the call counts too,
        as in our replay). None for an env without sekai's flow.
        """
        cores: list[Any] = [getattr(env.unwrapped, "core", None) for env in self.envs]
        if any(not hasattr(getattr(core, "flow", None), "advance") for core in cores):
            return None
        counted = [_CountingFlow(core.flow) for core in cores]
        for core, flow in zip(cores, counted, strict=True):
            core.flow = flow
        try:
            self.run()
        finally:
            for core, flow in zip(cores, counted, strict=True):
                core.flow = flow.flow
        return sum(flow.events for flow in counted) / self.env_steps_per_run

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []


# -- our limit order book's event count ------------------------------------------------------
_LOB_ENV_MODULE = "parallax.finance._lob._env"


@contextmanager
def _capturing(name: str) -> Iterator[list[Any]]:
    """While tracing inside the block, record the `FlowStats` that `_env.<name>` returns.

    `LimitOrderBookEnv` calls `run_flow` (step) and `warm_up` (reset) through its module's
    globals; swapping one for a recording copy during a trace adds no operation to the
    traced program: the stats are computed by the env anyway, and only read here.
    """
    module = importlib.import_module(_LOB_ENV_MODULE)
    original = getattr(module, name)
    seen: list[Any] = []

    def recording(*args: Any, **kwargs: Any) -> Any:
        book, stats = original(*args, **kwargs)
        seen.append(stats)
        return book, stats

    setattr(module, name, recording)
    try:
        yield seen
    finally:
        setattr(module, name, original)


class FlowEventCounter(Wrapper):
    """Adds `info["flow_events"]` (int32): the background events of the step's flow, or of
    the reset's warm-up. A benchmark-side wrapper for `LimitOrderBookEnv`, used only in the
    untimed replay of `count_flow_events`, never in a timed rollout."""

    def reset(self, *, key: Any, **kwargs: Any) -> Any:
        with _capturing("warm_up") as seen:
            state = self.env.reset(key=key, **kwargs)
        return dataclasses.replace(state, info={**state.info, "flow_events": seen[-1].events})

    def step(self, state: Any, action: Any, params: Any = None) -> Any:
        with _capturing("run_flow") as seen:
            state = step_env(self.env, state, action, params)
        return dataclasses.replace(state, info={**state.info, "flow_events": seen[-1].events})


def _events_of_step(state: Any) -> jax.Array:
    """Events that produced `state` across the batch: the step's flow, plus the warm-up of
    every env that the same-step auto-reset restarted (its step's own count is then in
    `final_info`)."""
    info = state.info
    if "final_info" not in info:
        return jnp.sum(info["flow_events"], dtype=jnp.int32)
    stepped = jnp.sum(info["final_info"]["flow_events"], dtype=jnp.int32)
    warm = jnp.sum(jnp.where(state.done, info["flow_events"], 0), dtype=jnp.int32)
    return stepped + warm


def count_flow_events(runner: Any, calls: int) -> dict[str, Any] | None:
    """The flow events of our timed calls, counted by replaying them untimed.

    `runner` is `parallax.bench.ParallaxRunner` after its calls: its rollout is
    deterministic (the reset key, the action draws at step counters `0, 1, ...`), so the
    same `make_vec` stack with `FlowEventCounter` inside, reset with the same key and run
    for the same `calls` calls of `steps` steps, runs the same events, and counts them.
    `exact` says whether the replay's final state equals the timed rollout's (every leaf of
    `env_state`).

    Returns:
        None when the env is not a `LimitOrderBookEnv`; else `{"per_call": [events of each
        call, the warm-up call first], "exact": bool, "counted_by": str}`.
    """
    from parallax.finance import LimitOrderBookEnv

    if not isinstance(runner.vec.unwrapped, LimitOrderBookEnv) or runner.state is None:
        return None
    vec = make_vec(
        runner.env_id,
        runner.num_envs,
        runner.max_episode_steps,
        runner.autoreset,
        wrappers=[FlowEventCounter],
        **runner.env_kwargs,
    )
    key = jax.random.key(runner.seed)
    state = jax.jit(lambda k: vec.reset(key=k))(key)
    episode_key = rng.episode_key(jax.random.fold_in(key, 1))

    def rollout(state: Any, start: jax.Array) -> Any:
        ts = start + jnp.arange(runner.steps, dtype=jnp.uint32)
        return action_scan(
            vec.step, state, runner.sample, episode_key, ts, count_done=_events_of_step
        )

    compiled = jax.jit(rollout, donate_argnums=0).lower(state, jnp.uint32(0)).compile()
    per_call = []
    for c in range(calls):
        state, events = compiled(state, jnp.uint32((c * runner.steps) % 2**32))
        per_call.append(int(events))
    ours, replayed = runner.state.env_state, state.env_state
    exact = all(
        bool(np.array_equal(np.asarray(a), np.asarray(b)))
        for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(replayed), strict=True)
    )
    return {
        "per_call": per_call,
        "exact": exact,
        "counted_by": (
            "an untimed replay of the timed calls (same reset key and action draws) through "
            "FlowEventCounter, which reads the flow's own FlowStats.events; the resets' "
            "warm-ups count"
        ),
    }


class GymnaxRunner(ScanRunner):
    """gymnax's own `jax.vmap(env.step)` (with its internal auto-reset) in a jitted scan."""

    label = "gymnax vmap"

    def __init__(
        self, env_id: str, num_envs: int, steps: int, *, sample: Any, **common: Any
    ) -> None:
        super().__init__(env_id, num_envs, steps, **common)
        namespace, _, name = env_id.partition("/")
        if namespace != "gymnax" or not name:
            raise ValueError(f"--compare gymnax needs a 'gymnax/NAME' id, got {env_id!r}")
        if not self.autoreset:
            raise ValueError("--compare gymnax needs auto-reset (gymnax always auto-resets)")
        try:
            import gymnax
        except ModuleNotFoundError as error:
            if error.name != "gymnax":
                raise
            raise ImportError("--compare gymnax needs gymnax: pip install gymnax") from None
        kwargs = {k: v for k, v in self.env_kwargs.items() if k != "params"}
        self.env, params = gymnax.make(name, **kwargs)
        if self.max_episode_steps is not None:
            params = params.replace(max_steps_in_episode=self.max_episode_steps)
        self.params, self.sample = params, sample

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
        key = jax.random.key(self.seed)
        keys = jax.random.split(key, self.num_envs)
        reset = jax.jit(jax.vmap(self.env.reset, in_axes=(0, None)))
        _, self.state = jax.block_until_ready(reset(keys, self.params))
        return self._compile(key)


def _gymnax_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gymnax")
    except PackageNotFoundError:
        return "?"


def find_parallax_rl_python(explicit: str | None) -> str:
    """The interpreter that runs parallax-rl 0.4.0: `explicit`, else `$PARALLAX_RL_PYTHON`."""
    python = explicit or os.environ.get("PARALLAX_RL_PYTHON")
    if not python:
        raise ValueError(
            "--compare parallax-rl needs the interpreter of a separate virtual environment "
            "with parallax-rl 0.4.0 and gymnax installed: pass --parallax-rl-python PATH or "
            "set $PARALLAX_RL_PYTHON (its import name `parallax` clashes with ours)"
        )
    return python


class ParallaxRLRunner(Runner):
    """The published parallax-rl 0.4.0 stack in a worker process of another interpreter.

    `VmapWrapper(AutoResetWrapper(TimeLimit(GymnaxAdapter(env), M)), N)`, random actions
    from `jax.random`, a jitted scan (`parallax_rl_worker.py`); the worker waits on its stdin
    between timed calls, so its repeats interleave with ours like the in-process ones'.
    """

    label = "parallax-rl"

    def __init__(
        self, env_id: str, num_envs: int, steps: int, *, python: str, **common: Any
    ) -> None:
        super().__init__(env_id, num_envs, steps, **common)
        namespace, _, name = env_id.partition("/")
        if namespace != "gymnax" or not name:
            raise ValueError(f"--compare parallax-rl needs a 'gymnax/NAME' id, got {env_id!r}")
        if not self.autoreset or self.env_kwargs:
            raise ValueError("--compare parallax-rl needs auto-reset and no --env-kwarg")
        self.cfg = {
            "name": name,
            "num_envs": num_envs,
            "steps": steps,
            "max_episode_steps": 500 if self.max_episode_steps is None else self.max_episode_steps,
            "seed": self.seed,
        }
        self.python = python
        self.extra["process"] = "worker subprocess, interleaved"
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
            [self.python, "-I", str(WORKER), json.dumps(self.cfg)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # -I: neither this folder nor the current directory is on its sys.path
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


def make_runner(
    name: str,
    env_id: str,
    num_envs: int,
    steps: int,
    *,
    autoreset: bool,
    max_episode_steps: int | None,
    seed: int,
    env_kwargs: dict[str, Any],
    sample: Any,
    parallax_rl_python: str | None = None,
    timed_envs: int | None = None,
) -> Any:
    """The runner of competitor `name` (one of `NAMES`) for `env_id` at batch size `num_envs`.

    Args:
        name: `"sekai"`, `"gymnax"` or `"parallax-rl"`.
        env_id: the id measured on our side (`gymnax/NAME` for the last two).
        num_envs: the batch size N.
        steps: env steps per timed call.
        autoreset, max_episode_steps, seed, env_kwargs: as on our side.
        sample: our random-action sampler (`parallax.random_actions`), which the gymnax
            runner shares so both sides step on the same actions.
        parallax_rl_python: the interpreter for `"parallax-rl"` (else `$PARALLAX_RL_PYTHON`).
        timed_envs: how many envs sekai's Python loop times, for an id sekai cannot
            vectorize natively (default `LOOP_ENVS`, at most `num_envs`).

    Raises:
        ValueError: an unknown `name`, an id the competitor cannot run, or no interpreter
            for parallax-rl.
        ImportError: the competitor's library is not installed.
    """
    common: dict[str, Any] = {
        "autoreset": autoreset,
        "max_episode_steps": max_episode_steps,
        "seed": seed,
        "env_kwargs": env_kwargs,
    }
    if name == "sekai":
        try:
            native = _import_sekai().spec(env_id).vector_entry_point is not None
        except Exception:  # an id sekai does not know: SekaiRunner says so
            native = True
        if not native:
            return SekaiLoopRunner(env_id, num_envs, steps, timed_envs=timed_envs, **common)
        return SekaiRunner(env_id, num_envs, steps, **common)
    if name == "gymnax":
        return GymnaxRunner(env_id, num_envs, steps, sample=sample, **common)
    if name == "parallax-rl":
        python = find_parallax_rl_python(parallax_rl_python)
        return ParallaxRLRunner(env_id, num_envs, steps, python=python, **common)
    raise ValueError(f"make_runner: name must be one of {NAMES}, got {name!r}")
