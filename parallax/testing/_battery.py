"""The battery as named checks, shared by the pytest star-import and `parallax check`.

- `BATTERY_CHECKS`: the check names, in order (each is a pytest test `test_<name>`).
- `CheckSkipped`: raised by a check that does not apply (e.g. MARL rules on a
  single-agent env, the differential test without a reference).
- `Battery`: one env factory (plus optional reference factory and options) with its
  shared session; `run(name)` runs one check.
- `Outcome`, `run_battery`: every check with status, time and message (used by the CLI).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jax

from .._wrappers.base import check_positive_int
from ._batch import check_batch_independence
from ._contract import run_group
from ._errors import CheckError
from ._invariants import invariant_sweep, invariants_of
from ._marl import check_marl_env
from ._reference import check_matches_reference
from ._report import CheckReport
from ._rules_actions import boundary_actions
from ._rules_autoreset import auto_reset
from ._rules_spaces import has_structured_space, structured_spaces
from ._scripted import run_scripted_policies, scripted_policies_of
from ._session import EnvSession
from ._tolerance import TRANSFORM_TOLERANCE

__all__ = ["BATTERY_CHECKS", "Battery", "CheckSkipped", "Outcome", "run_battery"]

BATTERY_CHECKS = (
    "contract",
    "structure_stable",
    "jit_vmap_scan_agree",
    "no_recompilation",
    "determinism",
    "batch_independence",
    "matches_reference",
    "marl_rules",
    "invariant_sweep",
    "boundary_actions",
    "auto_reset",
    "scripted_policies",
    "structured_spaces",
    "training_parity",
)
"""The named checks; the pytest battery has one `test_<name>` per entry."""

_GROUP = {
    "contract": "contract",
    "structure_stable": "structure",
    "jit_vmap_scan_agree": "transforms",
    "no_recompilation": "recompilation",
    "determinism": "determinism",
}

_SESSION_OPTIONS = ("key", "policy", "autoreset", "num_keys", "disable_jit")
_OPTIONS = (
    *_SESSION_OPTIONS,
    "deterministic",
    "tolerance",
    "marl_num_steps",
    "require_inactive",
    "check_active_used",
    "invariants",
    "invariant_envs",
    "invariant_steps",
    "scripted_policies",
    "scripted_keys",
    "autoreset_max_steps",
)


class CheckSkipped(Exception):
    """A battery check does not apply to this env; the message says why."""


@dataclass
class Outcome:
    """The result of one battery check.

    Attributes:
        check: the check name (one of `BATTERY_CHECKS`).
        status: `"pass"`, `"fail"` (a `CheckError`), `"skip"` or `"error"` (any other
            exception: the env or the factory crashed).
        seconds: wall time of the check.
        message: the failure, error or skip message ("" on pass).
        report: the `CheckReport` on pass, else None.
    """

    check: str
    status: str
    seconds: float
    message: str = ""
    report: CheckReport | None = None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return {
            "check": self.check,
            "status": self.status,
            "seconds": round(self.seconds, 4),
            "message": self.message,
            "report": None if self.report is None else self.report.as_dict(),
        }


@dataclass
class Battery:
    """The battery for one env factory.

    Args:
        env_factory: `env_factory() -> env` (called once, lazily).
        reference_factory: optional `reference_factory() -> Reference`, called before each
            run of `matches_reference`; None skips that check.
        num_steps: steps per rollout (positive int).
        batch_size: batch size of `batch_independence` for single envs (int >= 2).
        options: keyword options: `key`, `policy`, `autoreset`, `num_keys`, `disable_jit`,
            `deterministic`, `tolerance` (of the eager-versus-transform comparisons) as in
            `check_env` (`disable_jit` also for the driver's resets in `marl_rules`);
            `marl_num_steps` (default `num_steps`), `require_inactive`,
            `check_active_used` for `check_marl_env`;
            `invariants` (a mapping name -> `fn(state) -> bool array`, overriding the
            env's own `invariants`), `invariant_envs` (32) and `invariant_steps`
            (`4 * num_steps`) for `invariant_sweep`; `scripted_policies` (a mapping name ->
            `ScriptedPolicy`, overriding the env's own) and `scripted_keys` (4) for
            `scripted_policies`; `autoreset_max_steps` (3), the `TimeLimit` the
            `auto_reset` check puts under the auto-reset.
        reference_options: keyword options of `check_matches_reference` (e.g.
            `tolerance`, `num_episodes`, `record`, `actions`).
    """

    env_factory: Callable[[], Any]
    reference_factory: Callable[[], Any] | None = None
    num_steps: int = 16
    batch_size: int = 8
    options: Mapping[str, Any] = field(default_factory=dict)
    reference_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not callable(self.env_factory):
            raise TypeError(f"Battery: env_factory must be callable, got {self.env_factory!r}")
        if self.reference_factory is not None and not callable(self.reference_factory):
            raise TypeError(
                f"Battery: reference_factory must be callable or None, got "
                f"{self.reference_factory!r}"
            )
        self.num_steps = check_positive_int(self.num_steps, "num_steps", "Battery")
        self.batch_size = check_positive_int(self.batch_size, "batch_size", "Battery")
        if self.batch_size < 2:
            raise ValueError(f"Battery: batch_size must be an int >= 2, got {self.batch_size}")
        unknown = sorted(set(self.options) - set(_OPTIONS))
        if unknown:
            raise ValueError(f"Battery: unknown options {unknown}; allowed: {list(_OPTIONS)}")
        self._env: Any = None
        self._session: EnvSession | None = None

    def env(self) -> Any:
        """The env under test (built once)."""
        if self._env is None:
            self._env = self.env_factory()
        return self._env

    def session(self) -> EnvSession:
        """The shared `EnvSession` of the `check_env` groups."""
        if self._session is None:
            kwargs = {k: self.options[k] for k in _SESSION_OPTIONS if k in self.options}
            # num_keys = batch_size lets batch_independence reuse the compiled key schedule
            kwargs.setdefault("num_keys", self.batch_size)
            self._session = EnvSession(self.env(), num_steps=self.num_steps, **kwargs)
        return self._session

    def run(self, name: str) -> CheckReport:
        """Run the check `name`; raise `CheckError` on failure, `CheckSkipped` if n/a."""
        opts = self.options
        if name in _GROUP:
            session = self.session()
            report = CheckReport(f"check_env/{_GROUP[name]}")
            run_group(
                session,
                _GROUP[name],
                report,
                tolerance=opts.get("tolerance", TRANSFORM_TOLERANCE),
                deterministic=opts.get("deterministic", False),
            )
            return report
        if name == "batch_independence":
            session = self.session()
            return check_batch_independence(
                self.env(),
                None if session.kind.vector else self.batch_size,
                num_steps=self.num_steps,
                _solo_step=None if session.kind.vector else session.step_j(),
                _disable_jit=session.disable_jit,
                **{k: opts[k] for k in ("key", "policy", "autoreset") if k in opts},
            )
        if name == "matches_reference":
            if self.reference_factory is None:
                raise CheckSkipped(
                    "no reference: define a `reference_factory` fixture (pytest) or pass "
                    "--reference module:factory (parallax check) to run the differential test"
                )
            if self.session().kind.vector:
                raise CheckSkipped(
                    "the differential test compares one unbatched instance with the reference; "
                    "the env is a vector env"
                )
            with self.session().lent_step() as step_fn:
                return check_matches_reference(
                    self.env(),
                    self.reference_factory(),
                    num_steps=self.num_steps,
                    **{"key": opts["key"]} if "key" in opts else {},
                    **dict(self.reference_options),
                    _step_fn=step_fn,
                )
        if name == "marl_rules":
            if not self.session().kind.marl:
                raise CheckSkipped(
                    "single-agent env (reset returns a State, not a MARLState): the "
                    "multi-agent rules do not apply"
                )
            session = self.session()
            with session.lent_step() as step_fn:
                return check_marl_env(
                    self.env(),
                    num_steps=int(opts.get("marl_num_steps", self.num_steps)),
                    disable_jit=session.disable_jit,
                    _step_fn=step_fn,
                    **{
                        k: opts[k]
                        for k in (
                            "key",
                            "policy",
                            "autoreset",
                            "require_inactive",
                            "check_active_used",
                        )
                        if k in opts
                    },
                )
        if name == "invariant_sweep":
            session = self.session()
            invariants = invariants_of(self.env(), opts.get("invariants"))
            if invariants is None:
                raise CheckSkipped(
                    "no invariants declared: give the env an `invariants` attribute (a mapping "
                    "name -> fn(state) -> bool array) or pass the `invariants` option"
                )
            return invariant_sweep(
                session.kind,
                session.driver,
                invariants,
                session.k_other,
                num_envs=self._positive(opts, "invariant_envs", 32),
                num_steps=self._positive(opts, "invariant_steps", 4 * self.num_steps),
                _vscan=session.vscan(),
            )
        if name == "boundary_actions":
            session = self.session()
            report = CheckReport("boundary_actions")
            boundary_actions(self.env(), session.kind, session.eager(), report)
            return report
        if name == "auto_reset":
            session = self.session()
            return auto_reset(
                self.env(),
                session.kind,
                session.user_policy,
                session.k_other,
                num_envs=self.batch_size if not session.kind.vector else 1,
                num_steps=self.num_steps,
                max_steps=self._positive(opts, "autoreset_max_steps", 3),
            )
        if name == "scripted_policies":
            scripted = scripted_policies_of(self.env(), opts.get("scripted_policies"))
            if scripted is None:
                raise CheckSkipped(
                    "no scripted policies declared: give the env a `scripted_policies` "
                    "attribute (a mapping name -> ScriptedPolicy) or pass the "
                    "`scripted_policies` option"
                )
            if self.session().kind.vector:
                raise CheckSkipped(
                    "scripted policies run on one unbatched instance; the env is a vector env"
                )
            return run_scripted_policies(
                self.env(),
                scripted,
                self.session().k_other,
                num_keys=self._positive(opts, "scripted_keys", 4),
            )
        if name == "structured_spaces":
            env = self.env()
            if not has_structured_space(env):
                raise CheckSkipped(
                    "neither observation_space nor action_space is a Dict/Tuple (PyTreeSpace)"
                )
            try:
                import gymnasium  # noqa: F401
            except ModuleNotFoundError as error:
                if error.name != "gymnasium":
                    raise
                raise CheckSkipped(
                    "gymnasium is not installed (pip install 'parallax[gymnasium]')"
                ) from None
            session = self.session()
            report = CheckReport("structured_spaces")
            structured_spaces(env, session.kind, session.eager(), session.k_other, report)
            return report
        if name == "training_parity":
            from ._parity import check_training_parity

            return check_training_parity(
                self.env(),
                num_envs=self.batch_size,
                num_steps=self.num_steps,
                **({"key": opts["key"]} if "key" in opts else {}),
            )
        raise ValueError(f"Battery.run: unknown check {name!r}; use one of {BATTERY_CHECKS}")

    @staticmethod
    def _positive(opts: Mapping[str, Any], name: str, default: int) -> int:
        return check_positive_int(opts.get(name, default), name, "Battery")

    def outcome(self, name: str) -> Outcome:
        """Run `name` and record its status instead of raising."""
        start = time.perf_counter()
        try:
            report = self.run(name)
        except CheckSkipped as skip:
            return Outcome(name, "skip", time.perf_counter() - start, str(skip))
        except CheckError as error:
            return Outcome(name, "fail", time.perf_counter() - start, str(error))
        except Exception as error:  # the env or a factory crashed: report, keep going
            text = f"{type(error).__name__}: {error}"
            return Outcome(name, "error", time.perf_counter() - start, text)
        return Outcome(name, "pass", time.perf_counter() - start, "", report)


def run_battery(
    env_factory: Callable[[], Any],
    *,
    reference_factory: Callable[[], Any] | None = None,
    num_steps: int = 16,
    batch_size: int = 8,
    checks: Iterable[str] = BATTERY_CHECKS,
    options: Mapping[str, Any] | None = None,
    reference_options: Mapping[str, Any] | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Run the battery checks on one env (in the current `jax_enable_x64` mode).

    Args:
        env_factory: `env_factory() -> env`.
        reference_factory: optional `reference_factory() -> Reference`.
        num_steps: steps per rollout.
        batch_size: batch size of the batch-independence check.
        checks: names from `BATTERY_CHECKS`.
        options: see `Battery`.
        reference_options: see `Battery`.
        on_outcome: called with each `Outcome` as soon as its check ends (progress
            reporting: `parallax check` prints a line per check with it).

    Returns:
        One `Outcome` per check, in the order given.

    Example:
        >>> from parallax.envs import GridWorld
        >>> from parallax.testing import run_battery
        >>> outcomes = run_battery(GridWorld, num_steps=4, batch_size=2, checks=["contract"])
        >>> [(o.check, o.status) for o in outcomes]
        [('contract', 'pass')]
    """
    names = list(checks)
    unknown = [n for n in names if n not in BATTERY_CHECKS]
    if unknown:
        raise ValueError(f"run_battery: unknown checks {unknown}; use names from {BATTERY_CHECKS}")
    battery = Battery(
        env_factory,
        reference_factory,
        num_steps,
        batch_size,
        dict(options or {}),
        dict(reference_options or {}),
    )
    outcomes = []
    for name in names:
        outcomes.append(battery.outcome(name))
        if on_outcome is not None:
            on_outcome(outcomes[-1])
    return outcomes


def x64_enabled() -> bool:
    """Whether `jax_enable_x64` is on."""
    return bool(jax.config.read("jax_enable_x64"))
