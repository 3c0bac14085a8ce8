"""Helpers for differential tests of the finance envs against sekai 0.2.0 (shared; stable API).

- `ReplayGenerator(draws)`: a stand-in for `numpy.random.Generator` that serves a list of
  pre-computed draws `(method, args, value)` in order and checks that every call's method
  and arguments are the expected ones (spec section 1.1: set `sekai_env.rng = shim` and call
  `reset()` without a seed). `assert_exhausted()` checks that every draw was used.
- `TOLERANCE`, `values_match(ours, ref)`, `assert_values_match(ours, ref, where)`: the
  comparison rule of spec section 9.3 (float32: exact up to rtol 1e-6; float64:
  `|a - b| <= 1e-12 + 1e-9 |b|`; bools and ints exact), applied leaf by leaf.
- `rollout(env, key, actions, start=None)`: our env's episode as one jitted `lax.scan`,
  compiled once per static configuration (params are an argument, so configurations that
  differ only in numbers share the compilation).
- `run_against_sekai(env, sekai_env, key, actions, start=None)`: run our episode, reset
  sekai with our draws (`env.sekai_draws`) and step it with the same actions until the
  episode ends or the actions run out, comparing observations, rewards, flags and every info
  key on every step. Returns the number of steps compared. Our env must implement
  `reset(key=, start=, params=)`, `step(state, action, params)`, `params` and
  `sekai_draws(key, start)`; sekai is driven through its single-env API.
- `to_sekai_action(action)`: a JAX action as the value sekai's single env accepts.
- `SekaiReference(env, sekai_env)` and `sekai_tolerance()`: the same comparison through
  `parallax.testing.check_matches_reference` (sekai as a `Reference` fed our draws, and the
  rule above as a `Tolerance`).
- `sp500(rows=None)`: S&P 500 daily adjusted closes from `arch.data.sp500` (a dated Series).

Run the comparisons with `jax.enable_x64(True)`: float64 rewards and infos are compared with
the float64 rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

__all__ = [
    "TOLERANCE",
    "ReplayGenerator",
    "SekaiReference",
    "assert_values_match",
    "rollout",
    "run_against_sekai",
    "sekai_tolerance",
    "sp500",
    "to_sekai_action",
    "values_match",
]

TOLERANCE = {"float32_rtol": 1e-6, "float64_atol": 1e-12, "float64_rtol": 1e-9}


class ReplayGenerator:
    """Serve pre-computed draws to sekai in order, checking each call.

    Args:
        draws: `(method, args, value)` triples, e.g. `("standard_normal", ((S, n),), block)`
            or `("integers", (0, n), 7)`. `args` are the positional arguments sekai passes
            (a `size=` keyword counts as the last positional argument).
    """

    def __init__(self, draws: Sequence[tuple[str, tuple[Any, ...], Any]]) -> None:
        self._draws = list(draws)
        self._served = 0

    def _next(self, method: str, args: tuple[Any, ...]) -> Any:
        if self._served >= len(self._draws):
            raise AssertionError(f"sekai asked for an extra draw {method}{args}")
        want_method, want_args, value = self._draws[self._served]
        norm = tuple(tuple(a) if isinstance(a, list) else a for a in args)
        if want_method != method or tuple(want_args) != norm:
            raise AssertionError(
                f"draw {self._served}: sekai called {method}{norm}, expected "
                f"{want_method}{tuple(want_args)}"
            )
        self._served += 1
        return value

    @staticmethod
    def _args(*args: Any, size: Any = None) -> tuple[Any, ...]:
        if size is not None:
            args = (*args, tuple(size) if isinstance(size, list | tuple) else size)
        return args

    def standard_normal(self, size: Any = None) -> Any:
        """Serve a `standard_normal(size)` draw."""
        out = self._next("standard_normal", self._args(size=size))
        return float(out) if size is None else np.asarray(out, dtype=np.float64)

    def random(self, size: Any = None) -> Any:
        """Serve a `random(size)` draw."""
        out = self._next("random", self._args(size=size))
        return float(out) if size is None else np.asarray(out, dtype=np.float64)

    def integers(self, low: Any, high: Any = None, size: Any = None, **kwargs: Any) -> Any:
        """Serve an `integers(low, high[, size])` draw."""
        args = (int(low),) if high is None else (int(low), int(high))
        out = self._next("integers", self._args(*args, size=size))
        return int(out) if size is None else np.asarray(out, dtype=np.int64)

    def poisson(self, lam: Any, size: Any = None) -> Any:
        """Serve a `poisson(lam, size)` draw."""
        out = self._next("poisson", self._args(size=size))
        return np.asarray(out)

    @property
    def served(self) -> int:
        """How many draws were served."""
        return self._served

    def assert_exhausted(self) -> None:
        """Every draw was served."""
        assert self._served == len(self._draws), (
            f"sekai used {self._served} of {len(self._draws)} draws"
        )


def values_match(ours: Any, ref: Any) -> bool:
    """The spec's comparison rule for one value (arrays compared element-wise)."""
    a = np.asarray(ours)
    b = np.asarray(ref)
    if a.shape != b.shape:
        return False
    if a.dtype == np.bool_ or b.dtype == np.bool_ or a.dtype.kind in "iu" or b.dtype.kind in "iu":
        return bool(np.array_equal(a.astype(np.float64), b.astype(np.float64)))
    if a.dtype == np.float32 or b.dtype == np.float32:
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        return bool(
            np.all((a32 == b32) | (np.abs(a32 - b32) <= TOLERANCE["float32_rtol"] * np.abs(b32)))
        )
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = TOLERANCE["float64_atol"] + TOLERANCE["float64_rtol"] * np.abs(b64)
    return bool(np.all((a64 == b64) | (np.abs(a64 - b64) <= bound)))


