"""The invariant sweep: user-declared invariants of the state, checked over many envs and steps.

- `Invariants`: what an env may declare, a mapping `{name: fn}` or a sequence of named
  functions (or `(name, fn)` pairs); each `fn(state)` takes one unbatched `State` and
  returns a bool array that is all True when the invariant holds.
- `as_invariants`: that declaration as a tuple of `(name, fn)` pairs (validated).
- `invariants_of`: the invariants of an env: an explicit declaration, else the env's
  `invariants` attribute (any wrapper layer forwards it), else the bundled finance envs'
  (`parallax.finance._invariants.invariants_for`); `declared_or_bundled` is that lookup,
  which the scripted policies share.
- `invariant_sweep`: run `num_envs` instances for `num_steps` steps inside one
  `jax.jit(jax.vmap(lax.scan))`, evaluate every invariant on every state (after reset,
  after each step, and every driver reset) inside one `jax.jit(jax.vmap(...))`, and raise
  `CheckError("invariant_sweep/<name>")` at the first violation (step, env, invariant,
  offending state values).

Invariants are pure functions of one state, traced under `jit` and `vmap`: use `jnp`, no
Python `if` on values. Compare floats with a tolerance that says how much rounding the
identity allows (e.g. `jnp.abs(a - b) <= 1e-5 * (1 + jnp.abs(b))`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._wrappers.base import unwrap_layers
from ._errors import CheckError
from ._report import CheckReport
from ._rollout import Driver, EnvKind
from ._trees import flatten, is_key, to_numpy

__all__ = [
    "Invariants",
    "as_invariants",
    "declared_on",
    "declared_or_bundled",
    "describe_state",
    "invariant_sweep",
    "invariants_of",
]

Invariants = Mapping[str, Callable[[Any], Any]] | Sequence[Any]
"""`{name: fn(state) -> bool array}`, or a sequence of named functions or `(name, fn)` pairs."""

_OWNER = "invariant_sweep"
_SWEEP_SALT = 0x1A7A


def as_invariants(
    declared: Any, owner: str = _OWNER
) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    """`declared` (see `Invariants`) as a tuple of `(name, fn)` pairs; raise on a bad entry."""
    if isinstance(declared, Mapping):
        pairs = list(declared.items())
    elif isinstance(declared, Sequence) and not isinstance(declared, str):
        pairs = []
        for entry in declared:
            if isinstance(entry, tuple) and len(entry) == 2:
                pairs.append(entry)
            elif callable(entry) and getattr(entry, "__name__", "<lambda>") != "<lambda>":
                pairs.append((entry.__name__, entry))
            else:
                raise TypeError(
                    f"{owner}: each invariant must be a named function or a (name, fn) pair, "
                    f"got {entry!r}"
                )
    else:
        raise TypeError(
            f"{owner}: invariants must be a mapping name -> fn(state) or a sequence of named "
            f"functions, got {declared!r}"
        )
    out = []
    for name, fn in pairs:
        if not isinstance(name, str) or not name:
            raise TypeError(f"{owner}: an invariant name must be a non-empty str, got {name!r}")
        if not callable(fn):
            raise TypeError(f"{owner}: invariant {name!r} must be callable, got {fn!r}")
        out.append((name, fn))
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise ValueError(f"{owner}: invariant names must be unique, got {names}")
    return tuple(out)


def invariants_of(
    env: Any, declared: Any = None
) -> tuple[tuple[str, Callable[[Any], Any]], ...] | None:
    """The invariants to sweep for `env`, or None when it declares none.

    `declared` (a battery option) wins; then an `invariants` attribute on any layer of the
    wrapper stack; then the bundled finance envs' invariants.
    """

    def bundled(base: Any) -> Any:
        from ..finance._invariants import invariants_for

        return invariants_for(base)

    found = declared_or_bundled(env, declared, "invariants", bundled)
    return None if found is None else as_invariants(found)


def declared_or_bundled(env: Any, declared: Any, name: str, bundled: Callable[[Any], Any]) -> Any:
    """What to sweep for `env`, unconverted: `declared` (a battery option) unless None,
    else the attribute `name` of the first layer of the wrapper stack that defines it
    (`declared_on`), else `bundled(base)` when the innermost env is a bundled finance env;
    None when none of them gives one."""
    if declared is not None:
        return declared
    for layer in unwrap_layers(env):
        found = declared_on(layer, name)
        if found is not None:
            return found
    base = unwrap_layers(env)[-1]
    if any(c.__module__.startswith("parallax.finance") for c in type(base).__mro__):
        return bundled(base)
    return None


def declared_on(layer: Any, name: str) -> Any:
    """`layer.<name>` when the layer itself (its instance or class, properties included)
    defines it, else None: a wrapper's attribute forwarding is not followed, so each layer
    of a stack is asked in turn."""
    own = getattr(layer, "__dict__", {})
    if name in own or any(name in vars(c) for c in type(layer).__mro__):
        return object.__getattribute__(layer, name)
    return None


def describe_state(state: Any, max_size: int = 6) -> dict[str, Any]:
    """The small leaves of one state (`{path: value}`), to show next to a violation.

    Leaves with more than `max_size` elements and PRNG keys are left out.
    """
    out: dict[str, Any] = {}
    for path, leaf in flatten(state).items():
        if is_key(leaf) or path == "key":
            continue
        arr = to_numpy(leaf)
        if arr.size <= max_size:
            out[path] = arr.tolist() if arr.ndim else arr.item()
    return out


def invariant_sweep(
    kind: EnvKind,
    driver: Driver,
    invariants: tuple[tuple[str, Callable[[Any], Any]], ...],
    key: Any,
    *,
    num_envs: int,
    num_steps: int,
    _vscan: Any = None,
) -> CheckReport:
    """Sweep `invariants` over `num_envs` instances (each with its own keys) and `num_steps`.

    The rollout runs in one `jax.jit(jax.vmap(lax.scan))` (`_vscan`, e.g. the
    `EnvSession`'s, whose compiled program other checks of the same sizes share), the
    invariants in one `jax.jit(jax.vmap(...))` over its states; the first violation
    (earliest step, then lowest env) raises `CheckError("invariant_sweep/<name>")`.
    """
    k_env, k_policy = jax.random.split(jax.random.fold_in(key, _SWEEP_SALT))
    env_keys = jax.vmap(driver.instance_keys)(jax.random.split(k_env, num_envs))
    policy_keys = jax.vmap(driver.instance_keys)(jax.random.split(k_policy, num_envs))
    sched = driver.schedule(env_keys, policy_keys, num_steps)
    lead = 1 + int(kind.vector)  # time (and the batch of a vector env) inside one run

    def holds(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def one(state: Any) -> Any:
            return jnp.all(jnp.asarray(fn(state)))

        for _ in range(lead):
            one = jax.vmap(one)
        return one

    def evaluate(states: Any, pre: Any) -> tuple[Any, Any]:
        after = {name: holds(fn)(states) for name, fn in invariants}
        before = {name: holds(fn)(pre) for name, fn in invariants}
        return after, before

    vscan = _vscan if _vscan is not None else jax.jit(jax.vmap(driver.scan))
    roll = vscan(sched)
    states, pre = roll.states, roll.pre
    after, before = jax.jit(jax.vmap(evaluate))(states, pre)
    # the first violation: earliest step, then lowest env, then declaration order
    found = None
    for order, (name, _) in enumerate(invariants):
        for tree_name, oks, offset in (("states", after, 0), ("pre", before, 1)):
            ok = np.asarray(oks[name])  # (num_envs, T or T + 1, *batch)
            for index in np.argwhere(~ok):
                m, t = int(index[0]), int(index[1])
                env_i = m * (kind.num_envs or 1) + int(index[2]) if kind.vector else m
                cand = (t + offset, env_i, order, name, tree_name, tuple(int(i) for i in index))
                if found is None or cand[:3] < found[:3]:
                    found = cand
    if found is not None:
        step, env_i, _, name, tree_name, where_index = found
        tree = states if tree_name == "states" else pre
        state = jax.tree.map(lambda x: x[where_index], tree)
        where = (
            f"the state passed to step {step} (a reset by the test driver)"
            if tree_name == "pre"
            else ("the reset state" if step == 0 else f"the state returned by step {step}")
        )
        raise CheckError(
            f"{_OWNER}/{name}",
            f"invariant {name!r} does not hold on {where} (swept {num_envs} "
            f"{'batches' if kind.vector else 'envs'} x {num_steps} steps inside jit)",
            step=step,
            env_index=env_i,
            field=name,
            expected="True",
            got=describe_state(state),
            hint="the offending state's small fields are shown; an invariant must hold "
            "after reset and after every step",
        )
    report = CheckReport(_OWNER)
    report.passed.extend(name for name, _ in invariants)
    report.stats.update(
        {
            "envs": num_envs * (kind.num_envs or 1),
            "steps": num_steps,
            "states_checked": int(np.asarray(after[invariants[0][0]]).size)
            + int(np.asarray(before[invariants[0][0]]).size),
        }
    )
    return report
