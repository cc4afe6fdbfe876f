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

from .._hints import did_you_mean, join_hints
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
        use_attribute_docstrings=True,  # the docstring under a field is its schema description
    )


# ---------------------------------------------------------------- Model


class ModelSpec(Spec):
    """Model: an LLM provider and model an Agent talks to (modelConfig.modelRef)."""

    provider: NonEmptyStr
    """scripted, python, openai, anthropic, google or local."""
    model: NonEmptyStr
    """The provider's model name (e.g. gpt-4o-mini, claude-sonnet-4-5)."""
    api_key: ValueSource | None = None
    """API key as a ValueSource, e.g. {valueFrom: {env: MY_KEY}}; must be set when an agent uses the Model."""
    endpoint: str | None = None
    """Base URL of an OpenAI-compatible or proxy server (http or https)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Provider options (scripted: rules; python: entry; network providers: timeouts, retries, streaming)."""
    capabilities: dict[str, bool] = Field(default_factory=dict)
    """Capability flags of the model (e.g. toolCalling: true)."""

    @field_validator("endpoint")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+", value):
            raise PydanticCustomError("url", "endpoint must be an http(s) URL")
        return value


class ScriptWhen(Spec):
    """Condition of a scripted rule, matched against the last message (trailing system messages skipped)."""

    role: Literal["user", "assistant", "tool", "system"] | None = None
    """Role the last message must have."""
    contains: str | None = None
    """Text the last message must contain."""
    regex: str | None = None
    """Regular expression the last message must match."""

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
    """One tool call a scripted rule makes."""

    name: NonEmptyStr
    """Tool name as the model sees it: <Tool>__<export>."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Arguments of the call ({{last}} is replaced by the last message's text)."""


class ScriptReply(Spec):
    """What a scripted rule answers: text, tool calls or both."""

    text: str | None = None
    """Answer text; {{last}} is replaced by the last message's text."""
    tool_calls: list[ScriptToolCall] | None = None
    """Tool calls to make in this step."""


class ScriptRule(Spec):
    """One rule of the scripted provider; the first rule whose `when` matches answers."""

    when: ScriptWhen | None = None
    """Condition; a rule without one always matches."""
    reply: ScriptReply
    """The answer of this rule."""


class ScriptedOptions(Spec):
    """Options of `provider: scripted`: ordered rules that answer offline."""

    rules: list[ScriptRule] = Field(min_length=1)
    """Rules tried in order."""


class PythonOptions(Spec):
    """Options of `provider: python`; further keys are handed to the module's generate()."""

    model_config = ConfigDict(extra="allow")  # further options are handed to the user's generate()
    entry: NonEmptyStr
    """Python file (relative to the bundle) defining generate(request)."""


# ---------------------------------------------------------------- Agent


class ModelParams(Spec):
    """Sampling parameters sent with every model call of this agent."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature, 0 to 2."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Most tokens the model may generate per call."""
    top_p: float | None = Field(default=None, ge=0, le=1)
    """Nucleus sampling probability mass, 0 to 1."""
    extra: dict[str, Any] | None = None
    """Further provider-specific parameters passed through unchanged."""


class ModelConfig(Spec):
    """Which Model the agent uses and with which parameters."""

    model_ref: RefLike
    """The Model to use: Model/<name> or {kind: Model, name, package?}."""
    params: ModelParams | None = None
    """Sampling parameters for this agent."""


class Prompt(Spec):
    """The agent's system prompt, inline or from a file."""

    system: str | None = None
    """System prompt text."""
    system_ref: NonEmptyStr | None = None
    """File (relative to the bundle) holding the system prompt."""

    @model_validator(mode="after")
    def _xor(self) -> Prompt:
        if self.system is not None and self.system_ref is not None:
            raise PydanticCustomError("prompt_xor", "use either 'system' or 'systemRef', not both")
        return self


DEFAULT_OUTPUT_RETRIES = 2
MAX_OUTPUT_RETRIES = 10


JSON_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
_SCHEMA_HINT = (
    "fix the keyword named above; the schema is JSON Schema Draft 2020-12 "
    "(https://json-schema.org/understanding-json-schema/reference)"
)


