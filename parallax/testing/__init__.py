"""The validation battery: checks that an environment keeps the Parallax contract.

- `check_env`: the contract (spaces, dtypes, flags, step_count, stable structure, jit/vmap/
  scan agreement, no recompilation, determinism, key dependence).
- `check_marl_env`: the six multi-agent rules.
- `check_batch_independence`: instance i alone and inside a batch are bit-identical.
- `check_matches_reference`: a differential test against a reference implementation.
- `Tolerance`, `FloatRule`, `NearThreshold`, `ulp_distance`, `EXACT`, `TRANSFORM_TOLERANCE`:
  the comparison rule, written down once.
- `Reference`, `GymReference`: the reference interface and an adapter for Gymnasium/sekai envs.
- `CheckError`, `ReferenceMismatch`: the failures (subclasses of `AssertionError`).
- `CheckReport`: what a passing check verified.
- `require_fresh_report`, `StaleReportError`, `StaleReportWarning`: refuse to train on an
  env whose validation report (`parallax check`) is missing, failing or stale.
- `check_training_parity`: donated jit, `vmap` over seeds and `shard_rollout` reproduce
  the batched rollout bit for bit (the variants a trainer runs).
- `new_project`: the skeleton `parallax new NAME` writes (spec, reference, env, tests).
- `record_trajectory`, `save_trajectory`, `load_trajectory`, `replay`, `TrajectoryRecord`,
  `ReplayResult`: trajectories on disk (`.npz` + a JSON header), replayed bit for bit.
- `ScriptedPolicy`, `run_scripted_policies`: scripted policies with expected outcomes;
  `invariant_sweep` and `auto_reset` are battery checks (an env declares `invariants`).
- `run_battery`, `BATTERY_CHECKS`: the battery as a list of named checks (used by
  `parallax.testing.battery`, the pytest star-import, and by `parallax check`).
"""

from .._scaffold import new_project as new_project
from ._batch import check_batch_independence as check_batch_independence
from ._battery import BATTERY_CHECKS as BATTERY_CHECKS
from ._battery import Battery as Battery
from ._battery import CheckSkipped as CheckSkipped
from ._battery import Outcome as Outcome
from ._battery import run_battery as run_battery
from ._contract import CHECK_GROUPS as CHECK_GROUPS
from ._contract import check_env as check_env
from ._errors import CheckError as CheckError
from ._errors import ReferenceMismatch as ReferenceMismatch
from ._freshness import StaleReportError as StaleReportError
from ._freshness import StaleReportWarning as StaleReportWarning
from ._freshness import require_fresh_report as require_fresh_report
from ._marl import check_marl_env as check_marl_env
from ._parity import check_training_parity as check_training_parity
from ._reference import GymReference as GymReference
from ._reference import Reference as Reference
from ._reference import check_matches_reference as check_matches_reference
from ._reference import state_record as state_record
from ._replay import ReplayResult as ReplayResult
from ._replay import TrajectoryRecord as TrajectoryRecord
from ._replay import load_trajectory as load_trajectory
from ._replay import record_trajectory as record_trajectory
from ._replay import replay as replay
from ._replay import save_trajectory as save_trajectory
from ._report import CheckReport as CheckReport
from ._scripted import ScriptedPolicy as ScriptedPolicy
from ._scripted import Trajectory as Trajectory
from ._scripted import run_scripted_policies as run_scripted_policies
from ._tolerance import EXACT as EXACT
from ._tolerance import TRANSFORM_TOLERANCE as TRANSFORM_TOLERANCE
from ._tolerance import FloatRule as FloatRule
from ._tolerance import NearThreshold as NearThreshold
from ._tolerance import Tolerance as Tolerance
from ._tolerance import ulp_distance as ulp_distance

__all__ = [
    "BATTERY_CHECKS",
    "CHECK_GROUPS",
    "EXACT",
    "TRANSFORM_TOLERANCE",
    "Battery",
    "CheckError",
    "CheckReport",
    "CheckSkipped",
    "FloatRule",
    "GymReference",
    "NearThreshold",
    "Outcome",
    "Reference",
    "ReferenceMismatch",
    "ReplayResult",
    "ScriptedPolicy",
    "StaleReportError",
    "StaleReportWarning",
    "Tolerance",
    "Trajectory",
    "TrajectoryRecord",
    "check_batch_independence",
    "check_env",
    "check_marl_env",
    "check_matches_reference",
    "check_training_parity",
    "load_trajectory",
    "new_project",
    "record_trajectory",
    "replay",
    "require_fresh_report",
    "run_battery",
    "run_scripted_policies",
    "save_trajectory",
    "state_record",
    "ulp_distance",
]
