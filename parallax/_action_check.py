"""Trace-time action checks: the action's shape and dtype kind against an action space.

- `check_action(space, action, owner, batch=())`: raise a clear error for an action that
  cannot be one of `space`: none (`None`), not an array (a string, a dict, ...), the wrong
  dtype kind (a float for an integer space), the wrong shape (a batch of actions for one
  env, say). The message names the owner (`"GridWorld.step"`), the space, the expected and
  the given shape and dtype.

Every bundled env and adapter calls it at the top of `step` while its `check_actions`
attribute is True (the default); `make` puts a `StaticActionCheck` over an env that has no
such attribute, so everything `make` and `make_vec` build is checked.

The check reads shapes and dtypes only (`.shape`, `.dtype`, `jax.eval_shape` for a list),
never a value: it works on tracers under `jit` and `vmap`, and adds nothing to the compiled
program. Values (an out-of-range index, a NaN) are `CheckedWrapper`'s job, inside `jit`.

What is accepted:

- an integer space (`Discrete`, `MultiDiscrete`, `MultiBinary`, an integer `Box`): any
  integer dtype, or bool (Python `True` acts as 1, as in NumPy and Gymnasium), so Python
  ints and NumPy / JAX integer scalars work;
- a float `Box`: any float or integer dtype (an int is a number the env can promote), not
  bool (a flag passed as a continuous action is a bug);
- a `PyTreeSpace`: the same tree structure, each leaf checked against its space;
- any other space with a tuple `shape` and a NumPy `dtype`: as the space of that dtype;
  spaces without them are not checked.

The shape must be `batch + space.shape` exactly, unless the env takes any shape that holds
the right number of elements (`any_shape=True`, the finance envs' sekai convention).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._spaces import PyTreeSpace

__all__ = ["check_action"]


def _space_leaf_info(space: Any) -> tuple[tuple[int, ...], np.dtype] | None:
    """`(shape, dtype)` of a checkable leaf space, or `None` (not checked)."""
    shape = getattr(space, "shape", None)
    if not isinstance(shape, tuple) or not all(isinstance(d, int | np.integer) for d in shape):
        return None
    try:
        dtype = np.dtype(getattr(space, "dtype", None))
    except TypeError:
        return None
    if not (np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)):
        return None
    return tuple(int(d) for d in shape), dtype


def _given(action: Any) -> tuple[tuple[int, ...], Any] | None:
    """`(shape, dtype)` of an array-like action (a tracer, an array, a Python or NumPy
    scalar, a list of numbers), or `None` when it is no array at all."""
    if isinstance(action, str | bytes):
        return None
    if hasattr(action, "shape") and hasattr(action, "dtype"):
        return tuple(int(d) for d in action.shape), action.dtype
    if isinstance(action, bool | int | float | complex):
        return (), jnp.result_type(action)
    if isinstance(action, list | tuple):
        try:
            abstract = jax.eval_shape(jnp.asarray, action)  # shapes only, no op recorded
        except (TypeError, ValueError):
            return None
        return tuple(abstract.shape), abstract.dtype
    return None


def _kind_ok(dtype: Any, integer: bool) -> bool:
    """Whether `dtype` is an accepted kind: integer or bool for integer spaces, float or
    integer for float spaces (never a key, complex, string or object dtype)."""
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return False
    if jax.dtypes.issubdtype(dtype, np.integer):
        return True
    if integer:
        return jax.dtypes.issubdtype(dtype, np.bool_)
    return jax.dtypes.issubdtype(dtype, np.floating)


def _shape_ok(
    got: tuple[int, ...], shape: tuple[int, ...], batch: tuple[int, ...] | None, any_shape: bool
) -> bool:
    if batch is None:  # any leading batch axes (nested vector envs): the trailing shape counts
        return len(got) >= len(shape) and got[len(got) - len(shape) :] == shape
    if any_shape:
        lead = got[: len(batch)]
        return lead == batch and math.prod(got[len(batch) :]) == math.prod(shape)
    return got == batch + shape


def _describe_value(action: Any, given: tuple[tuple[int, ...], Any] | None) -> str:
    if given is None:
        text = repr(action)
        text = text if len(text) <= 40 else text[:37] + "..."
        return f"{type(action).__name__} {text}"
    shape, dtype = given
    if isinstance(action, bool | int | float | complex):
        return f"a Python {type(action).__name__} ({dtype} {shape})"
    return f"{dtype} {shape}"


def _owner_name(owner: str) -> str:
    """`"GridWorld"` from `"GridWorld.step"` (the env, for the batch hint)."""
    return owner.rsplit(".", 1)[0] if owner.endswith(".step") else owner


def _check_leaf(
    space: Any,
    action: Any,
    owner: str,
    where: str,
    batch: tuple[int, ...] | None,
    any_shape: bool,
) -> None:
    info = _space_leaf_info(space)
    if info is None:
        return
    shape, dtype = info
    integer = bool(np.issubdtype(dtype, np.integer))
    kinds = "integer or bool" if integer else "float or integer"
    if batch is None:  # nested batches: any leading axes
        want = f"(..., {', '.join(map(str, shape))}{',' if len(shape) == 1 else ''})"
        want = "any shape" if not shape else want
    else:
        want = str(batch + shape)
        if any_shape:
            size = math.prod(shape)
            after = f" after the batch axes {batch}" if batch else ""
            want += f" or another shape of {size} element{'s' if size != 1 else ''}{after}"
        if batch:
            want += f", one action per env of {batch[0]}"
    article = "an" if dtype.name.startswith("int") else "a"
    expected = f"must be {article} {dtype} array of shape {want} (any {kinds} dtype is fine)"
    label = f"action{where}"
    if action is None:
        raise TypeError(
            f"{owner}: {label} is missing (got None); the action for {space!r} {expected}"
        )
    given = _given(action)
    shown = _describe_value(action, given)
    if given is None:
        raise TypeError(f"{owner}: {label} for {space!r} {expected}, got {shown}")
    got_shape, got_dtype = given
    if not _kind_ok(got_dtype, integer):
        raise TypeError(f"{owner}: {label} for {space!r} {expected}, got {shown}")
    if _shape_ok(got_shape, shape, batch, any_shape):
        return
    hint = ""
    if batch == () and len(got_shape) > len(shape) and got_shape[1:] == shape:
        env = _owner_name(owner)
        hint = (
            f"; a batch of {got_shape[0]} actions? {env} takes one action: batch envs "
            "with VmapWrapper or parallax.make_vec"
        )
    raise ValueError(f"{owner}: {label} for {space!r} {expected}, got {shown}{hint}")


def check_action(
    space: Any,
    action: Any,
    owner: str,
    batch: tuple[int, ...] | None = (),
    *,
    any_shape: bool = False,
) -> None:
    """Raise unless `action` has the shape and dtype kind of an element of `space`.

    Reads shapes and dtypes only: free at run time, fine on tracers under `jit`/`vmap`.

    Args:
        space: the action space of one env (`env.action_space`).
        action: the action given to `step`.
        owner: who checks, for the message (`"GridWorld.step"`).
        batch: the leading batch shape the action must have, `()` for one env,
            `(num_envs,)` for a vector env, or `None` for any leading axes (the trailing
            shape must still be `space.shape`).
        any_shape: accept any shape holding as many elements as `space.shape` (after
            `batch`), for envs that reshape their actions (sekai's finance envs).

    Raises:
        TypeError: no action (`None`), no array (a string, an object), a pytree of the
            wrong structure, or the wrong dtype kind (see the module docstring).
        ValueError: the wrong shape; for one env given a batch of actions, the message says
            to use `VmapWrapper` / `parallax.make_vec`.

    Example:
        >>> import jax.numpy as jnp
        >>> from parallax import check_action, spaces
        >>> check_action(spaces.Discrete(4), 2, "GridWorld.step")
        >>> try:
        ...     check_action(spaces.Discrete(4), jnp.float32(1.0), "GridWorld.step")
        ... except TypeError as error:
        ...     print(error)
        GridWorld.step: action for Discrete(4) must be an int32 array of shape () (any integer or bool dtype is fine), got float32 ()
    """
    if isinstance(space, PyTreeSpace):
        _check_tree(space, action, owner, batch, any_shape)
        return
    _check_leaf(space, action, owner, "", batch, any_shape)


def _check_tree(
    space: PyTreeSpace,
    action: Any,
    owner: str,
    batch: tuple[int, ...] | None,
    any_shape: bool,
) -> None:
    from ._spaces import _is_space

    spaces_tree = space.spaces
    treedef: Any = jax.tree.structure(spaces_tree, is_leaf=_is_space)
    if action is None:
        raise TypeError(
            f"{owner}: action is missing (got None); the action for {space!r} must be a "
            f"pytree {treedef}"
        )
    try:
        leaves = treedef.flatten_up_to(action)
    except (TypeError, ValueError):
        got: Any = jax.tree.structure(action)
        raise TypeError(
            f"{owner}: action for {space!r} must be a pytree of structure {treedef}, got {got}"
        ) from None
    paths = jax.tree_util.tree_flatten_with_path(spaces_tree, is_leaf=_is_space)[0]
    for (path, leaf_space), leaf in zip(paths, leaves, strict=True):
        where = jax.tree_util.keystr(path)
        if isinstance(leaf_space, PyTreeSpace):
            _check_tree(leaf_space, leaf, f"{owner} (action{where})", batch, any_shape)
        else:
            _check_leaf(leaf_space, leaf, owner, where, batch, any_shape)