def _checked_json_schema(value: dict[str, Any], error_type: str, what: str) -> dict[str, Any]:
    """``value`` when it is a valid JSON Schema (Draft 2020-12); else the pydantic error naming where,
    with the JSON type meant when a ``type`` is misspelt (``strng``: did you mean 'string'?)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(value)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        at = f" at {where}" if where else ""
        err = exc.message
        hint = None
        if exc.path and exc.path[-1] == "type" and isinstance(exc.instance, str):
            err = f"{exc.instance!r} is not a JSON type ({', '.join(JSON_TYPES)})"
            hint = did_you_mean(exc.instance, JSON_TYPES)
            err += f"; {hint}" if hint else ""
        # subpath: the issue points at the offending keyword's own line, not the schema's first one
        subpath = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.path).lstrip(".")
        ctx = {"at": at, "err": err, "subpath": subpath, "suggestion": hint or _SCHEMA_HINT}
        raise PydanticCustomError(error_type, what + " is not a valid JSON Schema{at}: {err}", ctx) from None
    return value


_SCHEMA_KEYWORDS = (
    "type", "properties", "required", "items", "prefixItems", "additionalProperties", "patternProperties",
    "enum", "const", "description", "title", "default", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "minLength", "maxLength", "pattern", "format", "minItems", "maxItems", "uniqueItems",
    "minProperties", "maxProperties", "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "contains",
    "dependentRequired", "dependentSchemas", "propertyNames", "multipleOf", "examples", "deprecated",
    "readOnly", "writeOnly", "nullable", "unevaluatedProperties", "unevaluatedItems", "contentMediaType",
    "contentEncoding", "contentSchema",
)  # fmt: skip
_SUBSCHEMA = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def schema_slips(schema: Any, where: str = "") -> list[tuple[str, str, str]]:
    """``(path, problem, suggestion)`` for each slip in ``schema`` (and its subschemas) that JSON
    Schema accepts but that cannot be what the author meant, so the check it was meant to make is
    silently not made:

    - a key that is no keyword but nearly one: ``requird`` is ignored, so the field it meant to
      require is optional; keys not close to a keyword are left alone (``example``, ``x-...``);
    - a ``required`` name that ``properties`` does not list (with ``additionalProperties: false`` no
      value can ever pass; otherwise the model is asked for a field nobody described), e.g. a
      property renamed and ``required`` left behind."""
    import difflib

    if not isinstance(schema, dict):
        return []
    out: list[tuple[str, str, str]] = []
    for key, value in schema.items():
        here = f"{where}.{key}" if where else str(key)
        if key in _SUBSCHEMA:
            out += schema_slips(value, here)
        elif key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                out += schema_slips(sub, f"{here}.{name}")
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            for i, sub in enumerate(value):
                out += schema_slips(sub, f"{here}[{i}]")
        elif isinstance(key, str) and key not in _SCHEMA_KEYWORDS and not key.startswith(("$", "x-")):
            close = difflib.get_close_matches(key, _SCHEMA_KEYWORDS, n=1, cutoff=0.75)
            if close and key != "example":
                out.append((here, f"unknown field {key!r} (JSON Schema ignores it)", f"did you mean {close[0]!r}?"))
    properties, required = schema.get("properties"), schema.get("required")
    if isinstance(properties, dict) and isinstance(required, list):
        for i, name in enumerate(required):
            if isinstance(name, str) and name not in properties:
                near = did_you_mean(name, [str(p) for p in properties])
                known = ", ".join(repr(str(p)) for p in properties) or "none"
                out.append(
                    (
                        f"{where}.required[{i}]" if where else f"required[{i}]",
                        f"{name!r} is required but not in properties (properties: {known})",
                        join_hints(near, "add it to properties or remove it from required") or "",
                    )
                )
    return out


class AgentOutput(Spec):
    """Structured output: the agent answers with JSON that validates against a schema."""

    json_schema: dict[str, Any] = Field(alias="schema")
    """JSON Schema (Draft 2020-12) the final answer must validate against; TurnResult.output holds it parsed."""
    retries: int = Field(default=DEFAULT_OUTPUT_RETRIES, ge=0, le=MAX_OUTPUT_RETRIES)
    """How often an answer that does not validate goes back to the model with the errors (default 2)."""

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _checked_json_schema(value, "output_schema", "output.schema")


MAX_APPROVAL_TIMEOUT_SECONDS = 366 * 24 * 3600


class AgentApproval(Spec):
    """Which tool calls wait for a person's approval before they run, and for how long."""

    tools: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+__[A-Za-z0-9_-]+$")]] = Field(default_factory=list)
    """Tools (<Tool>__<export>, built-in ones included, e.g. bash__exec) whose calls need approval."""
    timeout_seconds: float | None = Field(default=None, gt=0, le=MAX_APPROVAL_TIMEOUT_SECONDS)
    """Seconds an approval may wait; an undecided call is then denied (default: waits forever)."""


