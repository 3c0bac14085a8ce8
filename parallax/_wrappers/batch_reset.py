"""Resets of the envs whose episode ended, at the cost of the batch, however it was batched.

One rule serves every composition of an auto-reset with `vmap`:

- `reset_rows(env, keys, state, done, ...)`: a batch of `B` states (every leaf leads with
  `B`), reset where `done`. Nothing runs on a step where no env is done (`lax.cond` on
  `any(done)`); with a budget `K`, when at most `K` envs are done only their resets run
  (gathered keys, scattered results); otherwise all `B`. `VmapWrapper`'s selective reset.
- `reset_one(env, key, state, done, ...)`: one state, reset when `done` (a `lax.cond`).
  `AutoResetWrapper` over a single env.

Under `jax.vmap` a `lax.cond` with a batched predicate becomes a select: both branches run
for every env, so a vmapped `reset_one` would compute a reset for every env on every step,
and a vmapped `reset_rows` (seeds x envs) all `B` resets of every seed. Both functions
therefore carry a batching rule (`jax.custom_batching.custom_vmap`): a vmapped `reset_one`
is a `reset_rows` over the vmapped axis, and a vmapped `reset_rows` is one `reset_rows` over
the flattened `(outer, B)` rows. However deep the nesting, the batch does the batch-level
work once. Every env's result is exactly its unbatched one: each reset is the env's own
`reset` on its own key (and `previous=` row and params), and the envs that are not done
keep their state bit for bit.

Gradients. `custom_vmap` has no reverse-mode rule, so both functions are wrapped in a
`jax.custom_jvp` whose tangent is the incoming state's tangent for the envs that are not
done and zero for those that are reset: a new episode's first state is a fresh draw from
its key, so no gradient flows into it (not from `previous=` nor from `params` either).
Forward and reverse mode both work, under `vmap` too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, PyTree

from .._core import KeyArray

__all__ = ["auto_budget", "reset_one", "reset_rows"]

KeyFn = Callable[[KeyArray], KeyArray] | None
Finish = Callable[[Any, Any], Any] | None


def auto_budget(num_envs: int) -> int | None:
    """The default reset budget of a batch of `num_envs`: `num_envs // 16` from 32 envs up."""
    return num_envs // 16 if num_envs >= 32 else None


def _rows(params: PyTree, axes: PyTree, rows: Array) -> PyTree:
    """The per-env leaves of `params` (axis 0) gathered at `rows`; shared leaves as they are."""
    treedef: Any
    leaves, treedef = jax.tree.flatten(params)
    flat_axes = treedef.flatten_up_to(axes)
    return jax.tree.unflatten(
        treedef, [x if a is None else x[rows] for x, a in zip(leaves, flat_axes, strict=True)]
    )


def _mask(done: Array, leaf: Array) -> Array:
    """`done` shaped to broadcast against `leaf` row by row."""
    return jnp.reshape(done, jnp.shape(done) + (1,) * (jnp.ndim(leaf) - jnp.ndim(done)))


def where_done(done: Array, fresh: PyTree, old: PyTree) -> PyTree:
    """`fresh` in the rows where `done`, `old` elsewhere, leaf by leaf."""
    return jax.tree.map(lambda f, o: jnp.where(_mask(done, o), f, o), fresh, old)


def _reset_call(env: Any, key_fn: KeyFn) -> Callable[[KeyArray, Any, PyTree], Any]:
    """`(key, previous, params) -> env.reset(...)`: `key_fn(key)`, `previous=` and
    `params=` passed only when there are some."""

    def reset(key: KeyArray, previous: Any, params: PyTree) -> Any:
        key = key if key_fn is None else key_fn(key)
        extra = {} if params is None else {"params": params}
        if previous is None:
            return env.reset(key=key, **extra)
        return env.reset(key=key, previous=previous, **extra)

    return reset


def _no_gradient_into_resets(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn(key, state, done, params) -> state` with the tangent rule of the module docstring."""
    wrapped = jax.custom_jvp(fn)

    @wrapped.defjvp
    def _jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
        _, _, done, _ = primals
        state_tangent = tangents[1]

        def keep(t: Array) -> Array:
            if t.dtype == jax.dtypes.float0:
                return t
            return jnp.where(_mask(done, t), jnp.zeros_like(t), t)

        return fn(*primals), jax.tree.map(keep, state_tangent)

    return wrapped


