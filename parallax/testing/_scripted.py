"""Scripted policies with expected outcomes, run by the battery.

- `ScriptedPolicy`: a policy `policy(key, state) -> action` for one unbatched instance, the
  number of steps to run it, and `expect(trajectory) -> bool array`, all True when the
  outcome is the expected one (e.g. "selling everything at once costs the full impact");
  `measure(trajectory)` (optional) is the value shown when it is not.
- `Trajectory`: what `expect` receives: `states` (the reset state, then the state after each
  step; leaves `(num_steps + 1, ...)`) and `actions` (`(num_steps, ...)`). After the
  episode ends, the remaining states repeat the final one (stepping a finished episode is
  undefined, so the run stops there) and the actions still record what the policy chose.
- `as_scripted`, `scripted_policies_of`: the declaration of an env: an explicit mapping, the
  env's `scripted_policies` attribute, or the bundled finance envs'.
- `run_scripted_policies`: run each policy from `num_keys` resets inside
  `jax.jit(jax.vmap(lax.scan))` and raise `CheckError("scripted_policies/<name>")` at the
  first key whose trajectory does not meet the expectation. Policies whose actions have one
  structure, shapes and dtypes run in one program (the env's reset and step compile once,
  which matters for an env that takes seconds to compile); the others one program each.

A declaration is `{name: ScriptedPolicy}` or `{name: {"policy": ..., "expect": ..., and
optionally "num_steps", "measure", "description"}}`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._errors import CheckError
from ._invariants import declared_or_bundled
from ._report import CheckReport

__all__ = [
    "ScriptedPolicy",
    "Trajectory",
    "as_scripted",
    "run_scripted_policies",
    "scripted_policies_of",
]

_OWNER = "scripted_policies"


class Trajectory(NamedTuple):
    """One scripted run: `states` `(T + 1, ...)` (reset first) and `actions` `(T, ...)`."""

    states: Any
    actions: Any


@dataclass(frozen=True)
class ScriptedPolicy:
    """A scripted policy and the outcome it must produce.

    Args:
        policy: `policy(key, state) -> action` for one unbatched instance.
        expect: `expect(trajectory) -> bool array`, all True when the outcome is right.
        num_steps: steps to run (positive int, default 16).
        measure: optional `measure(trajectory) -> array`, shown on failure.
        description: what the policy does and what it must produce, in words.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from parallax import TimeLimit
        >>> from parallax.envs import GridWorld
        >>> from parallax.testing import ScriptedPolicy, run_scripted_policies
        >>> stay_up = ScriptedPolicy(
        ...     policy=lambda key, state: jnp.int32(0),
        ...     expect=lambda traj: traj.states.step_count <= 3,
        ...     num_steps=4,
        ... )
        >>> env = TimeLimit(GridWorld(), 3)
        >>> run_scripted_policies(env, {"up": stay_up}, jax.random.key(0)).passed
        ['up']
    """

    policy: Callable[[Any, Any], Any]
    expect: Callable[[Trajectory], Any]
    num_steps: int = 16
    measure: Callable[[Trajectory], Any] | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if not callable(self.policy):
            raise TypeError(f"ScriptedPolicy: policy must be callable, got {self.policy!r}")
        if not callable(self.expect):
            raise TypeError(f"ScriptedPolicy: expect must be callable, got {self.expect!r}")
        steps = self.num_steps
        if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 1:
            raise ValueError(f"ScriptedPolicy: num_steps must be a positive int, got {steps!r}")
        if self.measure is not None and not callable(self.measure):
            raise TypeError(f"ScriptedPolicy: measure must be callable, got {self.measure!r}")


def as_scripted(declared: Any) -> dict[str, ScriptedPolicy]:
    """A declaration (see the module docstring) as `{name: ScriptedPolicy}`."""
    if not isinstance(declared, Mapping):
        raise TypeError(
            f"{_OWNER}: scripted policies must be a mapping name -> ScriptedPolicy (or a "
            f"dict of its fields), got {declared!r}"
        )
    out = {}
    for name, entry in declared.items():
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"{_OWNER}: a scripted policy name must be a non-empty str, got {name!r}"
            )
        if isinstance(entry, Mapping):
            entry = ScriptedPolicy(**entry)
        if not isinstance(entry, ScriptedPolicy):
            raise TypeError(
                f"{_OWNER}: scripted policy {name!r} must be a ScriptedPolicy or a dict of "
                f"its fields, got {entry!r}"
            )
        out[name] = entry
    return out


def scripted_policies_of(env: Any, declared: Any = None) -> dict[str, ScriptedPolicy] | None:
    """The scripted policies of `env`: `declared`, else a `scripted_policies` attribute on
    any layer of the stack, else the bundled finance envs' (None when there are none)."""

    def bundled(base: Any) -> Any:
        from ..finance._invariants import scripted_policies_for

        return scripted_policies_for(base) or None  # none bundled: no scripted check

    found = declared_or_bundled(env, declared, "scripted_policies", bundled)
    return None if found is None else as_scripted(found)


def _outcome(scripted: ScriptedPolicy, traj: Trajectory) -> tuple[Any, Any]:
    """`(all of expect(traj), measure(traj) or that flag)` for one episode."""
    ok = jnp.all(jnp.asarray(scripted.expect(traj)))
    measured = scripted.measure(traj) if scripted.measure is not None else ok
    return ok, measured


