"""What the runtime needs to start one agent, resolved once from the bundle."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._paths import TextProblem, read_text_file
from ._resource import Resource
from ._schemas import AgentSpec, SwarmSpec, ToolSpec
from ._values import resolve_config

if TYPE_CHECKING:
    from ._bundle import Bundle

DEFAULT_MAX_STEPS_PER_TURN = 32


@dataclass
class ExtensionBinding:
    """An Extension as one agent uses it: ``config`` is ``spec.config`` overlaid by the agent's item."""

    resource: Resource
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.resource.name


@dataclass
class AgentPlan:
    agent: Resource
    swarm: Resource | None
    model: Resource
    tools: list[Resource]
    extensions: list[ExtensionBinding]
    required_tools: list[str]
    prompt_system: str | None
    max_steps_per_turn: int
    params: dict[str, Any] = field(default_factory=dict)  # Agent.spec.modelConfig.params, as written
    # Tool name -> its spec.config with the agent's tools[].config shallow-merged over it
    tool_configs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def tool_names(self) -> list[str]:
        return tool_names(self.tools)


def tool_names(tools: Iterable[Resource]) -> list[str]:
    """LLM-facing names ``<Tool resource>__<export>`` of ``tools``, in declaration order."""
    names: list[str] = []
    for tool in tools:
        if isinstance(tool.spec, ToolSpec):
            names.extend(f"{tool.name}__{export.name}" for export in tool.spec.exports)
    return names


def max_steps(swarm: Resource | None) -> int:
    if swarm is not None and isinstance(swarm.spec, SwarmSpec) and swarm.spec.policy is not None:
        value = swarm.spec.policy.max_steps_per_turn
        if value is not None:
            return value
    return DEFAULT_MAX_STEPS_PER_TURN


def build_plan(bundle: Bundle, agent: Resource, swarm: Resource | None) -> AgentPlan:
    spec = agent.spec
    assert isinstance(spec, AgentSpec)
    model = bundle.resolve_ref(spec.model_cfg.model_ref, agent, "Model")
    tools: list[Resource] = []
    tool_configs: dict[str, dict[str, Any]] = {}
    raw_items = agent.raw.get("spec", {}).get("tools") or []
    for index, tool_ref in enumerate(spec.tools):
        tool = bundle.resolve_ref(tool_ref, agent, "Tool")
        if all(tool is not seen for seen in tools):
            tools.append(tool)
        item = raw_items[index] if index < len(raw_items) else None
        override = (item.get("config") or {}) if isinstance(item, dict) else {}
        base = tool_configs.get(tool.name) or tool.raw.get("spec", {}).get("config") or {}
        tool_configs[tool.name] = {**base, **override}
    extensions: list[ExtensionBinding] = []
    for use in spec.extensions:
        ext = bundle.resolve_ref(use.ref, agent, "Extension")
        base = ext.raw.get("spec", {}).get("config") or {}
        config = resolve_config({**base, **use.config}, bundle.env, path=f"{agent.key} config of {ext.key}")
        extensions.append(ExtensionBinding(ext, config))
    # valueFrom entries become the variables' values (docs/handbook.md#environment-env-files-and-secrets)
    for tool in tools:
        tool_configs[tool.name] = resolve_config(
            tool_configs.get(tool.name) or {}, bundle.env, path=f"{agent.key} config of {tool.key}"
        )
    available = tool_names(tools)
    for index, required in enumerate(spec.required_tools):
        if required not in available:
            raise agent.error(
                "E_CONFIG_SCHEMA_INVALID",
                required_tool_message(agent, required, available),
                f"spec.requiredTools[{index}]",
                "list tools as '<Tool name>__<export name>' of a Tool in spec.tools",
            )
    prompt: str | None = None
    if spec.prompt is not None:
        if spec.prompt.system_ref is not None:
            path = agent.resolve_file(spec.prompt.system_ref, "spec.prompt.systemRef", python=False)
            try:
                prompt = read_text_file(path, spec.prompt.system_ref)
            except TextProblem as exc:
                raise agent.error(
                    "E_CONFIG_PARSE_ERROR", f"{agent.key}: {exc.message}", "spec.prompt.systemRef", exc.suggestion
                ) from None
            except OSError as exc:
                raise agent.error(
                    "E_CONFIG_ENTRY_NOT_FOUND",
                    f"{agent.key}: cannot read systemRef file: {exc}",
                    "spec.prompt.systemRef",
                ) from None
        else:
            prompt = spec.prompt.system
    if prompt is not None and not prompt.strip():
        prompt = None
    params = agent.raw.get("spec", {}).get("modelConfig", {}).get("params") or {}
    return AgentPlan(
        agent=agent,
        swarm=swarm,
        model=model,
        tools=tools,
        extensions=extensions,
        required_tools=list(spec.required_tools),
        prompt_system=prompt,
        max_steps_per_turn=max_steps(swarm),
        tool_configs=tool_configs,
        params=dict(params),
    )


def required_tool_message(agent: Resource, required: str, available: list[str]) -> str:
    listing = ", ".join(available) if available else "none"
    return f"{agent.key}: spec.requiredTools({required}) is not one of the agent's tools (available: {listing})"
