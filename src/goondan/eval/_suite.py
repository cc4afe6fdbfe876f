"""The eval suite file: YAML read with line numbers, checked by a pydantic schema, every problem reported
as ``E_EVAL_SUITE_INVALID`` at ``file:line`` (docs/guides/evaluating.md describes the format)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..bundle._paths import close_path
from ..errors import GoondanError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ToolExpectation(_Strict):
    name: str = Field(min_length=1)
    args: dict[str, Any] | None = None
    """Arguments the call must contain (subset match)."""
    times: int | None = Field(default=None, ge=0)


class Expectations(_Strict):
    """Deterministic checks of a scenario; each one is a criterion scored 0 or 1."""

    tool_called: list[ToolExpectation] = Field(default_factory=list, alias="toolCalled")
    tool_not_called: list[str] = Field(default_factory=list, alias="toolNotCalled")
    text_contains: list[str] = Field(default_factory=list, alias="textContains")
    text_regex: list[str] = Field(default_factory=list, alias="textRegex")
    output_schema: dict[str, Any] | None = Field(default=None, alias="outputSchema")
    max_steps: int | None = Field(default=None, ge=1, alias="maxSteps")
    max_tokens: int | None = Field(default=None, ge=0, alias="maxTokens")
    max_latency_ms: float | None = Field(default=None, gt=0, alias="maxLatencyMs")
    finish_reason: str | None = Field(default="text_response", alias="finishReason")

    @field_validator("tool_called", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        # a bare tool name is a call with any arguments
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("text_contains", "text_regex", "tool_not_called", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("text_contains", "text_regex", mode="before")
    @classmethod
    def _numbers_as_text(cls, value: Any) -> Any:
        # `textContains: 5` (the sum the answer must state) is a YAML number: the text "5", not
        # "Input should be a valid list"
        def text(item: Any) -> Any:
            return str(item) if isinstance(item, (int, float)) and not isinstance(item, bool) else item

        return [text(v) for v in value] if isinstance(value, list) else text(value)

    @field_validator("text_regex")
    @classmethod
    def _regex(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
        return value

    @field_validator("output_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            import jsonschema

            try:
                jsonschema.Draft202012Validator.check_schema(value)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
        return value


class Criterion(_Strict):
    """A rubric criterion graded by the judge model with a score from 0 to 1."""

    name: str = Field(min_length=1)
    criterion: str = Field(min_length=1)
    pass_score: float = Field(default=0.5, ge=0, le=1, alias="passScore")


class Scenario(_Strict):
    name: str = Field(min_length=1)
    input: str | list[dict[str, Any]] | None = None
    """The user's message: text, or content parts (``{type: text, text}``, images, files)."""
    turns: list[str | list[dict[str, Any]]] | None = None
    """A scripted multi-turn exchange: one request each, in order, on the same conversation; the
    checks look at the last turn (tool checks at all of them)."""
    agent: str | None = None
    instance_key: str | None = Field(default=None, alias="instanceKey")
    expect: Expectations = Field(default_factory=Expectations)
    rubric: list[Criterion] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_input(self) -> Scenario:
        if (self.input is None) == (self.turns is None):
            raise ValueError("a scenario needs exactly one of 'input' or 'turns'")
        if self.turns is not None and not self.turns:
            raise ValueError("'turns' needs at least one message")
        return self

    @property
    def inputs(self) -> list[str | list[dict[str, Any]]]:
        if self.turns is not None:
            return list(self.turns)
        assert self.input is not None
        return [self.input]


class ModelConfig(_Strict):
    """A Model spec for the judge: provider, model, options, endpoint, apiKey (a ValueSource)."""

    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)
    options: dict[str, Any] = Field(default_factory=dict)
    endpoint: str | None = None
    api_key: dict[str, Any] | None = Field(default=None, alias="apiKey")

    @field_validator("provider")
    @classmethod
    def _known(cls, value: str) -> str:
        from ..models._providers import KNOWN_PROVIDERS

        if value not in KNOWN_PROVIDERS:
            raise ValueError(f"unknown provider {value!r}; use one of {', '.join(sorted(KNOWN_PROVIDERS))}")
        return value


class Judge(_Strict):
    model: ModelConfig
    instructions: str | None = None
    """Extra guidance prepended to every grading request."""

    @field_validator("model", mode="before")
    @classmethod
    def _short_form(cls, value: Any) -> Any:
        if isinstance(value, str):
            provider, sep, model = value.partition("/")
            if not sep:
                raise ValueError("write the judge model as provider/model or as a mapping")
            return {"provider": provider, "model": model}
        return value


