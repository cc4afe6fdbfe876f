"""Reading a bundle directory into resources and checking everything the spec requires.

Checks run in stages (files -> envelopes -> specs -> identities -> refs/paths/env) and every stage
keeps going after a problem, so ``validate_bundle`` can report all of them at once. A resource whose
spec is invalid is still remembered by identity: references to it are not reported a second time as
missing, which keeps one typo from producing a cascade of unrelated errors.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from goondan.errors import ConfigIssue, GoondanError
from goondan.models._providers import KNOWN_PROVIDERS

from ._bundle import BASE_PACKAGE, Bundle, ScopeKey, ref_scope
from ._code import REQUIRED_ATTRIBUTE, EntryModule, HandlerFunction, RegisterBinding, inspect_entry
from ._extension_checks import builtin_config_problems
from ._issues import did_you_mean, join_hints, join_path, parent_path, pydantic_problems
from ._packages import InstalledPackage, base_package_root, default_distribution, find_package, specifier_problem
from ._paths import PathProblem, TextProblem, close_path, read_text_file, resolve_inside
from ._plan import required_tool_message, tool_names
from ._refs import ObjectRef
from ._resource import Position, Resource
from ._schemas import (
    KINDS,
    SPEC_MODELS,
    AgentSpec,
    ConnectionSpec,
    ConnectorSpec,
    ExtensionSpec,
    ModelSpec,
    PackageSpec,
    PythonOptions,
    ScriptedOptions,
    SwarmSpec,
    ToolSpec,
    schema_slips,
)
from ._unread import MAX_UNREAD, not_read, unread_definition
from ._values import (
    SecretValue,
    env_missing_message,
    env_missing_suggestion,
    is_config_value_source,
    lookup_value_source,
    value_source_problem,
)
from ._yaml import MAX_FILE_BYTES, YamlDocument, YamlProblem, parse_documents

API_VERSION = "goondan.ai/v1"
LEGACY_API_VERSION = "agents.example.io/v1alpha1"
MANIFEST = "goondan.yaml"
_STEMS = frozenset(
    {"goondan", "resources"}
    | {
        f"{base}{s}"
        for base in ("model", "agent", "tool", "extension", "connector", "connection", "swarm")
        for s in ("", "s")
    }
)
_SKIP_DIRS = frozenset({"dist", "node_modules", ".git", ".venv", "__pycache__"})
_YAML_SUGGESTIONS = {
    "E_CONFIG_FILE_TOO_LARGE": "split the file into smaller ones",
    "E_CONFIG_TOO_MANY_DOCUMENTS": "split the file into smaller ones",
    "E_CONFIG_NESTING_TOO_DEEP": "flatten the data; resources never need more than a few levels",
    "E_CONFIG_PARSE_ERROR": "fix the YAML at that line: indentation, an unclosed bracket or quote, a tab, or a "
    "key written twice in one mapping",
}
_TOP_KEYS = ("apiVersion", "kind", "metadata", "spec")
_META_KEYS = ("name", "labels", "annotations")
_NAME = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
_PACKAGE_NAME = re.compile(r"^(?:@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*$")
_ARGS_NAMES = frozenset({"args", "arguments", "input", "inputs", "params", "payload", "data"})
_CTX_NAMES = frozenset({"ctx", "context", "tool_ctx", "tool_context"})
_NAME_HINT = "use lowercase letters, digits and '-', starting with a letter, at most 63 characters"


def _builtin_schema(path: Path, builtin: Path) -> dict[str, Any] | None:
    """``CONFIG_SCHEMA`` of a built-in extension or connector module, imported as part of
    ``goondan.base``. A module that cannot be imported here (an optional dependency missing, a broken
    install) leaves the check out: validation must not crash on it, and the module's own import in
    the run reports the problem with its code."""
    import importlib

    parts = path.relative_to(builtin).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    try:
        module = importlib.import_module(".".join(("goondan", "base", *parts)))
    except Exception:  # pragma: no cover - see the docstring
        return None
    schema = getattr(module, "CONFIG_SCHEMA", None)
    return schema if isinstance(schema, dict) else None


def _schema_problems(
    schema: dict[str, Any], config: Mapping[str, Any], owner: str, *, closed: bool
) -> list[tuple[str, str, str | None, str | None]]:
    """``(key, detail, did-you-mean, accepted keys)`` for each problem of ``config`` against ``schema``.

    ``closed``: a key the schema's ``properties`` do not list is a problem even when the schema does
    not say ``additionalProperties: false`` (a Connection's config: a key its connector never reads
    is a typo that would otherwise change nothing, silently).
    """
    from goondan._argcheck import check_args

    properties = schema.get("properties")
    known = list(properties) if isinstance(properties, dict) else []
    problems = [problem.replace("args", "config", 1) for problem in check_args(schema, dict(config))]
    if closed and known and "additionalProperties" not in schema:
        problems += [f"config.{key}: unexpected property" for key in config if key not in known]
    out: list[tuple[str, str, str | None, str | None]] = []
    for detail in problems:
        key = detail.split(":", 1)[0].removeprefix("config").lstrip(".").split(".")[0].split("[")[0]
        hint = did_you_mean(key, known) if key and key not in known else None
        if hint is None and key in known and isinstance(properties, dict):
            allowed = properties[key].get("enum") if isinstance(properties[key], dict) else None
            if isinstance(allowed, list) and key in config:
                hint = did_you_mean(str(config[key]), [str(a) for a in allowed])
        listing = f"{owner} accepts: {', '.join(known)}" if known and key not in known else None
        out.append((key, detail, hint, listing))
    return out


def _as_declared(value: str, prop: Mapping[str, Any], *, hidden: bool) -> Any:
    """A Connection's config value (always a string) as its schema declares it, where it reads as one.

    Connectors get strings and convert them (``int(ctx.setting("port", "8080"))``), so a schema that
    says ``integer`` or ``boolean`` accepts ``"8080"``/``"true"``; an enum matches case-insensitively,
    as the built-in connectors compare. ``hidden``: a variable's value, shown as ``'***'`` in messages.
    """
    allowed = prop.get("enum")
    if isinstance(allowed, list):
        folded = {str(a).lower(): a for a in allowed}
        if value.strip().lower() in folded:
            return folded[value.strip().lower()]
    declared = prop.get("type")
    text = value.strip()
    try:
        if declared == "integer" and re.fullmatch(r"[+-]?\d+", text):
            return int(text)
        if declared == "number" and text:
            return float(text) if not re.fullmatch(r"[+-]?\d+", text) else int(text)
    except (ValueError, OverflowError):
        pass
    if declared == "boolean" and text.lower() in ("true", "false"):
        return text.lower() == "true"
    return SecretValue(value) if hidden else value


def default_state_root(env: Mapping[str, str]) -> Path:
    configured = env.get("GOONDAN_STATE_ROOT")
    if configured:
        return Path(configured)
    return Path(os.path.expanduser("~")) / ".goondan"


@dataclass
class _Doc:
    """Where a document lives, for issues raised before it becomes a :class:`Resource`."""

    file: str
    index: int
    positions: dict[str, Position]
    line: int
    column: int

    def issue(self, code: str, message: str, field_path: str = "", suggestion: str | None = None) -> ConfigIssue:
        path: str | None = field_path
        pos: Position | None = None
        while path is not None:
            if path in self.positions:
                pos = self.positions[path]
                break
            path = parent_path(path)
        line, column = pos or (self.line, self.column)
        return ConfigIssue(
            code,
            message,
            path=f"{self.file}#{self.index}" + (f".{field_path}" if field_path else ""),
            file=self.file,
            line=line,
            column=column,
            suggestion=suggestion,
        )


def _enclosing_bundle(directory: Path) -> Path | None:
    """The nearest directory above ``directory`` holding a ``goondan.yaml`` (a bundle the user is
    inside of, e.g. in its ``tools/``), or None; only said in the error's suggestion."""
    for parent in list(directory.parents)[:8]:
        try:
            if (parent / MANIFEST).is_file():
                return parent
        except OSError:
            return None
    return None


