"""The other side of `parallax bench ID --compare NAME`: the competitors' runners.

`parallax bench` measures the user's own env anywhere; the competitors live here, in the
source checkout, because they are developer tools (they import sekai, gymnax's internals, or
run a published parallax-rl release in another interpreter) and stay out of the wheel. The
command finds this module in the checkout that holds the running `parallax` package (an
editable install) or in the current directory, and says how to get one when neither has it.

- `make_runner(name, env_id, num_envs, steps, ...)`: the runner of one competitor;
- `SekaiRunner`: sekai's native vector env (`sekai.make_vec(..., vectorization_mode=
  "native")`), random actions from its `batch_action_space`, same process;
- `GymnaxRunner`: gymnax's own `jax.vmap(env.step)` with its internal auto-reset in a jitted
  `lax.scan`, with our actions (`parallax.action_scan`), same process;
- `ParallaxRLRunner`: the published parallax-rl 0.4.0 stack in `parallax_rl_worker.py`, run
  by the interpreter of a separate virtual environment (its import name clashes with ours).

A runner has `label`, `extra` (a dict reported as `competitor_<key>`), `prepare() ->
compile seconds or None` (build, compile, warm up), `run() -> (seconds, episodes ended)`
(one timed call of `steps` steps) and `close()`; `parallax.bench.benchmark` interleaves its
`run` calls with ours.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from parallax import action_scan, rng

NAMES = ("sekai", "gymnax", "parallax-rl")
WORKER = Path(__file__).resolve().with_name("parallax_rl_worker.py")

__all__ = [
    "NAMES",
    "GymnaxRunner",
    "ParallaxRLRunner",
    "SekaiRunner",
    "find_parallax_rl_python",
    "make_runner",
]


class SekaiRunner:
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


class GymnaxRunner:
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
        sample: Any,
    ) -> None:
        namespace, _, name = env_id.partition("/")
        if namespace != "gymnax" or not name:
            raise ValueError(f"--compare gymnax needs a 'gymnax/NAME' id, got {env_id!r}")
        if not autoreset:
            raise ValueError("--compare gymnax needs auto-reset (gymnax always auto-resets)")
        try:
            import gymnax
        except ModuleNotFoundError as error:
            if error.name != "gymnax":
                raise
            raise ImportError("--compare gymnax needs gymnax: pip install gymnax") from None
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


class ParallaxRLRunner:
    """The published parallax-rl 0.4.0 stack in a worker process of another interpreter.

    `VmapWrapper(AutoResetWrapper(TimeLimit(GymnaxAdapter(env), M)), N)`, random actions
    from `jax.random`, a jitted scan (`parallax_rl_worker.py`); the worker waits on its stdin
    between timed calls, so its repeats interleave with ours like the in-process ones'.
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
        return SekaiRunner(env_id, num_envs, steps, **common)
    if name == "gymnax":
        return GymnaxRunner(env_id, num_envs, steps, sample=sample, **common)
    if name == "parallax-rl":
        python = find_parallax_rl_python(parallax_rl_python)
        return ParallaxRLRunner(env_id, num_envs, steps, python=python, **common)
    raise ValueError(f"make_runner: name must be one of {NAMES}, got {name!r}")
