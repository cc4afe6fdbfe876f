"""Pydantic models of each kind's ``spec``.

Every model forbids undeclared fields (the spec requires it; upstream never enforced it) and runs in
strict mode, so ``maxTokens: "100"`` is reported instead of being coerced. YAML keys are camelCase;
attributes are snake_case through aliases. Refs and ValueSources use plain validators so that a bad
value gives one readable error instead of one error per union member.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from ._refs import ObjectRef, RefSyntaxError, parse_ref, parse_ref_item
from ._values import value_source_problem


def _ref(value: Any) -> ObjectRef:
    try:
        return parse_ref(value)
    except RefSyntaxError as exc:
        raise PydanticCustomError("invalid_ref", exc.message, {"subpath": exc.subpath}) from None


def _ref_item(value: Any) -> ObjectRef:
    try:
        return parse_ref_item(value)
    except RefSyntaxError as exc:
        raise PydanticCustomError("invalid_ref", exc.message, {"subpath": exc.subpath}) from None


@dataclass(frozen=True)
class ExtensionUse:
    """One ``Agent.spec.extensions`` item: the Extension ref plus per-agent config overrides."""

    ref: ObjectRef
    config: dict[str, Any] = field(default_factory=dict)


def _extension_item(value: Any) -> ExtensionUse:
    if isinstance(value, dict) and "ref" in value:
        unknown = [k for k in value if k not in ("ref", "config")]
        if unknown:
            raise PydanticCustomError(
                "extra_forbidden_item",
                "unknown key {key!r} in extension item (allowed: ref, config)",
                {"key": str(unknown[0]), "subpath": str(unknown[0])},
            )
        config = value.get("config", {})
        if config is None:
            config = {}
        if not isinstance(config, dict):
            raise PydanticCustomError("config_type", "'config' must be a mapping", {"subpath": "config"})
        try:
            ref = parse_ref(value["ref"])
        except RefSyntaxError as exc:
            sub = f"ref.{exc.subpath}" if exc.subpath else "ref"
            raise PydanticCustomError("invalid_ref", exc.message, {"subpath": sub}) from None
        return ExtensionUse(ref, dict(config))
    return ExtensionUse(_ref(value))


def _value_source(value: Any) -> dict[str, Any]:
    problem = value_source_problem(value)
    if problem is not None:
        raise PydanticCustomError("value_source", problem)
    return dict(value)


def _scalar(value: Any) -> str:
    # match.properties values are compared as strings, so any YAML scalar is fine to write
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise PydanticCustomError("scalar_type", "must be a string, number or boolean")


def _dump_ref(ref: ObjectRef) -> dict[str, str]:
    return ref.to_dict()


def _dump_extension(use: ExtensionUse) -> dict[str, Any]:
    return {"ref": use.ref.to_dict(), "config": dict(use.config)}


RefLike = Annotated[ObjectRef, PlainValidator(_ref), PlainSerializer(_dump_ref)]


def _tool_ref_item(value: Any) -> ObjectRef:
    if isinstance(value, dict) and "ref" in value and not isinstance(value.get("config") or {}, dict):
        raise PydanticCustomError("config_type", "'config' must be a mapping", {"subpath": "config"})
    try:
        return parse_ref_item(value, allow_config=True)
    except RefSyntaxError as exc:
        raise PydanticCustomError("invalid_ref", exc.message, {"subpath": exc.subpath}) from None


RefItemLike = Annotated[ObjectRef, PlainValidator(_ref_item), PlainSerializer(_dump_ref)]
# a tools item may carry a per-agent ``config`` (read from the raw YAML when the plan is built)
ToolItemLike = Annotated[ObjectRef, PlainValidator(_tool_ref_item), PlainSerializer(_dump_ref)]
ExtensionItem = Annotated[ExtensionUse, PlainValidator(_extension_item), PlainSerializer(_dump_extension)]
ValueSource = Annotated[dict[str, Any], PlainValidator(_value_source)]
Scalar = Annotated[str, PlainValidator(_scalar)]
NonEmptyStr = Annotated[str, Field(min_length=1)]


class Spec(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        populate_by_name=False,
        protected_namespaces=(),
        frozen=True,
    )


# ---------------------------------------------------------------- Model


class ModelSpec(Spec):
    provider: NonEmptyStr
    model: NonEmptyStr
    api_key: ValueSource | None = None
    endpoint: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    capabilities: dict[str, bool] = Field(default_factory=dict)

    @field_validator("endpoint")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+", value):
            raise PydanticCustomError("url", "endpoint must be an http(s) URL")
        return value


class ScriptWhen(Spec):
    role: Literal["user", "assistant", "tool", "system"] | None = None
    contains: str | None = None
    regex: str | None = None

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise PydanticCustomError("regex", "regex does not compile: {err}", {"err": str(exc)}) from None
        return value


class ScriptToolCall(Spec):
    name: NonEmptyStr
    args: dict[str, Any] = Field(default_factory=dict)


class ScriptReply(Spec):
    text: str | None = None
    tool_calls: list[ScriptToolCall] | None = None


class ScriptRule(Spec):
    when: ScriptWhen | None = None
    reply: ScriptReply


class ScriptedOptions(Spec):
    rules: list[ScriptRule] = Field(min_length=1)


class PythonOptions(Spec):
    model_config = ConfigDict(extra="allow")  # further options are handed to the user's generate()
    entry: NonEmptyStr


# ---------------------------------------------------------------- Agent


class ModelParams(Spec):
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0)
    top_p: float | None = Field(default=None, ge=0, le=1)
    extra: dict[str, Any] | None = None


class ModelConfig(Spec):
    model_ref: RefLike
    params: ModelParams | None = None


class Prompt(Spec):
    system: str | None = None
    system_ref: NonEmptyStr | None = None

    @model_validator(mode="after")
    def _xor(self) -> Prompt:
        if self.system is not None and self.system_ref is not None:
            raise PydanticCustomError("prompt_xor", "use either 'system' or 'systemRef', not both")
        return self


class AgentSpec(Spec):
    model_cfg: ModelConfig = Field(alias="modelConfig")
    prompt: Prompt | None = None
    tools: list[ToolItemLike] = Field(default_factory=list)
    extensions: list[ExtensionItem] = Field(default_factory=list)
    required_tools: list[NonEmptyStr] = Field(default_factory=list)


# ---------------------------------------------------------------- Swarm


class Lifecycle(Spec):
    ttl_seconds: int | None = Field(default=None, ge=0)
    gc_grace_seconds: int | None = Field(default=None, ge=0)


class Shutdown(Spec):
    grace_period_seconds: int | None = Field(default=None, ge=0)


class SwarmPolicy(Spec):
    max_steps_per_turn: int | None = Field(default=None, ge=1)
    max_tool_calls_per_step: int | None = Field(default=None, ge=1)
    max_call_depth: int | None = Field(default=None, ge=1)
    """Most inter-agent hops one chain of requests and sends may take (default 8)."""
    max_instance_spawns_per_second: float | None = Field(default=None, gt=0)
    """New instances agents may create per second, swarm-wide (default 20; bursts of one second's worth)."""
    max_instances: int | None = Field(default=None, ge=1)
    """Live instances above which agents may not create another (default 1024)."""
    lifecycle: Lifecycle | None = None
    shutdown: Shutdown | None = None


class SwarmSpec(Spec):
    entry_agent: RefLike
    agents: list[RefItemLike] = Field(min_length=1)
    instance_key: str | None = None
    policy: SwarmPolicy | None = None

    @field_validator("instance_key")
    @classmethod
    def _non_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise PydanticCustomError("blank", "instanceKey must not be empty")
        return value


# ---------------------------------------------------------------- Tool


class ToolExport(Spec):
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")]
    description: str
    parameters: dict[str, Any]

    @field_validator("name")
    @classmethod
    def _no_double_underscore(cls, value: str) -> str:
        if "__" in value:
            raise PydanticCustomError("tool_name", "export names must not contain '__' (it separates tool names)")
        return value

    @field_validator("parameters")
    @classmethod
    def _json_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object":
            raise PydanticCustomError("parameters", "parameters must be a JSON Schema with type: object")
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(value)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.path)
            at = f" at {where}" if where else ""
            raise PydanticCustomError(
                "parameters",
                "parameters is not a valid JSON Schema{at}: {err}",
                {"at": at, "err": exc.message},
            ) from None
        return value


