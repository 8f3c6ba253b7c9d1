"""`python -m bench.gpu_check`: the GPU check's commands (bench/gpu_check.sh runs this).

Standard library only at import: the steps import what they need when they run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import bench.gpu_check as package
from bench.gpu_check.common import USAGE, config, die2


class _Parser(argparse.ArgumentParser):
    """Bad input: one paragraph and exit status 2 (argparse's usage block says less)."""

    def error(self, message: str) -> NoReturn:
        die2(f"{message}. {USAGE}.")


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="bash bench/gpu_check.sh", description=package.__doc__,
                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser,
                            metavar="{prepare,run,fixture}")
    sub.add_parser("prepare", help="here: assemble .gpucheck/ and check its size")
    a = sub.add_parser("run", help="there: the check; --dry-run rehearses it here")
    a.add_argument("--dry-run", action="store_true")
    a = sub.add_parser("fixture", help="here: file a run's returned files as a fixture")
    a.add_argument("dir", nargs="?", help="the folder the run's files came back to")
    # The helpers the steps call as commands (python3 -m bench.gpu_check NAME ...).
    a = sub.add_parser("recipe")
    a.add_argument("--gguf", type=Path, required=True)
    a.add_argument("--out", type=Path, required=True)
    a = sub.add_parser("standin")
    a.add_argument("--recipe", type=Path, required=True)
    a.add_argument("--out", type=Path, required=True)
    a = sub.add_parser("copybw")
    a.add_argument("--out", type=Path, required=True)
    a.add_argument("--gib", type=float, default=2.0)
    a = sub.add_parser("compare")
    a.add_argument("--plan", type=Path, action="append", default=[])
    a.add_argument("--bench", type=Path)
    a.add_argument("--copybw", type=Path)
    a.add_argument("--llama-bench", type=Path)
    a.add_argument("--out", type=Path, required=True)
    a = sub.add_parser("summary")
    a.add_argument("--work", type=Path, required=True)
    a.add_argument("--out", type=Path, required=True, help="the results folder")
    a.add_argument("--budget", type=int, default=0)
    a.add_argument("--elapsed", type=int, default=0)
    a.add_argument("--dry-run", action="store_true")
    # run's own steps, re-entered under their time box (stages.Runner.execute).
    a = sub.add_parser("_build")
    a.add_argument("llama_dir", type=Path)
    a = sub.add_parser("_served")
    a.add_argument("llama_server", type=Path)
    return ap


def _commands(ap: argparse.ArgumentParser) -> list[str]:
    return [name for action in ap._subparsers._group_actions  # type: ignore[union-attr]
            for name in getattr(action, "choices", None) or ()]


def _helper(args: argparse.Namespace) -> int:
    if args.cmd == "recipe":
        from bench.gpu_check.model import recipe

        m = recipe(args.gguf, args.out)
        print(f"recipe: {len(m['tensors'])} tensors, header {m['header_bytes']:,} bytes, "
              f"layout of {m['source_name']} ({m['source_bytes']:,} bytes) -> {args.out}")
    elif args.cmd == "standin":
        from bench.gpu_check.model import standin

        print(json.dumps(standin(args.recipe, args.out), indent=1))
    elif args.cmd == "copybw":
        from bench.gpu_check.results import copybw

        r = copybw(args.gib)
        args.out.write_text(json.dumps(r, indent=1) + "\n")
        print(json.dumps(r, indent=1))
        return 1 if "error" in r else 0
    elif args.cmd == "compare":
        from bench.gpu_check.results import compare, print_table

        print_table(compare(args.plan, args.bench, args.copybw, args.out, args.llama_bench))
    else:
        from bench.gpu_check.results import summary

        s = summary(args.work, args.out, args.budget, args.elapsed, args.dry_run)
        print("stages: " + ", ".join(f"{x['stage']} {x['exit']} ({x['seconds']} s)"
                                     for x in s["stages"]))
    return 0


def main(argv: list[str] | None = None) -> int:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # beside commands
    argv = sys.argv[1:] if argv is None else argv
    ap = parser()
    if not argv:
        die2(f"no command. {USAGE}.")
    if not argv[0].startswith("-") and argv[0] not in _commands(ap):
        die2(f"unknown command {argv[0]!r}. {USAGE}.")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "prepare":
            from bench.gpu_check.prepare import cmd_prepare

            return cmd_prepare(config(os.environ))
        if args.cmd == "run":
            from bench.gpu_check.run import cmd_run

            return cmd_run(config(os.environ, dry=args.dry_run))
        if args.cmd == "fixture":
            from bench.gpu_check.prepare import cmd_fixture

            return cmd_fixture(config(os.environ).repo, args.dir)
        if args.cmd == "_build":
            from bench.gpu_check.build import build

            return build(config(os.environ), args.llama_dir)
        if args.cmd == "_served":
            from bench.gpu_check.run import served

            return served(config(os.environ), args.llama_server)
        return _helper(args)
    except subprocess.CalledProcessError as exc:  # its own output, above, says why
        print(f"gpu_check: {' '.join(map(str, exc.cmd))[:200]} failed (exit {exc.returncode})",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
