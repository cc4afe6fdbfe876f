"""The argparse tree of ``gdn``. Only argparse is imported here, so ``gdn --help`` starts instantly."""

from __future__ import annotations

import argparse
from typing import Any

from ._argparse import HelpFormatter, Parser, VersionAction, cache_translations, finish
from ._commands import (
    cmd_approvals_approve,
    cmd_approvals_deny,
    cmd_approvals_list,
    cmd_completion,
    cmd_doctor,
    cmd_help,
    cmd_init,
    cmd_instance_delete,
    cmd_instance_list,
    cmd_instance_restart,
    cmd_logs,
    cmd_package_add,
    cmd_package_build,
    cmd_package_install,
    cmd_package_lock,
    cmd_restart,
    cmd_run,
    cmd_schema,
    cmd_validate,
)
from ._eval import add_eval_parser
from ._studio import add_studio_parser

KINDS = ("Package", "Model", "Agent", "Swarm", "Tool", "Extension", "Connector", "Connection")


def _common(*, top: bool) -> argparse.ArgumentParser:
    """Global options, accepted before and after the command name.

    The copy given to subcommands uses SUPPRESS defaults so that ``gdn --state-root X run`` keeps the
    value given before the command instead of it being reset by the subcommand's default.
    """

    def default(value: object) -> object:
        return value if top else argparse.SUPPRESS

    common = Parser(add_help=False)
    g = common.add_argument_group("global options")
    g.add_argument(
        "--state-root",
        metavar="DIR",
        default=default(None),
        help="state directory (default: $GOONDAN_STATE_ROOT or ~/.goondan)",
    )
    g.add_argument(
        "--json", action="store_true", default=default(False), help="machine-readable output (errors as JSON on stderr)"
    )
    g.add_argument("-v", "--verbose", action="count", default=default(0), help="more logging (-vv for debug)")
    g.add_argument("-q", "--quiet", action="store_true", default=default(False), help="only errors")
    g.add_argument(
        "--no-color",
        action="store_true",
        default=default(False),
        help="disable colored output (NO_COLOR is honoured too)",
    )
    return common


def _sub(sub: Any, name: str, common: argparse.ArgumentParser, help_: str, description: str) -> Any:
    return sub.add_parser(
        name,
        parents=[common],
        help=help_,
        description=description,
        formatter_class=HelpFormatter,
    )


