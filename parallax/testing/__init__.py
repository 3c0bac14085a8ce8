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
- `run_battery`, `BATTERY_CHECKS`: the battery as a list of named checks (used by
  `parallax.testing.battery`, the pytest star-import, and by `parallax check`).
"""

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
from ._marl import check_marl_env as check_marl_env
from ._reference import GymReference as GymReference
from ._reference import Reference as Reference
from ._reference import check_matches_reference as check_matches_reference
from ._reference import state_record as state_record
from ._report import CheckReport as CheckReport
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
    "Tolerance",
    "check_batch_independence",
    "check_env",
    "check_marl_env",
    "check_matches_reference",
    "run_battery",
    "state_record",
    "ulp_distance",
]
