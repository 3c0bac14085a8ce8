"""Comparing what a check run produced with what the contract expects.

- `compare_rollouts`: the first difference between two rollouts, as a `CheckError`.
- `explain_not_contained`: why `space.contains(x)` is False (sub-path, expected, got).
- `check_in_space`: every step (and env of the batch) of a tree is in a space.
- `batch_index`: the env index of the batch in an index `(step, env, ...)`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from .._spaces import Box, Discrete, MultiBinary, MultiDiscrete, PyTreeSpace
from ._errors import CheckError
from ._harness import harness_jit
from ._rollout import EnvKind, Rollout
from ._tolerance import Tolerance
from ._trees import first_mismatch, path_str

__all__ = [
    "batch_index",
    "batched_contains",
    "check_in_space",
    "compare_rollouts",
    "explain_not_contained",
]


# -- explaining a failed `contains` ------------------------------------------------------------
def explain_not_contained(space: Any, x: Any) -> tuple[str, str, Any]:
    """Why `space.contains(x)` is False: `(sub-path with element index, expected, got)`."""
    if isinstance(space, PyTreeSpace):
        try:
            leaves = space._treedef.flatten_up_to(x)  # type: ignore[attr-defined]
        except (ValueError, TypeError):
            got_def = jax.tree_util.tree_structure(x)
            return "", f"a pytree shaped like {space._treedef}", f"{got_def}"
        paths = [path_str(p) for p, _ in jax.tree_util.tree_flatten_with_path(space.spaces)[0]]
        if len(paths) != len(leaves):  # a leaf space that is itself a pytree node
            paths = [f"[{i}]" for i in range(len(leaves))]
        for sub_path, sub_space, leaf in zip(paths, space._leaves, leaves):
            if not bool(sub_space.contains(leaf)):
                inner, expected, got = explain_not_contained(sub_space, leaf)
                return f".{sub_path}{inner}", expected, got
        return "", repr(space), "contains() returned False"
    arr = np.asarray(x)
    shape = tuple(getattr(space, "shape", ()))
    if arr.shape != shape:
        return "", f"shape {shape} ({space!r})", f"shape {arr.shape}"
    if isinstance(space, Box):
        kind_ok = (np.issubdtype(arr.dtype, np.floating) and space.dtype.kind == "f") or (
            space.dtype.kind in "iu" and (np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool)
        )
        if not kind_ok:
            return "", f"a {space.dtype.kind}-kind dtype ({space!r})", str(arr.dtype)
        with np.errstate(invalid="ignore"):
            ok = (arr >= space.low) & (arr <= space.high)
        bad = np.argwhere(~ok)
        if bad.size:
            i = tuple(int(j) for j in bad[0])
            idx = f"[{', '.join(map(str, i))}]" if i else ""
            lo, hi = np.asarray(space.low)[i], np.asarray(space.high)[i]
            return idx, f"a value in [{lo}, {hi}] ({space!r})", arr[i]
    elif isinstance(space, Discrete | MultiDiscrete | MultiBinary):
        if not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool):
            return "", f"an integer dtype ({space!r})", str(arr.dtype)
        if isinstance(space, Discrete):
            upper = np.full(arr.shape, space.n)
        elif isinstance(space, MultiDiscrete):
            upper = np.asarray(space.nvec)
        else:
            upper = np.full(arr.shape, 2)
        bad = np.argwhere((arr < 0) | (arr >= upper))
        if bad.size:
            i = tuple(int(j) for j in bad[0])
            idx = f"[{', '.join(map(str, i))}]" if i else ""
            return idx, f"an integer in [0, {int(upper[i]) - 1}] ({space!r})", arr[i]
    return "", repr(space), "contains() returned False"


# -- helpers -------------------------------------------------------------------------------------
def batch_index(index: tuple[int, ...], kind: EnvKind) -> int | None:
    """The env of the batch named by an index `(step, env, ...)`; None for single envs."""
    return index[1] if kind.vector else None


def _slice(tree: Any, index: tuple[int, ...]) -> Any:
    return jax.tree.map(lambda x: x[index], tree)


@functools.lru_cache(maxsize=64)
def _batched_contains(space: Any, lead: int) -> Callable[[Any], Any]:
    return harness_jit(space.contains, lead=lead)


def batched_contains(space: Any, lead: int) -> Callable[[Any], Any]:
    """`space.contains` over `lead` leading batch axes, one compiled program per `(space,
    lead)` (an unhashable space gets its own)."""
    try:
        return _batched_contains(space, lead)
    except TypeError:  # an unhashable space
        return _batched_contains.__wrapped__(space, lead)


def _contains_all(space: Any, tree: Any, lead: int) -> np.ndarray:
    return np.asarray(batched_contains(space, lead)(tree))


def check_in_space(
    check: str,
    space: Any,
    tree: Any,
    kind: EnvKind,
    field: str,
    describe: Callable[[int], str],
    step_offset: int,
) -> None:
    """Raise `CheckError(check)` at the first step/env whose `tree` is not in `space`.

    `tree` leads with a time axis (and the batch axis for vector envs); `describe(t)` words
    the failure at time index `t`, reported as step `t + step_offset`.
    """
    lead = 1 + int(kind.vector)
    ok = _contains_all(space, tree, lead)
    if ok.all():
        return
    index = tuple(int(i) for i in np.argwhere(~ok)[0])
    value = jax.tree.map(np.asarray, _slice(tree, index))
    sub, expected, got = explain_not_contained(space, value)
    raise CheckError(
        check,
        describe(index[0]),
        step=index[0] + step_offset,
        env_index=batch_index(index, kind),
        field=field + sub,
        expected=expected,
        got=got,
    )


# -- comparing rollouts ----------------------------------------------------------------------------
def compare_rollouts(
    check: str,
    got: Rollout,
    expected: Rollout,
    tolerance: Tolerance,
    kind: EnvKind,
    message: str,
    *,
    keys: bool = True,
    hint: str | None = None,
    env_index: int | None = None,
) -> None:
    """Raise `CheckError(check)` at the first difference between two rollouts.

    `env_index` names the batch instance when the rollouts are one instance of a batch.
    """
    flat_got, flat_exp = got.flat(keys=keys), expected.flat(keys=keys)
    states_got = {k: v for k, v in flat_got.items() if k.startswith("state.")}
    states_exp = {k: v for k, v in flat_exp.items() if k.startswith("state.")}
    acts_got = {k: v for k, v in flat_got.items() if k.startswith("action")}
    acts_exp = {k: v for k, v in flat_exp.items() if k.startswith("action")}
    m_state = first_mismatch(
        states_got, states_exp, tolerance, time_axis=True, batch_axis=kind.vector
    )
    m_act = first_mismatch(acts_got, acts_exp, tolerance, time_axis=True, batch_axis=kind.vector)
    candidates = []
    if m_state is not None:
        candidates.append((m_state.time or 0, 1, m_state))
    if m_act is not None:  # action index t is the input of step t + 1
        candidates.append(((m_act.time or 0) + 1, 0, m_act))
    if not candidates:
        return
    step, _, m = min(candidates, key=lambda c: (c[0], c[1]))
    field = m.field_with_index
    field = field[len("state.") :] if field.startswith("state.") else field
    raise CheckError(
        check,
        f"{message} (rule: {m.rule})",
        step=step,
        env_index=m.env if env_index is None else env_index,
        field=field,
        expected=m.expected,
        got=m.got,
        hint=hint,
    )
