"""`VmapWrapper`: run `num_envs` copies of an environment with `jax.vmap`, with selective reset.

Also holds the key helpers shared by the wrappers: `is_key_batch`, `split_keys`, and
`params_axes`, the rule that tells shared params leaves from per-env ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, PyTree

from .._core import Env, KeyArray, StateT
from .._validate import check_key
from .base import Wrapper, check_positive_int, is_vector_env, step_env
from .batch_reset import auto_budget, reset_rows


def _is_typed_key(key: Any) -> bool:
    return hasattr(key, "dtype") and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)


def is_key_batch(key: Any) -> bool:
    """Whether `key` is a batch of keys (typed keys of rank 1, or raw uint32 keys of rank 2)."""
    return jnp.ndim(key) == (1 if _is_typed_key(key) else 2)


def split_keys(key: KeyArray, num: int) -> KeyArray:
    """`num` keys from one key, or `key` itself when it already is a batch of `num` keys."""
    if is_key_batch(key):
        if jnp.shape(key)[0] != num:
            raise ValueError(f"expected a batch of {num} keys, got {jnp.shape(key)[0]}")
        return key
    return jax.random.split(key, num)


def _leading(tree: PyTree, num: int) -> str | None:
    """`None` when every leaf of `tree` leads with `num`, else the first offending shape."""
    for leaf in jax.tree.leaves(tree):
        shape = tuple(jnp.shape(leaf))
        if shape[:1] != (num,):
            return str(shape)
    return None


def _check_batched_state(state: Any, num_envs: int, owner: str) -> None:
    """Raise unless `state` is a batch of `num_envs` states (trace time, shapes only)."""
    step_count = getattr(state, "step_count", None)
    if step_count is not None and jnp.ndim(step_count) == 0:
        raise ValueError(
            f"{owner}: state must be a batch of num_envs={num_envs} states (every leaf "
            "leading with num_envs), got an unbatched state (step_count has shape ()); "
            "use the state the wrapper's reset returned"
        )
    bad = _leading(state, num_envs)
    if bad is not None:
        raise ValueError(
            f"{owner}: state must be a batch of num_envs={num_envs} states (every leaf "
            f"leading with {num_envs}), got a leaf of shape {bad}"
        )


def params_axes(env: Any, params: PyTree, num_envs: int, owner: str = "VmapWrapper") -> PyTree:
    """The `vmap` axes of `params` for `num_envs` copies of `env`: shared or per-env, per leaf.

    The rule: each leaf of `params` is compared with the same leaf of the env's default
    params (`env.params`, read through the wrapper stack). A leaf with the default's shape
    is shared by every env (axis None); a leaf with a leading `num_envs` axis in front of
    the default's shape is per-env (axis 0: env `i` gets row `i`). Leaves may mix. The
    comparison is by shape only, so it is decided at trace time and never retraces.

    Raises:
        TypeError: the env has no default `params`, or `params` has another structure.
        ValueError: a leaf whose shape is neither, naming the leaf and both allowed shapes.
    """
    default = getattr(env, "params", None)
    if default is None:
        raise TypeError(
            f"{owner}: params= needs the env's default params (env.params) to tell shared "
            f"leaves from per-env ones; {type(env).__name__} has none"
        )
    treedef: Any
    default_def: Any
    given, treedef = jax.tree_util.tree_flatten_with_path(params)
    defaults, default_def = jax.tree.flatten(default)
    if treedef != default_def:
        raise TypeError(
            f"{owner}: params must have the structure of env.params ({type(default).__name__}, "
            f"{default_def.num_leaves} leaves), got {type(params).__name__} with "
            f"{treedef.num_leaves} leaves; build them with env.params.replace(...)"
        )
    axes: list[int | None] = []
    for (path, leaf), base in zip(given, defaults, strict=True):
        shape, single = tuple(jnp.shape(leaf)), tuple(jnp.shape(base))
        if shape == single:
            axes.append(None)
        elif shape == (num_envs, *single):
            axes.append(0)
        else:
            raise ValueError(
                f"{owner}: params leaf {jax.tree_util.keystr(path)} has shape {shape}; it must "
                f"have the default's shape {single} (shared by every env) or "
                f"{(num_envs, *single)} (one row per env, num_envs={num_envs})"
            )
    return jax.tree.unflatten(treedef, axes)


class VmapWrapper(Wrapper[StateT]):
    """Step `num_envs` environments in parallel, with selective reset.

    Every leaf of the state gains a leading `num_envs` axis; the spaces keep describing one
    environment. `reset(key=k)` resets all envs; `reset(key=k, state=s, done=d)` resets only
    the envs where `d` is True and leaves the others bit-identical.

    Resets cost only what they must:

    - no env done: the reset is skipped batch-wide (`lax.cond`, one branch runs);
    - with `max_resets_per_step=K`: when at most `K` envs are done only those `K` resets are
      computed (gathered keys, scattered results), otherwise all `num_envs`. Results are
      identical to the plain path; the trade-off is a larger program (two reset branches) for a
      reset cost proportional to the number of finished envs. The default `"auto"` picks
      `K = num_envs // 16` for batches of 32 or more envs (none below); `None` turns the
      partial path off. Under an outer `vmap` (seeds x envs) the selective reset keeps its
      cost: a batching rule flattens the two batch axes into one and decides once for the
      whole `(seeds, num_envs)` batch (budget `K` per seed).

    `VmapWrapper` vmaps exactly the env it wraps, and an `AutoResetWrapper` below it resets
    at batch level too (its reset carries the same batching rule), so
    `VmapWrapper(AutoResetWrapper(env), n)`, `jax.vmap` over `AutoResetWrapper(env)` and
    `VmapAutoResetWrapper(env, n)` (what `make_vec` builds) do the same work and give the
    same results.

    Keyword arguments of `reset` other than `state`, `done`, `key_fn` and `params` are
    per-env: each leads with `num_envs`, and env `i` gets row `i` (a finance env's
    `start=`, say).

    Per-call params (domain randomisation): `reset(key=..., params=p)` and
    `step(state, action, params=p)` pass `p` to every env, leaf by leaf shared or per-env
    by the rule of `params_axes`: a leaf shaped like the env's default (`env.params`) is
    shared, a leaf with a leading `num_envs` axis gives env `i` its row `i`. Pass the same
    params to `reset` and to every `step`; a selective reset (and so the auto-reset) uses
    them too. Without `params=` the env is called exactly as before (no `params` keyword).

    A selective reset passes each reset env its own row of the old `state` as
    `reset(key=..., previous=row)` when the env declares `reset_uses_previous` (state that
    survives resets, such as a sequential walk through a price history); other envs get
    `key=` only.

    Args:
        env: the environment to batch.
        num_envs: a positive int.
        max_resets_per_step: `"auto"` (default), `None`, or a positive int `K <= num_envs`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax import VmapWrapper
        >>> from parallax.envs import GridWorld
        >>> env = VmapWrapper(GridWorld(), num_envs=8)
        >>> state = env.reset(key=jax.random.key(0))
        >>> state = env.step(state, jnp.zeros(8, jnp.int32))
        >>> state.observation.shape
        (8, 4)
        >>> state = env.reset(key=jax.random.key(1), state=state, done=state.done)
    """

    def __init__(
        self, env: Env[StateT], num_envs: int, *, max_resets_per_step: int | str | None = "auto"
    ) -> None:
        super().__init__(env)
        self.num_envs = check_positive_int(num_envs, "num_envs", "VmapWrapper")
        if max_resets_per_step == "auto":
            max_resets_per_step = auto_budget(self.num_envs)
        elif isinstance(max_resets_per_step, str):
            raise ValueError(
                "VmapWrapper: max_resets_per_step must be 'auto', None or a positive int, "
                f"got {max_resets_per_step!r}"
            )
        if max_resets_per_step is not None:
            k = check_positive_int(max_resets_per_step, "max_resets_per_step", "VmapWrapper")
            if k > self.num_envs:
                raise ValueError(
                    "VmapWrapper: max_resets_per_step must be in [1, num_envs="
                    f"{self.num_envs}], got {k}"
                )
            max_resets_per_step = k
        self.max_resets_per_step: int | None = max_resets_per_step

    def reset(  # type: ignore[override]
        self,
        *,
        key: KeyArray,
        state: StateT | None = None,
        done: Bool[Array, " num_envs"] | None = None,
        key_fn: Callable[[KeyArray], KeyArray] | None = None,
        params: PyTree = None,
        **per_env: Any,
    ) -> StateT:
        """Reset all environments, or only those where `done` is True.

        Args:
            key: one key (split into `num_envs`) or a batch of `num_envs` keys (env `i`
                resets with `key[i]`).
            state: the current batched state; required together with `done`.
            done: boolean mask of shape `(num_envs,)`; required together with `state`.
            key_fn: optional; env `i` resets with `key_fn(key[i])`, derived inside the reset
                branches for the envs that reset only (an auto-reset's next-episode keys,
                `next_episode_key`, cost nothing on a step where no episode ended).
            params: optional params of the env (shared or per-env leaves, see
                `params_axes`).
            **per_env: further arguments of the env's `reset`, each with a leading
                `num_envs` axis (env `i` gets row `i`); full resets only.

        Returns:
            The batched state; envs where `done` is False are returned unchanged.
        """
        if (state is None) != (done is None):
            raise ValueError(
                "VmapWrapper.reset: selective reset needs both `state` and `done` (or neither); "
                f"got state={'None' if state is None else 'a state'}, "
                f"done={'None' if done is None else 'a mask'}"
            )
        if state is None or done is None:
            check_key(key, "VmapWrapper.reset", batch=self.num_envs)
            keys = split_keys(key, self.num_envs)
            axes = None if params is None else params_axes(self.env, params, self.num_envs)
            env: Any = self.env
            derive = key_fn if key_fn is not None else (lambda k: k)

            def full(k: KeyArray, kw: dict[str, Any], p: PyTree) -> StateT:
                extra = {} if p is None else {"params": p}
                return env.reset(key=derive(k), **kw, **extra)  # type: ignore[no-any-return]

            return jax.vmap(full, in_axes=(0, 0, axes))(keys, per_env, params)
        if per_env:
            raise ValueError(
                "VmapWrapper.reset: a selective reset (state=, done=) takes no further "
                f"arguments, got {sorted(per_env)}"
            )
        return self._selective_reset(key, state, done, key_fn, params)

    def _selective_reset(
        self,
        key: KeyArray,
        state: StateT,
        done: Array,
        key_fn: Callable[[KeyArray], KeyArray] | None = None,
        params: PyTree = None,
        finish: Callable[[Any, Any], Any] | None = None,
    ) -> StateT:
        """`reset(key=key, state=state, done=done, ...)`, with `finish` (see `reset_rows`):
        what `AutoResetWrapper` calls."""
        check_key(key, "VmapWrapper.reset", batch=self.num_envs)
        keys = split_keys(key, self.num_envs)
        axes = None if params is None else params_axes(self.env, params, self.num_envs)
        _check_batched_state(state, self.num_envs, "VmapWrapper.reset")
        done = jnp.asarray(done)
        if done.shape != (self.num_envs,) or done.dtype != jnp.bool_:
            raise ValueError(
                f"VmapWrapper.reset: done must be a bool array of shape ({self.num_envs},), "
                f"got {done.dtype} {done.shape}"
            )
        return self._reset_where(keys, state, done, key_fn, params, axes, finish)

    def _reset_where(
        self,
        keys: KeyArray,
        state: StateT,
        done: Array,
        key_fn: Callable[[KeyArray], KeyArray] | None = None,
        params: PyTree = None,
        axes: PyTree = None,
        finish: Callable[[Any, Any], Any] | None = None,
    ) -> StateT:
        """Reset the envs where `done` with `key_fn(keys[i])` (or `keys[i]`), cheaply.

        `key_fn` is applied inside the reset branches, to the gathered keys only, so that a
        step where no env is done derives no key at all. An env that declares
        `reset_uses_previous` also gets its row of `state` as `previous=` (gathered with
        the keys on the partial path); the others are reset with `key=` only.
        """
        env: Any = self.env
        # A nested vector env resets whole batches; `previous=` is for single envs.
        with_previous = bool(getattr(env, "reset_uses_previous", False)) and not is_vector_env(env)
        return reset_rows(  # type: ignore[no-any-return]
            env,
            keys,
            state,
            done,
            key_fn=key_fn,
            params=params,
            axes=axes,
            with_previous=with_previous,
            budget=self.max_resets_per_step,
            finish=finish,
        )

    def step(self, state: StateT, action: PyTree, params: PyTree = None) -> StateT:
        """Step every environment; `action` leaves lead with `num_envs`.

        `params` (optional): the env's params, each leaf shared or per-env (`params_axes`).
        """
        _check_batched_state(state, self.num_envs, "VmapWrapper.step")
        bad = _leading(action, self.num_envs)
        if bad is not None:
            expected = (self.num_envs, *getattr(self.action_space, "shape", ()))
            shown = expected if all(isinstance(d, int) for d in expected) else "(num_envs, ...)"
            raise ValueError(
                f"VmapWrapper.step: action must hold one action per env, leading with "
                f"num_envs={self.num_envs} (shape {shown}), got shape {bad}"
            )
        if params is None:
            return jax.vmap(self.env.step)(state, action)
        env = self.env
        axes = params_axes(env, params, self.num_envs)
        return jax.vmap(  # type: ignore[no-any-return]
            lambda s, a, p: step_env(env, s, a, p), in_axes=(0, 0, axes)
        )(state, action, params)

    def _repr_args(self) -> str:
        auto = auto_budget(self.num_envs)
        extra = (
            f", max_resets_per_step={self.max_resets_per_step}"
            if self.max_resets_per_step != auto
            else ""
        )
        return f"num_envs={self.num_envs}{extra}"

    # -- batched spaces, for code ported from sekai's VecEnv (the spaces above are per env) --
    @property
    def batch_observation_space(self) -> Any:
        """The space of a batched observation: `observation_space` with a leading
        `num_envs` axis (`parallax.stack_space`; a `Discrete(n)` becomes
        `Discrete(n, (num_envs,))`, sekai's `MultiDiscrete([n] * num_envs)`)."""
        from .._spaces import stack_space

        return stack_space(self.observation_space, self.num_envs)

    @property
    def batch_action_space(self) -> Any:
        """The space of a batch of actions: `action_space` with a leading `num_envs` axis."""
        from .._spaces import stack_space

        return stack_space(self.action_space, self.num_envs)