class ToolSpec(Spec):
    entry: NonEmptyStr
    exports: list[ToolExport] = Field(min_length=1)
    error_message_limit: int = Field(default=1000, ge=1)
    config: dict[str, Any] = Field(default_factory=dict)  # handed to handlers as ctx.config


# ---------------------------------------------------------------- Extension


class ExtensionSpec(Spec):
    entry: NonEmptyStr
    config: dict[str, Any] = Field(default_factory=dict)


# ---------------------------------------------------------------- Connector


class EventProperty(Spec):
    type: Literal["string", "number", "boolean"]
    optional: bool = False


class ConnectorEvent(Spec):
    name: NonEmptyStr
    properties: dict[str, EventProperty] = Field(default_factory=dict)


class ConnectorSpec(Spec):
    entry: NonEmptyStr
    events: list[ConnectorEvent] = Field(min_length=1)


# ---------------------------------------------------------------- Connection


class IngressMatch(Spec):
    event: NonEmptyStr | None = None
    properties: dict[str, Scalar] | None = None


class IngressRoute(Spec):
    agent_ref: RefLike | None = None
    instance_key: str | None = None
    instance_key_property: NonEmptyStr | None = None
    instance_key_prefix: str | None = None

    @model_validator(mode="after")
    def _key_xor(self) -> IngressRoute:
        if self.instance_key is not None and self.instance_key_property is not None:
            raise PydanticCustomError(
                "route_xor", "use either 'instanceKey' or 'instanceKeyProperty' in a route, not both"
            )
        return self


class IngressRule(Spec):
    match: IngressMatch | None = None
    route: IngressRoute


class Ingress(Spec):
    rules: list[IngressRule] = Field(default_factory=list)


class ConnectionSpec(Spec):
    connector_ref: RefLike
    swarm_ref: RefLike | None = None
    config: dict[str, ValueSource] = Field(default_factory=dict)
    secrets: dict[str, ValueSource] = Field(default_factory=dict)
    ingress: Ingress | None = None


# ---------------------------------------------------------------- Package


class PackageDependency(Spec):
    name: NonEmptyStr
    version: NonEmptyStr


class PackageRegistry(Spec):
    url: NonEmptyStr


_SEMVER = r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$"


class PackageSpec(Spec):
    version: Annotated[str, Field(pattern=_SEMVER)] | None = None
    description: str | None = None
    access: Literal["public", "restricted"] | None = None
    dependencies: list[PackageDependency] = Field(default_factory=list)
    registry: PackageRegistry | None = None


SPEC_MODELS: dict[str, type[Spec]] = {
    "Package": PackageSpec,
    "Model": ModelSpec,
    "Agent": AgentSpec,
    "Swarm": SwarmSpec,
    "Tool": ToolSpec,
    "Extension": ExtensionSpec,
    "Connector": ConnectorSpec,
    "Connection": ConnectionSpec,
}
KINDS: tuple[str, ...] = tuple(SPEC_MODELS)
