"""Trajectories on disk, and replaying them bit for bit.

- `TrajectoryRecord`: a reset key, the actions of every step and the expected record of
  every state (reset included), with the env spec that rebuilds the env.
- `record_trajectory(env, ...)`: run an env (jitted reset and step) and record it.
- `save_trajectory(trajectory, path)`, `load_trajectory(path)`: the `.npz` file.
- `trajectory_from_mismatch(dump, env)`: the reference's side of a failed differential test
  (the JSON file `check_matches_reference` writes) as a trajectory of expected states.
- `replay(trajectory_or_path, env=None)`: re-run the actions; `ReplayResult` holds the
  first step where the env departs from the file, every differing field of that step.
- `write_failure_trajectory(check, env_factory, stem, ...)`: what `parallax check` and the
  pytest battery write when a check fails with a diverging trajectory (one code path).

`parallax replay FILE` (exit status 0 when identical, 1 when not) is `_replay_cli.main`.

The file: a NumPy `.npz` archive whose `header` entry is a JSON document (schema
`TRAJECTORY_SCHEMA`) naming the env spec, the parallax and jax versions, the x64 mode, the
PRNG key implementation, the state pytree structure, and for every stored array its role,
field path, shape and dtype. Arrays: `key_data` (the reset key's data), `action_<i>` (leaf
`i` of the action pytree, a leading time axis of `num_steps`) and `state_<j>` (field `j`
of the state record, a leading axis of `num_steps + 1`, index 0 the reset state).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._errors import format_value
from ._reference import state_record
from ._rollout import as_typed_key
from ._trees import flatten, to_numpy

__all__ = [
    "TRAJECTORY_SCHEMA",
    "Difference",
    "ReplayResult",
    "TrajectoryRecord",
    "load_trajectory",
    "record_trajectory",
    "replay",
    "save_trajectory",
    "trajectory_from_mismatch",
]

TRAJECTORY_SCHEMA = "parallax-trajectory/1"

TRAJECTORY_CHECKS = ("determinism", "jit_vmap_scan_agree", "batch_independence", "training_parity")
"""Failing checks after which the env's own trajectory is written (the differential test
writes the reference's side of the failing episode instead)."""


@dataclass
class TrajectoryRecord:
    """A trajectory to replay.

    Attributes:
        env: the env spec that rebuilds the env (a registered id, `module:factory`, or a
            project directory), or None (then `replay` needs `env=`).
        key_data: the uint32 data of the PRNG key given to `reset`.
        key_impl: the key's implementation name (`"threefry2x32"`, ...).
        actions: one action pytree (NumPy leaves) per step.
        states: one record (`{field path: array}`) per state, `states[0]` the reset state;
            `len(states) == len(actions) + 1`. Only these fields are compared on replay.
        x64: the `jax_enable_x64` mode it was recorded in (replay uses the same).
        meta: everything else the header holds (versions, structure, note, ...).
    """

    env: str | None
    key_data: np.ndarray
    key_impl: str
    actions: list[Any]
    states: list[dict[str, np.ndarray]]
    x64: bool
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.states) != len(self.actions) + 1:
            raise ValueError(
                f"TrajectoryRecord: states must hold one record per action plus the reset "
                f"state, got {len(self.states)} states for {len(self.actions)} actions"
            )

    @property
    def key(self) -> Any:
        """The reset key as a typed PRNG key."""
        return jax.random.wrap_key_data(jnp.asarray(self.key_data), impl=self.key_impl)

    @property
    def num_steps(self) -> int:
        """The number of actions."""
        return len(self.actions)


def _key_impl(key: Any) -> str:
    return str(jax.random.key_impl(key)).removeprefix("PRNGImpl(").removesuffix(")")


def _run(env: Any, key: Any, actions: Sequence[Any]) -> list[dict[str, np.ndarray]]:
    reset = jax.jit(lambda k: env.reset(key=k))
    step = jax.jit(env.step)
    state = reset(key)
    records = [state_record(state)]
    for action in actions:
        state = step(state, action)
        records.append(state_record(state))
    return records


