"""Pytree helpers of the battery: readable field paths, structure and value comparisons.

- `path_str`: a JAX key path as a dotted field path (`env_state.pos`, `info.cash`, `obs[0]`).
- `flatten`: a pytree as an ordered `{path: leaf}` dict.
- `to_numpy`: a leaf as a NumPy array (PRNG keys as their key data).
- `describe_leaf`: `float32[4]` style description (with `weak` for weakly typed values).
- `structure_difference`: the first place two pytrees differ in structure, shape or dtype.
- `first_mismatch`: the first (step, env, field, element) where two trajectories differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from ._tolerance import Tolerance

__all__ = [
    "Mismatch",
    "describe_leaf",
    "first_mismatch",
    "flatten",
    "is_key",
    "path_str",
    "structure_difference",
    "to_numpy",
]


def path_str(path: tuple[Any, ...]) -> str:
    """A JAX key path as a dotted field path: attributes and dict keys joined by dots,
    sequence indices in brackets."""
    out = ""
    for entry in path:
        if isinstance(entry, jax.tree_util.GetAttrKey):
            out += f".{entry.name}"
        elif isinstance(entry, jax.tree_util.DictKey):
            out += f".{entry.key}"
        elif isinstance(entry, jax.tree_util.SequenceKey):
            out += f"[{entry.idx}]"
        elif isinstance(entry, jax.tree_util.FlattenedIndexKey):
            out += f"[{entry.key}]"
        else:
            out += f".{entry}"
    return out.lstrip(".") or "<root>"


def flatten(tree: Any) -> dict[str, Any]:
    """The leaves of `tree` as an ordered `{dotted path: leaf}` dict."""
    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    return {path_str(path): leaf for path, leaf in leaves}


def is_key(leaf: Any) -> bool:
    """Whether `leaf` is a typed PRNG key array."""
    dtype = getattr(leaf, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def to_numpy(leaf: Any) -> np.ndarray:
    """`leaf` as a NumPy array; a typed PRNG key becomes its uint32 key data."""
    if is_key(leaf):
        return np.asarray(jax.random.key_data(leaf))
    return np.asarray(leaf)


def describe_leaf(leaf: Any) -> str:
    """`float32[4]`-style description; `~` marks a weakly typed value, as JAX prints it."""
    try:
        return str(jax.typeof(leaf))
    except TypeError:
        return f"a non-array {type(leaf).__name__}"


def _is_single_leaf(treedef: Any) -> bool:
    """Whether a treedef is one leaf (not an empty container, not None)."""
    return bool(treedef.num_leaves == 1 and treedef.num_nodes == 1)


def _kind(node: Any) -> str:
    if node is None:
        return "None"
    if _is_single_leaf(jax.tree_util.tree_structure(node)):
        return describe_leaf(node)
    return type(node).__name__


def _children(node: Any) -> dict[str, Any]:
    flat, _ = jax.tree_util.tree_flatten_with_path(node, is_leaf=lambda x: x is not node)
    return {path_str(path): child for path, child in flat}


def _join(prefix: str, key: str) -> str:
    if not prefix:
        return key
    return prefix + key if key.startswith("[") else f"{prefix}.{key}"


def _node_difference(a: Any, b: Any, path: str) -> tuple[str, Any, Any] | None:
    ta: Any = jax.tree_util.tree_structure(a)
    tb: Any = jax.tree_util.tree_structure(b)
    if ta == tb:
        return None
    leaf_a = _is_single_leaf(ta)
    leaf_b = _is_single_leaf(tb)
    if leaf_a or leaf_b or a is None or b is None or type(a) is not type(b):
        return path or "<root>", _kind(a), _kind(b)
    ca, cb = _children(a), _children(b)
    for key in ca:
        if key not in cb:
            return _join(path, key), _kind(ca[key]), "no such field"
    for key in cb:
        if key not in ca:
            return _join(path, key), "no such field", _kind(cb[key])
    for key in ca:
        found = _node_difference(ca[key], cb[key], _join(path, key))
        if found is not None:
            return found
    return path or "<root>", str(ta), str(tb)


def structure_difference(a: Any, b: Any) -> tuple[str, Any, Any] | None:
    """The first difference in tree structure, shape or dtype between pytrees `a` and `b`.

    Returns:
        None when they agree, else `(field, what a has, what b has)` with readable
        descriptions (`"float32[4]"`, `"no such field"`, a node type name). Weak typing is
        not a difference here (`check_env`'s recompilation check reports it).
    """
    found = _node_difference(a, b, "")
    if found is not None:
        return found
    flat_a, flat_b = flatten(a), flatten(b)
    for key, leaf_a in flat_a.items():
        leaf_b = flat_b[key]
        try:
            aval_a, aval_b = jax.typeof(leaf_a), jax.typeof(leaf_b)
        except TypeError:
            if type(leaf_a) is not type(leaf_b):
                return key, describe_leaf(leaf_a), describe_leaf(leaf_b)
            continue
        if aval_a.shape != aval_b.shape or aval_a.dtype != aval_b.dtype:
            return key, describe_leaf(leaf_a), describe_leaf(leaf_b)
    return None


@dataclass(frozen=True)
class Mismatch:
    """Where two trajectories first differ.

    Attributes:
        time: index along the leading time axis (or None for a single state).
        env: index along the batch axis (or None when not batched).
        field: dotted path of the field.
        element: index inside the field's value (empty tuple for a scalar).
        got: the value under test at that element.
        expected: the expected value at that element.
        rule: the comparison rule in words.
    """

    time: int | None
    env: int | None
    field: str
    element: tuple[int, ...]
    got: Any
    expected: Any
    rule: str

    @property
    def field_with_index(self) -> str:
        """`observation[2]` style: the field and the element inside it."""
        if not self.element:
            return self.field
        return f"{self.field}[{', '.join(str(i) for i in self.element)}]"


def first_mismatch(
    got: Mapping[str, Any],
    expected: Mapping[str, Any],
    tolerance: Tolerance,
    *,
    time_axis: bool,
    batch_axis: bool,
) -> Mismatch | None:
    """The earliest difference between two flat trajectories `{path: array}`.

    The earliest time index wins; at equal times the first field in `got`'s order, then the
    first environment, then the first element. Only the paths present in both are compared;
    their shapes must agree (callers check structure first).
    """
    lead = int(time_axis) + int(batch_axis)
    best: Mismatch | None = None
    best_time = None
    for key, raw_got in got.items():
        if key not in expected:
            continue
        g = to_numpy(raw_got)
        e = to_numpy(expected[key])
        if g.shape != e.shape:
            t = 0 if time_axis else None
            return Mismatch(t, None, key, (), f"shape {g.shape}", f"shape {e.shape}", "shape")
        bad = ~tolerance.close(key, g, e)
        if not bad.any():
            continue
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        if time_axis:
            per_time = bad.reshape(bad.shape[0], -1).any(axis=1)
            t = int(np.argmax(per_time))
            if best_time is not None and t >= best_time:
                continue
            sub = bad[t]
            index = (t, *(int(i) for i in np.argwhere(sub)[0]))
            best_time = t
        env = index[int(time_axis)] if batch_axis else None
        best = Mismatch(
            time=index[0] if time_axis else None,
            env=env,
            field=key,
            element=index[lead:],
            got=g[index],
            expected=e[index],
            rule=tolerance.describe(key) if np.issubdtype(g.dtype, np.floating) else "exact",
        )
        if not time_axis:
            return best
    return best
