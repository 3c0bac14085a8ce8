"""Host-side plumbing of the Gymnasium and PettingZoo exports (this module imports `gymnasium`).

- `action_encoder`: a Gymnasium action, checked and converted to NumPy in the structure and
  dtypes the Parallax env expects.
- `ObservationCodec`: how an observation leaves the device (a tuple of leaves in the
  Gymnasium dtypes) and is rebuilt on the host in the Gymnasium structure.
- `HostPacker`: every host-bound array of a call packed into one byte buffer, one transfer.
- `seed_to_int`, `check_parallax_env` and the exports' other shared helpers.

Actions are checked with the Gymnasium space's `contains` before they reach the device; an
action outside the space raises `ValueError` naming the action and the space. Arrays of
another numeric dtype are accepted when they convert exactly (an int64 array for an int32
`MultiDiscrete`, a float64 array for a float32 `Box`); `1.7` for a `Discrete` space is not.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np
from gymnasium import spaces as gym_spaces

from .._spaces import Box, Discrete, MultiBinary, MultiDiscrete, PyTreeSpace
from ._gymnasium_spaces import _leaf_to_gymnasium

__all__ = ["HostPacker", "ObservationCodec", "action_encoder", "check_parallax_env", "seed_to_int"]


# -- actions: Gymnasium value -> checked NumPy value in the env's structure and dtypes ----------
class _NotInSpace(Exception):
    """An action leaf outside its space (turned into the caller's `ValueError`)."""


def _plain(spec: Any) -> Any:
    """A Parallax space tree with every `PyTreeSpace` replaced by the tree it holds."""
    if isinstance(spec, PyTreeSpace):
        return _plain(spec.spaces)
    if isinstance(spec, dict):
        return {k: _plain(v) for k, v in spec.items()}
    if isinstance(spec, tuple | list):
        items = [_plain(v) for v in spec]
        return type(spec)(*items) if hasattr(spec, "_fields") else type(spec)(items)
    return spec


def _is_leaf_space(x: Any) -> bool:
    return isinstance(x, Discrete | Box | MultiDiscrete | MultiBinary)


def _jax_dtype(dtype: Any) -> np.dtype:
    """The dtype JAX stores `dtype` as (int64 -> int32 unless x64 is on)."""
    return np.dtype(jax.dtypes.canonicalize_dtype(np.dtype(dtype)))


def _leaf_encoder(gym_space: gym_spaces.Space[Any], spec: Any) -> Callable[[Any], Any]:
    target = _jax_dtype(spec.dtype)
    contains = gym_space.contains
    if isinstance(gym_space, gym_spaces.Discrete):

        def encode_discrete(action: Any) -> Any:
            if not contains(action):  # ints and integer scalars in range; not 1.7, not -1
                raise _NotInSpace
            return np.asarray(action, target)

        return encode_discrete

    space_dtype = np.dtype(gym_space.dtype)  # type: ignore[arg-type]
    exact = space_dtype.kind != "f"  # integer spaces take only values that convert exactly

    def encode_array(action: Any) -> Any:
        x = np.asarray(action)
        if x.dtype != space_dtype:
            if x.dtype.kind not in "biuf":
                raise _NotInSpace
            with np.errstate(all="ignore"):
                cast = x.astype(space_dtype)
            if exact and not np.array_equal(cast, x):
                raise _NotInSpace
            x = cast
        if not contains(x):
            raise _NotInSpace
        return x if space_dtype == target else x.astype(target)

    return encode_array


def _encoder(gym_space: gym_spaces.Space[Any], spec: Any) -> Callable[[Any], Any]:
    """Check-and-convert for one (possibly nested) action; `spec` is a `_plain` tree."""
    if isinstance(spec, dict):
        assert isinstance(gym_space, gym_spaces.Dict)
        items = [(k, str(k), _encoder(gym_space[str(k)], s)) for k, s in spec.items()]
        names = {name for _, name, _ in items}

        def encode_dict(action: Any) -> Any:
            if not isinstance(action, Mapping) or set(action) != names:
                raise _NotInSpace
            return {k: encode(action[name]) for k, name, encode in items}

        return encode_dict
    if isinstance(spec, tuple | list):
        assert isinstance(gym_space, gym_spaces.Tuple)
        encoders = [_encoder(g, s) for g, s in zip(gym_space.spaces, spec)]
        named = hasattr(spec, "_fields")  # a NamedTuple of spaces

        def rebuild(items: list[Any]) -> Any:
            return type(spec)(*items) if named else type(spec)(items)

        def encode_tuple(action: Any) -> Any:
            if not isinstance(action, tuple | list) or len(action) != len(encoders):
                raise _NotInSpace
            return rebuild([encode(a) for encode, a in zip(encoders, action)])

        return encode_tuple
    return _leaf_encoder(gym_space, spec)


def action_encoder(
    gym_space: gym_spaces.Space[Any], spec: Any, owner: str, *, of: str = ""
) -> Callable[[Any], Any]:
    """`encode(action)`: the action as NumPy in the structure and dtypes the env expects.

    Built once per export. `encode` raises `ValueError` naming the action and `gym_space`
    when `gym_space.contains` refuses it (after an exact dtype conversion, see the module
    docstring). `spec` is the matching Parallax space (a batched `gym_space` pairs with the
    unbatched Parallax space: structure and dtypes are the same). `of` follows the action
    in the message (`" of 'agent_0'"`).
    """
    encode = _encoder(gym_space, _plain(spec))

    def checked(action: Any) -> Any:
        try:
            return encode(action)
        except (_NotInSpace, TypeError, ValueError):
            raise ValueError(
                f"{owner}: action {action!r}{of} is not in the action space {gym_space}"
            ) from None

    return checked


# -- observations: flat device leaves -> the Gymnasium structure on the host --------------------
class ObservationCodec:
    """How an observation leaves the device and is rebuilt on the host, decided once.

    `device(obs)` (inside `jit`) flattens the observation to a tuple of leaves cast to the
    Gymnasium dtypes JAX can hold; `host(leaves)` (after the transfer) rebuilds the
    Gymnasium structure (dicts with `str` keys, tuples), casting what JAX could not hold
    (int64 without x64), into writable arrays (a transferred array is read-only, and
    Gymnasium's wrappers write into observations). A plain `Box` observation costs one
    copy on the host.
    `batched` prepends the batch axis (vector exports): scalar `Discrete` values stay arrays.
    """

    def __init__(self, spec: Any, *, batched: bool = False) -> None:
        tree = _plain(spec)
        leaves, self._treedef = jax.tree.flatten(tree, is_leaf=_is_leaf_space)
        gym_dtypes = [np.dtype(_leaf_to_gymnasium(s).dtype) for s in leaves]  # type: ignore[arg-type]
        self._device_dtypes = [_jax_dtype(d) for d in gym_dtypes]
        scalar_discrete = [
            not batched and isinstance(s, Discrete) and s.shape == () for s in leaves
        ]
        fixes: list[Callable[[Any], Any]] = []
        for want, scalar in zip(gym_dtypes, scalar_discrete):
            if scalar:  # Gymnasium's checker wants a NumPy int64 scalar for `Discrete`
                fixes.append(np.int64)
            else:  # a writable copy (transferred arrays are read-only), in the Gymnasium dtype
                fixes.append(functools.partial(np.array, dtype=want))
        index_tree = jax.tree.unflatten(self._treedef, list(range(len(leaves))))
        self.host = self._builder(index_tree, fixes)

    def device(self, observation: Any) -> tuple[Any, ...]:
        leaves = self._treedef.flatten_up_to(observation)  # type: ignore[attr-defined]
        return tuple(x.astype(d) for x, d in zip(leaves, self._device_dtypes))

    @classmethod
    def _builder(cls, index_tree: Any, fixes: list[Callable[[Any], Any]]) -> Callable[[Any], Any]:
        if isinstance(index_tree, dict):
            parts = [(str(k), cls._builder(v, fixes)) for k, v in index_tree.items()]
            return lambda leaves: {name: build(leaves) for name, build in parts}
        if isinstance(index_tree, tuple | list):
            builders = [cls._builder(v, fixes) for v in index_tree]
            return lambda leaves: tuple(build(leaves) for build in builders)
        i, fix = int(index_tree), fixes[int(index_tree)]
        return lambda leaves: fix(leaves[i])


# -- one transfer per call: every host-bound array packed into one byte buffer ----------------
class HostPacker:
    """Moves a pytree of arrays to the host in one transfer, as one byte buffer.

    `pack(tree)` runs inside `jit`: it views every leaf as bytes (`bool` as `uint8`) and
    concatenates them into one `uint8` vector; it records the layout while tracing (one per
    `jax_enable_x64` setting).
    `unpack(buffer)` runs on the host after `np.asarray(buffer)` (the only transfer) and
    returns the same pytree of NumPy views (read-only). One buffer instead of one per leaf
    matters: each transferred array costs tens of microseconds.
    """

    def __init__(self, owner: str) -> None:
        self._owner = owner
        # one layout per `jax_enable_x64` setting: `jit` keeps one compiled program for each
        self._layouts: dict[bool, tuple[list[tuple[int, int, np.dtype, tuple[int, ...]]], Any]]
        self._layouts = {}

    def pack(self, tree: Any) -> Any:
        leaves, treedef = jax.tree.flatten(tree)
        parts, layout, offset = [], [], 0
        for leaf in leaves:
            dtype = np.dtype(leaf.dtype) if hasattr(leaf, "dtype") else None
            if dtype is None or dtype.kind not in "biuf":
                raise TypeError(
                    f"{self._owner}: cannot hand {leaf!r} to the host; observations, rewards, "
                    "flags and info values must be bool, integer or floating arrays"
                )
            data = leaf.astype(jax.numpy.uint8) if dtype.kind == "b" else leaf
            if dtype.itemsize > 1 or dtype.kind != "u":
                data = jax.lax.bitcast_convert_type(data, jax.numpy.uint8)
            nbytes = int(np.prod(leaf.shape, dtype=np.int64)) * dtype.itemsize
            layout.append((offset, offset + nbytes, dtype, tuple(leaf.shape)))
            parts.append(data.reshape(-1))
            offset += nbytes
        self._layouts[bool(jax.config.read("jax_enable_x64"))] = (layout, treedef)
        if not parts:
            return jax.numpy.zeros((0,), jax.numpy.uint8)
        return jax.numpy.concatenate(parts)

    def unpack(self, buffer: Any) -> Any:
        data = np.asarray(buffer)
        layout, treedef = self._layouts[bool(jax.config.read("jax_enable_x64"))]
        leaves = [data[a:b].view(dtype).reshape(shape) for a, b, dtype, shape in layout]
        return jax.tree.unflatten(treedef, leaves)


# -- shared helpers -----------------------------------------------------------------------------
def _writable(tree: Any) -> Any:
    """`tree` (NumPy views of a transferred buffer) as writable copies."""
    return jax.tree.map(np.array, tree) if tree else tree


def seed_to_int(seed: Any) -> int:
    """A non-negative int seed below 2**32 (larger ones hashed), or `ValueError`."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be None or a non-negative int, got {seed!r}")
    seed = int(seed)
    if seed < 2**32:
        return seed
    return int(np.random.SeedSequence(seed).generate_state(1, dtype=np.uint32)[0])


def _check_options(options: Any, allowed: tuple[str, ...], owner: str) -> dict[str, Any]:
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError(f"{owner}.reset: options must be a dict or None, got {options!r}")
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(
            f"{owner}.reset: unsupported options {unknown}; supported: {list(allowed)}"
        )
    return options


def check_parallax_env(env: Any, owner: str) -> None:
    """`TypeError` naming `owner` unless `env` has callable `reset`/`step` and both spaces."""
    for name in ("reset", "step"):
        if not callable(getattr(env, name, None)):
            raise TypeError(
                f"{owner}: env must be a Parallax environment with a callable `{name}`, got "
                f"{type(env).__name__}"
            )
    for name in ("action_space", "observation_space"):
        if getattr(env, name, None) is None:
            raise TypeError(f"{owner}: env must have an `{name}`, got {type(env).__name__}")


def _state_kind(env: Any) -> Any:
    """The abstract state `env.reset` returns (nothing is computed)."""
    return jax.eval_shape(lambda k: env.reset(key=k), jax.random.key(0))