def _structure(env: Any, key: Any) -> str:
    """The env's state pytree structure, as text (for the header)."""
    return str(jax.tree.structure(jax.eval_shape(lambda: env.reset(key=key))))


def _random_actions(env: Any, key: Any, num_steps: int) -> list[Any]:
    keys = jax.random.split(jax.random.fold_in(key, 0x5EED), num_steps)
    # a vector env's `action_space` is one env's; its batch space samples the whole batch
    space = getattr(env, "batch_action_space", None) or env.action_space
    batch = jax.tree.map(np.asarray, jax.vmap(lambda k: space.sample(key=k))(keys))
    return [jax.tree.map(lambda x, t=t: x[t], batch) for t in range(num_steps)]


def record_trajectory(
    env: Any,
    *,
    key: Any = None,
    actions: Sequence[Any] | None = None,
    num_steps: int = 16,
    env_spec: str | None = None,
    note: str = "",
) -> TrajectoryRecord:
    """Run `env` (jitted `reset` and `step`) and record every state.

    Args:
        env: a single (unbatched) or vector env.
        key: the reset key (typed or raw uint32[2]); `jax.random.key(0)` by default.
        actions: the actions, one pytree per step; default `num_steps` samples of
            `env.action_space` (from a key derived from `key`).
        num_steps: the number of random actions when `actions` is None.
        env_spec: how `replay` rebuilds the env (an id, `module:factory`, a directory).
        note: a line stored in the header (e.g. which check wrote the file).

    Returns:
        A `TrajectoryRecord` whose states are every field of `state_record(state)`.

    Example:
        >>> from parallax.envs import GridWorld
        >>> from parallax.testing import record_trajectory, replay
        >>> trajectory = record_trajectory(GridWorld(), num_steps=5, env_spec="GridWorld-v0")
        >>> replay(trajectory).identical
        True
    """
    key = as_typed_key(key, "record_trajectory")
    if actions is None:
        if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 1:
            raise ValueError(
                f"record_trajectory: num_steps must be a positive int, got {num_steps!r}"
            )
        actions = _random_actions(env, key, num_steps)
    actions = [jax.tree.map(np.asarray, a) for a in actions]
    states = _run(env, key, actions)
    return TrajectoryRecord(
        env=env_spec,
        key_data=np.asarray(jax.random.key_data(key)),
        key_impl=_key_impl(key),
        actions=list(actions),
        states=states,
        x64=bool(jax.config.read("jax_enable_x64")),
        meta={"note": note, "env_repr": repr(env), "state_structure": _structure(env, key)},
    )


def _leaf_entry(path: str, arr: np.ndarray) -> dict[str, Any]:
    return {"path": path, "shape": list(arr.shape), "dtype": str(arr.dtype)}


def save_trajectory(trajectory: TrajectoryRecord, path: str | os.PathLike[str]) -> str:
    """Write `trajectory` to `path` (an `.npz` file; the suffix is added if missing).

    Returns:
        The path written.
    """
    import parallax

    name = os.fspath(path)
    if not name.endswith(".npz"):
        name += ".npz"
    arrays: dict[str, np.ndarray] = {"key_data": np.asarray(trajectory.key_data)}
    action_leaves: list[dict[str, Any]] = []
    if trajectory.actions:
        first = flatten(trajectory.actions[0])
        for i, leaf_path in enumerate(first):
            stacked = np.stack([to_numpy(flatten(a)[leaf_path]) for a in trajectory.actions])
            arrays[f"action_{i}"] = stacked
            action_leaves.append(_leaf_entry(leaf_path, stacked[0]))
    fields = [f for f in trajectory.states[0] if all(f in s for s in trajectory.states)]
    state_leaves = []
    for j, name_j in enumerate(fields):
        stacked = np.stack([np.asarray(s[name_j]) for s in trajectory.states])
        arrays[f"state_{j}"] = stacked
        state_leaves.append(_leaf_entry(name_j, stacked[0]))
    header = {
        "schema": TRAJECTORY_SCHEMA,
        "env": trajectory.env,
        "parallax": parallax.__version__,
        "jax": jax.__version__,
        "x64": trajectory.x64,
        "key_impl": trajectory.key_impl,
        "num_steps": trajectory.num_steps,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "actions": action_leaves,
        "states": state_leaves,
        **{k: v for k, v in trajectory.meta.items() if k not in ("actions", "states")},
    }
    arrays["header"] = np.asarray(json.dumps(header, default=str))
    with open(name, "wb") as fh:
        np.savez_compressed(fh, **arrays)  # type: ignore[arg-type]
    return name


