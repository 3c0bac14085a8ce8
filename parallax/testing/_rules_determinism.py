"""The `"determinism"` group of `check_env`: one function per rule.

- `determinism`: a second eager rollout with the same keys is bit-identical.
- `reset_purity`: `reset` with one key gives the same state before and after other states
  were reset and stepped.
- `key_sensitivity`: different env keys give different trajectories (identical ones for
  `deterministic=True` envs).
"""

from __future__ import annotations

import jax
import numpy as np

from ._compare import compare_rollouts
from ._errors import CheckError
from ._report import CheckReport
from ._rollout import Driver, EnvKind, Rollout, Schedule
from ._tolerance import EXACT
from ._trees import first_mismatch, flatten, to_numpy

__all__ = ["determinism", "key_sensitivity", "reset_purity"]

_OWNER = "check_env"


def determinism(again: Rollout, eager: Rollout, kind: EnvKind) -> None:
    """A second eager rollout with the same keys equals the first, bit for bit."""
    compare_rollouts(
        f"{_OWNER}/determinism",
        again,
        eager,
        EXACT,
        kind,
        "a second eager rollout with the same keys differs from the first",
        hint="reset/step must be pure: no Python-side state, no global RNG",
    )


def reset_purity(driver: Driver, sched: Schedule, other: Schedule, kind: EnvKind) -> None:
    first = flatten(driver.first_reset(sched.first))
    state = driver.first_reset(other.first)
    for t in range(min(2, int(np.shape(other.restart)[0]))):
        prepared = jax.tree.map(lambda x, t=t: x[t], other.prepared)
        _, _, state = driver.transition(other.restart[t], prepared, state, eager=True)
    second = flatten(driver.first_reset(sched.first))
    for path, leaf in first.items():
        want, got = to_numpy(leaf), to_numpy(second[path])
        if got.shape == want.shape and np.array_equal(got, want, equal_nan=got.dtype.kind == "f"):
            continue
        env_i = None
        if kind.vector and got.shape == want.shape:
            diff = (got != want) & ~((got != got) & (want != want))
            env_i = int(np.argwhere(diff.reshape(diff.shape[0], -1).any(axis=1))[0][0])
        raise CheckError(
            f"{_OWNER}/reset_purity",
            "reset with the same key returned a different state after other states were "
            "reset and stepped; reset must depend on nothing but its key",
            step=0,
            env_index=env_i,
            field=path,
            expected=want if env_i is None else want[env_i],
            got=got if env_i is None else got[env_i],
            hint="look for Python-side counters, caches or a global RNG used in reset",
        )


def key_sensitivity(
    vroll: Rollout, kind: EnvKind, num_keys: int, deterministic: bool, report: CheckReport
) -> None:
    base = vroll.select(0, axis=0).flat(keys=False)
    others = [vroll.select(i, axis=0).flat(keys=False) for i in range(1, num_keys)]
    same = [
        all(np.array_equal(base[k], o[k], equal_nan=base[k].dtype.kind == "f") for k in base)
        for o in others
    ]
    if deterministic:
        if not all(same):
            i = 1 + same.index(False)
            m = first_mismatch(others[i - 1], base, EXACT, time_axis=True, batch_axis=kind.vector)
            assert m is not None
            raise CheckError(
                f"{_OWNER}/key_sensitivity",
                f"the env was declared deterministic, but env key {i} gave a different "
                "trajectory than env key 0 (same policy key)",
                step=m.time,
                env_index=m.env,
                field=m.field_with_index.removeprefix("state."),
                expected=m.expected,
                got=m.got,
            )
        report.notes.append(f"deterministic: {num_keys} env keys gave identical trajectories")
        return
    if all(same):
        raise CheckError(
            f"{_OWNER}/key_sensitivity",
            f"{num_keys} different reset keys gave identical trajectories (same policy key; "
            "fields holding PRNG keys ignored): the env ignores its key",
            expected="trajectories that depend on the key",
            got=f"{num_keys} identical trajectories",
            hint="derive every random draw from the key passed to reset (or state.key); "
            "pass deterministic=True for an env that uses no randomness",
        )
    report.stats["distinct_key_trajectories"] = 1 + sum(not x for x in same)