def assert_values_match(ours: Any, ref: Any, where: str) -> None:
    """Assert `values_match` (per key for dicts), naming `where` and both values on failure."""
    if isinstance(ref, dict):
        assert list(ours) == list(ref), f"{where}: keys {list(ours)} != {list(ref)}"
        for name in ref:
            assert_values_match(ours[name], ref[name], f"{where}[{name!r}]")
        return
    if not values_match(ours, ref):
        raise AssertionError(f"{where}: ours {np.asarray(ours)!r} != sekai {np.asarray(ref)!r}")


def _compare_observation(ours: Any, ref: Any, where: str) -> None:
    if isinstance(ref, dict):
        assert list(ours) == list(ref), f"{where}: observation keys {list(ours)} != {list(ref)}"
        for name in ref:
            assert np.asarray(ours[name]).dtype == np.asarray(ref[name]).dtype, where
            assert_values_match(ours[name], ref[name], f"{where} observation[{name!r}]")
    else:
        assert np.asarray(ours).dtype == np.asarray(ref).dtype, where
        assert_values_match(ours, ref, f"{where} observation")


def _compare_info(
    ours: dict[str, Any], ref: dict[str, Any], where: str, timestamps: Any = None
) -> None:
    assert set(ours) == set(ref), f"{where}: info keys {sorted(ours)} != {sorted(ref)}"
    for name, value in ref.items():
        if name == "timestamp" and timestamps is not None:
            mapped = timestamps[int(ours[name])]
            assert mapped == value, f"{where}: timestamp {mapped!r} != sekai {value!r}"
            continue
        assert_values_match(ours[name], value, f"{where} info[{name!r}]")


def to_sekai_action(action: Any) -> Any:
    """A JAX action as sekai's single env takes it: a Python int, or a float32 array."""
    a = np.asarray(action)
    if a.dtype.kind in "iu" and a.ndim == 0:
        return int(a)
    return a.astype(np.float32)


_ROLLOUTS: dict[Any, Callable[..., Any]] = {}


def _signature(env: Any, start: Any) -> Any:
    """What fixes the compiled rollout of an env: everything but its params."""
    history = getattr(env, "prices", None)
    return (
        type(env).__name__,
        env.lookback,
        env.episode_length,
        getattr(env, "n_assets", 1),
        getattr(env, "allow_short", None),
        repr(env.action_space),
        repr(env.observation_space),
        env.sampler,
        None if history is None else hash(np.asarray(history).tobytes()),
        start is None,
        jax.tree.structure(env.params),
        jax.config.jax_enable_x64,
    )


def rollout(env: Any, key: jax.Array, actions: Any, *, start: Any = None) -> tuple[Any, Any]:
    """Reset and step `env` through `actions` in one jitted `lax.scan`.

    The compiled function is cached by the env's static configuration and takes the params
    and the start row as arguments, so envs that differ only in their numbers, and episodes
    with different starts, share one compilation.

    Returns:
        `(first state, stacked states after each action)`, on the host.
    """
    sig = _signature(env, start)
    if sig not in _ROLLOUTS:
        template = env

        def run(key: jax.Array, actions: Any, params: Any, row: Any) -> tuple[Any, Any]:
            first = template.reset(key=key, start=row, params=params)

            def body(state: Any, action: Any) -> tuple[Any, Any]:
                nxt = template.step(state, action, params)
                return nxt, nxt

            _, states = jax.lax.scan(body, first, actions)
            return first, states

        _ROLLOUTS[sig] = jax.jit(run)
    row = None if start is None else np.int32(env.resolve_start(start))
    first, states = _ROLLOUTS[sig](key, actions, env.params, row)
    return jax.device_get(first), jax.device_get(states)


