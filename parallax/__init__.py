"""Parallax: a pure-functional JAX protocol for reinforcement-learning environments.

An environment is any object with pure `reset(*, key) -> State` and
`step(state, action) -> State`; states are pytree dataclasses, so everything composes with
`jit`, `vmap`, `lax.scan` and `grad`.

Public names (one per line below): the state structs and protocols, `spaces`, the core
wrappers, and the registry (`make`, `make_vec`, `register`). They are imported on first
use (PEP 562), so `import parallax` is cheap and imports jax only when a name needs it. Subpackages: `parallax.envs`
(examples), `parallax.rng` (counter-based randomness), `parallax.testing` (the validation
battery), `parallax.finance` (sekai-compatible finance envs), `parallax.adapters`.
"""

import importlib as _importlib
from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import spaces as spaces
    from ._action_check import check_action as check_action
    from ._actions import action_scan as action_scan
    from ._actions import random_actions as random_actions
    from ._core import Agents as Agents
    from ._core import Env as Env
    from ._core import MARLEnv as MARLEnv
    from ._core import MARLState as MARLState
    from ._core import MARLStateT as MARLStateT
    from ._core import MARLVectorEnv as MARLVectorEnv
    from ._core import State as State
    from ._core import StateT as StateT
    from ._core import VectorEnv as VectorEnv
    from ._cpu import cpu_threads as cpu_threads
    from ._cpu import set_cpu_devices as set_cpu_devices
    from ._cpu import set_cpu_threads as set_cpu_threads
    from ._cpu import use_all_cpu_cores as use_all_cpu_cores
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
    from ._wrappers.action_check import StaticActionCheck as StaticActionCheck
    from ._wrappers.autoreset import AutoResetWrapper as AutoResetWrapper
    from ._wrappers.autoreset import VmapAutoResetWrapper as VmapAutoResetWrapper
    from ._wrappers.autoreset import final_observation as final_observation
    from ._wrappers.autoreset import next_episode_key as next_episode_key
    from ._wrappers.base import Wrapper as Wrapper
    from ._wrappers.checked import CheckedWrapper as CheckedWrapper
    from ._wrappers.normalize import NormalizeObservation as NormalizeObservation
    from ._wrappers.normalize import NormalizeReward as NormalizeReward
    from ._wrappers.stats import RecordEpisodeStatistics as RecordEpisodeStatistics
    from ._wrappers.time_aware import TimeAwareObservation as TimeAwareObservation
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
    "StaticActionCheck",
    "TimeAwareObservation",
    "TimeLimit",
    "Trajectory",
    "TransformAction",
    "TransformObservation",
    "TransformReward",
    "VectorEnv",
    "VmapAutoResetWrapper",
    "VmapWrapper",
    "Wrapper",
    "__version__",
    "action_scan",
    "batch_mesh",
    "check_action",
    "cpu_threads",
    "final_observation",
    "make",
    "make_vec",
    "next_episode_key",
    "random_actions",
    "register",
    "register_namespace",
    "registered_ids",
    "rollout",
    "set_cpu_devices",
    "set_cpu_threads",
    "shard_batch",
    "shard_rollout",
    "spaces",
    "stack_space",
    "use_all_cpu_cores",
]

# name -> the module that defines it, imported on first access (PEP 562): `import parallax`
# (and with it the `parallax` command) imports jax only when a name needs it
_LAZY = {
    "spaces": ".spaces",
    "Agents": "._core",
    "Env": "._core",
    "MARLEnv": "._core",
    "MARLState": "._core",
    "MARLStateT": "._core",
    "MARLVectorEnv": "._core",
    "State": "._core",
    "StateT": "._core",
    "VectorEnv": "._core",
    "cpu_threads": "._cpu",
    "set_cpu_devices": "._cpu",
    "set_cpu_threads": "._cpu",
    "use_all_cpu_cores": "._cpu",
    "action_scan": "._actions",
    "check_action": "._action_check",
    "random_actions": "._actions",
    "EnvSpec": "._registry",
    "make": "._registry",
    "make_vec": "._registry",
    "register": "._registry",
    "register_namespace": "._registry",
    "registered_ids": "._registry",
    "Trajectory": "._rollout",
    "rollout": "._rollout",
    "batch_mesh": "._sharding",
    "shard_batch": "._sharding",
    "shard_rollout": "._sharding",
    "Space": "._spaces",
    "stack_space": "._spaces",
    "AutoResetWrapper": "._wrappers.autoreset",
    "final_observation": "._wrappers.autoreset",
    "VmapAutoResetWrapper": "._wrappers.autoreset",
    "next_episode_key": "._wrappers.autoreset",
    "Wrapper": "._wrappers.base",
    "StaticActionCheck": "._wrappers.action_check",
    "CheckedWrapper": "._wrappers.checked",
    "NormalizeObservation": "._wrappers.normalize",
    "NormalizeReward": "._wrappers.normalize",
    "RecordEpisodeStatistics": "._wrappers.stats",
    "TimeLimit": "._wrappers.time_limit",
    "TimeAwareObservation": "._wrappers.time_aware",
    "ClipAction": "._wrappers.transform",
    "FlattenObservation": "._wrappers.transform",
    "TransformAction": "._wrappers.transform",
    "TransformObservation": "._wrappers.transform",
    "TransformReward": "._wrappers.transform",
    "VmapWrapper": "._wrappers.vmap",
}

if not TYPE_CHECKING:  # mypy reads the imports above; a typo stays an error for it

    def __getattr__(name: str) -> Any:
        try:
            module = _importlib.import_module(_LAZY[name], __name__)
        except KeyError:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
        value = module if name == "spaces" else getattr(module, name)
        globals()[name] = value  # later lookups skip __getattr__
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
