"""``gdn eval``: run a suite of scenarios against a bundle, grade them, report, compare two runs.

This module is imported by the parser to register the command, so only argparse is imported at the
top: the suite runner (bundle loading, the runtime, the judge's provider SDK) is imported when the
command runs.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

from ._output import EXIT_CONFIG, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, CliError

EXIT_BELOW_THRESHOLD = EXIT_INTERNAL  # like pytest: 1 when the run did not pass
DESCRIPTION = """\
Run every scenario of an eval SUITE (YAML) against the bundle, each on a state root of its own, and
grade it: deterministic checks (tools called with arguments, text, JSON Schema of structured output,
steps, tokens, latency) and rubric criteria scored by the suite's judge model.
Prints a table with per-criterion scores, tokens, an approximate cost and latency; --format json|junit
with --output FILE writes a report. Exit 0 when the pass rate reaches the suite's threshold, 1 under it,
3 for a broken suite. `gdn eval --compare A.json B.json` shows which scenarios got better or worse.
Guide: docs/guides/evaluating.md"""


def add_eval_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``gdn eval`` (one call from the parser's build function)."""
    e = sub.add_parser(
        "eval",
        parents=[common],
        help="run an eval suite against a bundle and grade it",
        description=DESCRIPTION,
        epilog=(
            "examples:\n"
            "  gdn eval evals/suite.yaml                       run a suite, print the table\n"
            "  gdn eval evals/suite.yaml --format json --output before.json\n"
            "  gdn eval evals/suite.yaml --model-override main=openai/gpt-4o-mini --output after.json "
            "--format json\n"
            "  gdn eval --compare before.json after.json       which scenarios got better or worse\n"
            "  gdn eval evals/suite.yaml --format junit --output eval.xml --keep-state eval-runs"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    e.add_argument("suite", nargs="?", help="the suite YAML file")
    e.add_argument("--bundle", metavar="PATH", help="bundle directory (default: the suite's `bundle`)")
    e.add_argument(
        "--model-override",
        action="append",
        metavar="NAME=provider/model",
        help="replace Model NAME of the bundle, e.g. main=openai/gpt-4o-mini (repeatable)",
    )
    e.add_argument("--concurrency", type=int, metavar="N", help="scenarios run at once (default: the suite's, 4)")
    e.add_argument("--format", choices=("text", "json", "junit"), default="text", help="report format")
    e.add_argument("--output", metavar="FILE", help="write the report to FILE (the table still goes to stdout)")
    e.add_argument(
        "--keep-state",
        metavar="DIR",
        help="keep each scenario's state root under DIR/<scenario> (open it with gdn logs or Studio)",
    )
    e.add_argument("--env-file", metavar="FILE", help="extra environment file (after the bundle's .env)")
    e.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"), help="compare two JSON reports and exit")
    e.set_defaults(func=cmd_eval)


def _overrides(values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        name, sep, target = value.partition("=")
        if not sep or not name or "/" not in target:
            raise CliError(
                "E_INVALID_ARGUMENT",
                f"--model-override {value!r} is not NAME=provider/model",
                exit_code=EXIT_USAGE,
                suggestion="Write it like --model-override main=openai/gpt-4o-mini.",
            )
        out[name] = target
    return out


def cmd_eval(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from ..errors import GoondanError

    if args.compare:
        from ..eval import compare

        text, _ = compare(args.compare[0], args.compare[1])
        sys.stdout.write(text)
        return EXIT_OK
    if not args.suite:
        raise CliError(
            "E_INVALID_ARGUMENT",
            "gdn eval needs a SUITE file (or --compare A.json B.json)",
            exit_code=EXIT_USAGE,
            suggestion="Run `gdn eval evals/suite.yaml`; docs/guides/evaluating.md shows a suite.",
        )
    if args.concurrency is not None and args.concurrency < 1:
        raise CliError("E_INVALID_ARGUMENT", "--concurrency must be at least 1", exit_code=EXIT_USAGE)
    overrides = _overrides(args.model_override or [])
    if args.output:
        _check_output(args.output)
    if args.keep_state:
        _check_keep_state(args.keep_state)

    import asyncio

    from ..eval import SuiteRun, load_suite, render, text_report
    from ._env import load_env

    try:
        suite, suite_dir = load_suite(args.suite)
    except GoondanError as exc:
        raise CliError(exc.code, exc.message, exit_code=EXIT_CONFIG, suggestion=exc.suggestion) from None
    bundle = Path(args.bundle) if args.bundle else None
    try:
        run = SuiteRun(
            suite,
            suite_dir,
            bundle=bundle,
            overrides=overrides,
            concurrency=args.concurrency,
            keep_state=args.keep_state,
            suite_name=suite.name or Path(args.suite).stem,
            env=load_env(run_bundle_dir(bundle, suite, suite_dir), args.env_file),
            on_result=None if args.quiet or args.json else _progress(len(suite.scenarios)),
        )
    except GoondanError as exc:  # no bundle named, or none where it points: a broken suite, said once
        if args.verbose and exc.__cause__ is not None:  # the user's code failed (a judge module): its traceback
            import traceback

            traceback.print_exception(exc.__cause__, file=sys.stderr)
        raise CliError(exc.code, exc.message, exit_code=EXIT_CONFIG, suggestion=exc.suggestion) from None
    if not (args.json or args.quiet):
        for name, note in run.unknown_tools.items():  # the check runs; it may be a typo
            sys.stderr.write(f"warning: toolNotCalled {name!r}: {note} (the check runs as written)\n")
    from ._interrupt import interruptible  # asyncio: not on gdn --help's path

    report = asyncio.run(interruptible(run.run()))
    fmt = "json" if args.json and args.format == "text" else args.format  # --json: machine-readable
    if args.output:
        try:
            Path(args.output).write_text(render(report, fmt), encoding="utf-8")
        except OSError as exc:  # the report is not lost: it goes to stdout instead
            sys.stdout.write(render(report, fmt))
            raise CliError(
                "E_INVALID_ARGUMENT",
                f"--output {args.output}: cannot write the report: {exc.strerror or exc}; it was printed instead",
                suggestion="Pass --output a file in a directory you can write to.",
            ) from None
        sys.stdout.write(text_report(report) if not args.json else "")
    else:
        sys.stdout.write(render(report, fmt))
    return EXIT_OK if report.passed else EXIT_BELOW_THRESHOLD


def _check_output(output: str) -> None:
    """``--output`` must be writable before the suite runs: it used to fail only at the end, after
    every scenario (and every paid model call) had run, as an internal error with the report lost."""
    import os
    from pathlib import Path

    target = Path(output)
    parent = target.parent if str(target.parent) else Path(".")
    problem = None
    if target.is_dir():
        problem = "it is a directory"
    elif not parent.is_dir():
        problem = f"its directory {parent} does not exist"
    elif not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        problem = "it is not writable"
    if problem:
        raise CliError(
            "E_INVALID_ARGUMENT",
            f"--output {output}: {problem}; no scenario was run",
            exit_code=EXIT_USAGE,
            suggestion="Pass --output a file in an existing directory you can write to (e.g. --output report.json).",
        )


def _check_keep_state(keep_state: str) -> None:
    """``--keep-state DIR`` must be a directory gdn eval can create and write before the suite runs:
    otherwise every scenario failed its "runs" check (a FileNotFoundError each) and gdn eval exited 1,
    as if the agent were worse."""
    import os
    from pathlib import Path

    target = Path(keep_state)
    problem: str | None
    try:
        target.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        problem = "it is a file, not a directory"
    except OSError as exc:
        problem = f"it cannot be created: {exc.strerror or exc}"
    else:
        problem = None if os.access(target, os.W_OK | os.X_OK) else "it is not writable"
    if problem:
        raise CliError(
            "E_INVALID_ARGUMENT",
            f"--keep-state {keep_state}: {problem}; no scenario was run",
            exit_code=EXIT_USAGE,
            suggestion="Pass --keep-state a directory you can write to (e.g. --keep-state eval-runs).",
        )


def _progress(total: int) -> Any:
    """Prints each scenario to stderr as it finishes (stdout keeps the report)."""
    import sys

    done = 0

    def show(result: Any) -> None:
        nonlocal done
        done += 1
        status = "PASS" if result.passed else "FAIL"
        sys.stderr.write(f"[{done}/{total}] {status} {result.name} ({result.latency_ms / 1000:.1f} s)\n")
        sys.stderr.flush()

    return show


def run_bundle_dir(bundle: Path | None, suite: Any, suite_dir: Path) -> Path:
    """The bundle directory whose ``.env`` files the run reads (a bundle may be named by its
    ``goondan.yaml``: its ``.env`` is beside it, and was not read when the file was named)."""
    from ._env import bundle_dir

    if bundle is not None:
        return bundle_dir(str(bundle))
    return bundle_dir(str(suite_dir / suite.bundle)) if suite.bundle else suite_dir
