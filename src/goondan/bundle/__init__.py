"""Loading and validating Goondan bundles (``goondan.yaml`` plus resource files).

``validate_bundle`` reports every problem it can find; ``load_bundle`` is the form used by the runtime
and raises :class:`goondan.errors.ConfigError` for the first one (``.errors`` has all of them).

Python entry modules are never imported here, but both compile them without running them: a syntax
error is ``E_CONFIG_ENTRY_SYNTAX`` with its file:line at load (``gdn run --watch`` relies on it to
keep the last good version). ``validate_bundle`` also reads what they define (``handlers``/``register``
/``run``/``generate``, literal ``handlers`` keys and their ``def`` signatures, extension config
against ``CONFIG_SCHEMA``: see ``_code``); ``load_bundle`` leaves those to the runtime, whose import of
the module reports the same problems (``E_TOOL_LOAD``, ``E_EXT_LOAD``, ``E_EXT_CONFIG``) before any
model call. Both check a Connection's config against its Connector's ``CONFIG_SCHEMA``
(``E_CONNECTOR_CONFIG``: the connector would otherwise fail at start, or ignore a misspelt key) and
the environment variables a used Model or a Connection reads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from goondan.errors import ConfigError, ConfigIssue

from ._bundle import ALL_PACKAGES, BASE_PACKAGE, Bundle
from ._loader import API_VERSION, Loader
from ._packages import base_package_root
from ._plan import DEFAULT_MAX_STEPS_PER_TURN, AgentPlan, ExtensionBinding
from ._refs import ObjectRef, parse_ref
from ._resource import Resource
from ._values import resolve_value_source, secret_env_name


@dataclass
class ValidationReport:
    errors: list[ConfigIssue] = field(default_factory=list)
    warnings: list[ConfigIssue] = field(default_factory=list)
    bundle: Bundle | None = None  # set only when there are no errors

    @property
    def valid(self) -> bool:
        return not self.errors


def validate_bundle(
    path: str | os.PathLike[str],
    *,
    env: Mapping[str, str] | None = None,
    state_root: Path | None = None,
    check_code: bool = True,
) -> ValidationReport:
    """Check the bundle at ``path`` (a directory or its goondan.yaml) and report every problem.

    ``check_code=False`` (the runtime's form) checks Python entry files for syntax errors only.
    """
    loader = Loader(os.environ if env is None else env, state_root, check_code=check_code)
    bundle = loader.load(path)
    return ValidationReport(errors=loader.errors, warnings=loader.warnings, bundle=bundle)


def load_bundle(
    path: str | os.PathLike[str],
    *,
    env: Mapping[str, str] | None = None,
    state_root: Path | None = None,
) -> Bundle:
    """Load the bundle at ``path``; raise ConfigError for the first problem (all of them in ``.errors``)."""
    return _loaded(validate_bundle(path, env=env, state_root=state_root, check_code=False))


def load_bundle_for_requests(
    path: str | os.PathLike[str],
    *,
    env: Mapping[str, str] | None = None,
    state_root: Path | None = None,
) -> Bundle:
    """``load_bundle`` for a command that sends requests and starts no connector (``gdn run
    --input``, ``gdn approvals``): a Connection's config and secrets need not be set. A user asking
    one question of a bundle with a webhook Connection had to export its port and signing secret
    first; connectors resolve them (and fail with E_CONFIG_ENV_MISSING) when they start."""
    loader = Loader(os.environ if env is None else env, state_root, check_code=False, connection_values=False)
    bundle = loader.load(path)
    return _loaded(ValidationReport(errors=loader.errors, warnings=loader.warnings, bundle=bundle))


def _loaded(report: ValidationReport) -> Bundle:
    if report.bundle is None:
        errors = report.errors or [ConfigIssue("E_CONFIG_SCHEMA_INVALID", "the bundle could not be loaded")]
        raise ConfigError.from_issue(errors[0], errors=errors)
    return report.bundle


__all__ = [
    "ALL_PACKAGES",
    "API_VERSION",
    "BASE_PACKAGE",
    "DEFAULT_MAX_STEPS_PER_TURN",
    "AgentPlan",
    "Bundle",
    "ExtensionBinding",
    "ObjectRef",
    "Resource",
    "ValidationReport",
    "base_package_root",
    "load_bundle",
    "parse_ref",
    "resolve_value_source",
    "secret_env_name",
    "validate_bundle",
]
