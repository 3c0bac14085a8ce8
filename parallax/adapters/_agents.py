"""Per-agent views of stacked multi-agent spaces, shared by the multi-agent exports and adapters.

- `agent_names(n)`: `["agent_0", ..., "agent_{n-1}"]`, the names PettingZoo and JaxMARL use.
- `agent_space(space, i, n, owner=...)`: agent `i`'s own space, from a stacked space.
- `stack_agent_spaces(spaces, names, owner=...)`: the stacked space of per-agent spaces that
  share shapes and dtypes (bounds may differ per agent).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from .._spaces import Box, Discrete, MultiBinary, MultiDiscrete, PyTreeSpace

__all__ = ["agent_names", "agent_space", "stack_agent_spaces"]


def agent_names(num_agents: int) -> list[str]:
    """The agent names of slots `0 .. num_agents - 1`.

    Example:
        >>> from parallax.adapters._agents import agent_names
        >>> agent_names(3)
        ['agent_0', 'agent_1', 'agent_2']
    """
    return [f"agent_{i}" for i in range(num_agents)]


def _is_leaf_space(x: Any) -> bool:
    return isinstance(x, Discrete | Box | MultiDiscrete | MultiBinary)


def agent_space(space: Any, i: int, num_agents: int, *, owner: str) -> Any:
    """Agent `i`'s own Parallax space, from the stacked space (leading `num_agents` axis).

    Example:
        >>> from parallax import spaces, stack_space
        >>> from parallax.adapters._agents import agent_space
        >>> agent_space(stack_space(spaces.Box(0.0, 1.0, (4,)), 3), 1, 3, owner="demo")
        Box(0.0, 1.0, (4,), float32)
    """
    if isinstance(space, PyTreeSpace):
        return PyTreeSpace(
            jax.tree.map(
                lambda s: agent_space(s, i, num_agents, owner=owner),
                space.spaces,
                is_leaf=_is_leaf_space,
            )
        )
    shape = tuple(space.shape) if _is_leaf_space(space) else ()
    if not shape or shape[0] != num_agents:
        raise TypeError(
            f"{owner}: a multi-agent space must lead with num_agents={num_agents} "
            f"(stack_space(per_agent_space, num_agents)), got {space!r}"
        )
    if isinstance(space, Discrete):
        return Discrete(space.n, shape[1:], space.dtype)
    if isinstance(space, Box):
        return Box(space.low[i], space.high[i], shape[1:], space.dtype)
    if isinstance(space, MultiDiscrete):
        nvec = np.asarray(space.nvec)[i]
        if nvec.ndim == 0:
            return Discrete(int(nvec), (), space.dtype)
        return MultiDiscrete(nvec, space.dtype)
    if len(shape) == 1:  # MultiBinary with one bit per agent
        return Discrete(2, (), space.dtype)
    return MultiBinary(shape[1:])


def _describe(space: Any) -> Any:
    """What must agree between agents for their spaces to stack: kind, shape, dtype, n."""
    if isinstance(space, PyTreeSpace):
        return jax.tree.map(_describe, space.spaces, is_leaf=_is_leaf_space)
    extra = space.n if isinstance(space, Discrete) else None
    return (type(space).__name__, tuple(space.shape), np.dtype(space.dtype).name, extra)


def _stack(spaces: Sequence[Any]) -> Any:
    first = spaces[0]
    if isinstance(first, PyTreeSpace):
        trees = [s.spaces for s in spaces]
        return PyTreeSpace(
            jax.tree.map(lambda *leaves: _stack(leaves), *trees, is_leaf=_is_leaf_space)
        )
    num = len(spaces)
    if isinstance(first, Box):
        shape = (num, *first.shape)
        low = np.stack([np.broadcast_to(s.low, first.shape) for s in spaces])
        high = np.stack([np.broadcast_to(s.high, first.shape) for s in spaces])
        return Box(low, high, shape, first.dtype)
    if isinstance(first, Discrete):
        return Discrete(first.n, (num, *first.shape), first.dtype)
    if isinstance(first, MultiDiscrete):
        return MultiDiscrete(np.stack([np.asarray(s.nvec) for s in spaces]), first.dtype)
    return MultiBinary((num, *first.shape))


def stack_agent_spaces(spaces: Sequence[Any], names: Sequence[str], *, owner: str) -> Any:
    """One stacked space (leading axis: the agents) from the agents' own spaces.

    The spaces must agree in kind, shape, dtype and (for `Discrete`) `n`; a `Box`'s bounds
    may differ per agent.

    Raises:
        TypeError: two agents' spaces differ (the message names them and both spaces).

    Example:
        >>> from parallax import spaces
        >>> from parallax.adapters._agents import stack_agent_spaces
        >>> stack_agent_spaces([spaces.Discrete(5)] * 2, ["a", "b"], owner="demo")
        Discrete(5, shape=(2,))
    """
    reference = _describe(spaces[0])
    for name, space in zip(names[1:], spaces[1:]):
        if _describe(space) != reference:
            raise TypeError(
                f"{owner}: every agent's space must have the same kind, shape and dtype to "
                f"stack into one multi-agent space; {names[0]!r} has {spaces[0]!r} and "
                f"{name!r} has {space!r}"
            )
    return _stack(list(spaces))
