"""``gdn doctor [PATH]``: can this machine run *this* bundle? Python, the bundle, the extras it needs,
the API keys its models read, and that what the environment points at answers: the store
``GOONDAN_STORE`` names, the Ray cluster of ``GOONDAN_EXECUTOR=ray``, the OTLP receiver (a warning).

Checks follow from the bundle, not from a fixed list: an extra is checked when something the bundle
uses needs it (a Model's provider SDK, the MCP bridge extension, the Discord connector's signature
library, Swarm telemetry, the Ray executor or the PostgreSQL store when ``GOONDAN_EXECUTOR`` /
``GOONDAN_STORE`` select them) and an API key only when a Model an agent uses reads it. A missing
one fails the check, with the install command (``pip install 'goondan-runtime[extra]'``) or the
variable to set. Keys are looked up in the environment the run would get (``.env`` files included)
and never printed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._dist import install_command
from ..models._providers import DEFAULT_KEY_VARIABLES
from ._env import load_env
from ._output import EXIT_INTERNAL, EXIT_OK, Style

# extra -> (import to look for, what it is for)
EXTRAS: dict[str, tuple[str, str]] = {
    "anthropic": ("anthropic", "Anthropic models"),
    "openai": ("openai", "OpenAI and OpenAI-compatible models"),
    "google": ("google.genai", "Google Gemini models"),
    "local": ("llama_cpp", "the local model (llama.cpp)"),
    "mcp": ("mcp", "the MCP bridge extension"),
    "discord": ("cryptography", "Discord signature checks (Ed25519)"),
    "otel": ("opentelemetry.sdk", "Swarm telemetry (OpenTelemetry export)"),
    "ray": ("ray", "the Ray executor"),
    "postgres": ("psycopg", "the PostgreSQL store"),
}
# provider -> variables its SDK reads when Model.spec.apiKey is not given (any one is enough)
DEFAULT_KEYS = DEFAULT_KEY_VARIABLES
_BASE = "@goondan/base"


def _find(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@dataclass
class Needs:
    """What a bundle needs: extras with the reasons, and API key variables with the models reading them."""

    extras: dict[str, list[str]] = field(default_factory=dict)
    keys: dict[tuple[str, ...], list[str]] = field(default_factory=dict)

    def extra(self, name: str, why: str) -> None:
        reasons = self.extras.setdefault(name, [])
        if why not in reasons:
            reasons.append(why)

    def key(self, variables: tuple[str, ...], why: str) -> None:
        reasons = self.keys.setdefault(variables, [])
        if why not in reasons:
            reasons.append(why)


def _reexports_mcp(resource: Any) -> bool:
    """An Extension of the bundle whose entry re-exports the built-in MCP bridge: what the guides
    recommend (one Extension per server, since its name is the tool prefix), and it needs the
    ``mcp`` extra as much as ``Extension/mcp`` does. Read as text, never imported."""
    try:
        return "goondan.base.extensions.mcp" in Path(resource.entry_path()).read_text(encoding="utf-8")
    except Exception:  # no entry, or unreadable: gdn validate reports it
        return False


def _summary_model_needs(needs: Needs, agent: str, binding: Any) -> None:
    """A compaction's ``summaryModel`` (the fields of a Model spec, inline in the extension's config)
    needs its provider's extra and key like a Model does: the extension refuses to start without the
    key (E_EXT_CONFIG at the first ``gdn run``), and doctor said the bundle needed no key at all."""
    config = getattr(binding, "config", None)
    spec = config.get("summaryModel") if isinstance(config, dict) else None
    if not isinstance(spec, dict) or not isinstance(spec.get("provider"), str):
        return
    provider = spec["provider"]
    why = f"{agent} Extension/{binding.name} summaryModel (provider {provider})"
    if provider in EXTRAS:
        needs.extra(provider, why)
    key_env = spec.get("apiKeyEnv")
    if isinstance(key_env, str) and key_env:
        needs.key((key_env,), f"{agent} Extension/{binding.name} summaryModel.apiKeyEnv")
    elif provider in DEFAULT_KEYS and not spec.get("endpoint"):
        needs.key(DEFAULT_KEYS[provider], why)


def bundle_needs(bundle: Any, env: dict[str, str]) -> Needs:
    """Extras and keys of everything the bundle's agents, swarms and connections use."""
    from ..bundle._values import lookup_value_source

    needs = Needs()
    for agent in bundle.of_kind("Agent", package=None):
        try:
            plan = bundle.agent_plan(agent.name)
        except Exception:
            continue
        model = plan.model
        provider = str(getattr(model.spec, "provider", ""))
        if provider in EXTRAS:
            needs.extra(provider, f"{model.key} (provider {provider})")
        api_key = getattr(model.spec, "api_key", None)
        if api_key is not None:
            raw = api_key.model_dump(by_alias=True, exclude_none=True) if hasattr(api_key, "model_dump") else api_key
            _, variable = lookup_value_source(raw, env)
            if variable:
                needs.key((variable,), f"{model.key} spec.apiKey")
        elif provider in DEFAULT_KEYS and not getattr(model.spec, "endpoint", None):
            needs.key(DEFAULT_KEYS[provider], f"{model.key} (provider {provider})")
        for binding in plan.extensions:
            if binding.resource.package == _BASE and binding.name == "mcp":
                needs.extra("mcp", f"{agent.key} uses Extension/mcp")
            elif binding.resource.package is None and _reexports_mcp(binding.resource):
                needs.extra("mcp", f"{agent.key} uses Extension/{binding.name} (the MCP bridge)")
            _summary_model_needs(needs, agent.key, binding)
    for swarm in bundle.of_kind("Swarm", package=None):
        if getattr(swarm.spec, "telemetry", None) is not None:
            needs.extra("otel", f"{swarm.key} spec.telemetry")
    for connection in bundle.of_kind("Connection", package=None):
        try:
            connector = bundle.resolve_ref(connection.spec.connector_ref, connection, "Connector")
        except Exception:
            continue
        if connector.package == _BASE and connector.name == "discord":
            needs.extra("discord", f"{connection.key} uses the discord connector")
    executor = env.get("GOONDAN_EXECUTOR", "")
    if executor == "ray":
        needs.extra("ray", "GOONDAN_EXECUTOR=ray")
    if env.get("GOONDAN_STORE", "").startswith(("postgresql:", "postgres:")):
        needs.extra("postgres", "GOONDAN_STORE is a PostgreSQL URL")
    return needs


