"""Parallax: a pure-functional JAX protocol for reinforcement-learning environments.

An environment is any object with pure `reset(*, key) -> State` and
`step(state, action) -> State`; states are pytree dataclasses, so everything composes with
`jit`, `vmap`, `lax.scan` and `grad`.

Public names (one per line below): the state structs and protocols, `spaces`, the core
wrappers, and the registry (`make`, `make_vec`, `register`). Subpackages: `parallax.envs`
(examples), `parallax.rng` (counter-based randomness), `parallax.testing` (the validation
battery), `parallax.finance` (sekai-compatible finance envs), `parallax.adapters`.
"""

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version

from . import spaces as spaces
from ._core import Agents as Agents
from ._core import Env as Env
from ._core import MARLEnv as MARLEnv
from ._core import MARLState as MARLState
from ._core import MARLStateT as MARLStateT
from ._core import MARLVectorEnv as MARLVectorEnv
from ._core import State as State
from ._core import StateT as StateT
from ._core import VectorEnv as VectorEnv
from ._registry import EnvSpec as EnvSpec
from ._registry import make as make
from ._registry import make_vec as make_vec
from ._registry import register as register
from ._registry import register_namespace as register_namespace
from ._registry import registered_ids as registered_ids
from ._rollout import Trajectory as Trajectory
from ._rollout import rollout as rollout
from ._sharding import batch_mesh as batch_mesh
from ._sharding import shard_batch as shard_batch
from ._sharding import shard_rollout as shard_rollout
from ._spaces import Space as Space
from ._spaces import stack_space as stack_space
from ._wrappers.autoreset import AutoResetWrapper as AutoResetWrapper
from ._wrappers.autoreset import final_observation as final_observation
from ._wrappers.base import Wrapper as Wrapper
from ._wrappers.checked import CheckedWrapper as CheckedWrapper
from ._wrappers.normalize import NormalizeObservation as NormalizeObservation
from ._wrappers.normalize import NormalizeReward as NormalizeReward
from ._wrappers.stats import RecordEpisodeStatistics as RecordEpisodeStatistics
from ._wrappers.time_limit import TimeLimit as TimeLimit
from ._wrappers.transform import ClipAction as ClipAction
from ._wrappers.transform import FlattenObservation as FlattenObservation
from ._wrappers.transform import TransformAction as TransformAction
from ._wrappers.transform import TransformObservation as TransformObservation
from ._wrappers.transform import TransformReward as TransformReward
from ._wrappers.vmap import VmapWrapper as VmapWrapper

try:
    __version__ = _version("parallax-rl")
except _PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"

__all__ = [
    "Agents",
    "AutoResetWrapper",
    "CheckedWrapper",
    "ClipAction",
    "Env",
    "EnvSpec",
    "FlattenObservation",
    "MARLEnv",
    "MARLState",
    "MARLStateT",
    "MARLVectorEnv",
    "NormalizeObservation",
    "NormalizeReward",
    "RecordEpisodeStatistics",
    "Space",
    "State",
    "StateT",
    "TimeLimit",
    "Trajectory",
    "TransformAction",
    "TransformObservation",
    "TransformReward",
    "VectorEnv",
    "VmapWrapper",
    "Wrapper",
    "__version__",
    "batch_mesh",
    "final_observation",
    "make",
    "make_vec",
    "register",
    "register_namespace",
    "registered_ids",
    "rollout",
    "shard_batch",
    "shard_rollout",
    "spaces",
    "stack_space",
]
