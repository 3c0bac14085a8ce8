"""Parallax spaces as Gymnasium spaces (this module imports `gymnasium`).

- `to_gymnasium_space`: a Parallax space as the equivalent Gymnasium space (bounds and exact
  dtypes kept; `Discrete` is int64, Gymnasium's convention; `PyTreeSpace` dicts and tuples
  become `Dict` and `Tuple`), for the Gymnasium and PettingZoo exports.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces as gym_spaces

from .._spaces import Box, Discrete, MultiBinary, MultiDiscrete, PyTreeSpace, Space

__all__ = ["to_gymnasium_space"]


# -- spaces -----------------------------------------------------------------------------------
def _leaf_to_gymnasium(space: Any) -> gym_spaces.Space[Any]:
    if isinstance(space, Discrete):
        if space.shape == ():
            # Gymnasium's default and its checker's convention: scalar discrete values are int64
            return gym_spaces.Discrete(space.n)
        return gym_spaces.MultiDiscrete(np.full(space.shape, space.n), dtype=str(space.dtype))
    if isinstance(space, Box):
        # Bounds in the space's own dtype, as Gymnasium stores them (no precision warning).
        low = np.asarray(space.low).astype(space.dtype)
        high = np.asarray(space.high).astype(space.dtype)
        dtype: Any = space.dtype.type
        return gym_spaces.Box(low, high, space.shape, dtype)
    if isinstance(space, MultiDiscrete):
        return gym_spaces.MultiDiscrete(np.asarray(space.nvec), dtype=str(space.dtype))
    if isinstance(space, MultiBinary):
        shape = space.shape
        return gym_spaces.MultiBinary(shape[0] if len(shape) == 1 else list(shape))
    if isinstance(space, PyTreeSpace):
        return _container_to_gymnasium(space.spaces)
    raise TypeError(
        "to_gymnasium_space: expected a Discrete, Box, MultiDiscrete, MultiBinary or "
        f"PyTreeSpace, got {type(space).__name__}"
    )


def _container_to_gymnasium(tree: Any) -> gym_spaces.Space[Any]:
    if isinstance(tree, dict):
        return gym_spaces.Dict({str(k): _container_to_gymnasium(v) for k, v in tree.items()})
    if isinstance(tree, tuple | list):
        return gym_spaces.Tuple(tuple(_container_to_gymnasium(v) for v in tree))
    return _leaf_to_gymnasium(tree)


def to_gymnasium_space(space: Space) -> gym_spaces.Space[Any]:
    """The Gymnasium space equivalent to a Parallax space (bounds and dtypes kept).

    Args:
        space: `Discrete` (int64 in Gymnasium, its convention; with a shape:
            `MultiDiscrete`), `Box`, `MultiDiscrete`, `MultiBinary`, or a `PyTreeSpace` of
            dicts (`Dict`) and tuples/lists (`Tuple`).

    Returns:
        The Gymnasium space.

    Raises:
        TypeError: any other space.

    Example:
        >>> from parallax import spaces
        >>> from parallax.adapters import to_gymnasium_space
        >>> to_gymnasium_space(spaces.Box(0.0, 4.0, (4,)))
        Box(0.0, 4.0, (4,), float32)
    """
    return _leaf_to_gymnasium(space)