def load_trajectory(path: str | os.PathLike[str]) -> TrajectoryRecord:
    """Read a trajectory written by `save_trajectory`.

    Raises:
        ValueError: the file is not a parallax trajectory (or of an unknown schema).
    """
    with np.load(os.fspath(path), allow_pickle=False) as data:
        if "header" not in data:
            raise ValueError(f"{os.fspath(path)!r} is not a parallax trajectory (no header)")
        header = json.loads(str(data["header"]))
        if header.get("schema") != TRAJECTORY_SCHEMA:
            raise ValueError(
                f"{os.fspath(path)!r}: unknown trajectory schema {header.get('schema')!r}, "
                f"expected {TRAJECTORY_SCHEMA!r}"
            )
        num_steps = int(header["num_steps"])
        leaves = [np.asarray(data[f"action_{i}"]) for i in range(len(header["actions"]))]
        paths = [entry["path"] for entry in header["actions"]]
        actions: list[Any] = []
        for t in range(num_steps):
            if paths == ["<root>"]:
                actions.append(leaves[0][t])
            else:
                actions.append({p: leaf[t] for p, leaf in zip(paths, leaves, strict=True)})
        stacked = {
            entry["path"]: np.asarray(data[f"state_{j}"])
            for j, entry in enumerate(header["states"])
        }
        key_data = np.asarray(data["key_data"])
    states = [{p: arr[t] for p, arr in stacked.items()} for t in range(num_steps + 1)]
    meta = {
        k: v
        for k, v in header.items()
        if k not in ("env", "key_impl", "x64", "num_steps", "actions", "states", "schema")
    }
    meta["action_paths"] = paths
    return TrajectoryRecord(
        env=header["env"],
        key_data=key_data,
        key_impl=header["key_impl"],
        actions=actions,
        states=states,
        x64=bool(header["x64"]),
        meta=meta,
    )


def trajectory_from_mismatch(
    dump: str | os.PathLike[str], env: Any, *, env_spec: str | None = None, note: str = ""
) -> TrajectoryRecord:
    """The failed episode of a differential test as a trajectory whose expected states are
    the reference's records (rounded to the JAX dtypes, as the check compares them).

    Replaying it on the JAX env shows where the env departs from the reference.

    Args:
        dump: the JSON file a `ReferenceMismatch` names (`dump_path`).
        env: the JAX env of the check (for the action dtypes).
        env_spec: how `replay` rebuilds the env.
        note: a line for the header.
    """
    with open(os.fspath(dump), encoding="utf-8") as fh:
        data = json.load(fh)
    key = jax.random.wrap_key_data(jnp.asarray(data["key_data"], jnp.uint32))
    k_env, _ = jax.random.split(key)  # check_matches_reference's key schedule
    episode_key = jax.random.fold_in(k_env, int(data.get("episode", 0)))
    space = getattr(env, "batch_action_space", None) or env.action_space
    sample = jax.tree.map(np.asarray, space.sample(key=jax.random.key(0)))
    leaves = flatten(sample)
    actions: list[Any] = []
    states: list[dict[str, np.ndarray]] = []
    for entry in data["steps"]:
        dtypes = entry["dtypes"]
        states.append(
            {
                name: np.asarray(value, dtypes[name])
                for name, value in entry["reference"].items()
                if name in dtypes
            }
        )
        if entry["step"] == 0:
            continue
        action = entry["action"]
        if list(leaves) == ["<root>"]:
            actions.append(np.asarray(action, leaves["<root>"].dtype))
        else:
            actions.append({p: np.asarray(action[p], leaf.dtype) for p, leaf in leaves.items()})
    trajectory = TrajectoryRecord(
        env=env_spec,
        key_data=np.asarray(jax.random.key_data(episode_key)),
        key_impl=_key_impl(episode_key),
        actions=actions,
        states=states,
        x64=bool(jax.config.read("jax_enable_x64")),
        meta={
            "note": note,
            "expected": "the reference's records (check_matches_reference)",
            "env_repr": repr(env),
            "state_structure": _structure(env, episode_key),
            "first_divergence": data.get("first_divergence"),
        },
    )
    if list(leaves) != ["<root>"]:
        trajectory.meta["action_paths"] = list(leaves)
    return trajectory