class AgentSpec(Spec):
    """Agent: a model, a prompt, tools and extensions that together answer requests."""

    model_cfg: ModelConfig = Field(alias="modelConfig")
    """The model this agent uses and its parameters."""
    prompt: Prompt | None = None
    """System prompt; the built-in context-message extension is attached implicitly when set."""
    tools: list[ToolItemLike] = Field(default_factory=list)
    """Tools the agent may call: Tool/<name>, {kind, name, package?} or {ref: ..., config?}."""
    extensions: list[ExtensionItem] = Field(default_factory=list)
    """Extensions around turns, steps and tool calls: a ref, or {ref, config} merged over spec.config."""
    required_tools: list[NonEmptyStr] = Field(default_factory=list)
    """Tools (<Tool>__<export>) the agent must call before it may finish a turn."""
    output: AgentOutput | None = None
    """Structured output: the final answer must be JSON valid against output.schema."""
    approval: AgentApproval | None = None
    """Tool calls that pause the turn until a person approves or denies them (and their expiry)."""
    steering: Literal["queue", "inject"] = "queue"
    """A user message arriving mid-turn: 'queue' waits for the next turn, 'inject' joins the running turn."""


# ---------------------------------------------------------------- Swarm


class Lifecycle(Spec):
    """When idle agent instances are evicted and their state collected."""

    ttl_seconds: int | None = Field(default=None, ge=0)
    """Idle seconds after which an agent instance's process is stopped."""
    gc_grace_seconds: int | None = Field(default=None, ge=0)
    """Seconds before the state of a stopped instance may be collected."""


class Shutdown(Spec):
    """How long agents may finish their turn when the swarm stops."""

    grace_period_seconds: int | None = Field(default=None, ge=0)
    """Seconds an agent may finish its turn when asked to stop."""


class SwarmPolicy(Spec):
    """Limits and lifecycle rules that apply to every agent of the swarm."""

    max_steps_per_turn: int | None = Field(default=None, ge=1)
    """Most model calls (steps) in one turn."""
    max_tool_calls_per_step: int | None = Field(default=None, ge=1)
    """Most tool calls the model may make in one step."""
    max_parallel_tool_calls: int | None = Field(default=None, ge=1)
    """Most tool calls of one step that run at the same time (default 8; 1 runs them one by one)."""
    max_call_depth: int | None = Field(default=None, ge=1)
    """Most inter-agent hops one chain of requests and sends may take (default 8)."""
    max_instance_spawns_per_second: float | None = Field(default=None, gt=0)
    """New instances agents may create per second, swarm-wide (default 20; bursts of one second's worth)."""
    max_instances: int | None = Field(default=None, ge=1)
    """Live instances above which agents may not create another (default 1024)."""
    lifecycle: Lifecycle | None = None
    """Idle eviction and state collection."""
    shutdown: Shutdown | None = None
    """Graceful shutdown."""


