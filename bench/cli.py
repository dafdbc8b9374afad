"""Command line: ``python -m bench [--quick | --full] [--only NAME ...] [--out DIR]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.config import PROFILES
from bench.scenarios import SCENARIOS


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmarks of gpu_ivm. Writes raw results (JSON lines) to "
                    "bench/results/<timestamp>.jsonl and regenerates docs/benchmarks.md and "
                    "the figures in docs/img/.")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", dest="profile", action="store_const", const="quick",
                   help="smaller sizes, about a minute (default)")
    g.add_argument("--full", dest="profile", action="store_const", const="full",
                   help="the sizes the project's goals are stated for (~6 min on 2 cores)")
    g.add_argument("--profile", dest="profile", choices=sorted(PROFILES),
                   help="pick a profile by name (tiny: seconds, for the smoke test)")
    p.add_argument("--only", nargs="+", choices=sorted(SCENARIOS), metavar="NAME",
                   help=f"run only these scenarios ({', '.join(SCENARIOS)}); the report takes "
                        "the others from the newest earlier run of the same profile")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="write DIR/results/*.jsonl, DIR/benchmarks.md and DIR/img/ instead of "
                        "bench/results/, docs/benchmarks.md and docs/img/")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--report-only", action="store_true",
                   help="do not measure; regenerate the report from the newest results")
    p.set_defaults(profile="quick")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    from bench import runner

    if args.report_only:
        print(runner.report_only(args.profile, args.out))
        return 0
    res = runner.run(args.profile, only=args.only, out=args.out,
                     progress=not args.no_progress,
                     command=" ".join(["python -m bench", *argv]).strip())
    bad = [r for r in res["records"] if r.get("kind") == "result" and r.get("ok") is False]
    if bad:
        print(f"{len(bad)} result(s) with a wrong count or store content; see {res['results']}",
              file=sys.stderr)
        return 1
    return 0