def build_parser() -> argparse.ArgumentParser:
    cache_translations()  # gettext lookups were most of `gdn --help` (cli/_argparse.py)
    common = _common(top=False)
    parser = Parser(
        prog="gdn",
        description="Goondan: run declarative swarms of LLM agents.",
        parents=[_common(top=True)],
        formatter_class=HelpFormatter,
        epilog="exit codes: 0 ok, 1 internal error, 2 usage, 3 config, 4 validation, 130 interrupted,\n"
        "141 stdout closed by its reader (gdn logs | head)\n"
        "Run 'gdn help <command>' for a command's options. Docs: https://goondan.ai",
    )
    parser.add_argument("-V", "--version", action=VersionAction, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="<command>")

    i = _sub(
        sub,
        "init",
        common,
        "create a new bundle from a template",
        "Create a bundle that validates and runs offline at once (scripted model).\n"
        "Templates: default (one assistant), multi-agent (coordinator + researcher), minimal (echo),\n"
        "package (a Goondan package: a Python distribution to build and publish, README.md#packages).",
    )
    i.add_argument("path", nargs="?", default=".", help="directory to create it in (default: .)")
    i.add_argument(
        "-t",
        "--template",
        choices=("default", "multi-agent", "minimal", "package"),
        default="default",
        help="what to start from",
    )
    i.add_argument("-n", "--name", help="package name (default: the directory name)")
    i.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="write into a directory that already holds a bundle, overwriting the template's files there "
        "(without it: E_INIT_EXISTS, exit 2)",
    )
    i.add_argument("--git", action=argparse.BooleanOptionalAction, default=False, help="run git init (default: no)")
    i.set_defaults(func=cmd_init)

    v = _sub(
        sub,
        "validate",
        common,
        "check a bundle and report every problem",
        "Validate a bundle (goondan.yaml and its resource files). Exit 0 when valid, 4 when not.",
    )
    v.add_argument("path", nargs="?", default=".", help="bundle directory or goondan.yaml (default: .)")
    v.add_argument("--format", choices=("text", "json", "github"), default="text", help="output format")
    v.add_argument("--strict", action="store_true", help="treat warnings as errors")
    v.add_argument(
        "--fix",
        action="store_true",
        help="apply mechanical fixes (missing apiVersion, goondan.yml, renamed fields): shows the diff, then asks",
    )
    v.add_argument("-y", "--yes", action="store_true", help="with --fix: apply without asking")
    v.add_argument("--env-file", metavar="FILE", help="extra environment file (after .env and .env.local)")
    v.set_defaults(func=cmd_validate)

    r = _sub(
        sub,
        "run",
        common,
        "run a swarm: one request, a chat session, or its connectors",
        "Run a swarm in the foreground.\n"
        "  --input/--input-file  send one request, print the reply, exit\n"
        "  (swarm has Connections) run its connectors until Ctrl+C (exit 130)\n"
        "  (otherwise)           chat: one request per line; /help lists the commands;\n"
        "                        /quit or Ctrl+D ends, Ctrl+C exits 130\n"
        "Environment: system < .env < .env.local < --env-file.",
    )
    r.add_argument("path", nargs="?", default=".", help="bundle directory or goondan.yaml (default: .)")
    r.add_argument("--swarm", "-s", metavar="NAME", help="swarm to run (default: 'default' or the only one)")
    r.add_argument("--input", metavar="TEXT", help="send TEXT as one request and print the reply")
    r.add_argument("--input-file", metavar="FILE", help="send the contents of FILE as one request")
    r.add_argument(
        "--attach",
        action="append",
        metavar="FILE[:TYPE]",
        help="send FILE with the request, as an image or file part (repeatable; the media type is "
        "guessed from the name unless :TYPE is given; at most 20 MiB each, $GOONDAN_MAX_ATTACHMENT_BYTES)",
    )
    r.add_argument("--agent", metavar="NAME", help="agent to address (default: the swarm's entryAgent)")
    r.add_argument("--instance-key", metavar="KEY", help="conversation key (default: the swarm's instanceKey)")
    r.add_argument("-i", "--interactive", action="store_true", help="chat even when the swarm has Connections")
    r.add_argument("-w", "--watch", action="store_true", help="reload agents when bundle files change")
    r.add_argument("--env-file", metavar="FILE", help="extra environment file (after .env and .env.local)")
    r.add_argument("--no-persist", action="store_true", help="keep conversations in memory only (= --store memory:)")
    r.add_argument(
        "--store",
        metavar="URL",
        help="where conversations are kept: a directory (filesystem store), file:///DIR, memory: "
        "(default: $GOONDAN_STORE, else the state root)",
    )
    r.add_argument(
        "--executor",
        metavar="NAME",
        help="where agent instances run: process (one OS process each), inline (this process) or ray "
        "(one Ray actor each; docs/cluster.md) (default: $GOONDAN_EXECUTOR, else process)",
    )
    r.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="Ray cluster for --executor ray: auto (the one `ray start --head` started here) or "
        "HOST:PORT (default: $GOONDAN_RAY_ADDRESS, $RAY_ADDRESS, else a local Ray for this run)",
    )
    r.set_defaults(func=cmd_run)

    rs = _sub(
        sub,
        "restart",
        common,
        "restart the agents of a running `gdn run`",
        "Ask a running `gdn run` (same --state-root) of the bundle in PATH to restart its agents: all\n"
        "of them and its connectors, or one with --agent. --fresh also clears their conversation state.",
    )
    rs.add_argument(
        "path",
        nargs="?",
        metavar="PATH",
        help="bundle directory whose run to restart (default: the current directory when it holds a "
        "goondan.yaml, else the one run)",
    )
    rs.add_argument("-a", "--agent", metavar="NAME", help="restart only this agent")
    rs.add_argument("--fresh", action="store_true", help="clear conversation state of the restarted agents")
    rs.add_argument("--instance-key", metavar="KEY", help="which run, when several are active")
    rs.set_defaults(func=cmd_restart)

    inst = _sub(
        sub,
        "instance",
        common,
        "list, delete or restart agent instances",
        "Agent instances are conversations on disk under <state-root>/workspaces.",
    )
    isub = inst.add_subparsers(dest="instance_command", metavar="<action>", required=True)
    il = _sub(
        isub,
        "list",
        common,
        "list instances (newest first)",
        "List agent instances of the bundle in PATH (default: the current directory when it holds a\n"
        "goondan.yaml, else every bundle's), with the bundle each workspace belongs to.",
    )
    il.add_argument("path", nargs="?", metavar="PATH", help="bundle directory (default: current directory)")
    il.add_argument("-A", "--all-workspaces", action="store_true", help="every bundle's instances")
    il.add_argument("-a", "--agent", metavar="NAME", help="only this agent")
    il.add_argument("-w", "--workspace", metavar="ID", help="only this workspace")
    il.add_argument("-n", "--limit", type=int, default=20, help="at most N rows (default 20)")
    il.add_argument("--all", action="store_true", help="no row limit")
    il.add_argument("--store", metavar="URL", help="store URL or directory (default: GOONDAN_STORE, state root)")
    il.set_defaults(func=cmd_instance_list)
    idel = _sub(
        isub,
        "delete",
        common,
        "delete an instance's conversation and state",
        "Delete every agent instance with KEY (or only --agent's) of the bundle in PATH (default: the\n"
        "current directory when it holds a goondan.yaml, else every bundle's). Asks before deleting.",
    )
    idel.add_argument("key", help="instance key")
    idel.add_argument("path", nargs="?", metavar="PATH", help="bundle directory (default: current directory)")
    idel.add_argument("-A", "--all-workspaces", action="store_true", help="match instances of every bundle")
    idel.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    idel.add_argument("-a", "--agent", metavar="NAME", help="only this agent's instance")
    idel.add_argument("-w", "--workspace", metavar="ID", help="only in this workspace")
    idel.add_argument("-f", "--force", action="store_true", help="delete even while a gdn run uses the workspace")
    idel.add_argument("--store", metavar="URL", help="store URL or directory (default: GOONDAN_STORE, state root)")
    idel.set_defaults(func=cmd_instance_delete)
    ire = _sub(
        isub,
        "restart",
        common,
        "restart the running swarm instance KEY",
        "Restart a running `gdn run` identified by its swarm instance key.",
    )
    ire.add_argument("key", help="swarm instance key (see `gdn instance list`)")
    ire.add_argument("path", nargs="?", metavar="PATH", help="bundle directory (default: current directory)")
    ire.add_argument("-A", "--all-workspaces", action="store_true", help="consider runs of every bundle")
    ire.add_argument("--fresh", action="store_true", help="clear conversation state")
    ire.set_defaults(func=cmd_instance_restart)

    _approvals_parser(sub, common)
    add_studio_parser(sub, common)
    add_eval_parser(sub, common)

    lg = _sub(
        sub,
        "logs",
        common,
        "show runtime events (turns, steps, tool calls)",
        "Show runtime events from <state-root>/workspaces/*/instances/*/messages/runtime-events.jsonl.\n"
        "Filters combine with AND. --json prints one JSON record per line.",
    )
    lg.add_argument(
        "path",
        nargs="?",
        metavar="PATH",
        help="only the bundle in PATH (default: the current directory's when it holds a goondan.yaml, else every "
        "bundle's)",
    )
    lg.add_argument("-A", "--all-workspaces", action="store_true", help="every bundle's events")
    lg.add_argument("-i", "--instance", metavar="KEY", help="only this instance key")
    lg.add_argument("-a", "--agent", metavar="NAME", help="only this agent")
    lg.add_argument("--trace", metavar="ID", help="only this trace (its id or a unique prefix of 8+ characters)")
    lg.add_argument("-w", "--workspace", metavar="ID", help="only this workspace")
    lg.add_argument("-l", "--lines", type=int, default=200, help="last N records (default 200, 0 = all)")
    lg.add_argument("-f", "--follow", action="store_true", help="keep printing new records")
    lg.add_argument("--store", metavar="URL", help="store URL or directory (default: GOONDAN_STORE, state root)")
    lg.set_defaults(func=cmd_logs)

    d = _sub(
        sub,
        "doctor",
        common,
        "check Python, extras, API keys and the bundle",
        "Check that this machine can run the bundle in PATH. Exit 1 when a required check fails.",
    )
    d.add_argument("path", nargs="?", default=".", help="bundle directory (default: .)")
    d.set_defaults(func=cmd_doctor)

    sc = _sub(
        sub,
        "schema",
        common,
        "print the JSON Schema of goondan.yaml resources",
        "Print a JSON Schema (draft 2020-12) of one goondan.yaml document, for editors.\n"
        "e.g. gdn schema -o goondan.schema.json, then in goondan.yaml:\n"
        "  # yaml-language-server: $schema=./goondan.schema.json",
    )
    sc.add_argument("--kind", choices=KINDS, help="only the spec schema of this kind")
    sc.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    sc.set_defaults(func=cmd_schema)

    _package_parser(sub, common)
    h = _sub(sub, "help", common, "show help for a command", "Show the help of a command: gdn help run.")
    h.add_argument("words", nargs="*", metavar="COMMAND", help="command (and subcommand) to explain")
    h.set_defaults(func=cmd_help)
    comp = _sub(
        sub,
        "completion",
        common,
        "print a shell completion script",
        "Print a completion script for bash, zsh or fish, generated from gdn's own parser.",
    )
    comp.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell to complete in")
    comp.set_defaults(func=cmd_completion)
    return finish(parser)