class Loader:
    def __init__(
        self,
        env: Mapping[str, str],
        state_root: Path | None,
        *,
        check_code: bool = True,
        connection_values: bool = True,
    ) -> None:
        self.env = env
        self.check_code = check_code
        # False: a load that will not start connectors (gdn run --input, gdn approvals) does not
        # require the Connections' variables; plan_connections resolves them when connectors start
        self.connection_values = connection_values
        self.state_root = state_root
        self.errors: list[ConfigIssue] = []
        self.warnings: list[ConfigIssue] = []
        self.resources: list[Resource] = []
        self.index: dict[ScopeKey, Resource] = {}
        self.known: dict[ScopeKey, str] = {}  # every declared identity -> "file:line:column"
        self.scopes: set[str | None] = {None, BASE_PACKAGE}
        self.local_package: str | None = None
        self.root = Path()
        self.checked_builtins: set[int] = set()
        self.entry_modules: dict[Path, EntryModule] = {}
        self.config_schemas: dict[int, dict[str, Any] | None] = {}
        self.checked_models: set[int] = set()
        self.unavailable: set[str] = set()  # dependencies that could not be loaded (already reported)
        self.unreadable = 0  # local files that could not be read or parsed
        # YAML files of the local bundle that are not read (not named after a kind: researcher.yaml):
        # looked into only to explain a reference that is not found
        self.unread_yaml: list[Path] = []
        self.local_documents = 0  # non-empty documents in the local bundle's files

    # ------------------------------------------------------------------ entry point

    def load(self, path: str | os.PathLike[str]) -> Bundle | None:
        manifest = self._manifest(Path(path))
        if manifest is None:
            return None
        self.root = manifest.parent
        package_spec = self._load_scope(self.root, manifest, None)
        local_files_ok = not self.unreadable
        self._load_scope(base_package_root(), base_package_root() / MANIFEST, BASE_PACKAGE)
        self._load_dependencies(package_spec)
        for res in self.resources:
            self._check(res)
        local = [r for r in self.resources if r.package is None]
        if not self.local_documents and local_files_ok:
            self.errors.append(
                ConfigIssue(
                    "E_CONFIG_EMPTY_BUNDLE",
                    f"{MANIFEST} defines no resources",
                    path=MANIFEST,
                    file=MANIFEST,
                    suggestion="start from a template with `gdn init`, or add Model, Agent and Swarm documents",
                )
            )
        elif (
            local_files_ok
            and not any(r.kind == "Swarm" for r in local)
            # a Swarm that is there but invalid (entryAgnet) is reported where it is, not as missing
            and not any(scope is None and kind == "Swarm" for scope, kind, _ in self.known)
            # a Goondan package (goondan.yaml inside its import package, `gdn init -t package`) has no
            # runs of its own: the bundles that depend on it hold the Swarm
            and not (self.root / "__init__.py").is_file()
        ):
            # only when every file was read: a file that failed to parse may well hold the Swarm
            unread = unread_definition(self.unread_yaml, "Swarm", None)
            self.warnings.append(
                ConfigIssue(
                    "E_CONFIG_SWARM_MISSING",
                    "the bundle defines no Swarm, so there is nothing to run",
                    path=MANIFEST,
                    file=MANIFEST,
                    suggestion="add a Swarm resource with entryAgent and agents"
                    if unread is None
                    else "its Swarm is in " + not_read(self._display(unread, None), "Swarm"),
                    severity="warning",
                )
            )
        elif local_files_ok and not self.errors:
            self._warn_unused_agents(local)
        if self.errors:
            return None
        bundle = Bundle(self.root, self.local_package, self.resources, self.env)
        bundle.unread_yaml = self.unread_yaml
        return bundle

    def _warn_unused_agents(self, local: list[Resource]) -> None:
        """A warning for each local Agent that no Swarm lists: it can never run, which is most often a
        forgotten ``spec.agents`` entry (a request to it fails with ``AGENT_NOT_FOUND`` only at run
        time). Only when every file was read and nothing else is wrong: an unreadable file, or a Swarm
        whose ``agents`` did not parse, may be what lists it, and a wrong warning beside the real error
        sends the user to the wrong fix."""
        members: set[ScopeKey] = set()
        for swarm in self.resources:
            if isinstance(swarm.spec, SwarmSpec):
                members |= self._member_keys(swarm, swarm.spec)
        swarms = sorted(f"Swarm/{r.name}" for r in local if r.kind == "Swarm")
        for agent in local:
            if agent.kind != "Agent" or (None, "Agent", agent.name) in members:
                continue
            self.warnings.append(
                agent.issue(
                    "E_CONFIG_AGENT_UNUSED",
                    f"{agent.key} is not listed in any Swarm's spec.agents, so it never runs",
                    "metadata.name",
                    f"add {agent.key} to spec.agents of {' or '.join(swarms)}, or delete it if it is left over",
                    severity="warning",
                )
            )

    def _manifest(self, target: Path) -> Path | None:
        """The ``goondan.yaml`` that PATH names: PATH itself, or the one directly inside directory PATH.

        A bundle is exactly that file's directory; anything else given as PATH (a README, another YAML
        file, a directory without a manifest) is refused with a code instead of being read as YAML.
        """
        try:
            if target.is_dir():
                manifest = target.resolve() / MANIFEST
                if manifest.is_file():
                    return manifest
                hint = f"run inside a bundle directory, pass the path of its {MANIFEST}, or create one with `gdn init`"
                if (target / "goondan.yml").is_file():
                    hint = "rename goondan.yml to goondan.yaml"
                else:
                    nested = sorted(p.parent for p in target.glob(f"*/{MANIFEST}"))
                    enclosing = _enclosing_bundle(target.resolve())
                    if enclosing is not None:  # `gdn run` in the bundle's tools/ directory
                        relative = os.path.relpath(enclosing)  # from where the user is
                        hint = (
                            f"{target} is inside the bundle {enclosing}: pass {relative} as the bundle path, "
                            f"or run the command from {enclosing}"
                        )
                    elif nested:
                        hint = f"{target / MANIFEST} is missing; bundles below it: " + ", ".join(
                            str(p) for p in nested[:5]
                        )
                self._fail("E_CONFIG_NOT_A_BUNDLE", f"{target} is not a bundle: it has no {MANIFEST}", hint)
                return None
            if target.is_file():
                if target.name == MANIFEST:
                    return target.resolve()
                parent = target.resolve().parent
                hint = f"pass the bundle directory or its {MANIFEST}"
                if (parent / MANIFEST).is_file():
                    hint = f"pass the bundle directory {parent} (or {parent / MANIFEST}) instead"
                self._fail(
                    "E_CONFIG_NOT_A_BUNDLE",
                    f"{target} is not a bundle: a bundle is a directory with a {MANIFEST}, or that file",
                    hint,
                    file=str(target),
                )
                return None
        except (OSError, RuntimeError, ValueError) as exc:
            self._fail("E_CONFIG_FILE_NOT_FOUND", f"cannot open bundle {str(target)!r}: {exc}")
            return None
        near = close_path(target)
        # as the user wrote it: an absolute path gets one back (relpath gave ../../../../work/x)
        shown_near = (str(near) if Path(target).is_absolute() else os.path.relpath(near)) if near is not None else ""
        hint = f"did you mean {shown_near}? " if near is not None else ""
        if near is not None:
            create = ""
        elif "examples" in Path(target).parts:  # README's first command, run outside a checkout
            create = "; the examples/ bundles come with the source repository, not with the installed package"
        else:
            create = f", or create one with `gdn init {target}`"
        absolute = os.path.abspath(target)
        self._fail(
            "E_CONFIG_FILE_NOT_FOUND",
            f"{target} does not exist" + (f" (looked for {absolute})" if absolute != str(target) else ""),
            f"{hint}pass a bundle directory (one with a {MANIFEST}) or the path of its {MANIFEST}{create}",
            file=str(target),
        )
        return None

    def _fail(self, code: str, message: str, suggestion: str | None = None, file: str | None = None) -> None:
        self.errors.append(ConfigIssue(code, message, file=file, path=file, suggestion=suggestion))

    # ------------------------------------------------------------------ files

    def _display(self, file: Path, scope: str | None) -> str:
        if scope is None:
            try:
                return file.relative_to(self.root).as_posix()
            except ValueError:
                return str(file)
        return str(file)

    def _discover(self, root: Path, manifest: Path) -> list[Path]:
        """``goondan.yaml`` plus resource files below it, stopping at nested bundles.

        A directory below the root that has its own ``goondan.yaml`` is another bundle (an example, a
        vendored package): its files belong to it, not to this one, so its whole subtree is skipped.
        """
        files = [manifest]
        resolved_root = root.resolve()
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            dirnames[:] = sorted(
                d
                for d in dirnames
                if not d.startswith(".") and d not in _SKIP_DIRS and not (here / d / MANIFEST).is_file()
            )
            for filename in sorted(filenames):
                candidate = here / filename
                stem, dot, suffix = filename.rpartition(".")
                if not dot or suffix.lower() not in ("yaml", "yml"):
                    continue
                if stem.lower() not in _STEMS:
                    if root == self.root and len(self.unread_yaml) < MAX_UNREAD:
                        self.unread_yaml.append(candidate)
                    continue
                if candidate == manifest or filename == MANIFEST:
                    continue
                try:  # a symlinked file must not pull in YAML from outside the root
                    if not candidate.resolve().is_relative_to(resolved_root):
                        continue
                except (OSError, RuntimeError):
                    continue
                files.append(candidate)
        return files

    def _read(self, file: Path, display: str) -> list[YamlDocument] | None:
        try:
            size = file.stat().st_size
            if size > MAX_FILE_BYTES:
                raise YamlProblem(
                    "E_CONFIG_FILE_TOO_LARGE", f"file is {size} bytes; the limit is {MAX_FILE_BYTES} bytes"
                )
            return parse_documents(file.read_bytes(), display)
        except YamlProblem as exc:
            self.errors.append(
                ConfigIssue(
                    exc.code,
                    f"{display}: {exc.message}",
                    path=display,
                    file=display,
                    line=exc.line,
                    column=exc.column,
                    suggestion=exc.suggestion or _YAML_SUGGESTIONS.get(exc.code),
                )
            )
        except OSError as exc:
            self.errors.append(
                ConfigIssue(
                    "E_CONFIG_PARSE_ERROR",
                    f"cannot read {display}: {exc.strerror}",
                    path=display,
                    file=display,
                )
            )
        return None

    def _load_scope(self, root: Path, manifest: Path, scope: str | None) -> PackageSpec | None:
        if scope is not None:
            self.scopes.add(scope)
        package_spec: PackageSpec | None = None
        for file in self._discover(root, manifest):
            display = self._display(file, scope)
            docs = self._read(file, display)
            if docs is None:
                self.unreadable += scope is None
                continue
            first = True
            package_seen = False
            for doc in docs:
                if doc.value is None:
                    continue
                self.local_documents += scope is None
                ctx = _Doc(display, doc.index, doc.positions, doc.line, doc.column)
                res = self._document(doc.value, ctx, root, scope, file == manifest, first, package_seen)
                first = False
                if isinstance(doc.value, dict) and doc.value.get("kind") == "Package":
                    package_seen = True
                if res is not None and isinstance(res.spec, PackageSpec) and file == manifest:
                    package_spec = res.spec
                    if scope is None:
                        self.local_package = res.name
        return package_spec

    # ------------------------------------------------------------------ documents

    def _document(
        self,
        value: Any,
        ctx: _Doc,
        root: Path,
        scope: str | None,
        is_manifest: bool,
        first: bool,
        package_seen: bool,
    ) -> Resource | None:
        if not isinstance(value, dict):
            self.errors.append(
                ctx.issue(
                    "E_CONFIG_SCHEMA_INVALID",
                    f"a resource document must be a mapping, not {type(value).__name__}",
                    suggestion="each document needs apiVersion, kind, metadata and spec",
                )
            )
            return None
        ok = True
        kind = value.get("kind")
        meant: str | None = None
        if kind is None or kind == "":
            ok = False
            self.errors.append(
                ctx.issue(
                    "E_CONFIG_KIND_MISSING",
                    "document has no 'kind'",
                    suggestion=f"add kind: one of {', '.join(KINDS)}",
                )
            )
        elif not isinstance(kind, str) or kind not in SPEC_MODELS:
            ok = False
            hint = did_you_mean(str(kind), KINDS)
            meant = hint.split("'")[1] if hint else None
            if kind == "Secret":
                hint = "there is no Secret kind: secrets come from the environment via valueFrom.secretRef"
            self.errors.append(
                ctx.issue(
                    "E_CONFIG_UNKNOWN_KIND",
                    f"unknown kind {kind!r}",
                    "kind",
                    join_hints(hint, f"known kinds: {', '.join(KINDS)}"),
                )
            )
        api = value.get("apiVersion")
        if api != API_VERSION:
            ok = False
            message = "document has no 'apiVersion'" if api is None else f"unsupported apiVersion {api!r}"
            suggestion = f"use apiVersion: {API_VERSION}"
            if api == LEGACY_API_VERSION:
                suggestion = (
                    f"{LEGACY_API_VERSION} is the old (v0.9) format; migrate the resource to "
                    f"apiVersion: {API_VERSION} (modelConfig.modelRef, prompt.system, middleware extensions)"
                )
            self.errors.append(ctx.issue("E_CONFIG_UNSUPPORTED_API_VERSION", message, "apiVersion", suggestion))
        for key in value:
            if key not in _TOP_KEYS:
                self.errors.append(
                    ctx.issue(
                        "E_CONFIG_SCHEMA_INVALID",
                        f"unknown top-level field {key!r}",
                        str(key),
                        did_you_mean(str(key), _TOP_KEYS) or "allowed: apiVersion, kind, metadata, spec",
                    )
                )
                ok = False
        name = self._metadata(value.get("metadata"), "metadata" in value, kind, ctx)
        if name is None:
            ok = False
        registrable = isinstance(kind, str) and kind in SPEC_MODELS and name is not None
        if registrable and not self._register(scope, str(kind), str(name), ctx):
            return None
        if meant is not None and name is not None:
            # `kind: Agnet`: remembered as the Agent it is meant to be, so the Swarm listing it does
            # not add "Agent/x does not exist" errors to the one typo (as for an invalid spec)
            self.known.setdefault((scope, meant, str(name)), ctx.issue("", "", "kind").location or ctx.file)
        if kind == "Package":
            if is_manifest and package_seen:
                self.errors.append(
                    ctx.issue(
                        "E_CONFIG_PACKAGE_DOC_DUPLICATED",
                        "goondan.yaml has more than one Package document",
                        "kind",
                        "keep a single Package document, the first one in goondan.yaml",
                    )
                )
                return None
            if not (is_manifest and first):
                elsewhere = not is_manifest  # agents.yaml with a Package: another bundle's goondan.yaml copied in
                self.errors.append(
                    ctx.issue(
                        "E_CONFIG_PACKAGE_DOC_POSITION",
                        f"{ctx.file} has a Package document, which only goondan.yaml may have (as its first)"
                        if elsewhere
                        else "a Package document must be the first document of goondan.yaml",
                        "kind",
                        f"if {ctx.file} is another bundle's goondan.yaml, give that bundle a directory of its own; "
                        "else delete this Package document (the bundle's Package is in goondan.yaml)"
                        if elsewhere
                        else "move the Package document to the top of goondan.yaml",
                    )
                )
                return None
        if not ok or name is None or not isinstance(kind, str):
            return None
        spec_value: Any = value.get("spec")
        if "spec" not in value:
            if kind != "Package":
                self.errors.append(
                    ctx.issue("E_CONFIG_SCHEMA_INVALID", f"{kind}/{name} has no 'spec'", "", "add a spec: mapping")
                )
                return None
            spec_value = {}
        if spec_value is None and kind == "Package":
            spec_value = {}
        if not isinstance(spec_value, dict):
            self.errors.append(ctx.issue("E_CONFIG_SCHEMA_INVALID", "'spec' must be a mapping", "spec"))
            return None
        model_cls = SPEC_MODELS[kind]
        spec = self._validate_model(model_cls, spec_value, "spec", ctx, f"{kind}/{name}")
        if spec is None:
            return None
        res = Resource(
            kind=kind,
            name=name,
            package=scope,
            api_version=API_VERSION,
            metadata=dict(value["metadata"]),
            spec=spec,  # type: ignore[arg-type]
            raw=value,
            root=root,
            file=ctx.file,
            doc_index=ctx.index,
            positions=ctx.positions,
        )
        self.resources.append(res)
        self.index[(scope, kind, name)] = res
        return res

    def _validate_model(
        self, model: type[BaseModel], data: Any, prefix: str, ctx: _Doc | Resource, owner: str
    ) -> BaseModel | None:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            for field_path, message, suggestion, code in pydantic_problems(exc, model):
                full = join_path(prefix, [field_path]) if field_path else prefix
                self.errors.append(ctx.issue(code, f"{owner}: {full}: {message}", full, suggestion))
            return None

    def _metadata(self, meta: Any, present: bool, kind: Any, ctx: _Doc) -> str | None:
        if not isinstance(meta, dict):
            self.errors.append(
                ctx.issue(
                    "E_CONFIG_INVALID_NAME",
                    "metadata.name is required" if not present else "'metadata' must be a mapping with a name",
                    "metadata" if present else "",
                    "add metadata: {name: my-resource}",
                )
            )
            return None
        valid = True
        for key in meta:
            if key not in _META_KEYS:
                valid = False
                self.errors.append(
                    ctx.issue(
                        "E_CONFIG_SCHEMA_INVALID",
                        f"unknown metadata field {key!r}",
                        f"metadata.{key}",
                        did_you_mean(str(key), _META_KEYS) or "allowed: name, labels, annotations",
                    )
                )
        for key in ("labels", "annotations"):
            mapping = meta.get(key)
            if mapping is None:
                continue
            if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
                valid = False
                self.errors.append(
                    ctx.issue(
                        "E_CONFIG_SCHEMA_INVALID",
                        f"metadata.{key} must map strings to strings",
                        f"metadata.{key}",
                        "quote numeric and boolean values",
                    )
                )
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            self.errors.append(
                ctx.issue(
                    "E_CONFIG_INVALID_NAME",
                    "metadata.name is required and must be a non-empty string",
                    "metadata.name" if "name" in meta else "metadata",
                    _NAME_HINT,
                )
            )
            return None
        pattern = _PACKAGE_NAME if kind == "Package" else _NAME
        if not pattern.match(name) or len(name) > (214 if kind == "Package" else 63):
            self.errors.append(
                ctx.issue(
                    "E_CONFIG_INVALID_NAME",
                    f"invalid name {name!r}",
                    "metadata.name",
                    "package names look like @scope/name" if kind == "Package" else _NAME_HINT,
                )
            )
            return None
        return name if valid else None

    def _register(self, scope: str | None, kind: str, name: str, ctx: _Doc) -> bool:
        key = (scope, kind, name)
        issue = ctx.issue("E_CONFIG_DUPLICATE_NAME", "", "metadata.name")
        here = issue.location or ctx.file
        if key in self.known:
            where = f" in package {scope}" if scope else ""
            issue.message = f"{kind}/{name} is defined twice{where}: at {self.known[key]} and at {here}"
            issue.suggestion = f"rename one of them; {kind}/{name} was first defined at {self.known[key]}"
            self.errors.append(issue)
            return False
        self.known[key] = here
        return True

    # ------------------------------------------------------------------ packages

    def _load_dependencies(self, package_spec: PackageSpec | None) -> None:
        if package_spec is None:
            return
        owner = next((r for r in self.resources if r.kind == "Package" and r.package is None), None)
        queue: list[tuple[PackageSpec, Resource | None]] = [(package_spec, owner)]
        seen: set[str] = set()
        while queue:
            spec, holder = queue.pop(0)
            for i, dep in enumerate(spec.dependencies):
                if dep.name == BASE_PACKAGE or dep.name in seen:
                    continue
                seen.add(dep.name)
                field_path = f"spec.dependencies[{i}]"
                problem = None if _PACKAGE_NAME.match(dep.name) else f"invalid package name {dep.name!r}"
                problem = problem or (specifier_problem(dep.version) if dep.version else None)
                if problem is not None:
                    if holder is not None:
                        self.errors.append(
                            holder.issue(
                                "E_CONFIG_SCHEMA_INVALID",
                                f"dependency {dep.name}: {problem}",
                                field_path,
                                "dependencies look like {name: '@scope/name', version: '>=1.2,<2'}",
                            )
                        )
                    continue
                found = find_package(dep.name, dep.version, dep.distribution)
                if not isinstance(found, InstalledPackage):
                    if holder is not None:
                        self.errors.append(holder.issue(found.code, found.message, field_path, found.suggestion))
                        self.unavailable.add(dep.name)  # reported: its references are not, one by one
                    continue
                pkg_root = found.root
                manifest = pkg_root / MANIFEST
                dep_spec = self._load_scope(pkg_root.resolve(), manifest.resolve(), dep.name)
                if dep_spec is not None:
                    dep_owner = next((r for r in self.resources if r.kind == "Package" and r.package == dep.name), None)
                    if dep_owner is not None and dep_owner.name != dep.name and holder is not None:
                        self.errors.append(
                            holder.issue(
                                "E_PACKAGE_INVALID",
                                f"distribution {found.distribution} declares package {dep.name}, but its "
                                f"{MANIFEST} names itself {dep_owner.name}",
                                field_path,
                                f"ask its author to make the entry point name and metadata.name agree ({dep.name})",
                            )
                        )
                    queue.append((dep_spec, dep_owner))

    # ------------------------------------------------------------------ semantic checks

    def _check(self, res: Resource) -> None:
        spec = res.spec
        entry = res.entry_field()
        if isinstance(spec, ToolSpec | ExtensionSpec) and res.package is None:
            self._check_config_sources(res, spec.config)
        if isinstance(spec, ModelSpec):
            self._check_model(res, spec)
        elif isinstance(spec, ToolSpec):
            self._check_tool(res, spec)
        elif isinstance(spec, ConnectorSpec):
            seen: set[str] = set()
            for i, event in enumerate(spec.events):
                if event.name in seen:
                    self.errors.append(
                        res.issue(
                            "E_CONFIG_SCHEMA_INVALID",
                            f"{res.key}: duplicate event name {event.name!r}",
                            f"spec.events[{i}].name",
                        )
                    )
                seen.add(event.name)
        elif isinstance(spec, AgentSpec):
            self._check_agent(res, spec)
        elif isinstance(spec, SwarmSpec):
            self._check_swarm(res, spec)
        elif isinstance(spec, ConnectionSpec):
            self._check_connection(res, spec)
        if entry is not None and entry != "spec.options.entry" and res.package != BASE_PACKAGE:
            found = self._check_path(res, getattr(spec, "entry", ""), entry, python=True)
            if found is not None:
                self._check_code(res, found, entry)

    def _check_config_sources(self, res: Resource, config: Mapping[str, Any]) -> None:
        """``spec.config`` entries given as ``{valueFrom: ...}``: well-formed, and set in the environment."""
        for key, value in config.items():
            if not is_config_value_source(value):
                continue
            field_path = f"spec.config.{key}"
            problem = value_source_problem(value)
            if problem is not None:
                self.errors.append(res.issue("E_CONFIG_SCHEMA_INVALID", f"{res.key}: {problem}", field_path))
                continue
            found, variable = lookup_value_source(value, self.env)
            if found is None:
                self.errors.append(
                    res.issue(
                        "E_CONFIG_ENV_MISSING",
                        env_missing_message(variable or "?", f"{res.key} {field_path}"),
                        field_path,
                        env_missing_suggestion(variable or "?", self.env),
                    )
                )

    def _check_builtin_entry(self, res: Resource) -> None:
        """Built-ins are checked only once something uses them: an unused one must not break a bundle."""
        if res.package != BASE_PACKAGE or id(res) in self.checked_builtins:
            return
        self.checked_builtins.add(id(res))
        entry = res.entry_field()
        if entry is not None and entry != "spec.options.entry":
            self._check_path(res, getattr(res.spec, "entry", ""), entry, python=True)

    def _check_path(self, res: Resource, relative: str, field_path: str, *, python: bool) -> Path | None:
        try:
            return resolve_inside(res.root, relative, python=python, what=field_path.rsplit(".", 1)[-1])
        except PathProblem as exc:
            self.errors.append(res.issue(exc.code, f"{res.key}: {exc.message}", field_path, exc.suggestion))
            return None

    def _check_text(self, res: Resource, path: Path, field_path: str) -> None:
        """A prompt file that is not UTF-8, at its bad byte: found here, not when the agent starts."""
        shown = self._display(path, res.package)
        try:
            read_text_file(path, shown)
        except TextProblem as exc:
            issue = res.issue("E_CONFIG_PARSE_ERROR", f"{res.key}: {exc.message}", field_path, exc.suggestion)
            issue.file, issue.line, issue.column = shown, exc.line, exc.column
            self.errors.append(issue)
        except OSError:
            pass  # unreadable: the start reports it (E_CONFIG_ENTRY_NOT_FOUND)

    def _entry_module(self, path: Path) -> EntryModule:
        module = self.entry_modules.get(path)
        if module is None:
            module = self.entry_modules[path] = inspect_entry(path)
        return module

    def _check_code(self, res: Resource, path: Path, field_path: str) -> None:
        """Syntax and required attributes of an entry file, read without running it (see ``_code``)."""
        if res.package is not None:
            return  # installed packages are checked when they are published, not in every bundle using them
        module = self._entry_module(path)
        shown = self._display(path, res.package)
        if module.problem is not None:
            problem = module.problem
            issue = res.issue(
                "E_CONFIG_ENTRY_SYNTAX",
                f"{res.key}: {shown} does not compile: {problem.message}",
                field_path,
                f"fix the Python file; `python -m py_compile {shlex.quote(str(path))}` shows the same error",
            )
            issue.file, issue.line, issue.column = shown, problem.line, problem.column
            self.errors.append(issue)
            return
        if not self.check_code:
            return  # the runtime's import checks the rest, with its own codes
        kind = "Model" if isinstance(res.spec, ModelSpec) else res.kind
        attribute = REQUIRED_ATTRIBUTE.get(kind)
        if attribute is None or module.opaque:
            return
        if attribute not in module.names:
            example = {
                "handlers": "handlers = {'export_name': handler}",
                "register": "def register(api, config): ...",
                "run": "async def run(ctx): ...",
                "generate": "def generate(request): ...",
            }[attribute]
            self.errors.append(
                res.issue(
                    "E_CONFIG_ENTRY_EXPORT_MISSING",
                    f"{res.key}: {shown} defines no module-level `{attribute}`",
                    field_path,
                    f"add `{example}` to {shown}",
                )
            )
            return
        if isinstance(res.spec, ToolSpec) and module.handlers_not_dict is not None:
            kind, line = module.handlers_not_dict
            example = ", ".join(f"{e.name!r}: {e.name}" for e in res.spec.exports[:3])
            issue = res.issue(
                "E_CONFIG_TOOL_HANDLER_MISSING",
                f"{res.key}: `handlers` at {shown}:{line} is {kind}; it must be a dict from each export name "
                "to its function",
                field_path,
                f"write `handlers = {{{example}}}` in {shown}",
            )
            issue.file, issue.line, issue.column = shown, line, 1
            self.errors.append(issue)
            return
        if isinstance(res.spec, ToolSpec) and module.handler_literals:
            for i, export in enumerate(res.spec.exports):
                literal = module.handler_literals.get(export.name)
                if literal is None:
                    continue
                value, line = literal
                quoted = value.startswith(("'", '"'))
                name = value[1:-1] if quoted else export.name
                self.errors.append(
                    res.issue(
                        "E_CONFIG_TOOL_HANDLER_MISSING",
                        f"{res.key}: export {export.name!r}: `handlers` at {shown}:{line} maps it to {value}, "
                        "not to a function",
                        f"spec.exports[{i}].name",
                        f"name the function itself{', without quotes' if quoted else ''}: `{export.name!r}: {name}`",
                    )
                )
        if isinstance(res.spec, ToolSpec) and module.handler_keys is not None:
            keys = module.handler_keys
            listing = ", ".join(repr(k) for k in keys) or "none"
            for i, export in enumerate(res.spec.exports):
                if export.name in keys:
                    continue
                hint = did_you_mean(export.name, keys)
                self.errors.append(
                    res.issue(
                        "E_CONFIG_TOOL_HANDLER_MISSING",
                        f"{res.key}: export {export.name!r} has no handler in `handlers` of "
                        f"{shown}:{module.handlers_line} (it has {listing})",
                        f"spec.exports[{i}].name",
                        join_hints(hint, f"add {export.name!r}: handler to `handlers` in {shown}"),
                    )
                )
            for i, export in enumerate(res.spec.exports):
                handler = module.handler_functions.get(export.name)
                if handler is not None:
                    self._check_handler_signature(res, handler, f"spec.exports[{i}].name", shown)
        if res.kind == "Extension" and module.register is not None:
            self._check_register(res, module.register, field_path, shown)

    def _check_register(self, res: Resource, register: RegisterBinding, field_path: str, shown: str) -> None:
        """The runtime calls ``register(api, config)`` when it takes two positional parameters (or
        ``*args``), else ``register(api)`` (docs/guides/extensions.md). A ``register`` that can take neither
        (``def register():``, a third required parameter, a required keyword-only one, or not a
        function at all) failed only when the first agent instance started, as an E_EXT_INIT
        TypeError that read like an error raised inside register()."""
        where = f"{shown}:{register.line}"
        fix = "define it as `def register(api, config): ...` (or `def register(api): ...`; sync or async)"
        fn = register.function
        if fn is None:
            problem = f"`register` at {where} is {register.literal}, not a function"
        else:
            params = ", ".join(fn.positional)
            head = f"register({params}) at {where}"
            if not fn.positional and not fn.star_args:
                problem = f"{head} takes no positional parameter, but it is called as register(api)"
            elif fn.required > 2:
                problem = f"{head} needs {fn.required} positional arguments, but it is called as register(api, config)"
            elif register.required_keywords:
                names = ", ".join(register.required_keywords)
                problem = f"{head} needs keyword-only argument(s) {names}, which the runtime never passes"
            else:
                return
        self.errors.append(res.issue("E_CONFIG_EXTENSION_REGISTER_SIGNATURE", f"{res.key}: {problem}", field_path, fix))

    def _check_handler_signature(self, res: Resource, handler: HandlerFunction, field_path: str, shown: str) -> None:
        """A handler is called ``handler(ctx, args)``: one that cannot take two positional arguments
        fails every call (TypeError, which the model sees as the tool's error), and ``(args, ctx)``
        gets the context where it expects the arguments. Both were found only by calling the tool."""
        where = f"{shown}:{handler.line}"
        fix = f"define it as `def {handler.name}(ctx, args): ...` (ctx: ToolContext, args: the call's arguments)"
        params = ", ".join(handler.positional)
        if handler.required > 2 or (len(handler.positional) < 2 and not handler.star_args):
            self.errors.append(
                res.issue(
                    "E_CONFIG_TOOL_HANDLER_SIGNATURE",
                    f"{res.key}: handler {handler.name}({params}) at {where} cannot be called as "
                    f"{handler.name}(ctx, args)",
                    field_path,
                    fix,
                )
            )
        elif (
            handler.positional[:1]
            and handler.positional[0] in _ARGS_NAMES
            and (handler.positional[1:2] and handler.positional[1] in _CTX_NAMES)
        ):
            self.warnings.append(
                res.issue(
                    "E_CONFIG_TOOL_HANDLER_SIGNATURE",
                    f"{res.key}: handler {handler.name}({params}) at {where} looks swapped: it is called as "
                    f"{handler.name}(ctx, args), so {handler.positional[0]!r} gets the ToolContext",
                    field_path,
                    fix,
                    severity="warning",
                )
            )

    def _check_model(self, res: Resource, spec: ModelSpec) -> None:
        if spec.provider not in KNOWN_PROVIDERS:
            hint = did_you_mean(spec.provider, sorted(KNOWN_PROVIDERS))
            listing = f"known providers: {', '.join(sorted(KNOWN_PROVIDERS))}"
            self.errors.append(
                res.issue(
                    "E_CONFIG_SCHEMA_INVALID",
                    f"{res.key}: unknown provider {spec.provider!r}",
                    "spec.provider",
                    join_hints(hint, listing),
                )
            )
        elif spec.provider == "python":
            options = self._validate_model(PythonOptions, spec.options, "spec.options", res, res.key)
            if isinstance(options, PythonOptions):
                found = self._check_path(res, options.entry, "spec.options.entry", python=True)
                if found is not None:
                    self._check_code(res, found, "spec.options.entry")
        elif spec.provider == "scripted":
            self._validate_model(ScriptedOptions, spec.options, "spec.options", res, res.key)
        else:  # real and local providers check their own options (no SDK is imported for it)
            from goondan.models import check_model_options

            try:
                check_model_options(spec.provider, dict(spec.options or {}), res.root)
            except GoondanError as exc:
                self.errors.append(res.issue(exc.code, f"{res.key}: {exc.message}", "spec.options", exc.suggestion))
            self._warn_unknown_model_id(res, spec)

    def _warn_unknown_model_id(self, res: Resource, spec: ModelSpec) -> None:
        """A warning when ``spec.model`` looks like a mistake against the installed SDK's list of
        models (``_model_ids.model_id_problem``: a misspelt word, another provider's family, the
        wrong case or separators), with the id meant. An id the list lacks but made of the provider's
        own words (``claude-opus-4-1``, dated snapshots) passes: SDKs drop ids the API still serves,
        and ``--strict`` would fail a bundle that runs. Not for the runtime's load (its warnings are
        dropped), an installed package's Model, or a Model that talks to another server
        (``endpoint``, or the base URL variable the SDK reads): it names its models as it likes."""
        from ._model_ids import BASE_URL_VARIABLES, model_id_problem, sdk_models

        if not self.check_code or res.package is not None or spec.endpoint:
            return
        variable = BASE_URL_VARIABLES.get(spec.provider)
        if variable and (self.env.get(variable) or "").strip():
            return
        known = sdk_models(spec.provider)
        problem = model_id_problem(spec.provider, spec.model, known) if known is not None else None
        if known is None or problem is None:
            return
        guess = f"Did you mean {problem.meant!r}? " if problem.meant else f"e.g. {', '.join(known.names[:3])}. "
        self.warnings.append(
            res.issue(
                "E_CONFIG_MODEL_UNKNOWN",
                f"{res.key}: model {spec.model!r}: {problem.reason}; the first request would fail if "
                f"{spec.provider} does not serve it",
                "spec.model",
                guess + f"(checked against the {len(known.names)} ids of the installed {known.package} SDK "
                f"{known.version}; if the provider serves this one, ignore this)",
                severity="warning",
            )
        )

    def _warn_schema_typos(self, res: Resource, schema: Any, field_path: str) -> None:
        """A warning per slip in a JSON Schema that JSON Schema accepts but the author cannot have
        meant (see ``schema_slips``: a near-keyword, a required name missing from properties); only
        for the bundle's own resources (an installed package's are not the user's to fix)."""
        if res.package is not None:
            return
        for where, problem, suggestion in schema_slips(schema):
            self.warnings.append(
                res.issue(
                    "E_CONFIG_SCHEMA_INVALID",
                    f"{res.key}: {field_path}.{where}: {problem}",
                    f"{field_path}.{where}",
                    suggestion,
                    severity="warning",
                )
            )

    def _check_tool(self, res: Resource, spec: ToolSpec) -> None:
        if "__" in res.name:
            self.errors.append(
                res.issue("E_CONFIG_INVALID_NAME", f"{res.key}: tool names must not contain '__'", "metadata.name")
            )
        seen: set[str] = set()
        for i, export in enumerate(spec.exports):
            self._warn_schema_typos(res, export.parameters, f"spec.exports[{i}].parameters")
            if export.name in seen:
                self.errors.append(
                    res.issue(
                        "E_CONFIG_SCHEMA_INVALID",
                        f"{res.key}: duplicate export name {export.name!r}",
                        f"spec.exports[{i}].name",
                        "export names must be unique within a Tool",
                    )
                )
            seen.add(export.name)

    def _resolve(self, res: Resource, field_path: str, ref: ObjectRef, expected: str) -> Resource | None:
        if ref.kind != expected:
            self.errors.append(
                res.issue(
                    "E_CONFIG_INVALID_REF",
                    f"{res.key}: {field_path} must reference a {expected}, not {ref.key}",
                    field_path,
                    f"write {expected}/<name>",
                )
            )
            return None
        scope = ref_scope(ref, res.package, self.local_package)
        if scope in self.unavailable:
            return None  # the dependency's own error (not installed, wrong version) says why
        if scope not in self.scopes:
            self.errors.append(
                res.issue(
                    "E_CONFIG_REF_NOT_FOUND",
                    f"{res.key}: {field_path} references package {scope!r}, which is not available",
                    field_path,
                    f"install it and record it: gdn package add {default_distribution(str(scope))}",
                )
            )
            return None
        key = (scope, ref.kind, ref.name)
        if key in self.index:
            self._check_builtin_entry(self.index[key])
            return self.index[key]
        if key in self.known:
            return None  # declared but invalid: already reported where it is defined
        candidates = [n for (s, k, n) in self.known if s == scope and k == ref.kind]
        hint = did_you_mean(ref.name, candidates)
        if ref.package is None and scope != BASE_PACKAGE and (BASE_PACKAGE, ref.kind, ref.name) in self.known:
            hint = (
                f"{ref.key} is a built-in: reference it as "
                f'{{kind: {ref.kind}, name: {ref.name}, package: "{BASE_PACKAGE}"}}'
            )
        elif hint is None and scope != BASE_PACKAGE:
            # `Connector/webhok`: nothing local is close, a built-in may be
            builtins = [n for (s, k, n) in self.known if s == BASE_PACKAGE and k == ref.kind]
            near = did_you_mean(ref.name, builtins)
            if near is not None:
                name = near.split("'")[1]
                hint = (
                    f"{near} (the built-in: reference it as "
                    f'{{kind: {ref.kind}, name: {name}, package: "{BASE_PACKAGE}"}})'
                )
        if hint is None:  # a resource renamed (nothing near the old name): what there is instead
            there = ", ".join(repr(n) for n in sorted(candidates)[:8]) + (", ..." if len(candidates) > 8 else "")
            hint = (
                f"{ref.kind}s defined here: {there}; rename the reference or the resource to match"
                if candidates
                else f"define a {ref.kind} named {ref.name!r} (the bundle has no {ref.kind})"
            )
        unread = (
            unread_definition(self.unread_yaml, ref.kind, ref.name) if scope in (None, self.local_package) else None
        )
        if unread is not None:
            hint = f"{ref.key} is defined in " + not_read(self._display(unread, None), ref.kind)
        where = f" in package {scope}" if scope else ""
        self.errors.append(
            res.issue(
                "E_CONFIG_REF_NOT_FOUND",
                f"{res.key}: {field_path} references {ref.key}{where}, which does not exist",
                field_path,
                hint,
            )
        )
        return None

    def _check_agent(self, res: Resource, spec: AgentSpec) -> None:
        if spec.output is not None:
            self._warn_schema_typos(res, spec.output.json_schema, "spec.output.schema")
        model = self._resolve(res, "spec.modelConfig.modelRef", spec.model_cfg.model_ref, "Model")
        if model is not None:
            self._check_model_env(model)
        tools: list[Resource] = []
        complete = True
        for i, tool_ref in enumerate(spec.tools):
            tool = self._resolve(res, f"spec.tools[{i}]", tool_ref, "Tool")
            if tool is None:
                complete = False
            elif tool not in tools:
                tools.append(tool)
        extensions: list[str] = []
        for i, use in enumerate(spec.extensions):
            ext = self._resolve(res, f"spec.extensions[{i}]", use.ref, "Extension")
            if ext is None:
                complete = False
            else:
                extensions.append(ext.name)
                self._check_extension_config(res, spec, i, use.config, ext)
                self._check_builtin_config(res, i, use.config, ext)
        if spec.prompt is not None and spec.prompt.system_ref is not None:
            prompt_file = self._check_path(res, spec.prompt.system_ref, "spec.prompt.systemRef", python=False)
            if prompt_file is not None:
                self._check_text(res, prompt_file, "spec.prompt.systemRef")
        if complete:
            available = tool_names(tools)
            for i, required in enumerate(spec.required_tools):
                if required not in available:
                    self.errors.append(
                        res.issue(
                            "E_CONFIG_SCHEMA_INVALID",
                            required_tool_message(res, required, available),
                            f"spec.requiredTools[{i}]",
                            "list tools as '<Tool name>__<export name>' of a Tool in spec.tools",
                        )
                    )
            self._check_approval_tools(res, spec, tools, available, extensions)

    def _check_approval_tools(
        self, res: Resource, spec: Any, tools: list[Resource], available: list[str], extensions: list[str]
    ) -> None:
        """``spec.approval.tools`` naming an export of one of the agent's Tools must name a real one
        (a typo would silently leave the call unguarded); names of extension tools pass as they are,
        but their prefix must be an Extension of the agent: an extension's tools are always named
        ``<extension>__<tool>``, so any other prefix can never match a call, and the call it was
        meant to guard would run without asking."""
        approval = getattr(spec, "approval", None)
        if approval is None:
            return
        resources = {tool.name for tool in tools}
        for i, name in enumerate(approval.tools):
            prefix = name.split("__", 1)[0]
            if prefix not in resources and prefix not in extensions:
                # near a name the agent has: a typo that leaves that tool unguarded (an error); else a
                # warning (e.g. bash__exec listed for an agent that does not have the bash Tool)
                near = did_you_mean(name, available) or did_you_mean(prefix, [*resources, *extensions])
                (self.errors if near else self.warnings).append(
                    res.issue(
                        "E_CONFIG_SCHEMA_INVALID",
                        f"{res.key}: spec.approval.tools({name}) names no Tool or Extension of this agent "
                        f"({prefix!r} is neither), so no call would ever wait for approval under it",
                        f"spec.approval.tools[{i}]",
                        join_hints(
                            near,
                            "list tools as '<Tool name>__<export name>' of a Tool in spec.tools, or "
                            "'<Extension name>__<tool>' of an Extension in spec.extensions",
                        ),
                        severity="error" if near else "warning",
                    )
                )
                continue
            if prefix in resources and name not in available:
                self.errors.append(
                    res.issue(
                        "E_CONFIG_SCHEMA_INVALID",
                        f"{res.key}: spec.approval.tools({name}) is not an export of that Tool "
                        f"(available: {', '.join(available) or 'none'})",
                        f"spec.approval.tools[{i}]",
                        "list tools as '<Tool name>__<export name>' of a Tool in spec.tools",
                    )
                )

    def _check_model_env(self, model: Resource) -> None:
        """A Model's apiKey variable must be set when an agent uses the Model: at load, not first turn.

        Otherwise the SDK falls back to its own variable (``OPENAI_API_KEY``...) and the error, one turn
        later, names a variable the bundle never mentioned.
        """
        if id(model) in self.checked_models or not isinstance(model.spec, ModelSpec):
            return
        self.checked_models.add(id(model))
        source = model.spec.api_key
        if source is None:
            return
        # a self-hosted endpoint often takes any key, an empty one included
        self._check_required_value(model, source, "spec.apiKey", blank_ok=bool(model.spec.endpoint))

    def _check_required_value(
        self, res: Resource, source: Mapping[str, Any], field_path: str, *, blank_ok: bool = False
    ) -> None:
        """A required ValueSource (an API key, a Connection's config or secret) must be set; a key or
        secret must not be blank either: ``ANTHROPIC_API_KEY=`` left empty in ``.env`` passed, and the
        provider then read its own variable or failed at the first model call, and an empty webhook
        ``signingSecret`` means no secret, so unsigned requests were accepted."""
        value, variable = lookup_value_source(source, self.env)
        where = f"{res.key} {field_path}"
        if value is None:
            message = env_missing_message(variable or "?", where)
            suggestion = env_missing_suggestion(variable or "?", self.env)
        elif variable is not None and not value.strip() and not blank_ok and not field_path.startswith("spec.config."):
            message = f"environment variable {variable} is set but empty (needed by {where})"
            suggestion = f"give {variable} a value (in the environment or after {variable}= in the bundle's .env)"
        else:
            return
        self.errors.append(res.issue("E_CONFIG_ENV_MISSING", message, field_path, suggestion))

    def _config_schema(self, res: Resource) -> dict[str, Any] | None:
        """The ``CONFIG_SCHEMA`` of an Extension's or Connector's entry module: a literal read from its
        source, or a built-in's by import (built-ins are our own code; theirs are often not literals)."""
        if id(res) in self.config_schemas:
            return self.config_schemas[id(res)]
        schema: dict[str, Any] | None = None
        entry = getattr(res.spec, "entry", "")
        try:
            path = resolve_inside(res.root, entry, python=True)
        except PathProblem:
            path = None
        if path is not None:
            schema = self._entry_module(path).config_schema
            builtin = Path(__file__).resolve().parent.parent / "base"
            if schema is None and res.package == BASE_PACKAGE and path.is_relative_to(builtin):
                schema = _builtin_schema(path, builtin)
        if schema is not None:
            from goondan._argcheck import schema_problem

            problem = schema_problem(schema)
            if problem is not None:  # checking a config with it raised jsonschema's own error (INTERNAL_ERROR)
                code = "E_CONNECTOR_CONFIG" if res.kind == "Connector" else "E_CONFIG_EXTENSION_CONFIG_INVALID"
                self.errors.append(
                    res.issue(
                        code,
                        f"{res.key}: the CONFIG_SCHEMA of {entry} is not a valid JSON Schema {problem}",
                        "spec.entry",
                        "fix CONFIG_SCHEMA in the module; it is JSON Schema Draft 2020-12 "
                        "(https://json-schema.org/understanding-json-schema/reference)",
                    )
                )
                schema = None
        self.config_schemas[id(res)] = schema
        return schema

    def _check_extension_config(
        self, agent: Resource, spec: AgentSpec, index: int, override: Mapping[str, Any], ext: Resource
    ) -> None:
        """The config an agent gives an extension (spec.config + its override) against CONFIG_SCHEMA."""
        if not self.check_code:
            return
        schema = self._config_schema(ext)
        if schema is None:
            return
        base = ext.raw.get("spec", {}).get("config") or {}
        config = {**base, **override}
        for key, value in config.items():  # checked as the string the environment gives (repr hidden)
            if is_config_value_source(value):
                found = lookup_value_source(value, self.env)[0] if value_source_problem(value) is None else None
                config[key] = SecretValue(found if found is not None else f"<{key} from the environment>")
        if ext.name == "required-tools-guard" and spec.required_tools and not config.get("requiredTools"):
            config["requiredTools"] = list(spec.required_tools)  # the runtime fills it in the same way
        for key, detail, hint, listing in _schema_problems(schema, config, ext.key, closed=False):
            where_agent = key in override or (not key and bool(override)) or ext.package is not None
            field_path = f"spec.extensions[{index}].config" if where_agent else "spec.config"
            owner = agent if where_agent else ext
            if key:
                field_path += f".{key}"
            issue = owner.issue(
                "E_CONFIG_EXTENSION_CONFIG_INVALID",
                f"{owner.key}: invalid config for {ext.key}: {detail}",
                field_path,
                join_hints(hint, listing),
            )
            if owner is ext and any(e.message == issue.message for e in self.errors):
                continue  # one report per Extension, not one per agent using it
            self.errors.append(issue)

    def _check_builtin_config(self, agent: Resource, index: int, override: Mapping[str, Any], ext: Resource) -> None:
        """What a built-in extension's CONFIG_SCHEMA cannot say (a summary model's entry file):
        ``_extension_checks``. Also in the run's load (no ``check_code``): the extension itself finds
        the problem only when it first needs the file."""
        if ext.package != BASE_PACKAGE:
            return
        config = {**(ext.raw.get("spec", {}).get("config") or {}), **override}
        for problem in builtin_config_problems(ext.name, config, agent.root):
            issue = agent.issue(
                problem.code,
                f"{agent.key}: config of {ext.key}: {problem.message}",
                f"spec.extensions[{index}].config.{problem.field}",
                problem.suggestion,
                severity=problem.severity,
            )
            (self.errors if problem.severity == "error" else self.warnings).append(issue)

    def _member_keys(self, swarm: Resource, spec: SwarmSpec) -> set[ScopeKey]:
        return {(ref_scope(r, swarm.package, self.local_package), r.kind, r.name) for r in spec.agents}

    def _check_swarm(self, res: Resource, spec: SwarmSpec) -> None:
        if spec.telemetry is not None and _export_on(self.env):  # the run resolves them at start (telemetry/_config.py)
            for name, source in spec.telemetry.otlp.headers.items():
                self._check_required_value(res, source, f"spec.telemetry.otlp.headers.{name}")
        entry = self._resolve(res, "spec.entryAgent", spec.entry_agent, "Agent")
        for i, agent_ref in enumerate(spec.agents):
            self._resolve(res, f"spec.agents[{i}]", agent_ref, "Agent")
        if spec.entry_agent.kind == "Agent" and (entry is not None or self._declared(res, spec.entry_agent)):
            key = (
                ref_scope(spec.entry_agent, res.package, self.local_package),
                "Agent",
                spec.entry_agent.name,
            )
            if key not in self._member_keys(res, spec):
                self.errors.append(
                    res.issue(
                        "E_CONFIG_SCHEMA_INVALID",
                        f"{res.key}: entryAgent {spec.entry_agent.key} is not listed in spec.agents",
                        "spec.entryAgent",
                        f"add {spec.entry_agent.key} to spec.agents or pick one of them as entryAgent",
                    )
                )

    def _declared(self, res: Resource, ref: ObjectRef) -> bool:
        return (ref_scope(ref, res.package, self.local_package), ref.kind, ref.name) in self.known

    def _connection_swarm(self, res: Resource, spec: ConnectionSpec) -> Resource | None:
        if spec.swarm_ref is not None:
            return self._resolve(res, "spec.swarmRef", spec.swarm_ref, "Swarm")
        swarms = [r for r in self.resources if r.kind == "Swarm" and r.package == res.package]
        named = [s for s in swarms if s.name == "default"]
        if named:
            return named[0]
        return swarms[0] if len(swarms) == 1 else None

    def _check_connection_config(self, res: Resource, spec: ConnectionSpec, connector: Resource) -> None:
        """``spec.config`` against the connector's ``CONFIG_SCHEMA``, in validate and in run alike.

        Without it a misspelt value (``replyMode: strem``) failed only when ``gdn run`` started the
        connector process, and a misspelt key (``prot``) was never reported: the connector reads
        ``port`` and silently listens on its default. Values come as the connector receives them: a
        variable's value (hidden in messages), an unset one is left out (reported as missing above).
        Connectors compare enum settings case-insensitively (``Stream`` works), so the check does too.
        """
        schema = self._config_schema(connector)
        if schema is None:
            return
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        config: dict[str, Any] = {}
        variables: dict[str, str] = {}
        for key, source in spec.config.items():
            value, variable = lookup_value_source(source, self.env)
            if value is None or (variable is not None and not self.connection_values):
                continue  # unset, or a variable's value a load that starts no connector does not read
            prop = properties.get(key)
            config[key] = _as_declared(value, prop if isinstance(prop, dict) else {}, hidden=variable is not None)
            if variable is not None:
                variables[key] = variable
        for key, detail, hint, listing in _schema_problems(schema, config, connector.key, closed=True):
            field_path = "spec.config" + (f".{key}" if key else "")
            value = config.get(key)
            got = f" (got {value!r})" if key in properties and isinstance(value, str) else ""
            if key in variables and got:  # '***' alone (PORT=abc) did not say where the value came from
                got = f" (got the value of {variables[key]}, not shown)"
                hint = hint or f"check {variables[key]} in the environment or the bundle's .env"
            self.errors.append(
                res.issue(
                    "E_CONNECTOR_CONFIG",
                    f"{res.key}: invalid config for {connector.key}: {detail}{got}",
                    field_path,
                    join_hints(hint, listing),
                )
            )

    def _check_connection(self, res: Resource, spec: ConnectionSpec) -> None:
        connector = self._resolve(res, "spec.connectorRef", spec.connector_ref, "Connector")
        if connector is not None:
            self._check_connection_config(res, spec, connector)
        swarm = self._connection_swarm(res, spec)
        rules = spec.ingress.rules if spec.ingress is not None else []
        for i, rule in enumerate(rules):
            agent_ref = rule.route.agent_ref
            if agent_ref is None:
                continue
            field_path = f"spec.ingress.rules[{i}].route.agentRef"
            agent = self._resolve(res, field_path, agent_ref, "Agent")
            if agent is None or swarm is None or not isinstance(swarm.spec, SwarmSpec):
                continue
            members = self._member_keys(swarm, swarm.spec)
            if (agent.package, agent.kind, agent.name) not in members:
                self.errors.append(
                    res.issue(
                        "E_CONFIG_SCHEMA_INVALID",
                        f"{res.key}: route agent {agent.key} is not an agent of Swarm/{swarm.name}",
                        field_path,
                        f"add {agent.key} to Swarm/{swarm.name} spec.agents or route to one of its agents",
                    )
                )
        for section, values in (("config", spec.config), ("secrets", spec.secrets)):
            for key, source in values.items() if self.connection_values else ():
                self._check_required_value(res, source, f"spec.{section}.{key}")


def _export_on(env: Mapping[str, str]) -> bool:
    """False when the environment turns OpenTelemetry export off (``OTEL_SDK_DISABLED=true``,
    ``OTEL_TRACES_EXPORTER=none``): the run then never reads the Swarm's OTLP header variables."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() in ("true", "1", "yes", "on"):
        return False
    return "none" not in [e.strip() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",")]
