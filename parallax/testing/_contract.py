"""`check_env`: the Parallax contract of one environment (single, vector or multi-agent).

Check groups (select with `check_env(..., checks=...)`), each in its own rule module:

- `"contract"` (`_rules_contract`): spaces, reset state, observations and actions in their
  spaces, reward, flags, `step_count`, action masks, `info`.
- `"structure"` (`_rules_structure`): identical tree structure, shapes and dtypes across
  reset and step, also through `lax.cond` and `jnp.where` between a reset and a step state.
- `"transforms"` (`_rules_transforms`): `jit`, `lax.scan` and `vmap` runs agree with the
  eager run.
- `"recompilation"` (`_rules_recompilation`): a jitted step is traced once, and XLA
  compiles nothing on later steps.
- `"determinism"` (`_rules_determinism`): same keys give the same trajectory, `reset`
  depends on its key alone, different keys give different trajectories (the same ones for
  `deterministic=True`).
- `"marl"` (`_marl`): `check_marl_env` (multi-agent envs only).

What a run holds (env, keys, compiled functions) is an `EnvSession` (`_session`);
`run_group` runs one group on it. Only this module imports `_marl`; no rule module imports
this one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import jax

from ._compare import explain_not_contained
from ._marl import check_marl_env
from ._report import CheckReport
from ._rollout import Policy
from ._rules_contract import check_contract
from ._rules_determinism import determinism, key_sensitivity, reset_purity
from ._rules_recompilation import recompilation
from ._rules_structure import structure
from ._rules_transforms import check_transforms
from ._session import EnvSession, index_schedule
from ._tolerance import TRANSFORM_TOLERANCE, Tolerance

__all__ = ["CHECK_GROUPS", "EnvSession", "check_env", "explain_not_contained", "run_group"]

CHECK_GROUPS = ("contract", "structure", "transforms", "recompilation", "determinism", "marl")
_OWNER = "check_env"


def run_group(
    session: EnvSession,
    group: str,
    report: CheckReport,
    *,
    tolerance: Tolerance = TRANSFORM_TOLERANCE,
    deterministic: bool = False,
) -> None:
    """Run one check group on `session`, appending to `report`; raise `CheckError` on failure."""
    kind, driver = session.kind, session.driver
    if group == "contract":
        check_contract(session.env, kind, session.eager(), report)
    elif group == "structure":
        session.eager()
        structure(driver, session.sched)
        report.passed.append("structure")
    elif group == "transforms":
        check_transforms(session, tolerance, report)
    elif group == "recompilation":
        recompilation(
            driver, session.step_j(), session.traces, session.sched, session.disable_jit, report
        )
    elif group == "determinism":
        eager = session.eager()
        again = driver.eager(session.sched, disable_jit=session.disable_jit)
        determinism(again, eager, kind)
        with jax.disable_jit(session.disable_jit):
            reset_purity(driver, session.sched, index_schedule(session.sched_all, 1), kind)
        key_sensitivity(session.vroll(), kind, session.num_keys, deterministic, report)
        report.passed.extend(["determinism", "reset_purity", "key_sensitivity"])
    elif group == "marl":
        if not kind.marl:
            return
        report.merge(
            check_marl_env(
                session.env,
                key=session.k_other,
                num_steps=session.num_steps,
                policy=session.user_policy,
                autoreset=session.user_autoreset,
                disable_jit=session.disable_jit,
                _step_fn=session.step_j(),
            )
        )
    else:
        raise ValueError(f"{_OWNER}: unknown check group {group!r}; use one of {CHECK_GROUPS}")


# -- check_env ---------------------------------------------------------------------------------
def check_env(
    env: Any,
    *,
    key: Any = None,
    num_steps: int = 16,
    policy: Policy | None = None,
    autoreset: bool | None = None,
    deterministic: bool = False,
    num_keys: int = 4,
    tolerance: Tolerance = TRANSFORM_TOLERANCE,
    checks: Iterable[str] = CHECK_GROUPS,
    disable_jit: bool = True,
) -> CheckReport:
    """Check that `env` keeps the Parallax contract; raise `CheckError` at the first breach.

    The env is run from a reset for `num_steps` steps with actions from `policy` (by default
    uniform over `action_space`, or over the legal actions when states carry a boolean
    `action_mask` for a `Discrete` space). When an episode ends and the env does not restart
    it itself (`autoreset`), the test driver resets it with a fresh key before the next
    step, because stepping a finished episode is undefined. What is checked, by group:

    - `"contract"`: `reset` returns a `State`/`MARLState`; its flags are False and
      `step_count` 0; `info` is a dict; every observation (after reset, every step and
      every driver reset) is in `observation_space`; every action is in `action_space`;
      the reward (`agents.reward` for multi-agent envs) is float32/float64, of shape `()`
      (`(num_agents,)`; with a leading `num_envs` for vector envs) and finite;
      `termination`/`truncation` are bool, `step_count` int32 and it grows by exactly 1 per
      step (an auto-reset may restart it at 0 on or right after the step that ends an
      episode); a boolean `action_mask`, if the state has one, allows at least one action.
    - `"structure"`: every state has the tree structure, shapes and dtypes of the reset
      state, and `lax.cond`/`jnp.where` between a reset state and a step state work and keep
      them.
    - `"transforms"`: the rollout with a jitted step in a Python loop, the rollout inside
      `jax.jit(lax.scan)` and `jax.jit(jax.vmap(lax.scan))` over `num_keys` keys all
      agree with the eager rollout under `tolerance` (default `TRANSFORM_TOLERANCE`: ints,
      bools and keys exact; floats within 16 ulp or 1e-6 absolute).
    - `"recompilation"`: the jitted step is traced once over five same-shaped calls, and
      XLA compiles nothing during steps 2-4; on failure the field whose type changed is
      named (a weakly typed `reward=0.0` in `reset` is the classic cause).
    - `"determinism"`: a second eager rollout with the same keys is bit-identical; `reset`
      with one key gives bit-identical states before and after other states were stepped;
      rollouts from `num_keys` different env keys (same policy key) are not all identical
      apart from key fields (for `deterministic=True` envs, which use no randomness: they
      must be identical).
    - `"marl"`: `check_marl_env` (only for envs whose `reset` returns a `MARLState`).

    Vector envs (a `VmapWrapper` or anything with `num_envs`) are checked per instance:
    spaces describe one instance, fields lead with `num_envs`, and `reset(key=k)` must
    accept one key or a batch of `num_envs` keys.

    Args:
        env: the environment.
        key: a PRNG key (typed or raw); `jax.random.key(0)` by default.
        num_steps: steps per rollout (positive int).
        policy: `policy(key, state) -> action` for one unbatched instance, or None.
        autoreset: whether the env restarts episodes itself; None detects an
            `AutoResetWrapper` (mode other than "off") in the wrapper stack.
        deterministic: the env uses no randomness (see `"determinism"`).
        num_keys: number of env keys in the vmap and key-sensitivity runs (int >= 2).
        tolerance: float tolerance of the eager-versus-transform comparisons.
        checks: the groups to run, a subset of `CHECK_GROUPS`.
        disable_jit: run the eager rollouts under `jax.disable_jit()` (default), so that
            `lax.cond`/`lax.scan` inside the env run as Python and nothing compiles per
            step; pass False for envs with long internal loops (brax, mjx), which then run
            op by op.

    Returns:
        A `CheckReport` listing the sub-checks that passed.

    Raises:
        CheckError: naming the check, the step, the env of the batch, the field, and the
            expected and actual values.

    Example:
        >>> from parallax import TimeLimit
        >>> from parallax.envs import GridWorld
        >>> from parallax.testing import check_env
        >>> env = TimeLimit(GridWorld(), 5)
        >>> report = check_env(env, num_steps=6, checks=["contract", "recompilation"])
        >>> report.passed[-3:], report.stats["episodes_ended"]
        (['flags', 'step_count', 'recompilation'], 1)
    """
    if not isinstance(deterministic, bool):
        raise TypeError(f"{_OWNER}: deterministic must be a bool, got {deterministic!r}")
    if not isinstance(tolerance, Tolerance):
        raise TypeError(f"{_OWNER}: tolerance must be a Tolerance, got {tolerance!r}")
    groups = (checks,) if isinstance(checks, str) else tuple(checks)
    unknown = [g for g in groups if g not in CHECK_GROUPS]
    if unknown or not groups:
        raise ValueError(
            f"{_OWNER}: checks must be a non-empty subset of {CHECK_GROUPS}, got {groups!r}"
        )
    session = EnvSession(
        env,
        key=key,
        num_steps=num_steps,
        policy=policy,
        autoreset=autoreset,
        num_keys=num_keys,
        disable_jit=disable_jit,
    )
    report = CheckReport(_OWNER)
    report.stats.update(
        {
            "num_steps": session.num_steps,
            "vector": session.kind.vector,
            "marl": session.kind.marl,
            "autoreset": session.kind.autoreset,
        }
    )
    for group in CHECK_GROUPS:
        if group in groups:
            run_group(session, group, report, tolerance=tolerance, deterministic=deterministic)
    return report
