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
is a `reset_rows` over the vmapped axis, and a vmapped `reset_rows` is one `reset_rows`
over the `(outer, B)` rows, with one more leading batch dim. However deep the nesting, the
batch does the batch-level work once, and the state keeps its own `(outer, B, ...)` buffers:
reshaping it to one flat batch for the conditional made XLA copy leaves on every step where
no env is done (Portfolio-v0, seeds x envs: 0.84x of the flat batch, 0.96x-1.00x without).
The partial reset gathers and scatters its rows with one index per leading dim (indexing a
flat view of each leaf instead cost GridWorld-v0 a fifth of its speed). Every env's result
is exactly its unbatched one: each reset is the env's own `reset` on its own key (and
`previous=` row and params), and the envs that are not done keep their state bit for bit.

Gradients. `custom_vmap` has no reverse-mode rule, so both functions are wrapped in a
`jax.custom_jvp` whose tangent is the incoming state's tangent for the envs that are not
done and zero for those that are reset: a new episode's first state is a fresh draw from
its key, so no gradient flows into it (not from `previous=` nor from `params` either).
Forward and reverse mode both work, under `vmap` too.
"""

from __future__ import annotations

import math
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


def _rows(params: PyTree, axes: PyTree, rows: Any) -> PyTree:
    """The per-env leaves of `params` (axis 0) gathered at `rows` (an index array, or a
    tuple of them over several leading dims); shared leaves as they are."""
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


def _lead_params(
    params: PyTree, axes: PyTree, outer_batched: PyTree, outer: int, lead: tuple[int, ...]
) -> tuple[PyTree, PyTree]:
    """`params` for the `(outer, *lead)` rows of a vmapped `reset_rows`, and their axes: a
    leaf batched by neither vmap stays shared (axis None); any other gets the full
    `(outer, *lead, ...)` leading shape (axis 0). Params are small, so broadcasting them is
    cheap; the state itself is never reshaped."""
    treedef: Any
    leaves, treedef = jax.tree.flatten(params)
    inner_axes = treedef.flatten_up_to(axes) if axes is not None else [None] * len(leaves)
    flags = treedef.flatten_up_to(outer_batched)
    out: list[Any] = []
    out_axes: list[int | None] = []
    for x, inner, batched in zip(leaves, inner_axes, flags, strict=True):
        if not batched and inner is None:
            out.append(x)
            out_axes.append(None)
            continue
        if not batched:  # (*lead, ...) -> every outer index
            x = jnp.broadcast_to(x, (outer, *jnp.shape(x)))
        elif inner is None:  # (outer, ...) -> every row
            rest = jnp.shape(x)[1:]
            x = jnp.reshape(x, (outer, *(1,) * len(lead), *rest))
            x = jnp.broadcast_to(x, (outer, *lead, *rest))
        out.append(x)
        out_axes.append(0)
    return jax.tree.unflatten(treedef, out), jax.tree.unflatten(treedef, out_axes)


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
    rule = _Rows(env, key_fn, with_previous, finish)
    return _no_gradient_into_resets(rule.function(axes, budget))(keys, state, done, _arrays(params))


class _Rows:
    """`reset_rows` over any number of leading batch dims, with its batching rule.

    `function(axes, budget)` takes `(keys, state, done, params)` where `done` has the batch
    shape `lead` (one dim for `reset_rows`, one more per enclosing `vmap`), `keys` the same,
    every state leaf leads with `lead`, and each params leaf is shared (axis None) or has
    the full `lead` leading shape (axis 0). Under `vmap` it becomes the same function with
    one more leading dim: the envs of every seed are one batch, and the state keeps its own
    `(outer, *lead, ...)` buffers (no reshape), so XLA hands it on untouched on a step where
    no env is done.
    """

    def __init__(self, env: Any, key_fn: KeyFn, with_previous: bool, finish: Finish) -> None:
        self.env, self.key_fn, self.with_previous, self.finish = env, key_fn, with_previous, finish

    def function(self, axes: PyTree, budget: int | None) -> Any:
        def rows(keys: KeyArray, state: Any, done: Array, params: PyTree) -> Any:
            return self.impl(keys, state, done, params, axes, budget)

        batched = jax.custom_batching.custom_vmap(rows)

        @batched.def_vmap
        def _nested(
            outer: int, in_batched: Any, keys: Any, state: Any, done: Any, params: Any
        ) -> Any:
            keys_b, state_b, done_b, params_b = in_batched
            keys, state, done = _broadcast((keys, state, done), (keys_b, state_b, done_b), outer)
            lead = jnp.shape(done)[1:]
            params, outer_axes = _lead_params(params, axes, params_b, outer, lead)
            more = None if budget is None else budget * outer
            out = self.function(outer_axes, more)(keys, state, done, params)
            return out, jax.tree.map(lambda _: True, out)

        return batched

    def reset_call(self, depth: int, axes: PyTree) -> Callable[[KeyArray, Any, PyTree], Any]:
        """The env's reset vmapped over `depth` leading dims of keys, previous and params."""
        fn = _reset_call(self.env, self.key_fn)
        for _ in range(depth):
            fn = jax.vmap(fn, in_axes=(0, 0, axes))
        return fn

    def impl(
        self,
        keys: KeyArray,
        state: Any,
        done: Array,
        params: PyTree,
        axes: PyTree,
        budget: int | None,
    ) -> Any:
        lead = jnp.shape(done)
        num = math.prod(lead)
        complete = self.finish if self.finish is not None else (lambda fresh, old: fresh)
        with_previous = self.with_previous

        def reset_all(state: Any) -> Any:
            previous = state if with_previous else None
            fresh = self.reset_call(len(lead), axes)(keys, previous, params)
            return where_done(done, complete(fresh, state), state)

        def keep(state: Any) -> Any:
            return state

        if budget is None or budget >= num:
            return jax.lax.cond(jnp.any(done), reset_all, keep, state)

        def reset_some(state: Any) -> Any:
            (idx,) = jnp.nonzero(jnp.reshape(done, (num,)), size=budget, fill_value=num)
            at = jnp.unravel_index(jnp.minimum(idx, num - 1), lead)
            # the unused slots point past the first dim, so the scatter drops them
            drop = (jnp.where(idx < num, at[0], lead[0]), *at[1:])
            old = jax.tree.map(lambda s: s[at], state)
            some = params if params is None else _rows(params, axes, at)
            fresh = self.reset_call(1, axes)(keys[at], old if with_previous else None, some)
            fresh = complete(fresh, old)
            return jax.tree.map(lambda s, f: s.at[drop].set(f, mode="drop"), state, fresh)

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
