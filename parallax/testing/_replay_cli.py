"""`parallax replay FILE [--env SPEC]`: re-run a trajectory, show the first difference.

Exit status 0 when the replay is bit-identical, 1 when it differs, 2 on a usage error or an
unreadable file. FILE is a `.npz` trajectory (`parallax check` writes one when a check fails
with a diverging trajectory; `parallax.testing.save_trajectory` writes any), or the `.json`
file a failed differential test writes (then `--env SPEC` names the env).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._replay import load_trajectory, replay, trajectory_from_mismatch

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """`parallax replay FILE [--env SPEC]`: exit 0 when identical, 1 when not, 2 on errors."""
    from .._cli import DefaultsHelpFormatter

    p = argparse.ArgumentParser(
        prog="parallax replay",
        description="Re-run a trajectory file written by `parallax check` or "
        "parallax.testing.save_trajectory, and show the first difference field by field.",
        formatter_class=DefaultsHelpFormatter,
    )
    p.add_argument(
        "file",
        help="a .npz trajectory file, or the .json file a failed differential test wrote "
        "(then --env is required)",
    )
    p.add_argument(
        "--env",
        default=None,
        metavar="SPEC",
        help="replay on this env (an id, module:factory or project directory) instead of "
        "the one the file names",
    )
    args = p.parse_args(argv)
    try:
        env = None
        if args.env is not None:
            from ._targets import load_target

            env = load_target(args.env).env_factory()
        if args.file.endswith(".json"):
            if env is None:
                p.error("a .json mismatch file names no env spec: pass --env SPEC")
            trajectory = trajectory_from_mismatch(args.file, env, env_spec=args.env)
        else:
            trajectory = load_trajectory(args.file)
        env_text = args.env or trajectory.env
        note = trajectory.meta.get("note")
        print(
            f"parallax replay {args.file}  (env {env_text}, {trajectory.num_steps} steps, "
            f"{'x64' if trajectory.x64 else 'f32'})"
        )
        if note:
            print(f"note: {note}")
        result = replay(trajectory, env)
    except (OSError, ValueError, ImportError, AttributeError, TypeError, KeyError) as error:
        print(f"parallax replay: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    print(result.format())
    return 0 if result.identical else 1
