"""The `parallax` command: `list`, `check`, `bench`, `new`, `replay`.

Each subcommand lives in its own module and is imported only when used:
`parallax list` (here), `parallax check` (`parallax.testing._cli`), `parallax bench`
(`parallax._bench`), `parallax new` (`parallax._scaffold`), `parallax replay`
(`parallax.testing._replay_cli`). Those four get every argument after their name and parse
them with their own parsers; `parallax --version` and `parallax list` import no jax.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["DefaultsHelpFormatter", "main"]

_FORWARDED = {
    "check": (
        "parallax.testing._cli",
        "run the validation battery on an env id or module:factory (see `parallax check -h`)",
    ),
    "new": (
        "parallax._scaffold",
        "write the skeleton of an env project: spec, reference, JAX env, battery tests "
        "(see `parallax new -h`)",
    ),
    "replay": (
        "parallax.testing._replay_cli",
        "re-run a trajectory file and show the first difference (see `parallax replay -h`)",
    ),
    "bench": (
        "parallax._bench",
        "time a jitted lax.scan rollout, optionally against a competitor (see `parallax bench -h`)",
    ),
}

_EPILOG = """examples:
  parallax list                      every id (adapter ids of the installed libraries too)
  parallax list --spaces             ... and each env's observation and action spaces
  parallax check GridWorld-v0        the validation battery, in float32 and float64
  parallax new myenv                 a project skeleton that passes the battery as written
  parallax check myenv               ... its battery, throughput -> myenv/validation_report.json
  parallax replay FILE.npz           re-run a failing check's trajectory, first difference shown
  parallax bench GridWorld-v0 --num-envs 1024 --compare sekai
"""


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """`--help` shows each option's default, except where it says nothing (None, False, [])
    or the help text already states it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or any(default is nothing for nothing in (None, False, argparse.SUPPRESS))
            or default == []
            or "%(default)" in text
            or "(default" in text
        ):
            return action.help
        shown = " ".join(map(str, default)) if isinstance(default, list) else str(default)
        return f"{text} (default: {shown.replace('%', '%%')})"


def _list(args: argparse.Namespace) -> int:
    from ._ids import NEEDS_DATA, UNSUPPORTED, listed_ids

    for env_id in listed_ids(include_namespaces=not args.no_namespaces):
        if args.spaces and env_id in NEEDS_DATA:
            print(f"{env_id}\n    (needs {NEEDS_DATA[env_id]})")
        elif args.spaces:
            from ._registry import make

            try:
                env = make(env_id)
                print(
                    f"{env_id}\n    observation: {env.observation_space}\n    action: {env.action_space}"
                )
            except Exception as error:  # a listing must not stop at one broken entry
                print(f"{env_id}\n    (cannot build: {type(error).__name__}: {error})")
        else:
            print(env_id, flush=True)
            if env_id in UNSUPPORTED:  # on stderr, so scripts still read one id per line
                print(f"    (unsupported: {UNSUPPORTED[env_id]})", file=sys.stderr, flush=True)
    return 0


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="parallax",
        description=__doc__.splitlines()[0] if __doc__ else None,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"parallax {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p_list = sub.add_parser(
        "list",
        help="list every registered env id (--spaces: also build each env, print its spaces)",
        description="List every registered env id: the builtin ids, then the adapter ids "
        "(gymnax/, brax/, mjx/) of the libraries that are installed.",
    )
    p_list.add_argument(
        "--spaces", action="store_true", help="also build each env and print its spaces (slow)"
    )
    p_list.add_argument(
        "--no-namespaces", action="store_true", help="skip adapter ids (gymnax/, brax/, mjx/)"
    )
    p_list.set_defaults(func=_list, parser=p_list)
    for name, (_, help_text) in _FORWARDED.items():
        # main() hands their arguments over unparsed; argparse sees them only when an option
        # comes before the command
        forwarded = sub.add_parser(name, help=help_text, add_help=False)
        forwarded.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def _forward(command: str, argv: list[str]) -> int:
    run: Any = importlib.import_module(_FORWARDED[command][0]).main
    return int(run(argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `parallax` console script; returns the exit code.

    Unknown options are usage errors (exit code 2), for every subcommand.
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in _FORWARDED:
        return _forward(args_list[0], args_list[1:])
    parser = _parser()
    args, unknown = parser.parse_known_args(args_list)
    if args.command in _FORWARDED:
        return _forward(args.command, [*unknown, *args.rest])
    if unknown:  # what parse_args would say, with the usage of the subcommand
        args.parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