def _store_check(args: argparse.Namespace, env: dict[str, str]) -> tuple[str, str, str, str | None]:
    """``GOONDAN_STORE`` opened and listed once, as every run will: a wrong password, a database
    that does not exist or a server out of reach is found here, before the service is started,
    instead of in its first turn. The URL's password is never shown (the store's errors redact it)."""
    from ..errors import GoondanError
    from ._state import store_backend, store_label

    try:
        backend = store_backend(args, env)
        try:
            where = store_label(backend)
            root = getattr(backend, "root", None)  # the filesystem store: its directory
            if isinstance(root, Path) and root.exists() and not root.is_dir():
                return ("store", "fail", f"GOONDAN_STORE {where} is not a directory", "Point it at a directory.")
            count = len(backend.list_workspaces())
        finally:
            close = getattr(backend, "close", None)  # the filesystem store holds nothing open
            if close is not None:
                close()
    except GoondanError as exc:
        return ("store", "fail", f"[{exc.code}] {exc.message}", exc.suggestion)
    return ("store", "ok", f"GOONDAN_STORE {where} answers ({count} workspace(s))", None)


def _state_root_check(args: argparse.Namespace, env: dict[str, str]) -> tuple[str, str, str, str | None]:
    """The state root (``--state-root``, ``GOONDAN_STATE_ROOT``, ``~/.goondan``) must be a directory
    this user can write, or be creatable: every ``gdn run`` writes there (its run record; the
    conversations with the filesystem store). A service whose ``User=`` cannot write it (a root-owned
    /var/lib/goondan), or a read-only volume, failed only at its first request. Nothing is created."""
    from ._state import state_root

    root = state_root(args, env)
    fix = "Give a directory this user can write with --state-root or GOONDAN_STATE_ROOT"
    existing = root
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        return ("state-root", "fail", f"{root}: {existing} is not a directory", f"{fix}.")
    if not os.access(existing, os.W_OK | os.X_OK):
        why = "is read-only" if _read_only_fs(existing) else "is not writable by this user"
        return (
            "state-root",
            "fail",
            f"{root}: {existing} {why}",
            f"{fix} (or make it writable: chown/chmod for the service's user, a volume mounted read-write).",
        )
    if existing != root:
        return ("state-root", "ok", f"{root} (does not exist yet; created on the first run)", None)
    return ("state-root", "ok", f"{root} is writable", None)


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _otlp_check(bundle: Any, env: dict[str, str]) -> tuple[str, str, str, str | None] | None:
    """Where spans would go (``OTEL_*`` over ``Swarm.spec.telemetry``), and whether a TCP
    connection to it opens within 3 s. A warning, not a failure: a receiver that is down never
    breaks a turn, but its spans are dropped, which the operator should hear of before the service
    starts, not from one log line after it. None when export is off."""
    import socket
    import urllib.parse

    from ..errors import GoondanError
    from ..telemetry import telemetry_config

    swarms = bundle.of_kind("Swarm", package=None)
    setting = getattr(swarms[0].spec, "telemetry", None) if len(swarms) == 1 else None
    try:
        config = telemetry_config(setting, env)
    except GoondanError as exc:
        return ("otlp", "fail", f"[{exc.code}] {exc.message}", exc.suggestion)
    if config is None:
        return None
    url = urllib.parse.urlsplit(config.endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=3).close()
    except OSError as exc:
        return (
            "otlp",
            "warn",
            f"spans go to {config.endpoint}, which does not answer ({exc}); they would be dropped",
            "Start the receiver (its OTLP/HTTP port, usually 4318) or fix OTEL_EXPORTER_OTLP_ENDPOINT / "
            "Swarm spec.telemetry.otlp.endpoint.",
        )
    return ("otlp", "ok", f"spans go to {config.endpoint} (it accepts connections)", None)