def _arrays(params: PyTree) -> PyTree:
    """`params` as JAX arrays of canonical dtypes. `custom_jvp` and `custom_vmap` take no
    NumPy values, and `vmap` hands a NumPy leaf on as it is (a float64 one too, without
    x64); a copy makes it a JAX array, a float32 one without x64, as the env would see it."""
    return jax.tree.map(lambda x: jnp.array(x, copy=True), params)


def _broadcast(tree: PyTree, batched: PyTree, size: int) -> PyTree:
    """Every leaf of `tree` with a leading axis of `size` (added where `batched` is False)."""
    return jax.tree.map(
        lambda x, b: x if b else jnp.broadcast_to(x, (size, *jnp.shape(x))), tree, batched
    )


def _merge(tree: PyTree) -> PyTree:
    """Leaves of shape `(outer, B, ...)` as `(outer * B, ...)`."""
    return jax.tree.map(lambda x: jnp.reshape(x, (-1, *jnp.shape(x)[2:])), tree)


def _split(tree: PyTree, outer: int) -> PyTree:
    """Leaves of shape `(outer * B, ...)` as `(outer, B, ...)`."""
    return jax.tree.map(lambda x: jnp.reshape(x, (outer, -1, *jnp.shape(x)[1:])), tree)


def _merge_params(
    params: PyTree, axes: PyTree, outer_batched: PyTree, outer: int, rows: int
) -> tuple[PyTree, PyTree]:
    """`params` for `outer * rows` flattened rows, and their axes: a leaf batched by neither
    vmap stays shared; any other gets one row per flattened env."""
    treedef: Any
    leaves, treedef = jax.tree.flatten(params)
    inner_axes = treedef.flatten_up_to(axes) if axes is not None else [None] * len(leaves)
    flags = treedef.flatten_up_to(outer_batched)
    merged: list[Any] = []
    merged_axes: list[int | None] = []
    for x, inner, batched in zip(leaves, inner_axes, flags, strict=True):
        if not batched and inner is None:
            merged.append(x)
            merged_axes.append(None)
            continue
        if not batched:  # (rows, ...) -> every outer index
            x = jnp.broadcast_to(x, (outer, *jnp.shape(x)))
        elif inner is None:  # (outer, ...) -> every row
            x = jnp.broadcast_to(x[:, None], (outer, rows, *jnp.shape(x)[1:]))
        merged.append(jnp.reshape(x, (outer * rows, *jnp.shape(x)[2:])))
        merged_axes.append(0)
    return jax.tree.unflatten(treedef, merged), jax.tree.unflatten(treedef, merged_axes)


def reset_rows(
    env: Any,
    keys: KeyArray,
    state: Any,
    done: Array,
    *,
    key_fn: KeyFn = None,
    params: PyTree = None,
    axes: PyTree = None,
    with_previous: bool = False,
    budget: int | None = None,
    finish: Finish = None,
) -> Any:
    """A batch of states with the envs where `done` reset, at batch-level cost.

    Args:
        env: the env of one row (its `reset` is vmapped).
        keys: `(B,)` keys; row `i` resets with `key_fn(keys[i])` (or `keys[i]`), derived
            inside the reset branches for the rows that reset only.
        state: the batch of states (every leaf leads with `B`).
        done: bool `(B,)`.
        key_fn: optional key derivation (an auto-reset's `next_episode_key`).
        params: optional params, each leaf shared (axis None) or per row (axis 0) by `axes`.
        axes: the `vmap` axes of `params` (`params_axes`).
        with_previous: pass row `i` of `state` as `previous=` to its reset.
        budget: `K`: when at most `K` rows are done, reset only those (a gather and a
            scatter); `None`: all rows whenever any is done.
        finish: optional `finish(fresh, old) -> state`, what a reset row becomes from its
            fresh reset and its old state (an auto-reset keeps the finished step's reward
            and flags). Applied inside the reset branches, so the fields it replaces are
            never computed (the batching rule is opaque to JAX's dead-code elimination).

    Returns:
        The batch, rows where `done` is False bit-identical to `state`.
    """

    def rows(keys: KeyArray, state: Any, done: Array, params: PyTree) -> Any:
        return _rows_impl(
            env, keys, state, done, key_fn, params, axes, with_previous, budget, finish
        )

    batched = jax.custom_batching.custom_vmap(rows)

    @batched.def_vmap
    def _nested(outer: int, in_batched: Any, keys: Any, state: Any, done: Any, params: Any) -> Any:
        keys_b, state_b, done_b, params_b = in_batched
        keys, state, done = _broadcast((keys, state, done), (keys_b, state_b, done_b), outer)
        size = jnp.shape(done)[1]
        flat_params, flat_axes = _merge_params(params, axes, params_b, outer, size)

        def reset_some(state: Any) -> Any:
            flat = reset_rows(
                env,
                *_merge((keys, state, done)),
                key_fn=key_fn,
                params=flat_params,
                axes=flat_axes,
                with_previous=with_previous,
                budget=None if budget is None else budget * outer,
                finish=finish,
            )
            return _split(flat, outer)

        # decided here too, so that a step where no env is done hands the state on in its
        # own (outer, B) buffers, never through the flattened copy
        out = jax.lax.cond(jnp.any(done), reset_some, lambda state: state, state)
        return out, jax.tree.map(lambda _: True, out)

    return _no_gradient_into_resets(batched)(keys, state, done, _arrays(params))


