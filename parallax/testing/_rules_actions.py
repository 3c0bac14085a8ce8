"""Ladder rung 3: boundary and invalid actions.

- `boundary_actions`: step the states of the session's eager rollout (reset states and
  mid-episode states alike) with the edges of the action space and with out-of-space
  actions, inside `jax.jit(jax.vmap(env.step))`:
  - `boundary_actions/in_range`: each edge (`Discrete`: every action; `MultiDiscrete`: all
    zeros and all maxima; `Box`: `low`, `high` and their midpoint where finite) gives
    observations in `observation_space` and a finite reward.
  - `boundary_actions/out_of_range`: the documented rule (docs/protocol.md, "Out-of-range
    actions"): an out-of-range action acts exactly as the action clipped into the space.
    `Discrete(n)`: `-1` acts as `0`, `n` and `n + 5` as `n - 1`; `MultiDiscrete`: `-1` and
    `nvec` per element; `Box`: `low - 1 - |low|` and `high + 1 + |high|` where the bound is
    finite. The states after both steps must be bit-identical (NaN equal to NaN).

Actions are broadcast to the shape and dtype of the policy's actions (per env of a batch,
per agent of a multi-agent env). Spaces other than `Discrete`, `MultiDiscrete` and `Box`
(e.g. a `PyTreeSpace`) are probed leaf by leaf when they are a `PyTreeSpace` of those,
otherwise skipped with a note.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._spaces import Box, Discrete, MultiDiscrete, PyTreeSpace
from ._compare import batched_contains, explain_not_contained
from ._errors import CheckError
from ._report import CheckReport
from ._rollout import EnvKind, Rollout, observation_of, reward_of
from ._trees import flatten, to_numpy

__all__ = ["boundary_actions", "probe_actions"]

_OWNER = "boundary_actions"


def _leaf_probes(
    space: Any, dtype: np.dtype
) -> tuple[list[tuple[str, Any]], list[tuple[str, Any, Any]]]:
    """`(in_range, out_of_range)` probes of one leaf space, unbroadcast.

    `in_range`: `(label, action)`; `out_of_range`: `(label, action, clipped action)`.
    """
    inside: list[tuple[str, Any]] = []
    outside: list[tuple[str, Any, Any]] = []
    signed = np.issubdtype(dtype, np.signedinteger) or np.issubdtype(dtype, np.floating)
    if isinstance(space, Discrete):
        n = int(space.n)
        inside = [(f"action {a}", np.asarray(a)) for a in range(n)]
        if signed:
            outside.append(("-1", np.asarray(-1), np.asarray(0)))
        outside += [(f"{n}", np.asarray(n), np.asarray(n - 1))]
        outside += [(f"{n + 5}", np.asarray(n + 5), np.asarray(n - 1))]
    elif isinstance(space, MultiDiscrete):
        nvec = np.asarray(space.nvec)
        inside = [("all 0", np.zeros_like(nvec)), ("all nvec - 1", nvec - 1)]
        if signed:
            outside.append(("all -1", np.full_like(nvec, -1), np.zeros_like(nvec)))
        outside.append(("all nvec", nvec, nvec - 1))
    elif isinstance(space, Box):
        low = np.broadcast_to(np.asarray(space.low, np.float64), space.shape)
        high = np.broadcast_to(np.asarray(space.high, np.float64), space.shape)
        finite_low, finite_high = np.isfinite(low), np.isfinite(high)
        zero = np.zeros(space.shape)
        lo = np.where(finite_low, low, np.where(finite_high, np.minimum(high, 0.0) - 1, -1.0))
        hi = np.where(finite_high, high, np.where(finite_low, np.maximum(low, 0.0) + 1, 1.0))
        inside = [("low", lo), ("high", hi), ("midpoint", (lo + hi) / 2)]
        if space.dtype.kind in "iu":
            inside = [(label, np.round(a)) for label, a in inside]
        if finite_low.any():
            below = np.where(finite_low, low - 1 - np.abs(low), np.where(finite_high, hi, zero))
            outside.append(("below low", below, np.clip(below, low, high)))
        if finite_high.any():
            above = np.where(finite_high, high + 1 + np.abs(high), lo)
            outside.append(("above high", above, np.clip(above, low, high)))
    else:
        raise TypeError(type(space).__name__)
    return inside, outside


def probe_actions(
    space: Any, example: Any
) -> tuple[list[tuple[str, Any]], list[tuple[str, Any, Any]]]:
    """The probes of `space`, shaped and typed like `example` (one step's actions).

    For a `PyTreeSpace`, each leaf is probed in turn with the other leaves at their first
    in-range probe. Raises `TypeError` for a space it cannot probe.
    """
    if isinstance(space, PyTreeSpace):
        leaves, treedef = jax.tree_util.tree_flatten(example)
        spaces_ = space._treedef.flatten_up_to(space.spaces)  # type: ignore[attr-defined]
        probes = [_leaf_probes(s, np.dtype(leaf.dtype)) for s, leaf in zip(spaces_, leaves)]
        base = [p[0][0][1] for p in probes]

        def build(i: int, value: Any) -> Any:
            parts = [base[j] if j != i else value for j in range(len(leaves))]
            return jax.tree_util.tree_unflatten(
                treedef,
                [_shape_like(v, leaf) for v, leaf in zip(parts, leaves)],
            )

        paths = list(flatten(example))
        inside = [
            (f"{paths[i]}: {label}", build(i, a)) for i, p in enumerate(probes) for label, a in p[0]
        ]
        outside = [
            (f"{paths[i]}: {label}", build(i, a), build(i, c))
            for i, p in enumerate(probes)
            for label, a, c in p[1]
        ]
        return inside, outside
    inside, outside = _leaf_probes(space, np.dtype(example.dtype))
    return (
        [(label, _shape_like(a, example)) for label, a in inside],
        [(label, _shape_like(a, example), _shape_like(c, example)) for label, a, c in outside],
    )


def _shape_like(value: Any, example: Any) -> Any:
    """`value` (one instance's action) broadcast to `example`'s shape and dtype."""
    return jnp.broadcast_to(jnp.asarray(np.asarray(value)).astype(example.dtype), example.shape)


def boundary_actions(env: Any, kind: EnvKind, roll: Rollout, report: CheckReport) -> None:
    """Probe the edges of the action space and out-of-space actions (see the module)."""
    pre = roll.pre
    example = jax.tree.map(lambda x: x[0], roll.actions)
    try:
        inside, outside = probe_actions(env.action_space, example)
    except TypeError as error:
        report.notes.append(f"action space {error} not probed")
        return
    step = jax.jit(jax.vmap(env.step, in_axes=(0, None)))
    num_states = int(np.shape(pre.step_count)[0])
    lead = 1 + int(kind.vector)
    space = env.observation_space
    contains = batched_contains(space, lead)
    for label, action in inside:
        out = step(pre, action)
        ok = np.asarray(contains(observation_of(out)))
        reward = np.asarray(reward_of(out))
        finite = np.isfinite(reward).reshape((*reward.shape[:lead], -1)).all(axis=-1)
        bad = np.argwhere(~(ok & finite))
        if bad.size:
            index = tuple(int(i) for i in bad[0])
            one = jax.tree.map(lambda x, index=index: np.asarray(x)[index], out)
            if not ok[index]:
                sub, expected, got = explain_not_contained(space, observation_of(one))
                field = ("agents.observation" if kind.marl else "observation") + sub
                what = "an observation outside observation_space"
            else:
                field, expected, got = "reward", "a finite reward", np.asarray(reward_of(one))
                what = "a non-finite reward"
            raise CheckError(
                f"{_OWNER}/in_range",
                f"the edge action {label} ({_fmt(action)}) gave {what}",
                step=index[0] + 1,
                env_index=index[1] if kind.vector else None,
                field=field,
                expected=expected,
                got=got,
                hint="stepped from the state the rollout passed to that step; an action on the edge of action_space is a valid action",
            )
    report.passed.append("in_range")
    for label, action, clipped in outside:
        got_tree = flatten(step(pre, action))
        want_tree = flatten(step(pre, clipped))
        for path, leaf in want_tree.items():
            want, got = to_numpy(leaf), to_numpy(got_tree[path])
            equal = want == got
            if want.dtype.kind in "fc":
                equal |= np.isnan(want) & np.isnan(got)
            if equal.all():
                continue
            index = tuple(int(i) for i in np.argwhere(~equal)[0])
            raise CheckError(
                f"{_OWNER}/out_of_range",
                f"the out-of-range action {label} ({_fmt(action)}) does not act as the "
                f"clipped action ({_fmt(clipped)}); Parallax's rule is that out-of-range "
                "actions are clipped into the space (docs/protocol.md)",
                step=index[0] + 1,
                env_index=index[1] if kind.vector else None,
                field=path + (f"[{', '.join(map(str, index[lead:]))}]" if index[lead:] else ""),
                expected=want[index],
                got=got[index],
                hint="stepped from the state the rollout passed to that step; clip (jnp.clip) the action into the space before using it",
            )
    report.passed.append("out_of_range")
    report.stats["probes"] = len(inside) + len(outside)
    report.stats["states_probed"] = num_states


def _fmt(action: Any) -> str:
    leaves = [np.asarray(x) for x in jax.tree.leaves(action)]
    parts = []
    for x in leaves:
        flat = x.reshape(-1)
        same = flat.size and bool((flat == flat[0]).all())
        parts.append(str(flat[0]) if same else str(x.tolist()))
    return ", ".join(parts)
