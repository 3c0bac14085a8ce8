"""The rollout driver shared by every check: the same pure transition, run eagerly, under
`jit`, under `lax.scan` and under `vmap`.

- `EnvKind`: single or vector, single- or multi-agent, auto-resetting or not.
- `inspect_env`: the `EnvKind` of an env, from its wrapper stack and its reset state.
- `default_policy`: uniform actions from `action_space`, legal ones when the state has a
  boolean `action_mask` that matches a `Discrete` action space.
- `Driver`: derives every key from `(instance key, purpose, step)`, resets finished
  episodes of envs that do not auto-reset, and produces `Rollout`s.
- `Rollout`: the states (reset, then after each step), the states each step was called
  on, and the actions.

Keys. Each instance has an env key and a policy key. Its first reset uses
`fold_in(fold_in(env_key, 1), 0)`; the reset the driver performs before step `t` (when the
previous episode ended and the env does not auto-reset) uses
`fold_in(fold_in(env_key, 1), t + 1)`; the action of step `t` is drawn with
`fold_in(fold_in(policy_key, 2), t)`. So an instance's trajectory is a function of its two
keys alone, whether it runs alone, in a batch, eagerly or traced.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core import MARLState, State
from .._spaces import Discrete
from .._wrappers.base import is_vector_env
from ._errors import CheckError
from ._harness import harness_jit
from ._trees import flatten, structure_difference, to_numpy

__all__ = [
    "Driver",
    "EnvKind",
    "KeyPolicy",
    "Policy",
    "Rollout",
    "SampledPolicy",
    "Schedule",
    "as_typed_key",
    "default_policy",
    "inspect_env",
    "make_policy",
    "observation_of",
    "reward_of",
]

Policy = Callable[[Any, Any], Any]
"""`policy(key, state) -> action` for one (unbatched) environment instance."""

_RESET_TAG = 1
_ACTION_TAG = 2


def as_typed_key(key: Any, owner: str) -> Any:
    """`key` as a typed PRNG key (raw `uint32[2]` keys are wrapped); None -> `key(0)`."""
    if key is None:
        return jax.random.key(0)
    dtype = getattr(key, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        if jnp.ndim(key) != 0:
            raise ValueError(f"{owner}: key must be a single PRNG key, got shape {key.shape}")
        return key
    arr = jnp.asarray(key)
    if arr.dtype != jnp.uint32 or arr.shape != (2,):
        raise TypeError(
            f"{owner}: key must be a PRNG key (jax.random.key(seed) or a raw uint32[2] "
            f"key), got {arr.dtype}{list(arr.shape)}"
        )
    return jax.random.wrap_key_data(arr)


def observation_of(state: Any) -> Any:
    """`state.observation`, or `state.agents.observation` for a `MARLState`."""
    return state.agents.observation if isinstance(state, MARLState) else state.observation


def reward_of(state: Any) -> Any:
    """`state.reward`, or `state.agents.reward` for a `MARLState`."""
    return state.agents.reward if isinstance(state, MARLState) else state.reward


def action_mask_of(state: Any) -> Any:
    """The legal-action mask a state carries (`agents.action_mask` or `action_mask`), or None."""
    if isinstance(state, MARLState):
        return state.agents.action_mask
    return getattr(state, "action_mask", None)


@dataclass(frozen=True)
class EnvKind:
    """What the driver needs to know about an env.

    Attributes:
        marl: the env returns `MARLState`s.
        vector: the env runs a batch (`num_envs`), its states lead with `num_envs`.
        num_envs: the batch size, or None.
        autoreset: the env starts new episodes itself (an `AutoResetWrapper` below).
    """

    marl: bool
    vector: bool
    num_envs: int | None
    autoreset: bool

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """`(num_envs,)` for vector envs, `()` otherwise."""
        return (self.num_envs,) if self.vector and self.num_envs is not None else ()


def inspect_env(env: Any, reset_state: Any, autoreset: bool | None, owner: str) -> EnvKind:
    """The `EnvKind` of `env`, given the state its `reset` returned.

    `autoreset=None` detects an `AutoResetWrapper` (mode other than `"off"`) in the stack.
    """
    if not isinstance(reset_state, State | MARLState):
        raise CheckError(
            f"{owner}/reset",
            "reset must return a parallax.State or parallax.MARLState (or a subclass)",
            step=0,
            expected="State or MARLState",
            got=type(reset_state).__name__,
        )
    vector = is_vector_env(env)
    num_envs = int(env.num_envs) if vector else None
    if autoreset is None:
        autoreset = getattr(env, "autoreset_mode", "off") != "off"
    return EnvKind(
        marl=isinstance(reset_state, MARLState),
        vector=vector,
        num_envs=num_envs,
        autoreset=bool(autoreset),
    )


class SampledPolicy:
    """The default policy: uniform over `action_space`, or over the legal actions.

    When the state carries a boolean mask (`action_mask`, or `agents.action_mask`) of shape
    `action_space.shape + (n,)` and the action space is `Discrete(n)`, the action is
    uniform over the legal ones (Gumbel-max over the mask), else `action_space.sample`.
    The random material is drawn ahead of the rollout (`prepare`), so the traced rollout
    holds no sampling code and compiles fast.
    """

    def __init__(self, space: Any) -> None:
        self.space = space

    def prepare(self, key: Any) -> Any:
        """The random material of one step: a sample, and Gumbel noise for masks."""
        k_sample, k_gumbel = jax.random.split(key)
        sample = self.space.sample(key=k_sample)
        if isinstance(self.space, Discrete):
            return sample, jax.random.gumbel(k_gumbel, (*self.space.shape, self.space.n))
        return sample, None

    def __call__(self, prepared: Any, state: Any) -> Any:
        sample, gumbel = prepared
        mask = action_mask_of(state)
        if (
            gumbel is not None
            and mask is not None
            and getattr(mask, "dtype", None) == jnp.bool_
            and tuple(mask.shape) == tuple(gumbel.shape)
        ):
            choice = jnp.argmax(jnp.where(mask, gumbel, -jnp.inf), axis=-1)
            return choice.astype(self.space.dtype)
        return sample

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SampledPolicy) and other.space == self.space

    def __hash__(self) -> int:
        return hash(("SampledPolicy", self.space))


class KeyPolicy:
    """A user policy `policy(key, state) -> action`; its step keys are prepared ahead (as
    key data, wrapped again with the key implementation `impl` when the policy is called)."""

    def __init__(self, policy: Policy, impl: Any = None) -> None:
        self.policy = policy
        self.impl = impl

    def prepare(self, key: Any) -> Any:
        return jax.random.key_data(key)

    def __call__(self, prepared: Any, state: Any) -> Any:
        return self.policy(jax.random.wrap_key_data(prepared, impl=self.impl), state)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, KeyPolicy)
            and other.policy is self.policy
            and str(other.impl) == str(self.impl)
        )

    def __hash__(self) -> int:
        return hash(("KeyPolicy", id(self.policy), str(self.impl)))


def make_policy(env: Any, policy: Policy | None, impl: Any = None) -> SampledPolicy | KeyPolicy:
    """`KeyPolicy(policy, impl)`, or the default `SampledPolicy` over `env.action_space`."""
    return SampledPolicy(env.action_space) if policy is None else KeyPolicy(policy, impl)


def default_policy(env: Any) -> Policy:
    """The default policy as a plain `policy(key, state) -> action` function."""
    sampled = SampledPolicy(env.action_space)
    return lambda key, state: sampled(sampled.prepare(key), state)


def _derive(key: Any, tag: int, t: Any) -> Any:
    return jax.random.fold_in(jax.random.fold_in(key, tag), t)


@functools.lru_cache(maxsize=32)
def _schedule_fn(policy: SampledPolicy | KeyPolicy, num_steps: int, lead: int) -> Any:
    """Jitted `(env_keys, policy_keys) -> Schedule` over `lead` leading instance axes.

    Cached by (policy, num_steps, lead), so every check of the same space and length
    reuses one compiled program (per input shape).
    """

    def one(env_key: Any, policy_key: Any) -> Schedule:
        steps = jnp.arange(num_steps, dtype=jnp.int32)
        first = _derive(env_key, _RESET_TAG, 0)
        restart = jax.vmap(lambda t: _derive(env_key, _RESET_TAG, t + 1))(steps)
        prepared = jax.vmap(lambda t: policy.prepare(_derive(policy_key, _ACTION_TAG, t)))(steps)
        return Schedule(jax.random.key_data(first), jax.random.key_data(restart), prepared)

    # bookkeeping, not the env: compiled without LLVM optimisation
    return harness_jit(one, lead=lead)


class Schedule(NamedTuple):
    """The precomputed randomness of a rollout, as NumPy arrays (keys as key data).

    Attributes:
        first: the key data of the first reset, per instance.
        restart: `(T, ...)` key data of the resets the driver performs before each step.
        prepared: `(T, ...)` the policy's random material for each step.
    """

    first: Any
    restart: Any
    prepared: Any


@dataclass
class Rollout:
    """A trajectory of `T` steps.

    Attributes:
        states: pytree with leaves `(T + 1, *batch, ...)`: the reset state, then the state
            returned by each step.
        pre: pytree with leaves `(T, *batch, ...)`: the state each step was called on (the
            previous state, or a fresh reset where the driver restarted an episode).
        actions: pytree with leaves `(T, *batch, ...)`.
    """

    states: Any
    pre: Any
    actions: Any

    def flat(self, *, keys: bool = True) -> dict[str, np.ndarray]:
        """`{"state.<path>": (T+1, ...), "action.<path>": (T, ...)}` as NumPy arrays.

        With `keys=False`, the `key` field and every typed PRNG key leaf are left out.
        """
        out: dict[str, np.ndarray] = {}
        for path, leaf in flatten(self.states).items():
            if not keys and (path == "key" or _leaf_is_key(leaf)):
                continue
            out[f"state.{path}"] = to_numpy(leaf)
        for path, leaf in flatten(self.actions).items():
            out[f"action.{path}" if path != "<root>" else "action"] = to_numpy(leaf)
        return out

    def host(self) -> Rollout:
        """The same rollout with NumPy leaves (PRNG keys as key data); no device work."""
        return Rollout(*(jax.tree.map(to_numpy, t) for t in (self.states, self.pre, self.actions)))

    def select(self, index: int, axis: int = 1) -> Rollout:
        """Instance `index` along `axis` (1: the batch axis after time; 0: a vmap axis)."""

        def pick(x: Any) -> Any:
            return np.take(np.asarray(x), index, axis=axis)

        return Rollout(*(jax.tree.map(pick, t) for t in (self.states, self.pre, self.actions)))


jax.tree_util.register_dataclass(Rollout, data_fields=["states", "pre", "actions"], meta_fields=[])


def _leaf_is_key(leaf: Any) -> bool:
    dtype = getattr(leaf, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def _stack(trees: list[Any]) -> Any:
    return jax.tree.map(lambda *xs: np.stack([to_numpy(x) for x in xs]), *trees)


class Driver:
    """Runs an env with derived keys and a policy; resets finished episodes if needed.

    Args:
        env: the environment (single or vector).
        kind: its `EnvKind`.
        policy: a `SampledPolicy` or `KeyPolicy` (see `make_policy`).
        owner: the check name used in error messages.
    """

    def __init__(
        self,
        env: Any,
        kind: EnvKind,
        policy: SampledPolicy | KeyPolicy,
        owner: str,
        impl: Any = None,
    ) -> None:
        self.env = env
        self.kind = kind
        self.policy = policy
        self.owner = owner
        self.impl = impl

    def wrap(self, data: Any) -> Any:
        """Typed keys from key data (the key implementation of the check's key)."""
        return jax.random.wrap_key_data(data, impl=self.impl)

    # -- keys ------------------------------------------------------------------------------
    def instance_keys(self, key: Any) -> Any:
        """One key per instance: `key` itself, or `num_envs` keys split from it."""
        if self.kind.vector and self.kind.num_envs is not None:
            return jax.random.split(key, self.kind.num_envs)
        return key

    def schedule(self, env_keys: Any, policy_keys: Any, num_steps: int) -> Schedule:
        """The randomness of rollouts, time-major (`(T, *batch, ...)`).

        `env_keys`/`policy_keys` are per-instance keys, possibly with extra leading axes
        (e.g. several env keys stacked for a vmapped run); those axes stay in front of T.
        """
        inst = len(self.kind.batch_shape)
        lead = jnp.ndim(env_keys)
        sched = _schedule_fn(self.policy, num_steps, lead)(env_keys, policy_keys)
        sched = jax.tree.map(np.asarray, sched)
        outer = lead - inst  # extra stacking axes stay first; the instance axes follow T

        def tm(x: Any) -> Any:
            return np.moveaxis(x, lead, outer) if inst else x

        return Schedule(
            sched.first,
            jax.tree.map(tm, sched.restart),
            jax.tree.map(tm, sched.prepared),
        )

    def _per_instance(self, fn: Callable[..., Any], *args: Any) -> Any:
        return jax.vmap(fn)(*args) if self.kind.vector else fn(*args)

    # -- pieces of the transition ----------------------------------------------------------
    def first_reset(self, first_keys: Any) -> Any:
        """The reset state of every instance (`first_keys`: key data)."""
        return self.env.reset(key=self.wrap(first_keys))

    def restart(self, restart_keys: Any, state: Any, *, eager: bool) -> Any:
        """Reset the instances whose episode ended (unless the env auto-resets)."""
        if self.kind.autoreset:
            return state
        restart_keys = self.wrap(restart_keys)
        if self.kind.vector:
            return self.env.reset(key=restart_keys, state=state, done=state.done)
        if eager:
            return self.env.reset(key=restart_keys) if bool(np.asarray(state.done)) else state
        return jax.lax.cond(state.done, lambda: self.env.reset(key=restart_keys), lambda: state)

    def act(self, prepared: Any, state: Any) -> Any:
        """The action of every instance."""
        return self._per_instance(self.policy, prepared, state)

    def transition(
        self, restart_keys: Any, prepared: Any, state: Any, *, eager: bool = False
    ) -> tuple[Any, Any, Any]:
        """`(pre, action, next)`: restart if needed, act, step."""
        pre = self.restart(restart_keys, state, eager=eager)
        action = self.act(prepared, pre)
        return pre, action, self.env.step(pre, action)

    # -- whole rollouts --------------------------------------------------------------------
    def eager(
        self,
        sched: Schedule,
        *,
        step_fn: Callable[[Any, Any], Any] | None = None,
        disable_jit: bool = True,
    ) -> Rollout:
        """Python-loop rollout with NumPy leaves.

        Resets, restarts and actions run eagerly, under `jax.disable_jit()` when
        `disable_jit` (so `lax.cond`/`lax.scan` inside the env run as Python and nothing is
        compiled per step), else op by op. The env's step runs the same way, or through
        `step_fn(state, action)` (e.g. `jax.jit(env.step)`) when given. Every state is
        compared in structure with the reset state before it is kept; a difference raises
        `CheckError(<owner>/structure)`.
        """
        with jax.disable_jit(disable_jit):
            s0 = self.first_reset(sched.first)
        num_steps = int(np.shape(sched.restart)[0])
        states, pres, actions = [s0], [], []
        state = s0
        for t in range(num_steps):
            prepared_t = jax.tree.map(lambda x, t=t: x[t], sched.prepared)
            with jax.disable_jit(disable_jit):
                pre = self.restart(sched.restart[t], state, eager=True)
                action = self.act(prepared_t, pre)
                if step_fn is None:
                    state = self.env.step(pre, action)
            if step_fn is not None:
                state = step_fn(pre, action)
            for name, tree in (("the state passed to step", pre), ("the step result", state)):
                diff = structure_difference(s0, tree)
                if diff is not None:
                    field, at_reset, later = diff
                    raise CheckError(
                        f"{self.owner}/structure",
                        f"{name} differs from the reset state in tree structure, shape or "
                        "dtype (every reset and step must return the same pytree structure, "
                        "shapes and dtypes)",
                        step=t + 1,
                        field=field,
                        expected=f"{at_reset} (as after reset)",
                        got=later,
                    )
            states.append(state)
            pres.append(pre)
            actions.append(action)
        return Rollout(_stack(states), _stack(pres), _stack(actions))

    def scan(self, sched: Schedule) -> Rollout:
        """A pure rollout built on `lax.scan` (jit or vmap it; leaves stay JAX arrays)."""
        return self.scan_with(sched, None)[0]

    def scan_with(
        self, sched: Schedule, also: Callable[[Any, Any], Any] | None
    ) -> tuple[Rollout, Any]:
        """`scan`, and `also(pre, action)` evaluated in the same loop body at every step.

        Returns `(rollout, outputs)`: the outputs of `also` stacked over time (`None` when
        `also` is None). One loop, so one compiled program; where `also` repeats work of the
        env's step on the same inputs (a reference step), XLA's common-subexpression pass
        may compute it once.
        """
        s0 = self.first_reset(sched.first)

        def body(state: Any, x: tuple[Any, Any]) -> tuple[Any, tuple[Any, Any, Any, Any]]:
            pre, action, nxt = self.transition(x[0], x[1], state)
            extra = None if also is None else also(pre, action)
            return nxt, (pre, action, nxt, extra)

        _, (pres, actions, posts, extras) = jax.lax.scan(body, s0, (sched.restart, sched.prepared))
        states = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), s0, posts)
        return Rollout(states, pres, actions), extras