@dataclass(frozen=True)
class Difference:
    """One field that differs at a step: the element index, expected and got values."""

    step: int
    field: str
    index: tuple[int, ...]
    expected: Any
    got: Any

    def __str__(self) -> str:
        where = f"{self.field}[{', '.join(map(str, self.index))}]" if self.index else self.field
        return (
            f"step {self.step}  {where}  expected {format_value(self.expected)}  "
            f"got {format_value(self.got)}"
        )


@dataclass(frozen=True)
class ReplayResult:
    """What `replay` found.

    Attributes:
        identical: every compared field of every step is bit-identical.
        steps: the steps replayed.
        differences: every field that differs at the first step where any does (empty when
            identical).
    """

    identical: bool
    steps: int
    differences: tuple[Difference, ...] = ()

    @property
    def first_step(self) -> int | None:
        """The first step where the replay departs from the file, or None."""
        return self.differences[0].step if self.differences else None

    def format(self) -> str:
        """A human-readable summary (one line per differing field)."""
        if self.identical:
            return f"identical: {self.steps} steps replayed bit for bit"
        lines = [
            f"differs at step {self.first_step} ({len(self.differences)} field(s); step 0 is "
            "the reset state):"
        ]
        lines += [f"  {d}" for d in self.differences]
        return "\n".join(lines)


def _unflatten_action(env: Any, action: Any, paths: Sequence[str]) -> Any:
    """A stored action (a leaf, or `{path: leaf}`) as the env's action pytree."""
    if not isinstance(action, Mapping):
        return action
    space = getattr(env, "batch_action_space", None) or env.action_space
    sample = space.sample(key=jax.random.key(0))
    leaves, treedef = jax.tree_util.tree_flatten_with_path(sample)
    from ._trees import path_str

    names = [path_str(p) for p, _ in leaves]
    if sorted(names) != sorted(paths):
        raise ValueError(
            f"replay: the stored action leaves {list(paths)} do not match the env's action "
            f"space {names}"
        )
    return jax.tree_util.tree_unflatten(treedef, [action[n] for n in names])


def _compare(
    step: int, want: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray]
) -> list[Difference]:
    out = []
    for name, expected in want.items():
        if name not in got:
            out.append(
                Difference(step, name, (), expected, f"no such field; fields: {sorted(got)}")
            )
            continue
        value, expected = np.asarray(got[name]), np.asarray(expected)
        if value.shape != expected.shape or value.dtype != expected.dtype:
            out.append(
                Difference(
                    step,
                    name,
                    (),
                    f"{expected.dtype}{list(expected.shape)}",
                    f"{value.dtype}{list(value.shape)}",
                )
            )
            continue
        if np.issubdtype(value.dtype, np.floating):
            same = (value == expected) | (np.isnan(value) & np.isnan(expected))
        else:
            same = value == expected
        same = np.asarray(same)
        if not same.all():
            index = tuple(int(i) for i in np.argwhere(~same)[0]) if same.ndim else ()
            out.append(
                Difference(
                    step,
                    name,
                    index,
                    expected[index] if index else expected,
                    value[index] if index else value,
                )
            )
    return out


