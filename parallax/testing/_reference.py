"""`check_matches_reference`: a differential test of a JAX env against a reference.

- `Reference`: the interface a reference implementation provides (`reset`, `step`).
- `GymReference`: an adapter that makes a Gymnasium-API env (gymnasium, sekai) a `Reference`.
- `state_record`: the flat record of a JAX state that the reference's records are compared to.
- `check_matches_reference`: steps both with the same actions and compares them field by
  field under a `Tolerance`; on failure writes both trajectories to a JSON file.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import jax
import numpy as np

from .._core import MARLState
from ._errors import CheckError, ReferenceMismatch, format_value
from ._report import CheckReport
from ._rollout import Policy, as_typed_key, inspect_env, make_policy
from ._session import check_interface, validate_common
from ._tolerance import EXACT, Tolerance, ulp_distance
from ._trees import flatten, to_numpy

__all__ = [
    "GymReference",
    "Reference",
    "check_matches_reference",
    "flatten_record",
    "state_record",
]

_OWNER = "check_matches_reference"


@runtime_checkable
class Reference(Protocol):
    """A reference implementation: one instance, NumPy/Python values, same randomness.

    - `reset(key, initial) -> record`: start an episode. `key` is the JAX PRNG key the JAX
      env's `reset` receives (derive your randomness from it, e.g. with
      `parallax.rng.reference` and `parallax.rng.episode_key(key)`). `initial` is the
      record of the JAX reset state; a reference that shares the randomness ignores it, one
      that cannot (e.g. a NumPy-RNG sekai env) may copy its initial state from it, and then
      the reset itself is not under test.
    - `step(action) -> record`: advance with `action` (NumPy values: the JAX action
      converted leaf by leaf with `np.asarray`).

    A record is a mapping from field names to values (scalars, arrays, or nested
    mappings, flattened to dotted names: `{"info": {"cash": 1.0}}` is `info.cash`). Field
    names are those of `state_record` of the JAX state: `observation`, `reward`,
    `termination`, `truncation`, `step_count`, `env_state.<...>`, `info.<...>`, and for
    multi-agent states `agents.observation`, `agents.reward`, `agents.active`. Only the
    fields the reference returns are compared; it must return the observation.
    """

    def reset(self, key: Any, initial: Mapping[str, np.ndarray]) -> Mapping[str, Any]: ...

    def step(self, action: Any) -> Mapping[str, Any]: ...


def flatten_record(record: Any, prefix: str = "") -> dict[str, np.ndarray]:
    """A (nested) mapping as `{dotted name: np.ndarray}`."""
    if not isinstance(record, Mapping):
        raise TypeError(f"a record must be a mapping of field names to values, got {record!r}")
    out: dict[str, np.ndarray] = {}
    for name, value in record.items():
        full = f"{prefix}.{name}" if prefix else str(name)
        if isinstance(value, Mapping):
            out.update(flatten_record(value, full))
        else:
            out[full] = to_numpy(value)
    return out


def state_record(state: Any) -> dict[str, np.ndarray]:
    """The record of a JAX state: every field by dotted path, NumPy values, without `key`.

    Example:
        >>> import jax
        >>> from parallax.envs import GridWorld
        >>> from parallax.testing import state_record
        >>> sorted(state_record(GridWorld().reset(key=jax.random.key(0))))[:3]
        ['env_state.goal', 'env_state.pos', 'observation']
    """
    return {
        path: to_numpy(leaf)
        for path, leaf in flatten(state).items()
        if path != "key" and not path.startswith("key.")
    }


class GymReference:
    """A Gymnasium-API env (gymnasium, sekai) as a `Reference`.

    `reset(seed=...)` may return `(observation, info)` or an object with `.observation` and
    `.info` (sekai's `ResetResult`); `step(action)` may return the 5-tuple or an object with
    `.observation`, `.reward`, `.terminated`, `.truncated`, `.info` (sekai's `StepResult`).
    Records hold `observation`, `reward`, `termination`, `truncation` (the reset record has
    reward 0 and both flags False, as a Parallax reset state does) and `info.<name>` for
    each name in `info_keys`.

    Args:
        env: the Gymnasium-style env.
        seed: `seed(key) -> int` for `env.reset(seed=...)`; default: the last word of the
            key data. Only meaningful if the JAX env draws its randomness the same way.
        sync: optional `sync(env, initial) -> observation or None`, called after reset with
            the JAX reset record, to copy the JAX initial state into `env` when the two
            cannot share randomness (the returned observation replaces the reset one).
        info_keys: `info` entries to compare (as `info.<name>`).
        action: `action(np_action) -> env action`; default: a 0-d array becomes a Python
            scalar, anything else stays a NumPy array.

    Example:
        sekai's CartPole as a reference (the docs page "The validation battery" compares it
        with a JAX CartPole through `check_matches_reference`):

        >>> import numpy as np
        >>> import sekai
        >>> from parallax.testing import GymReference
        >>> ref = GymReference(sekai.make("CartPole-v1"), seed=lambda key: 0)
        >>> sorted(ref.reset(None, {}))
        ['observation', 'reward', 'termination', 'truncation']
        >>> record = ref.step(np.int32(1))
        >>> record["reward"], record["termination"], record["observation"].dtype
        (1.0, False, dtype('float32'))
    """

    def __init__(
        self,
        env: Any,
        *,
        seed: Callable[[Any], int] | None = None,
        sync: Callable[[Any, Mapping[str, np.ndarray]], Any] | None = None,
        info_keys: Sequence[str] = (),
        action: Callable[[Any], Any] | None = None,
    ) -> None:
        for name in ("reset", "step"):
            if not callable(getattr(env, name, None)):
                raise TypeError(f"GymReference: env must have a callable `{name}`, got {env!r}")
        for name, fn in (("seed", seed), ("sync", sync), ("action", action)):
            if fn is not None and not callable(fn):
                raise TypeError(f"GymReference: {name} must be callable or None, got {fn!r}")
        if isinstance(info_keys, str):
            raise TypeError(
                f"GymReference: info_keys must be a sequence of names, got the string {info_keys!r}"
            )
        self.env = env
        self.seed = seed
        self.sync = sync
        self.info_keys = tuple(info_keys)
        self.action = action

    def _seed(self, key: Any) -> int:
        if self.seed is not None:
            return int(self.seed(key))
        return int(to_numpy(key).ravel()[-1]) % (2**31 - 1)

    def _info(self, info: Any) -> dict[str, Any]:
        return {f"info.{k}": info[k] for k in self.info_keys}

    def reset(self, key: Any, initial: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """Reset with a seed derived from `key`; optionally sync from the JAX record."""
        out = self.env.reset(seed=self._seed(key))
        obs, info = (out.observation, out.info) if hasattr(out, "observation") else out
        if self.sync is not None:
            synced = self.sync(self.env, initial)
            if synced is not None:
                obs = synced
        return {
            "observation": obs,
            "reward": 0.0,
            "termination": False,
            "truncation": False,
            **self._info(info),
        }

    def step(self, action: Any) -> dict[str, Any]:
        """Step with `action` (converted by `self.action`)."""
        if self.action is not None:
            act = self.action(action)
        elif isinstance(action, np.ndarray) and action.ndim == 0:
            act = action.item()
        else:
            act = action
        out = self.env.step(act)
        if hasattr(out, "observation"):
            obs, reward, term, trunc, info = (
                out.observation,
                out.reward,
                out.terminated,
                out.truncated,
                out.info,
            )
        else:
            obs, reward, term, trunc, info = out
        return {
            "observation": obs,
            "reward": reward,
            "termination": bool(term),
            "truncation": bool(trunc),
            **self._info(info),
        }

    def __repr__(self) -> str:
        return f"GymReference({self.env!r})"


def _jsonable(value: Any) -> Any:
    arr = np.asarray(value)
    if arr.dtype == np.bool_ or np.issubdtype(arr.dtype, np.number):
        return arr.tolist()
    return repr(value)


def _write_dump(
    path: str | os.PathLike[str] | None,
    meta: dict[str, Any],
    steps: list[dict[str, Any]],
) -> str:
    if path is None:
        fd, name = tempfile.mkstemp(prefix="parallax-mismatch-", suffix=".json")
        os.close(fd)
    else:
        name = os.fspath(path)
        if os.path.isdir(name):
            stamp = time.strftime("%Y%m%d-%H%M%S")
            name = os.path.join(name, f"parallax-mismatch-{stamp}-{os.getpid()}.json")
    payload = {
        **meta,
        "steps": [
            {
                "step": s["step"],
                "action": None if s["action"] is None else _jsonable_tree(s["action"]),
                "jax": {k: _jsonable(v) for k, v in s["jax"].items()},
                "reference": {k: _jsonable(v) for k, v in s["reference"].items()},
                "dtypes": {k: str(np.asarray(v).dtype) for k, v in s["jax"].items()},
            }
            for s in steps
        ],
    }
    with open(name, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, indent=1)
    return name


def _jsonable_tree(tree: Any) -> Any:
    flat = flatten(tree)
    if list(flat) == ["<root>"]:
        return _jsonable(flat["<root>"])
    return {k: _jsonable(v) for k, v in flat.items()}


def _describe_diff(got: np.ndarray, expected: np.ndarray) -> str:
    if np.issubdtype(got.dtype, np.floating):
        with np.errstate(invalid="ignore", over="ignore"):
            diff = float(np.abs(got.astype(np.float64) - np.asarray(expected, np.float64)))
        ulps = float(ulp_distance(got, expected, got.dtype))
        ulp_text = "inf" if not np.isfinite(ulps) else f"{ulps:.0f}"
        return f"|diff| = {diff:.3g}, {ulp_text} ulp in {got.dtype}"
    return "values differ"


def check_matches_reference(
    env: Any,
    reference: Reference,
    *,
    key: Any = None,
    num_steps: int = 32,
    num_episodes: int = 1,
    actions: Any = None,
    policy: Policy | None = None,
    tolerance: Tolerance = EXACT,
    record: Callable[[Any], Mapping[str, Any]] | None = None,
    dump_path: str | os.PathLike[str] | None = None,
    _step_fn: Any = None,
) -> CheckReport:
    """Step a JAX env and a reference with the same actions; compare every step field by field.

    For each episode `e` the JAX env is reset with `key_e = fold_in(key, e)` (eagerly; its
    steps run through `jax.jit(env.step)`) and the reference with `reference.reset(key_e, initial)` (see `Reference`).
    Then, for up to `num_steps` steps, the same action goes to both: from `actions` (a
    sequence, or a pytree with a leading time axis, used for every episode), else from
    `policy(key, state)` on the JAX state, else uniform samples of `action_space`. The
    episode ends after the first step where the JAX state is done.

    At every step (reset included), every field the reference returns is compared with
    the same field of `record(jax_state)` (default `state_record`): shapes must agree;
    bools and ints must be equal; floats follow `tolerance` (the reference value is first
    rounded to the JAX dtype; the default `EXACT` asks for bit-identical values). A bool
    field that differs is accepted when a `tolerance.near_threshold` hook explains it (e.g.
    `NearThreshold("termination", "env_state.energy", 0.0, ulp=4)`); the episode then
    stops there, since the two trajectories legitimately part.

    Args:
        env: a single (unbatched) env, single- or multi-agent.
        reference: an object with `reset(key, initial)` and `step(action)`, see `Reference`.
        key: a PRNG key (typed or raw); `jax.random.key(0)` by default.
        num_steps: the most steps per episode (positive int).
        num_episodes: episodes to compare (positive int).
        actions: fixed actions, or None.
        policy: `policy(key, state) -> action` (JAX), used when `actions` is None.
        tolerance: the comparison rule.
        record: `record(jax_state) -> mapping` naming the JAX fields (default
            `state_record`); use it to rename fields to the reference's names.
        dump_path: where to write the trajectories on failure: a file path, a directory, or
            None for a new file in the system's temporary directory.

    Returns:
        A `CheckReport`; `stats` hold the steps and episodes compared, the compared fields
        and the flips explained by near-threshold hooks.

    Raises:
        ReferenceMismatch: at the first unexplained divergence, naming the episode, step,
            field (with element index) and both values; `dump_path` holds the JSON file with
            the actions and both trajectories of that episode up to the divergence.

    Example:
        A NumPy reference of GridWorld that shares its randomness:

        >>> import jax, numpy as np
        >>> from parallax.envs import GridWorld
        >>> from parallax.testing import check_matches_reference
        >>> class GridReference:
        ...     def reset(self, key, initial):
        ...         _, goal_key = jax.random.split(key)  # GridWorld's draw, same key
        ...         goal = jax.random.randint(goal_key, (2,), 1, 5)
        ...         self.pos, self.goal = np.zeros(2, np.float32), np.asarray(goal, np.float32)
        ...         return {"observation": np.concatenate([self.pos, self.goal])}
        ...     def step(self, action):
        ...         move = [(0, 1), (0, -1), (1, 0), (-1, 0)][int(action)]
        ...         self.pos = np.clip(self.pos + np.float32(move), 0, 4).astype(np.float32)
        ...         done = bool((self.pos == self.goal).all())
        ...         return {"observation": np.concatenate([self.pos, self.goal]),
        ...                 "termination": done}
        >>> report = check_matches_reference(GridWorld(), GridReference(), num_steps=10)
        >>> report.stats["steps_compared"] > 0
        True
    """
    num_steps, policy, _ = validate_common(_OWNER, num_steps, policy, None)
    if isinstance(num_episodes, bool) or not isinstance(num_episodes, int) or num_episodes < 1:
        raise ValueError(f"{_OWNER}: num_episodes must be a positive int, got {num_episodes!r}")
    for name in ("reset", "step"):
        if not callable(getattr(reference, name, None)):
            raise TypeError(
                f"{_OWNER}: reference must have a callable `{name}` (see parallax.testing."
                f"Reference), got {type(reference).__name__}"
            )
    if not isinstance(tolerance, Tolerance):
        raise TypeError(f"{_OWNER}: tolerance must be a Tolerance, got {tolerance!r}")
    if record is not None and not callable(record):
        raise TypeError(f"{_OWNER}: record must be callable or None, got {record!r}")
    action_list: list[Any] | None = None
    if actions is not None:
        if isinstance(actions, list | tuple):
            action_list = list(actions)
        else:
            leaves = jax.tree.leaves(actions)
            length = int(np.shape(leaves[0])[0]) if leaves else 0
            action_list = [
                jax.tree.map(lambda x, t=t: np.asarray(x)[t], actions) for t in range(length)
            ]
        if not action_list:
            raise ValueError(f"{_OWNER}: actions must hold at least one action")
    key = as_typed_key(key, _OWNER)
    check_interface(env, _OWNER)
    k_env, k_policy = jax.random.split(key)
    probe = jax.eval_shape(lambda: env.reset(key=k_env))
    kind = inspect_env(env, probe, False, _OWNER)
    if kind.vector:
        raise ValueError(
            f"{_OWNER}: env must be a single (unbatched) env; compare one instance with the "
            "reference and use check_batch_independence for the batch"
        )
    chosen = make_policy(env, policy, jax.random.key_impl(key))
    to_record = record or state_record
    # reset and the policy run eagerly: one compilation in all (none when the battery hands
    # over its session's jax.jit(env.step))
    step_j = _step_fn if _step_fn is not None else jax.jit(env.step)

    def reset_j(k: Any) -> Any:
        with jax.disable_jit():
            return env.reset(key=k)

    def act_j(k: Any, s: Any) -> Any:
        with jax.disable_jit():
            return chosen(chosen.prepare(k), s)

    stats: dict[str, Any] = {
        "episodes": 0,
        "steps_compared": 0,
        "fields": [],
        "explained_flips": [],
    }
    meta = {
        "env": repr(env),
        "reference": repr(reference),
        "tolerance": repr(tolerance),
        "key_data": to_numpy(key).tolist(),
    }

    for episode in range(num_episodes):
        episode_key = jax.random.fold_in(k_env, episode)
        state = reset_j(episode_key)
        got = {k: to_numpy(v) for k, v in to_record(state).items()}
        want = flatten_record(reference.reset(episode_key, got))
        if not want:
            raise CheckError(
                f"{_OWNER}/interface", "reference.reset returned an empty record", step=0
            )
        if episode == 0:
            stats["fields"] = list(want)
        history: list[dict[str, Any]] = []
        steps = num_steps if action_list is None else min(num_steps, len(action_list))
        for t in range(steps + 1):
            if t > 0:
                if action_list is not None:
                    action = action_list[t - 1]
                else:
                    action = act_j(
                        jax.random.fold_in(jax.random.fold_in(k_policy, episode), t), state
                    )
                np_action = jax.tree.map(np.asarray, action)
                state = step_j(state, action)
                got = {k: to_numpy(v) for k, v in to_record(state).items()}
                want = flatten_record(reference.step(np_action))
            else:
                np_action = None
            history.append({"step": t, "action": np_action, "jax": got, "reference": want})
            outcome = _compare_step(got, want, tolerance)
            stats["steps_compared"] += 1 if t > 0 else 0
            if outcome is None:
                pass
            elif outcome[0] == "explained":
                stats["explained_flips"].append(
                    {"episode": episode, "step": t, "fields": outcome[1]}
                )
                break
            else:
                _, field, element, g, e, rule = outcome
                where = f"{field}[{', '.join(map(str, element))}]" if element else field
                meta_e = {
                    **meta,
                    "episode": episode,
                    "first_divergence": {"step": t, "field": where},
                }
                try:
                    path: str | None = _write_dump(dump_path, meta_e, history)
                    saved = f"both trajectories written to {path}"
                except OSError as error:
                    path = None
                    saved = f"could not write the trajectories ({error})"
                detail = (
                    _describe_diff(np.asarray(g), np.asarray(e))
                    if rule not in ("shape", "missing")
                    else rule
                )
                raise ReferenceMismatch(
                    f"episode {episode}: the JAX env and the reference diverge ({detail}; rule: "
                    f"{rule}); {saved}",
                    step=t,
                    field=where,
                    expected=e if rule != "missing" else "a field of the JAX record",
                    got=g,
                    episode=episode,
                    dump_path=path,
                    hint=None
                    if t == 0
                    else f"the action of step {t} was {format_value(np_action)}",
                )
            if t > 0 and bool(np.asarray(state.done)):
                break
        stats["episodes"] += 1
    report = CheckReport(_OWNER, stats=stats)
    report.passed.append("matches_reference")
    missing = [
        name
        for name in (
            ("agents.reward", "termination", "truncation")
            if isinstance(probe, MARLState)
            else ("reward", "termination", "truncation")
        )
        if name not in stats["fields"]
    ]
    if missing:
        report.notes.append(f"the reference does not return {missing}; they were not compared")
    return report


def _compare_step(
    got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray], tolerance: Tolerance
) -> tuple[Any, ...] | None:
    """None, `("explained", fields)`, or `("mismatch", field, element, got, want, rule)`."""
    flips: list[str] = []
    for field, expected in want.items():
        if field not in got:
            return (
                "mismatch",
                field,
                (),
                f"no such field; JAX fields: {sorted(got)}",
                expected,
                "missing",
            )
        value = got[field]
        exp = np.asarray(expected)
        if value.shape != exp.shape:
            return ("mismatch", field, (), f"shape {value.shape}", f"shape {exp.shape}", "shape")
        ok = np.asarray(tolerance.close(field, value, exp))
        if ok.all():
            continue
        index = tuple(int(i) for i in np.argwhere(~ok)[0])
        if value.dtype == np.bool_ and tolerance.explains_flip(field, got, want):
            flips.append(field)
            continue
        rule = tolerance.describe(field) if np.issubdtype(value.dtype, np.floating) else "exact"
        return ("mismatch", field, index, value[index], exp[index], rule)
    if flips:
        return ("explained", flips)
    return None