def _approvals_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    ap = _sub(
        sub,
        "approvals",
        common,
        "list, approve or deny tool calls waiting for a person",
        "Tool calls that need approval pause their turn until someone decides. A paused turn lives in\n"
        "the state root, so this works with no runtime running; when a gdn run of the bundle is\n"
        "running, it is asked instead. approve/deny resume the turn and print its reply.",
    )
    asub = ap.add_subparsers(dest="approvals_command", metavar="<action>", required=True)

    def target(p: Any) -> None:
        p.add_argument("path", nargs="?", default=".", help="bundle directory or goondan.yaml (default: .)")
        p.add_argument("--swarm", "-s", metavar="NAME", help="swarm (default: 'default' or the only one)")
        p.add_argument("--env-file", metavar="FILE", help="extra environment file (after .env and .env.local)")
        p.add_argument("--store", metavar="URL", help="where conversations are kept (default: the state root)")

    al = _sub(asub, "list", common, "list pending approvals", "List the tool calls waiting for a decision.")
    target(al)
    al.add_argument("-a", "--agent", metavar="NAME", help="only this agent")
    al.add_argument("-i", "--instance-key", metavar="KEY", help="only this instance key")
    al.set_defaults(func=cmd_approvals_list)
    aa = _sub(asub, "approve", common, "approve a call and resume its turn", "Approve pending call ID.")
    aa.add_argument("id", help="approval id (see `gdn approvals list`)")
    target(aa)
    aa.add_argument("--args", metavar="JSON", help="run the call with these arguments instead (a JSON object)")
    aa.add_argument("--note", metavar="TEXT", help="a note kept with the decision")
    aa.set_defaults(func=cmd_approvals_approve)
    ad = _sub(asub, "deny", common, "deny a call and resume its turn", "Deny pending call ID.")
    ad.add_argument("id", help="approval id (see `gdn approvals list`)")
    target(ad)
    ad.add_argument("--note", metavar="TEXT", help="why: the model reads it with the E_TOOL_DENIED result")
    ad.set_defaults(func=cmd_approvals_deny)


