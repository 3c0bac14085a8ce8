"""Ladder rung 7: structured (Dict/Tuple) spaces round-trip through flatten/unflatten and
through the Gymnasium export.

- `structured_spaces`: for each `PyTreeSpace` of the env (observation and action), with
  values drawn from the space (8 samples) and, for the observation space, every
  observation of the session's eager rollout:
  - `structured_spaces/gymnasium_space`: the value, as NumPy leaves, is in the space's
    Gymnasium equivalent (`to_gymnasium_space`: same keys, shapes, bounds and exact dtypes).
  - `structured_spaces/flatten_roundtrip`: `gymnasium.spaces.flatten` then `unflatten`
    gives back every leaf bit for bit, and the leaves put back into the env's tree
    structure are in the parallax space again.
  - `structured_spaces/gymnasium_export` (single-agent, unbatched envs): `GymnasiumEnv(env)`
    returns observations in its observation space after reset and after steps with
    sampled actions, and the sampled actions round-trip through flatten/unflatten.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from .._spaces import PyTreeSpace
from ._errors import CheckError
from ._report import CheckReport
from ._rollout import EnvKind, Rollout, observation_of

__all__ = ["has_structured_space", "structured_spaces"]

_OWNER = "structured_spaces"


def has_structured_space(env: Any) -> bool:
    """Whether the observation or the action space is a `PyTreeSpace` (Dict/Tuple)."""
    return any(isinstance(s, PyTreeSpace) for s in (env.observation_space, env.action_space))


def _leaf_diff(got: Any, want: Any) -> tuple[int, Any, Any] | None:
    for i, (g, w) in enumerate(zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or not np.array_equal(g.astype(w.dtype), w, equal_nan=True):
            return i, w, g
    return None


def _roundtrip(gymnasium: Any, label: str, space: Any, gspace: Any, value: Any) -> None:
    host = jax.tree.map(np.asarray, value)
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(host)[0]]
    if not gspace.contains(host):
        detail = []
        for path, leaf in zip(paths, jax.tree.leaves(host), strict=True):
            detail.append(f"{path}: {leaf.dtype}{list(leaf.shape)}")
        raise CheckError(
            f"{_OWNER}/gymnasium_space",
            f"{label} is in the parallax space but not in its Gymnasium equivalent "
            f"{gspace} (keys, shapes, bounds and exact dtypes must match)",
            expected=str(gspace),
            got=", ".join(detail),
            hint="return every leaf in the dtype its space declares (e.g. float32 under x64)",
        )
    back = gymnasium.spaces.unflatten(gspace, gymnasium.spaces.flatten(gspace, host))
    diff = _leaf_diff(back, host)
    if diff is not None:
        i, want, got = diff
        raise CheckError(
            f"{_OWNER}/flatten_roundtrip",
            f"{label} changed through gymnasium.spaces.flatten/unflatten",
            field=paths[i],
            expected=want,
            got=got,
        )
    restored = jax.tree.unflatten(jax.tree.structure(value), jax.tree.leaves(back))
    if not bool(
        space.contains(
            jax.tree.map(lambda x, v: np.asarray(x, np.asarray(v).dtype), restored, host)
        )
    ):
        raise CheckError(
            f"{_OWNER}/flatten_roundtrip",
            f"{label}, flattened, unflattened and put back into the env's tree structure, "
            "is no longer in the parallax space",
            expected=repr(space),
            got=jax.tree.map(np.asarray, restored),
        )


def structured_spaces(
    env: Any, kind: EnvKind, roll: Rollout, key: Any, report: CheckReport
) -> None:
    """Run the rung-7 rules (see the module docstring), appending to `report`."""
    import gymnasium

    from ..adapters._gymnasium_spaces import to_gymnasium_space

    count = 0
    for name in ("observation_space", "action_space"):
        space = getattr(env, name)
        if not isinstance(space, PyTreeSpace):
            continue
        gspace = to_gymnasium_space(space)
        for i, k in enumerate(jax.random.split(jax.random.fold_in(key, 0x57), 8)):
            _roundtrip(gymnasium, f"sample {i} of {name}", space, gspace, space.sample(key=k))
            count += 1
        if name == "observation_space" and not kind.vector and not kind.marl:
            observations = observation_of(roll.states)
            steps = int(np.shape(roll.states.step_count)[0])
            for t in range(steps):
                value = jax.tree.map(lambda x, t=t: x[t], observations)
                label = "the reset observation" if t == 0 else f"the observation of step {t}"
                _roundtrip(gymnasium, label, space, gspace, value)
                count += 1
    report.passed.extend(["gymnasium_space", "flatten_roundtrip"])
    report.stats["values_round_tripped"] = count
    if kind.vector or kind.marl:
        report.notes.append("the Gymnasium export wraps single-agent unbatched envs: not run")
        return
    _gymnasium_export(gymnasium, env, report)


def _gymnasium_export(gymnasium: Any, env: Any, report: CheckReport) -> None:
    from ..adapters import GymnasiumEnv

    genv = GymnasiumEnv(env, seed=0)
    genv.action_space.seed(0)
    obs, _ = genv.reset(seed=0)
    for step in range(5):
        if not genv.observation_space.contains(obs):
            raise CheckError(
                f"{_OWNER}/gymnasium_export",
                "GymnasiumEnv(env) returned an observation outside its observation_space",
                step=step,
                expected=str(genv.observation_space),
                got=jax.tree.map(lambda x: f"{np.asarray(x).dtype}{list(np.shape(x))}", obs),
            )
        action = genv.action_space.sample()
        back = gymnasium.spaces.unflatten(
            genv.action_space, gymnasium.spaces.flatten(genv.action_space, action)
        )
        diff = _leaf_diff(back, action)
        if diff is not None:
            raise CheckError(
                f"{_OWNER}/gymnasium_export",
                "a sampled Gymnasium action changed through flatten/unflatten",
                step=step + 1,
                expected=diff[1],
                got=diff[2],
            )
        obs, _, terminated, truncated, _ = genv.step(action)
        if terminated or truncated:
            obs, _ = genv.reset()
    genv.close()
    report.passed.append("gymnasium_export")