def run_against_sekai(
    env: Any,
    sekai_env: Any,
    key: jax.Array,
    actions: Any,
    *,
    start: Any = None,
    timestamps: Any = None,
) -> int:
    """Run `env` and `sekai_env` through one episode with the same actions; compare everything.

    Our env runs as one jitted scan (`rollout`); sekai is fed our draws through
    `env.sekai_draws` and a `ReplayGenerator`, then stepped action by action until its
    episode ends or the actions run out. Observations, rewards, flags and every info key are
    compared on every step with the tolerance rule.

    Args:
        env: our env (with `sekai_draws`).
        sekai_env: a sekai env built with the same arguments.
        key: our reset key.
        actions: a stacked array of actions `(T, ...)`.
        start: optional first-decision row (our `start=`, sekai's `options["start"]`).
        timestamps: optional host array mapping our int `timestamp` (a row) to sekai's
            (e.g. the dates of a dated history, `env.timestamps`).

    Returns:
        The number of steps compared.
    """
    actions = np.asarray(actions)
    first, states = rollout(env, key, actions, start=start)
    shim = ReplayGenerator(env.sekai_draws(key, start))
    sekai_env.rng = shim
    ref = sekai_env.reset(options=None if start is None else {"start": start})
    shim.assert_exhausted()
    _compare_observation(first.observation, ref.observation, "reset")
    _compare_info(first.info, ref.info, "reset", timestamps)
    steps = 0
    for t in range(actions.shape[0]):
        state = jax.tree.map(lambda x, t=t: x[t], states)
        out = sekai_env.step(to_sekai_action(actions[t]))
        where = f"step {t + 1}"
        _compare_observation(state.observation, out.observation, where)
        assert_values_match(state.reward, out.reward, f"{where} reward")
        assert bool(state.termination) == out.terminated, f"{where} terminated"
        assert bool(state.truncation) == out.truncated, f"{where} truncated"
        _compare_info(state.info, out.info, where, timestamps)
        steps += 1
        if out.terminated or out.truncated:
            break
    return steps


def sekai_tolerance() -> Any:
    """The spec's comparison rule as a `parallax.testing.Tolerance`.

    Float64 values (rewards, infos): `|a - b| <= 1e-12 + 1e-9 |b|`; float32 observations:
    relative 1e-6; bools and ints exact.
    """
    from parallax.testing import FloatRule, Tolerance

    return Tolerance(
        rtol=TOLERANCE["float64_rtol"],
        atol=TOLERANCE["float64_atol"],
        per_field={"observation": FloatRule(rtol=TOLERANCE["float32_rtol"])},
    )


class SekaiReference:
    """A sekai single env as a `parallax.testing.Reference`, fed our env's draws.

    `reset(key, initial)` serves `env.sekai_draws(key)` to sekai through a
    `ReplayGenerator`, so sekai's episode is ours; records hold the observation, reward,
    flags and every info entry (compared as `info.<name>`).

    Args:
        env: our env (with `sekai_draws`).
        sekai_env: the sekai env built with the same arguments.
    """

    def __init__(self, env: Any, sekai_env: Any) -> None:
        self.env = env
        self.sekai_env = sekai_env

    @staticmethod
    def _record(out: Any, reward: Any, terminated: bool, truncated: bool) -> dict[str, Any]:
        return {
            "observation": out.observation,
            "reward": np.float64(reward),
            "termination": np.bool_(terminated),
            "truncation": np.bool_(truncated),
            "info": dict(out.info),
        }

    def reset(self, key: Any, initial: Any) -> dict[str, Any]:
        """Reset sekai with our draws for `key`."""
        shim = ReplayGenerator(self.env.sekai_draws(key))
        self.sekai_env.rng = shim
        out = self.sekai_env.reset()
        shim.assert_exhausted()
        return self._record(out, 0.0, False, False)

    def step(self, action: Any) -> dict[str, Any]:
        """Step sekai with our action."""
        out = self.sekai_env.step(to_sekai_action(action))
        return self._record(out, out.reward, out.terminated, out.truncated)


def sp500(rows: int | None = None) -> Any:
    """S&P 500 daily adjusted closes from `arch.data.sp500`, the first `rows`, as a pandas
    Series indexed by date (`np.asarray(...)` gives the float64 prices)."""
    from arch.data import sp500 as data

    closes = data.load()["Adj Close"]
    return closes if rows is None else closes.iloc[:rows]