class Price(_Strict):
    """USD per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class Suite(_Strict):
    name: str | None = None
    bundle: str | None = None
    """The bundle directory, relative to the suite file (``--bundle`` wins)."""
    swarm: str | None = None
    agent: str | None = None
    threshold: float = Field(default=1.0, ge=0, le=1)
    """The pass rate (passed scenarios / all) under which ``gdn eval`` exits 1."""
    concurrency: int = Field(default=4, ge=1)
    judge: Judge | None = None
    prices: dict[str, Price] = Field(default_factory=dict)
    """``provider/model`` (or a prefix of the model name) -> price; overrides the built-in table."""
    models: dict[str, str] = Field(default_factory=dict)
    """Model overrides: Model name -> provider/model (``--model-override`` wins)."""
    scenarios: list[Scenario] = Field(min_length=1)

    @model_validator(mode="after")
    def _checks(self) -> Suite:
        names = [s.name for s in self.scenarios]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate is not None:
            raise ValueError(f"two scenarios are named {duplicate!r}; names must be unique")
        if self.judge is None and any(s.rubric for s in self.scenarios):
            raise ValueError("scenarios have rubric criteria but the suite configures no judge model")
        return self


# --- YAML with line numbers ----------------------------------------------------------------------


def _walk(node: yaml.Node, path: tuple[Any, ...], lines: dict[tuple[Any, ...], int]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else str(key)
            lines[(*path, name)] = key.start_mark.line + 1
            _walk(value, (*path, name), lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), lines)


def _line(lines: dict[tuple[Any, ...], int], loc: tuple[Any, ...]) -> int | None:
    path = tuple(loc)
    while True:
        if path in lines:
            return lines[path]
        if not path:
            return None
        path = path[:-1]


def _aliases() -> dict[str, str]:
    """python field name -> the camelCase spelling users write, for error paths."""
    out: dict[str, str] = {}
    for model in (Expectations, Scenario, Criterion, ModelConfig, Suite, Judge, ToolExpectation, Price):
        for name, info in model.model_fields.items():
            if info.alias:
                out[name] = info.alias
    return out


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``loc`` (list indexes skipped)."""
    import typing

    model: type[BaseModel] = Suite
    for part in loc:
        if isinstance(part, int):
            continue
        field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        if field is None:
            return None
        stack, found = [field.annotation], None
        while stack and found is None:
            annotation = stack.pop()
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                found = annotation
            else:
                stack.extend(typing.get_args(annotation))
        if found is None:
            return None
        model = found
    return model


def _unknown_field(name: str, model: type[BaseModel] | None) -> str:
    """``unknown field 'inptu'; did you mean 'input'? Allowed fields: ...`` (pydantic says "Extra
    inputs are not permitted", which names neither the mistake nor the fix)."""
    from .._hints import did_you_mean

    if model is None:
        return f"unknown field {name!r}"
    allowed = [f.alias or n for n, f in model.model_fields.items()]
    hint = did_you_mean(name, allowed)
    return f"unknown field {name!r}; " + (f"{hint} " if hint else "") + f"Allowed fields: {', '.join(allowed)}"


def load_suite(path: str | Path) -> tuple[Suite, Path]:
    """Read and check a suite file; returns the suite and its directory (relative paths start there)."""
    file = Path(path)
    if not file.is_file():
        inside = sorted(file.glob("*.y*ml")) if file.is_dir() else []
        near = close_path(file) if not file.exists() else inside[0] if len(inside) == 1 else None
        hint = f"did you mean {os.path.relpath(near)}? " if near is not None and near.is_file() else ""
        raise GoondanError(
            "E_EVAL_SUITE_NOT_FOUND",
            f"eval suite {file} ({os.path.abspath(file)}) "
            + ("does not exist" if not file.exists() else "is not a file"),
            suggestion=f"{hint}Pass the path of a suite YAML file (docs/guides/evaluating.md shows one).",
        )
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:  # saved as Latin-1 or UTF-16: an error at the byte, not a traceback
        data = exc.object
        row = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise GoondanError(
            "E_EVAL_SUITE_YAML",
            f"{file}:{row}:{column}: the suite is not valid UTF-8 (byte 0x{data[exc.start]:02x})",
            suggestion=f"Save it as UTF-8 (`iconv -f latin1 -t utf-8 {file} > {file}.new`, then rename it over "
            "the original).",
        ) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(file)
        raise GoondanError(
            "E_EVAL_SUITE_YAML",
            f"{where}: the suite is not valid YAML: {getattr(exc, 'problem', None) or exc}",
            suggestion="Fix the YAML syntax at that line.",
        ) from None
    lines: dict[tuple[Any, ...], int] = {}
    if node is not None:
        _walk(node, (), lines)
    if not isinstance(data, dict):
        raise GoondanError(
            "E_EVAL_SUITE_INVALID",
            f"{file}:1: the suite must be a mapping with a 'scenarios' list",
            suggestion="Start from the example in docs/guides/evaluating.md.",
        )
    try:
        suite = Suite.model_validate(data)
    except ValidationError as exc:
        aliases = _aliases()
        problems: list[str] = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            # pydantic names union members in the location ("str", "list[...]"): not user paths
            user_loc = tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or p in {"str", "list"})))
            line = _line(lines, tuple(aliases.get(p, p) if isinstance(p, str) else p for p in user_loc))
            dotted = ".".join(str(aliases.get(p, p)) if isinstance(p, str) else str(p) for p in user_loc)
            message = str(error["msg"]).removeprefix("Value error, ")
            if error["type"] == "extra_forbidden" and user_loc and isinstance(user_loc[-1], str):
                message = _unknown_field(user_loc[-1], _model_at(user_loc[:-1]))
            problems.append(f"{file}:{line or 1}: {dotted or '(suite)'}: {message}")
        unique = list(dict.fromkeys(problems))
        raise GoondanError(
            "E_EVAL_SUITE_INVALID",
            "the eval suite has problems:\n  " + "\n  ".join(unique),
            suggestion="Fix the fields named above; docs/guides/evaluating.md lists every field.",
        ) from None
    return suite, file.parent.resolve()


def slug(name: str) -> str:
    """A filesystem-safe directory name for a scenario's state root."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "scenario"


FormatName = Literal["text", "json", "junit"]

__all__ = ["Criterion", "Expectations", "Judge", "ModelConfig", "Price", "Scenario", "Suite", "load_suite", "slug"]