class OtlpExport(Spec):
    """Where the swarm's traces go over OTLP/HTTP (needs the ``otel`` extra). Any ``OTEL_*``
    environment variable that is set wins over the value here."""

    endpoint: NonEmptyStr
    """Base URL of an OTLP/HTTP receiver (``/v1/traces`` is appended unless the URL ends with it),
    e.g. http://localhost:4318 (Jaeger, an OpenTelemetry Collector)."""
    headers: dict[str, ValueSource] = Field(default_factory=dict)
    """Headers sent with every export, each a ValueSource, e.g. {Authorization: {valueFrom: {env: OTLP_AUTH}}}."""
    service_name: NonEmptyStr | None = None
    """service.name of the exported spans (default: goondan)."""

    @field_validator("headers", mode="before")
    @classmethod
    def _header_names(cls, value: Any) -> Any:
        for name in value if isinstance(value, dict) else ():
            if not isinstance(name, str) or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
                raise PydanticCustomError(
                    "header",
                    "not a valid HTTP header name (letters, digits and !#$%&'*+.^_`|~-)",
                    {"subpath": str(name)},
                )
        return value

    @field_validator("endpoint")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.match(r"^https?://[^\s/]+", value):
            raise PydanticCustomError("url", "endpoint must be an http(s) URL (OTLP over HTTP, e.g. port 4318)")
        return value


class Telemetry(Spec):
    """Export of the swarm's turns, steps, model and tool calls as OpenTelemetry spans."""

    otlp: OtlpExport
    """The OTLP/HTTP receiver to send spans to."""


class SwarmSpec(Spec):
    """Swarm: the agents that run together, and the one that receives requests first."""

    entry_agent: RefLike
    """The agent that receives requests (must be listed in agents)."""
    agents: list[RefItemLike] = Field(min_length=1)
    """The agents of this swarm."""
    instance_key: str | None = None
    """Conversation key used when a request names none."""
    policy: SwarmPolicy | None = None
    """Limits and lifecycle rules."""
    telemetry: Telemetry | None = None
    """OpenTelemetry export of traces (see README, Traces)."""

    @field_validator("instance_key")
    @classmethod
    def _non_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise PydanticCustomError("blank", "instanceKey must not be empty")
        return value


# ---------------------------------------------------------------- Tool


class ToolExport(Spec):
    """One function of a Tool as the model sees it (named <Tool>__<export>)."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")]
    """Export name (letters, digits, '_' and '-'; no '__')."""
    description: str
    """What the function does, shown to the model."""
    parameters: dict[str, Any]
    """JSON Schema (type: object) of the arguments."""
    approval: Literal["required", "none"] | None = None
    """'required': every call pauses the turn until a person approves or denies it."""
    parallel: bool | None = None
    """false: a call of this export runs alone, never at the same time as other calls of its step (default true)."""

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
            # say what it has: `parameters: {properties: ...}` without its type is the usual case
            found = "has no 'type'" if "type" not in value else f"has type {value['type']!r}"
            fix = (
                "add `type: object` beside its properties"
                if "type" not in value
                else "write `type: object`; put a single value in a property (properties: {value: {type: ...}})"
            )
            raise PydanticCustomError(
                "parameters",
                "parameters must be a JSON Schema with type: object (the arguments are an object of named "
                "properties); this one {found}",
                {"found": found, "suggestion": fix},
            )
        return _checked_json_schema(value, "parameters", "parameters")


class ToolSpec(Spec):
    """Tool: a Python module whose `handlers` dict implements the exported functions."""

    entry: NonEmptyStr
    """Python file (relative to the bundle) defining handlers = {'<export>': handler(ctx, input)}."""
    exports: list[ToolExport] = Field(min_length=1)
    """The functions this tool offers."""
    error_message_limit: int = Field(default=1000, ge=1)
    """Most characters of an error message returned to the model."""
    config: dict[str, Any] = Field(default_factory=dict)  # handed to handlers as ctx.config
    """Configuration handed to handlers as ctx.config; an agent's tools[].config is shallow-merged over it."""


# ---------------------------------------------------------------- Extension


class ExtensionSpec(Spec):
    """Extension: a Python module whose register(api[, config]) hooks into the pipeline."""

    entry: NonEmptyStr
    """Python file (relative to the bundle) defining register(api) or register(api, config)."""
    config: dict[str, Any] = Field(default_factory=dict)
    """Configuration passed to register(); an agent's extensions[].config is shallow-merged over it."""


# ---------------------------------------------------------------- Connector