def _rows_impl(
    env: Any,
    keys: KeyArray,
    state: Any,
    done: Array,
    key_fn: KeyFn,
    params: PyTree,
    axes: PyTree,
    with_previous: bool,
    budget: int | None,
    finish: Finish,
) -> Any:
    num = jnp.shape(done)[0]
    complete = finish if finish is not None else (lambda fresh, old: fresh)
    batch_reset = jax.vmap(_reset_call(env, key_fn), in_axes=(0, 0, axes))

    def reset_all(state: Any) -> Any:
        previous = state if with_previous else None
        return where_done(done, complete(batch_reset(keys, previous, params), state), state)

    def keep(state: Any) -> Any:
        return state

    if budget is None or budget >= num:
        return jax.lax.cond(jnp.any(done), reset_all, keep, state)

    def reset_some(state: Any) -> Any:
        (idx,) = jnp.nonzero(done, size=budget, fill_value=num)
        rows = jnp.minimum(idx, num - 1)
        old = jax.tree.map(lambda s: s[rows], state)
        some = params if params is None else _rows(params, axes, rows)
        fresh = complete(batch_reset(keys[rows], old if with_previous else None, some), old)
        return jax.tree.map(lambda s, f: s.at[idx].set(f, mode="drop"), state, fresh)

    def reset_some_or_all(state: Any) -> Any:
        count = jnp.sum(done, dtype=jnp.int32)
        return jax.lax.cond(count <= budget, reset_some, reset_all, state)

    # Two nested two-way conditionals, not one three-way `switch`: XLA then returns the
    # state of a step where no env is done in its own buffers (the `keep` branch passes
    # it through), where the `switch` copied every leaf of it (Trading-v0, N = 1024:
    # 46 kernels per step instead of 55), and only `any(done)` is computed on that step.
    return jax.lax.cond(jnp.any(done), reset_some_or_all, keep, state)


def reset_one(
    env: Any,
    key: KeyArray,
    state: Any,
    done: Array,
    *,
    key_fn: KeyFn = None,
    params: PyTree = None,
    with_previous: bool = False,
    finish: Finish = None,
) -> Any:
    """One state, reset with `key_fn(key)` when `done` (with `previous=state` when
    `with_previous`, `params=` when given, then `finish(fresh, state)` when given: see
    `reset_rows`); under `vmap`, a `reset_rows` of the batch with the default budget
    (`auto_budget`)."""
    reset = _reset_call(env, key_fn)
    complete = finish if finish is not None else (lambda fresh, old: fresh)

    def one(key: KeyArray, state: Any, done: Array, params: PyTree) -> Any:
        previous = state if with_previous else None
        return jax.lax.cond(
            done, lambda: complete(reset(key, previous, params), state), lambda: state
        )

    batched = jax.custom_batching.custom_vmap(one)

    @batched.def_vmap
    def _batch(size: int, in_batched: Any, key: Any, state: Any, done: Any, params: Any) -> Any:
        key_b, state_b, done_b, params_b = in_batched
        key, state, done = _broadcast((key, state, done), (key_b, state_b, done_b), size)
        axes = jax.tree.map(lambda b: 0 if b else None, params_b)
        out = reset_rows(
            env,
            key,
            state,
            done,
            key_fn=key_fn,
            params=params,
            axes=axes,
            with_previous=with_previous,
            budget=auto_budget(size),
            finish=finish,
        )
        return out, jax.tree.map(lambda _: True, out)

    return _no_gradient_into_resets(batched)(key, state, done, _arrays(params))
