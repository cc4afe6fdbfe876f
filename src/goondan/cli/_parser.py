"""The argparse tree of ``gdn``. Only argparse is imported here, so ``gdn --help`` starts instantly."""

from __future__ import annotations

import argparse
from typing import Any

from ._commands import (
    cmd_approvals_approve,
    cmd_approvals_deny,
    cmd_approvals_list,
    cmd_doctor,
    cmd_init,
    cmd_instance_delete,
    cmd_instance_list,
    cmd_instance_restart,
    cmd_logs,
    cmd_restart,
    cmd_run,
    cmd_schema,
    cmd_validate,
)

KINDS = ("Package", "Model", "Agent", "Swarm", "Tool", "Extension", "Connector", "Connection")


def _common(*, top: bool) -> argparse.ArgumentParser:
    """Global options, accepted before and after the command name.

    The copy given to subcommands uses SUPPRESS defaults so that ``gdn --state-root X run`` keeps the
    value given before the command instead of it being reset by the subcommand's default.
    """

    def default(value: object) -> object:
        return value if top else argparse.SUPPRESS

    common = argparse.ArgumentParser(add_help=False)
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
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def build_parser() -> argparse.ArgumentParser:
    common = _common(top=False)
    parser = argparse.ArgumentParser(
        prog="gdn",
        description="Goondan: run declarative swarms of LLM agents.",
        parents=[_common(top=True)],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes: 0 ok, 1 internal error, 2 usage, 3 config, 4 validation, 130 interrupted\n"
        "Run 'gdn <command> --help' for a command's options. Docs: https://goondan.ai",
    )
    sub = parser.add_subparsers(dest="command", metavar="<command>")

    i = _sub(
        sub,
        "init",
        common,
        "create a new bundle from a template",
        "Create a bundle that validates and runs offline at once (scripted model).\n"
        "Templates: default (one assistant), multi-agent (coordinator + researcher), minimal (echo).",
    )
    i.add_argument("path", nargs="?", default=".", help="directory to create it in (default: .)")
    i.add_argument("-t", "--template", choices=("default", "multi-agent", "minimal"), default="default")
    i.add_argument("-n", "--name", help="package name (default: the directory name)")
    i.add_argument("-f", "--force", action="store_true", help="overwrite an existing goondan.yaml")
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
        "  (otherwise)           chat: one request per line; /quit or Ctrl+D ends, Ctrl+C exits 130\n"
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
        help="where agent instances run: process (one OS process each) or inline (this process) "
        "(default: $GOONDAN_EXECUTOR, else process)",
    )
    r.set_defaults(func=cmd_run)

    rs = _sub(
        sub,
        "restart",
        common,
        "restart the agents of a running `gdn run`",
        "Ask a running `gdn run` (same --state-root) to restart its agents: all of them and its\n"
        "connectors, or one with --agent. --fresh also clears their conversation state.",
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

    lg = _sub(
        sub,
        "logs",
        common,
        "show runtime events (turns, steps, tool calls)",
        "Show runtime events from <state-root>/workspaces/*/instances/*/messages/runtime-events.jsonl.\n"
        "Filters combine with AND. --json prints one JSON record per line.",
    )
    lg.add_argument("-i", "--instance", metavar="KEY", help="only this instance key")
    lg.add_argument("-a", "--agent", metavar="NAME", help="only this agent")
    lg.add_argument("--trace", metavar="ID", help="only this trace (its id or a unique prefix of 8+ characters)")
    lg.add_argument("-w", "--workspace", metavar="ID", help="only this workspace")
    lg.add_argument("-l", "--lines", type=int, default=200, help="last N records (default 200, 0 = all)")
    lg.add_argument("-f", "--follow", action="store_true", help="keep printing new records")
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
    return parser


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