class EventProperty(Spec):
    """Type of one property of a connector event."""

    type: Literal["string", "number", "boolean"]
    """Type of the property value."""
    optional: bool = False
    """Whether events may leave the property out."""


class ConnectorEvent(Spec):
    """An event a connector emits, with the properties ingress rules can match."""

    name: NonEmptyStr
    """Event name, unique within the connector."""
    properties: dict[str, EventProperty] = Field(default_factory=dict)
    """Properties of the event by name."""


class ConnectorSpec(Spec):
    """Connector: a Python module whose `async def run(ctx)` receives events from outside."""

    entry: NonEmptyStr
    """Python file (relative to the bundle) defining async def run(ctx)."""
    events: list[ConnectorEvent] = Field(min_length=1)
    """Events the connector emits."""


# ---------------------------------------------------------------- Connection


class IngressMatch(Spec):
    """Which events a rule takes: by event name and property values (compared as strings)."""

    event: NonEmptyStr | None = None
    """Event name to match."""
    properties: dict[str, Scalar] | None = None
    """Property values to match, compared as strings."""


class IngressRoute(Spec):
    """Where a matched event goes: an agent and an instance key."""

    agent_ref: RefLike | None = None
    """Agent that receives the event (default: the swarm's entryAgent)."""
    instance_key: str | None = None
    """Fixed conversation key."""
    instance_key_property: NonEmptyStr | None = None
    """Event property whose value becomes the conversation key."""
    instance_key_prefix: str | None = None
    """Prefix added to the conversation key."""

    @model_validator(mode="after")
    def _key_xor(self) -> IngressRoute:
        if self.instance_key is not None and self.instance_key_property is not None:
            raise PydanticCustomError(
                "route_xor", "use either 'instanceKey' or 'instanceKeyProperty' in a route, not both"
            )
        return self


class IngressRule(Spec):
    """One ingress rule; the first matching rule routes the event."""

    match: IngressMatch | None = None
    """Which events; a rule without one matches every event."""
    route: IngressRoute
    """Where they go."""


class Ingress(Spec):
    """How a Connection routes connector events to agents."""

    rules: list[IngressRule] = Field(default_factory=list)
    """Rules tried in order."""


class ConnectionSpec(Spec):
    """Connection: binds a Connector to a Swarm with config, secrets and ingress rules."""

    connector_ref: RefLike
    """The Connector this connection runs."""
    swarm_ref: RefLike | None = None
    """The Swarm events go to (default: 'default' or the only swarm)."""
    config: dict[str, ValueSource] = Field(default_factory=dict)
    """Connector configuration by key, each a ValueSource ({value} or {valueFrom: {env | secretRef}})."""
    secrets: dict[str, ValueSource] = Field(default_factory=dict)
    """Connector secrets by key, each a ValueSource; a required variable that is unset fails at load."""
    ingress: Ingress | None = None
    """How events are routed to agents."""


# ---------------------------------------------------------------- Package


class PackageDependency(Spec):
    """A package this bundle depends on: an installed Python distribution (README.md#packages)."""

    name: NonEmptyStr
    """Package name as its goondan.yaml declares it, e.g. @scope/name (its goondan.packages entry point name)."""
    version: str | None = None
    """PEP 440 version range of the distribution, e.g. '>=1.2,<2' (a bare '1.2.3' means exactly it; default: any)."""
    distribution: str | None = None
    """Python distribution that ships it (default: the name without '@', '/' as '-', e.g. scope-name)."""


class PackageRegistry(Spec):
    """Registry packages are published to."""

    url: NonEmptyStr
    """Registry URL."""


_SEMVER = r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$"


class PackageSpec(Spec):
    """Package: the bundle's own name, version and dependencies (first document of goondan.yaml)."""

    version: Annotated[str, Field(pattern=_SEMVER)] | None = None
    """Semantic version of this package."""
    description: str | None = None
    """One-line description."""
    access: Literal["public", "restricted"] | None = None
    """Who may install the package once published."""
    dependencies: list[PackageDependency] = Field(default_factory=list)
    """Packages this bundle uses resources of."""
    registry: PackageRegistry | None = None
    """Where the package is published."""


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