def replay(trajectory: TrajectoryRecord | str | os.PathLike[str], env: Any = None) -> ReplayResult:
    """Re-run a trajectory's actions from its key; compare every stored field exactly.

    The env is `env`, else rebuilt from the trajectory's env spec. Reset and step are
    jitted (as `record_trajectory` runs them), in the x64 mode the file was recorded in.
    Floats compare equal when equal or both NaN; bools and ints exactly.

    Args:
        trajectory: a `TrajectoryRecord` or the path of a file.
        env: the env to replay on (e.g. a fixed version of the one that wrote the file).

    Returns:
        A `ReplayResult`.
    """
    if not isinstance(trajectory, TrajectoryRecord):
        trajectory = load_trajectory(trajectory)
    if env is None:
        if trajectory.env is None:
            raise ValueError("replay: the trajectory names no env spec; pass env=")
        from ._targets import load_target

        env = load_target(trajectory.env).env_factory()
    paths = trajectory.meta.get("action_paths", ["<root>"])
    with jax.enable_x64(trajectory.x64):
        actions = [_unflatten_action(env, a, paths) for a in trajectory.actions]
        got = _run(env, trajectory.key, actions)
    for step, (want, have) in enumerate(zip(trajectory.states, got, strict=True)):
        differences = _compare(step, want, have)
        if differences:
            return ReplayResult(False, trajectory.num_steps, tuple(differences))
    return ReplayResult(True, trajectory.num_steps)


def failure_trajectory_path(stem: str, check: str, mode: str) -> str:
    """`STEM.CHECK.MODE.trajectory.npz`, the file a failed check's trajectory goes to."""
    return f"{stem}.{check}.{mode}.trajectory.npz"


def write_failure_trajectory(
    check: str,
    env_factory: Any,
    stem: str,
    *,
    mode: str,
    num_steps: int,
    env_spec: str | None = None,
    note: str = "",
    mismatch: str | os.PathLike[str] | None = None,
) -> str | None:
    """Write the trajectory of a failed battery check; its path, or None when the check
    has no trajectory to write.

    `matches_reference` writes the reference's side of the failing episode (from the JSON
    file `mismatch` the check wrote; None writes nothing); the checks in
    `TRAJECTORY_CHECKS` record the env's own run of `num_steps` random actions. The file
    is `failure_trajectory_path(stem, check, mode)`; `parallax replay FILE` re-runs it.

    Args:
        check: the battery check's name.
        env_factory: `env_factory() -> env`.
        stem: the file's path without `.CHECK.MODE.trajectory.npz`.
        mode: `"f32"` or `"x64"` (the file is recorded in that mode).
        num_steps: steps of the recorded run.
        env_spec: how `replay` rebuilds the env, or None (then `--env SPEC` is needed).
        note: a line for the header.
        mismatch: the `ReferenceMismatch`'s `dump_path`.
    """
    with jax.enable_x64(mode == "x64"):
        if check == "matches_reference":
            if mismatch is None:
                return None
            trajectory = trajectory_from_mismatch(
                mismatch, env_factory(), env_spec=env_spec, note=note
            )
        elif check in TRAJECTORY_CHECKS:
            trajectory = record_trajectory(
                env_factory(), num_steps=num_steps, env_spec=env_spec, note=note
            )
        else:
            return None
        return save_trajectory(trajectory, failure_trajectory_path(stem, check, mode))


def failure_note(path: str, env_spec: str | None) -> str:
    """The line a failure message gets once its trajectory is on disk."""
    command = f"parallax replay {path}" + ("" if env_spec else " --env MODULE:FACTORY")
    return f"trajectory written to {path} (replay it: {command})"
