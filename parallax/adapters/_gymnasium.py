"""Parallax environments for Gymnasium users (this module imports `gymnasium`).

- `GymnasiumEnv`: any Parallax environment as a `gymnasium.Env` (Gymnasium 0.29 and 1.x).
- `GymnasiumVectorEnv`: any `VmapWrapper`-ed environment as a `gymnasium.vector.VectorEnv`
  (Gymnasium >= 1.1, whose vector API declares auto-reset modes).
- `to_gymnasium_space`: a Parallax space as the equivalent Gymnasium space.

Both exports compile one function per call kind with `jax.jit` when they are built: `step`
runs the environment's step *and* every conversion (observation dtypes, dropped
auto-reset keys) on the device, and packs everything the host needs into one byte buffer,
which comes to the host in one transfer (`HostPacker`). The caller gets NumPy: observations with the dtypes of the Gymnasium
observation space, rewards as floats, flags as bools, `info` as NumPy.

Actions are checked with the Gymnasium space's `contains` before they reach the device; an
action outside the space raises `ValueError` naming the action and the space. Arrays of
another numeric dtype are accepted when they convert exactly (an int64 array for an int32
`MultiDiscrete`, a float64 array for a float32 `Box`); `1.7` for a `Discrete` space is not.

Seeds. `reset(seed=s)` starts from `jax.random.key(s)` (seeds of 2**32 and above are first
hashed to 32 bits with NumPy's `SeedSequence`), so a Gymnasium user and a Parallax user who
use the same seed see the same episode. `reset()` without a seed draws the key from the
env's `np_random`, which `reset(seed=s)` (or the constructor's `seed`) seeds, so a seeded
sequence of resets is reproducible, as Gymnasium's checker requires.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium
import jax
import numpy as np
from gymnasium import spaces as gym_spaces
from gymnasium.vector.utils import batch_space

from .._core import MARLState, State
from .._spaces import Box, Discrete, MultiBinary, MultiDiscrete, PyTreeSpace, Space
from .._wrappers.autoreset import FINAL_INFO, FINAL_OBSERVATION, AutoResetWrapper
from .._wrappers.base import is_vector_env
from .._wrappers.transform import autoreset_mode
from .._wrappers.vmap import VmapWrapper

try:  # the vector API with declared auto-reset modes: Gymnasium >= 1.1
    from gymnasium.vector import AutoresetMode
except ImportError:  # pragma: no cover - exercised in a Gymnasium 0.29 environment
    AutoresetMode = None  # type: ignore[assignment,misc]

__all__ = ["GymnasiumEnv", "GymnasiumVectorEnv", "to_gymnasium_space"]


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


# -- single environment -----------------------------------------------------------------------
class GymnasiumEnv(gymnasium.Env):  # type: ignore[type-arg]
    """A Parallax environment as a `gymnasium.Env` (passes Gymnasium's `check_env`).

    Gymnasium's single-environment API has no auto-reset: after `terminated` or
    `truncated`, call `reset()`. A `step` before the first `reset`, or after the episode
    ended, raises `gymnasium.error.ResetNeeded` (the error of Gymnasium's `OrderEnforcing`)
    instead of continuing a finished episode. Wrap the env in `TimeLimit` for a time
    limit. Works with Gymnasium 0.29 (CleanRL's pin) and 1.x.

    Each `step` is one jitted call (the env's step and the output conversions) and one
    device-to-host transfer; the action is checked with `action_space.contains` first.

    Args:
        env: a single (not vectorised) Parallax environment whose states are `State`s.
        seed: optional non-negative int seeding `np_random`, which draws the keys of
            unseeded resets.

    Attributes:
        env: the Parallax environment.
        observation_space, action_space: the Gymnasium equivalents of the env's spaces.
        state: the current Parallax `State` (`None` before the first `reset`).

    Raises:
        ValueError: from `step`, for an action outside `action_space` (named, with the space).
        gymnasium.error.ResetNeeded: from `step`, before the first `reset` or after the
            episode ended (the message says which and names `reset()`).

    Example:
        >>> from parallax import TimeLimit
        >>> from parallax.envs import GridWorld
        >>> from parallax.adapters import GymnasiumEnv
        >>> env = GymnasiumEnv(TimeLimit(GridWorld(), max_steps=10))
        >>> obs, info = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        >>> obs.dtype, type(reward), type(terminated)
        (dtype('float32'), <class 'float'>, <class 'bool'>)
        >>> try:
        ...     env.step(7)
        ... except ValueError as error:
        ...     print(error)
        GymnasiumEnv.step: action 7 is not in the action space Discrete(4)
    """

    metadata = {"render_modes": []}  # noqa: RUF012 (Gymnasium's own convention)

    def __init__(self, env: Any, seed: int | None = None) -> None:
        check_parallax_env(env, "GymnasiumEnv")
        if is_vector_env(env):
            raise TypeError(
                "GymnasiumEnv: env is a vector env (it has num_envs); use GymnasiumVectorEnv"
            )
        shapes = _state_kind(env)
        if isinstance(shapes, MARLState) or not isinstance(shapes, State):
            raise TypeError(
                f"GymnasiumEnv: env must return single-agent `State`s, got {type(shapes).__name__}"
            )
        self.env = env
        self.observation_space = to_gymnasium_space(env.observation_space)
        self.action_space = to_gymnasium_space(env.action_space)
        self.render_mode = None
        self.state: State | None = None
        self._ended: str | None = None  # how the episode ended ("terminated"), until reset
        self._encode = action_encoder(self.action_space, env.action_space, "GymnasiumEnv.step")
        obs = ObservationCodec(env.observation_space)
        self._build_obs = obs.host
        reset_out, step_out = HostPacker("GymnasiumEnv"), HostPacker("GymnasiumEnv")
        self._reset_out, self._step_out = reset_out.unpack, step_out.unpack

        def reset(key: Any) -> Any:
            state = env.reset(key=key)
            return state, reset_out.pack((obs.device(state.observation), state.info))

        def step(state: Any, action: Any) -> Any:
            state = env.step(state, action)
            out = (state.reward, state.termination, state.truncation, state.info)
            return state, step_out.pack((obs.device(state.observation), *out))

        self._reset_fn: Callable[..., Any] = jax.jit(reset)
        self._step_fn: Callable[..., Any] = jax.jit(step)
        if seed is not None:
            self._np_random, self._np_random_seed = gymnasium.utils.seeding.np_random(
                seed_to_int(seed)
            )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode from `jax.random.key(seed)` (or a key drawn from `np_random`).

        Args:
            seed: optional non-negative int.
            options: must be `None` or empty (the env takes no reset options).

        Returns:
            `(observation, info)` as NumPy.
        """
        _check_options(options, (), "GymnasiumEnv")
        if seed is not None:
            seed = seed_to_int(seed)
        super().reset(seed=seed)
        if seed is None:
            seed = int(self.np_random.integers(0, 2**32, dtype=np.uint64))
        self.state, out = self._reset_fn(jax.random.key(seed))
        self._ended = None
        leaves, info = self._reset_out(out)
        return self._build_obs(leaves), _writable(info)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Advance one step.

        Args:
            action: an element of `action_space`.

        Returns:
            `(observation, reward, terminated, truncated, info)`.

        Raises:
            ValueError: `action` is not in `action_space`.
            gymnasium.error.ResetNeeded: no `reset` yet, or the last step returned
                `terminated` or `truncated` (the state is left as it was).
        """
        if self.state is None:
            raise gymnasium.error.ResetNeeded("GymnasiumEnv: call reset() before step()")
        if self._ended is not None:
            raise gymnasium.error.ResetNeeded(
                f"GymnasiumEnv: the episode ended (the last step returned {self._ended}=True); "
                "call reset() before step()"
            )
        self.state, out = self._step_fn(self.state, self._encode(action))
        leaves, reward, terminated, truncated, info = self._step_out(out)
        terminated, truncated = bool(terminated), bool(truncated)
        if terminated or truncated:
            self._ended = "terminated" if terminated else "truncated"
        obs = self._build_obs(leaves)
        return obs, float(reward), terminated, truncated, _writable(info)

    def render(self) -> None:
        """No rendering (`render_mode` is `None`)."""
        return None

    def __repr__(self) -> str:
        return f"GymnasiumEnv({self.env!r})"


# -- vector environment -----------------------------------------------------------------------
_MODE_NAMES = ("next-step", "same-step", "off")


def _gymnasium_mode(mode: str) -> Any:
    assert AutoresetMode is not None
    return {
        "same-step": AutoresetMode.SAME_STEP,
        "next-step": AutoresetMode.NEXT_STEP,
        "off": AutoresetMode.DISABLED,
    }[mode]


def _mode_name(mode: Any) -> str | None:
    """`autoreset_mode` as a Parallax mode name (`None`: keep the stack's)."""
    if mode is None or mode in _MODE_NAMES:
        return mode  # type: ignore[no-any-return]
    if AutoresetMode is not None and isinstance(mode, AutoresetMode):
        return {
            AutoresetMode.NEXT_STEP: "next-step",
            AutoresetMode.SAME_STEP: "same-step",
            AutoresetMode.DISABLED: "off",
        }[mode]
    raise ValueError(
        "GymnasiumVectorEnv: autoreset_mode must be 'next-step', 'same-step', 'off', a "
        f"gymnasium.vector.AutoresetMode or None, got {mode!r}"
    )


def _with_autoreset(vector_env: Any, wanted: str | None) -> tuple[Any, str]:
    """The stack that auto-resets in mode `wanted` (see `GymnasiumVectorEnv`), and the mode."""
    have = autoreset_mode(vector_env)
    if wanted is None or wanted == have:
        return vector_env, have
    if have == "off":  # nothing auto-resets: add the auto-reset on the outside
        return AutoResetWrapper(vector_env, mode=wanted), wanted
    base = None
    if isinstance(vector_env, AutoResetWrapper) and vector_env.mode == have:
        base = vector_env.env  # make_vec's stack (VmapAutoResetWrapper): the batch below
    elif type(vector_env) is VmapWrapper and isinstance(vector_env.env, AutoResetWrapper):
        inner = vector_env.env  # per-env auto-reset under vmap: the same batch without it
        base = VmapWrapper(
            inner.env, vector_env.num_envs, max_resets_per_step=vector_env.max_resets_per_step
        )
    if base is None:
        raise ValueError(
            f"GymnasiumVectorEnv: autoreset_mode={wanted!r}, but vector_env auto-resets in "
            f"mode {have!r} below other wrappers, which cannot be rebuilt; build the stack "
            f"with AutoResetWrapper(..., mode={wanted!r}) or pass autoreset_mode={have!r}"
        )
    return (base if wanted == "off" else AutoResetWrapper(base, mode=wanted)), wanted


def _vector_info(info: dict[str, Any], num_envs: int) -> dict[str, Any]:
    """Gymnasium's vector `info`: each key's batch plus a `_key` mask (all present)."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        out[key] = _vector_info(value, num_envs) if isinstance(value, dict) else np.array(value)
        out[f"_{key}"] = np.ones(num_envs, dtype=np.bool_)
    return out


def _masked_info(info: dict[str, Any], mask: np.ndarray) -> dict[str, Any]:
    """Vector `info` whose entries count only where `mask` (Gymnasium's `final_info`)."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, dict):
            out[key] = _masked_info(value, mask)
        else:
            arr = np.asarray(value)
            m = mask.reshape(mask.shape + (1,) * (arr.ndim - 1))
            out[key] = np.where(m, arr, np.zeros_like(arr))
        out[f"_{key}"] = mask.copy()
    return out


def _public_info(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if k not in (FINAL_OBSERVATION, FINAL_INFO)}


class GymnasiumVectorEnv(gymnasium.vector.VectorEnv):  # type: ignore[type-arg]
    """A `VmapWrapper`-ed Parallax environment as a `gymnasium.vector.VectorEnv`.

    Needs Gymnasium >= 1.1 (its vector API declares auto-reset modes); on older versions
    building one raises an `ImportError` that says so.

    Auto-reset: `autoreset_mode` decides, and `metadata["autoreset_mode"]` declares it:

    - `"next-step"` (the default, Gymnasium's own default and the only mode its vector
      observation wrappers, e.g. `NormalizeObservation` and `FlattenObservation`, accept):
      the step that ends an episode returns its terminal observation; the following step
      ignores its action and returns the reset observation with reward 0 and both flags
      False. `AutoresetMode.NEXT_STEP`.
    - `"same-step"`: the step that ends an episode returns the reset observation, with the
      terminal one in `info["final_obs"]` (an object array, `None` where no episode ended)
      and the terminal info in `info["final_info"]`, masked by `info["_final_obs"]` /
      `info["_final_info"]`. `AutoresetMode.SAME_STEP`.
    - `"off"`: no auto-reset (`AutoresetMode.DISABLED`); reset finished envs with
      `reset(options={"reset_mask": mask})`, `VmapWrapper`'s selective reset (also
      available in the other modes).
    - `None`: keep the stack's own mode (`"off"` for a stack that does not auto-reset).

    The rule for the given stack, which is never modified: a stack that does not auto-reset
    gets an `AutoResetWrapper` in the wanted mode on the outside; a stack whose outermost
    layer is its auto-reset (`parallax.make_vec`'s `VmapAutoResetWrapper`, same-step by
    default, or `AutoResetWrapper(VmapWrapper(env))`), or `VmapWrapper(AutoResetWrapper(env))`,
    is rebuilt over the same env with the wanted mode (identical episodes and keys, only the
    timing convention changes); a stack whose auto-reset sits below other wrappers must
    already have the wanted mode (`ValueError` otherwise, saying how to build it).

    Args:
        vector_env: a Parallax vector environment (`VmapWrapper(...)`, or wrappers over one)
            whose states are single-agent `State`s.
        seed: optional non-negative int seeding `np_random` (keys of unseeded resets).
        autoreset_mode: `"next-step"` (default), `"same-step"`, `"off"`, a
            `gymnasium.vector.AutoresetMode`, or `None` (keep the stack's).

    Attributes:
        env: the Parallax vector environment that runs (auto-reset as declared).
        num_envs: the batch size.
        single_observation_space, single_action_space: one env's Gymnasium spaces.
        observation_space, action_space: the batched spaces.
        state: the current batched Parallax `State`.

    Example:
        >>> import numpy as np
        >>> import parallax
        >>> from parallax.adapters import GymnasiumVectorEnv
        >>> envs = GymnasiumVectorEnv(parallax.make_vec("GridWorld-v0", 4, max_episode_steps=5))
        >>> envs.metadata["autoreset_mode"]
        <AutoresetMode.NEXT_STEP: 'NextStep'>
        >>> obs, info = envs.reset(seed=0)
        >>> obs, rewards, terminations, truncations, info = envs.step(np.zeros(4, np.int64))
        >>> obs.shape, rewards.dtype, terminations.dtype
        ((4, 4), dtype('float32'), dtype('bool'))
    """

    def __init__(
        self, vector_env: Any, seed: int | None = None, *, autoreset_mode: Any = "next-step"
    ) -> None:
        if AutoresetMode is None:
            raise ImportError(
                "GymnasiumVectorEnv needs gymnasium>=1.1 (the vector API with autoreset modes), "
                f"found gymnasium {gymnasium.__version__}: pip install 'gymnasium>=1.1,<1.4' "
                "(GymnasiumEnv works with this version)",
                name="gymnasium",
            )
        check_parallax_env(vector_env, "GymnasiumVectorEnv")
        if not is_vector_env(vector_env):
            raise TypeError(
                "GymnasiumVectorEnv: vector_env must be a vector env such as "
                f"VmapWrapper(env, num_envs), got {type(vector_env).__name__}; use "
                "GymnasiumEnv for a single env"
            )
        vector_env, mode = _with_autoreset(vector_env, _mode_name(autoreset_mode))
        shapes = _state_kind(vector_env)
        if isinstance(shapes, MARLState) or not isinstance(shapes, State):
            raise TypeError(
                "GymnasiumVectorEnv: vector_env must return single-agent `State`s, got "
                f"{type(shapes).__name__}"
            )
        self._mode = mode
        self.env = vector_env
        self.num_envs = int(vector_env.num_envs)
        self.single_observation_space = to_gymnasium_space(vector_env.observation_space)
        self.single_action_space = to_gymnasium_space(vector_env.action_space)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {"autoreset_mode": _gymnasium_mode(mode), "render_modes": []}
        self.render_mode = None
        self.state: State | None = None
        self._encode = action_encoder(
            self.action_space, vector_env.action_space, "GymnasiumVectorEnv.step"
        )
        obs = ObservationCodec(vector_env.observation_space, batched=True)
        self._build_obs = obs.host
        same_step = mode == "same-step"
        env = vector_env
        reset_packer, step_packer = (HostPacker("GymnasiumVectorEnv") for _ in range(2))
        self._reset_out, self._step_out = reset_packer.unpack, step_packer.unpack

        def reset_out(state: Any) -> Any:
            out = (obs.device(state.observation), _public_info(state.info))
            return state, reset_packer.pack(out)

        def step(state: Any, action: Any) -> Any:
            state = env.step(state, action)
            out = (state.reward, state.termination, state.truncation, _public_info(state.info))
            if same_step:
                final = (obs.device(state.info[FINAL_OBSERVATION]), state.info[FINAL_INFO])
                return state, step_packer.pack((obs.device(state.observation), *out, final))
            return state, step_packer.pack((obs.device(state.observation), *out))

        self._reset_fn: Callable[..., Any] = jax.jit(lambda key: reset_out(env.reset(key=key)))
        self._reset_where_fn: Callable[..., Any] = jax.jit(
            lambda key, state, done: reset_out(env.reset(key=key, state=state, done=done))
        )
        self._step_fn: Callable[..., Any] = jax.jit(step)
        if seed is not None:
            self._np_random, self._np_random_seed = gymnasium.utils.seeding.np_random(
                seed_to_int(seed)
            )

    def _draw_seed(self) -> int:
        return int(self.np_random.integers(0, 2**32, dtype=np.uint64))

    def _keys(self, seed: Any) -> Any:
        """One key (split by `VmapWrapper`) for an int seed, one per env for a list."""
        if seed is None:
            return jax.random.key(self._draw_seed())
        if isinstance(seed, list | tuple):
            if len(seed) != self.num_envs:
                raise ValueError(
                    f"GymnasiumVectorEnv.reset: a list of seeds needs num_envs={self.num_envs} "
                    f"entries, got {len(seed)}"
                )
            ints = [self._draw_seed() if s is None else seed_to_int(s) for s in seed]
            return jax.vmap(jax.random.key)(np.asarray(ints, dtype=np.uint32))
        return jax.random.key(seed_to_int(seed))

    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env, or with `options={"reset_mask": mask}` only where `mask`.

        Args:
            seed: `None`, an int (one key, split across the envs) or a list of `num_envs`
                ints or `None`s (one key per env).
            options: `None`, or `{"reset_mask": bool array of shape (num_envs,)}`.

        Returns:
            `(observations, infos)` in Gymnasium's vector format.
        """
        options = _check_options(options, ("reset_mask",), "GymnasiumVectorEnv")
        if isinstance(seed, int | np.integer) and not isinstance(seed, bool):
            self._np_random, self._np_random_seed = gymnasium.utils.seeding.np_random(
                seed_to_int(seed)
            )
        keys = self._keys(seed)
        if "reset_mask" in options:
            mask = np.asarray(options["reset_mask"])
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
                raise ValueError(
                    "GymnasiumVectorEnv.reset: reset_mask must be a bool array of shape "
                    f"({self.num_envs},), got {mask.dtype} {mask.shape}"
                )
            if self.state is None:
                raise gymnasium.error.ResetNeeded(
                    "GymnasiumVectorEnv: reset() without reset_mask first"
                )
            self.state, out = self._reset_where_fn(keys, self.state, mask)
        else:
            self.state, out = self._reset_fn(keys)
        leaves, info = self._reset_out(out)
        return self._build_obs(leaves), _vector_info(info, self.num_envs)

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step every env (auto-resetting as `metadata["autoreset_mode"]` says).

        Args:
            actions: an element of `action_space` (leading dimension `num_envs`).

        Returns:
            `(observations, rewards, terminations, truncations, infos)`; rewards float32,
            flags bool, all of shape `(num_envs,)`.

        Raises:
            ValueError: `actions` is not in `action_space`.
        """
        if self.state is None:
            raise gymnasium.error.ResetNeeded("GymnasiumVectorEnv: call reset() before step()")
        self.state, out = self._step_fn(self.state, self._encode(actions))
        leaves, rewards, terminations, truncations, info, *final = self._step_out(out)
        infos = _vector_info(info, self.num_envs) if info else {}
        if final:
            done = terminations | truncations
            if done.any():
                final_leaves, final_info = final[0]
                final_obs = np.full(self.num_envs, None, dtype=object)
                for i in np.flatnonzero(done):
                    final_obs[i] = self._build_obs([leaf[i] for leaf in final_leaves])
                infos["final_obs"] = final_obs
                infos["_final_obs"] = done.copy()
                infos["final_info"] = _masked_info(final_info, done)
                infos["_final_info"] = done.copy()
        # writable, as Gymnasium's own vector envs return them
        rewards, terminations, truncations = (
            np.array(rewards),
            np.array(terminations),
            np.array(truncations),
        )
        return self._build_obs(leaves), rewards, terminations, truncations, infos

    def render(self) -> None:
        """No rendering (`render_mode` is `None`)."""
        return None

    def __repr__(self) -> str:
        return f"GymnasiumVectorEnv({self.env!r})"