def _ray_check(env: dict[str, str]) -> tuple[str, str, str, str | None]:
    """``GOONDAN_EXECUTOR=ray``: the actor options parse and the cluster address answers (a
    ``HOST:PORT``; ``auto`` and ``ray://`` are left to Ray, none means a local Ray per run), the two
    things every run checks first. No Ray is started or joined here."""
    from ..errors import GoondanError
    from ..executors.ray._executor import ENV_ADDRESS, _check_reachable, _env_actor_options

    address = env.get(ENV_ADDRESS) or env.get("RAY_ADDRESS") or ""
    try:
        _env_actor_options(env)
        if address:
            _check_reachable(address)
    except GoondanError as exc:
        return ("ray", "fail", f"[{exc.code}] {exc.message}", exc.suggestion)
    where = f"the cluster at {address}" if address else "a local Ray started for each run"
    return ("ray", "ok", f"GOONDAN_EXECUTOR=ray: {where}", None)


def cmd_doctor(args: argparse.Namespace) -> int:
    checks: list[dict[str, Any]] = []

    def add(name: str, status: str, detail: str, suggestion: str | None = None) -> None:
        item: dict[str, Any] = {"check": name, "status": status, "detail": detail}
        if suggestion:
            item["suggestion"] = suggestion
        checks.append(item)

    version = ".".join(map(str, sys.version_info[:3]))
    add("python", "ok" if sys.version_info >= (3, 11) else "fail", f"Python {version} ({sys.executable})")
    directory = Path(args.path)
    env = load_env(directory, None) if directory.is_dir() else dict(os.environ)
    manifest = directory / "goondan.yaml" if directory.is_dir() else directory
    needs: Needs | None = None
    if manifest.is_file():
        from ..bundle import validate_bundle

        report = validate_bundle(args.path, env=env, state_root=Path(args.state_root) if args.state_root else None)
        if report.errors:
            first = report.errors[0]
            add(
                "bundle",
                "fail",
                f"{len(report.errors)} error(s), first: [{first.code}] {first.message} - run `gdn validate`",
            )
        else:
            add("bundle", "ok", f"{manifest} is valid ({len(report.warnings)} warning(s))")
        if report.bundle is not None:
            needs = bundle_needs(report.bundle, env)
            otlp = _otlp_check(report.bundle, env)
            if otlp is not None:
                add(*otlp)
    elif not directory.exists():  # a mistyped path must not pass as "nothing to check"
        add("bundle", "fail", f"{directory} does not exist", "Give the bundle's directory (or its goondan.yaml).")
    else:
        add("bundle", "warn", f"no goondan.yaml at {directory} (create one with `gdn init`)")
    if needs is not None:
        for extra, reasons in needs.extras.items():
            module, purpose = EXTRAS[extra]
            present = _find(module)
            add(
                f"extra:{extra}",
                "ok" if present else "fail",
                ("installed" if present else "not installed") + f" - {purpose}, needed by {'; '.join(reasons)}",
                None if present else install_command(extra),
            )
        for variables, reasons in needs.keys.items():
            present = any(env.get(v) for v in variables)
            add(
                f"key:{variables[0]}",
                "ok" if present else "fail",
                ("set" if present else "not set") + f" - read by {'; '.join(reasons)}",
                None
                if present
                else f"export {variables[0]}=... or put it in the bundle's .env (never in goondan.yaml)",
            )
        if not needs.extras and not needs.keys:
            add("needs", "ok", "the bundle needs no optional extra and no API key")
        if env.get("GOONDAN_EXECUTOR", "").strip() == "ray" and _find(EXTRAS["ray"][0]):
            add(*_ray_check(env))
        add(*_state_root_check(args, env))
        # a PostgreSQL URL without psycopg already failed its extra check above
        if env.get("GOONDAN_STORE", "").strip() and ("postgres" not in needs.extras or _find(EXTRAS["postgres"][0])):
            add(*_store_check(args, env))
    failed = any(c["status"] == "fail" for c in checks)
    if args.json:
        sys.stdout.write(json.dumps({"ok": not failed, "checks": checks}, indent=2) + "\n")
    else:
        style = Style(sys.stdout, not args.no_color)
        marks = {"ok": style("ok  ", "32"), "warn": style("warn", "33"), "fail": style("FAIL", "31")}
        sys.stdout.write("Goondan Doctor\n")
        for c in checks:
            sys.stdout.write(f"  [{marks[c['status']]}] {c['check']}: {c['detail']}\n")
            if c.get("suggestion"):
                sys.stdout.write(f"         fix: {c['suggestion']}\n")
        sys.stdout.write("All required checks passed.\n" if not failed else "Some checks failed.\n")
    return EXIT_INTERNAL if failed else EXIT_OK