def _package_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    pk = _sub(
        sub,
        "package",
        common,
        "add, install, lock and build Goondan packages",
        "Goondan packages are Python distributions (entry point group goondan.packages). They are\n"
        "installed into the Python environment gdn runs in, with uv when it is available, else pip.",
    )
    psub = pk.add_subparsers(dest="package_command", metavar="<action>", required=True)

    def where(p: Any, *, index: bool = True) -> None:
        p.add_argument("--path", default=".", metavar="DIR", help="bundle directory (default: .)")
        if index:
            p.add_argument("--find-links", action="append", metavar="DIR|URL", help="also look for wheels here")
            p.add_argument("--no-index", action="store_true", help="do not use the package index")

    pa = _sub(
        psub,
        "add",
        common,
        "install a package and record it in goondan.yaml and goondan.lock",
        "Install NAME (a pip requirement such as 'acme-tools>=1.2') into this Python environment,\n"
        "add it to Package.spec.dependencies of goondan.yaml and lock exact versions and hashes.",
    )
    pa.add_argument("requirement", metavar="NAME[SPEC]", help="distribution and optional PEP 440 range")
    where(pa)
    pa.set_defaults(func=cmd_package_add)
    pi = _sub(
        psub,
        "install",
        common,
        "install exactly what goondan.lock pins (hashes checked)",
        "Install the versions goondan.lock pins, refusing any file whose hash differs.",
    )
    where(pi)
    pi.set_defaults(func=cmd_package_install)
    pl = _sub(
        psub,
        "lock",
        common,
        "write goondan.lock from goondan.yaml's dependencies",
        "Resolve Package.spec.dependencies and write goondan.lock (exact versions and sha256 hashes).",
    )
    where(pl)
    pl.set_defaults(func=cmd_package_lock)
    pb = _sub(
        psub,
        "build",
        common,
        "build the wheel and sdist of a package",
        "Build the package in --path (a directory with pyproject.toml) into a wheel and an sdist.\n"
        "Uploading is twine's job: twine upload dist/*",
    )
    where(pb, index=False)
    pb.add_argument("-o", "--outdir", default="dist", metavar="DIR", help="where the files go (default: dist)")
    pb.add_argument(
        "--no-isolation", action="store_true", help="build with this environment's build backend (offline builds)"
    )
    pb.set_defaults(func=cmd_package_build)