def _action_signature(policy: ScriptedPolicy, key: Any, state: Any) -> tuple[Any, ...]:
    """What `policy` returns from a state shaped like `state`, as `jnp.asarray` makes it:
    `(treedef, ((shape, dtype), ...))`; policies with equal signatures share a program."""
    out = jax.eval_shape(lambda k, s: jax.tree.map(jnp.asarray, policy.policy(k, s)), key, state)
    leaves, treedef = jax.tree.flatten(out)
    return treedef, tuple((leaf.shape, leaf.dtype) for leaf in leaves)


def _run_group(
    env: Any, policies: list[ScriptedPolicy], keys: Any, dtypes: list[Any]
) -> list[tuple[Any, Any]]:
    """The episodes of `policies` (whose actions share one signature, leaf dtypes `dtypes`)
    in one compiled program, the env's reset and step traced once: `jax.vmap` over (policy,
    key) of a scan as long as the longest policy, the action chosen by `lax.switch` on the
    policy's index. Policy `p` stops stepping after its own `num_steps` (its last state
    repeats), so its first `num_steps[p]` steps are those it takes alone; each outcome is
    then read from that part of its trajectory."""
    longest = max(p.num_steps for p in policies)
    limits = jnp.asarray([p.num_steps for p in policies], jnp.int32)

    def cast(action: Any) -> Any:
        leaves, treedef = jax.tree.flatten(action)
        cast_leaves = [jnp.asarray(x, d) for x, d in zip(leaves, dtypes, strict=True)]
        return jax.tree.unflatten(treedef, cast_leaves)

    branches = [lambda k, s, pol=pol: cast(pol.policy(k, s)) for pol in policies]

    def episode(p: Any, key: Any) -> tuple[Any, Any]:
        k_reset, k_policy = jax.random.split(key)
        s0 = env.reset(key=k_reset)

        def body(state: Any, t: Any) -> tuple[Any, tuple[Any, Any]]:
            act = jax.lax.switch(p, branches, jax.random.fold_in(k_policy, t), state)
            # a finished episode, or a policy past its own length, is not stepped again:
            # its last state repeats
            stop = state.done | (t >= limits[p])
            nxt = jax.lax.cond(stop, lambda: state, lambda: env.step(state, act))
            return nxt, (nxt, act)

        _, (posts, actions) = jax.lax.scan(body, s0, jnp.arange(longest, dtype=jnp.int32))
        states = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), s0, posts)
        return states, actions

    index = jnp.arange(len(policies), dtype=jnp.int32)
    per_key = jax.vmap(episode, in_axes=(None, 0))
    states, actions = jax.jit(jax.vmap(per_key, in_axes=(0, None)))(index, keys)

    def outcome(i: int, states: Any, actions: Any) -> tuple[Any, Any]:
        n = policies[i].num_steps
        traj = Trajectory(
            jax.tree.map(lambda x: x[i, :, : n + 1], states),
            jax.tree.map(lambda x: x[i, :, :n], actions),
        )
        return jax.vmap(functools.partial(_outcome, policies[i]))(traj)

    # the slices inside each outcome's program, not one eager slice per leaf
    return [jax.jit(functools.partial(outcome, i))(states, actions) for i in range(len(policies))]


def run_scripted_policies(
    env: Any, scripted: Mapping[str, ScriptedPolicy], key: Any, *, num_keys: int = 4
) -> CheckReport:
    """Run every scripted policy from `num_keys` resets; raise at the first unmet outcome.

    Policies that return actions of one structure, shapes and dtypes (as `jnp.asarray`
    makes them) share one compiled program: the env is traced once and each policy's steps
    are chosen by `lax.switch`; each outcome is read from the first `num_steps` steps of
    that policy's episodes, exactly what running it alone gives.

    Args:
        env: a single (unbatched) env.
        scripted: `{name: ScriptedPolicy}` (or dicts of its fields).
        key: a PRNG key; each policy runs from the resets of `num_keys` keys split from it.
        num_keys: how many episodes per policy (positive int).

    Returns:
        A `CheckReport` listing the policies that met their expectations.

    Raises:
        CheckError: `scripted_policies/<name>`, naming the key index (as the env index),
            the policy's description and its measured outcome.
    """
    policies = as_scripted(dict(scripted))
    if isinstance(num_keys, bool) or not isinstance(num_keys, int) or num_keys < 1:
        raise ValueError(f"{_OWNER}: num_keys must be a positive int, got {num_keys!r}")
    keys = jax.random.split(key, num_keys)
    report = CheckReport(_OWNER)
    # one program per action signature: the env compiles once per group, not per policy
    state = jax.eval_shape(lambda k: env.reset(key=k), keys[0])
    groups: dict[tuple[Any, ...], list[str]] = {}
    for name, policy in policies.items():
        groups.setdefault(_action_signature(policy, keys[0], state), []).append(name)
    outcomes: dict[str, tuple[Any, Any]] = {}
    for (_, leaves), names in groups.items():
        dtypes = [dtype for _, dtype in leaves]
        ran = _run_group(env, [policies[n] for n in names], keys, dtypes)
        outcomes.update(zip(names, ran, strict=True))
    for name, policy in policies.items():
        ok, measured = outcomes[name]
        ok = np.asarray(ok)
        if not ok.all():
            i = int(np.argwhere(~ok)[0][0])
            raise CheckError(
                f"{_OWNER}/{name}",
                f"the scripted policy {name!r} did not produce its expected outcome"
                + (f" ({policy.description})" if policy.description else ""),
                env_index=i,
                expected=policy.description or "expect(trajectory) all True",
                got=jax.tree.map(lambda x, i=i: np.asarray(x)[i], measured),
                hint=f"episode {i} of {num_keys} (keys split from the battery's key) ran "
                f"{policy.num_steps} steps",
            )
        report.passed.append(name)
    report.stats["episodes_per_policy"] = num_keys
    return report
