"""What every instance of one agent shares (one per agent of a loaded swarm, kept by the
:class:`~goondan.engine._swarm.SwarmContext`): the plan and what is read or built from it once.

An agent instance is one conversation; a swarm may hold thousands of them, most idle. Whatever
does not depend on the conversation lives here instead of in each instance: the ``ctx.runtime``
agent and swarm descriptions, the limits and policies read from the Agent and Swarm specs, and the
tool entries of the agent's Tool resources (catalog item with its frozen parameter schema, handler,
config), which are immutable once built. A reload builds a new context and with it new definitions.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..tools import ToolEntry
from . import _approvals as approvals
from ._info import AgentInfo, PromptInfo, SwarmInfo
from ._parallel import DEFAULT_MAX_PARALLEL_TOOL_CALLS

if TYPE_CHECKING:
    from ..bundle import AgentPlan
    from ..storage import InstanceStore

# How many tool calls of one model response run (Swarm.spec.policy.maxToolCallsPerStep overrides it);
# the calls beyond it are answered with E_TOOL_CALL_LIMIT without running.
DEFAULT_MAX_TOOL_CALLS_PER_STEP = 128

ImplicitExtension = tuple[str, Path, dict[str, Any]]
WorkdirFactory = Callable[[str, str, "InstanceStore"], Path]


class AgentDefinition:
    """One agent of a loaded swarm, as all its instances see it (read-only for them)."""

    __slots__ = (
        "_params",
        "_tools",
        "agent_info",
        "approval",
        "bundle_root",
        "env",
        "implicit_extensions",
        "make_workdir",
        "max_parallel_tools",
        "max_steps",
        "max_tool_calls",
        "name",
        "output_retries",
        "output_schema",
        "plan",
        "steering",
        "swarm_info",
    )

    def __init__(
        self,
        plan: AgentPlan,
        *,
        swarm_info: SwarmInfo,
        bundle_root: Path,
        make_workdir: WorkdirFactory,
        implicit_extensions: list[ImplicitExtension] | None = None,
        env: Any = None,
    ) -> None:
        self.plan = plan
        self.name: str = plan.agent.name
        self.swarm_info = swarm_info
        self.bundle_root = bundle_root
        self.make_workdir = make_workdir
        # configs are copied for each instance that registers them (register() may change its dict)
        self.implicit_extensions: list[ImplicitExtension] = list(implicit_extensions or [])
        self.env = env if env is not None else {}
        self.agent_info = AgentInfo(
            name=self.name,
            bundle_root=str(bundle_root),
            prompt=PromptInfo(plan.prompt_system) if plan.prompt_system else None,
        )
        self.max_steps = plan.max_steps_per_turn
        agent_spec = getattr(plan.agent, "spec", None)
        output_cfg = getattr(agent_spec, "output", None)
        self.output_schema: dict[str, Any] | None = output_cfg.json_schema if output_cfg is not None else None
        self.output_retries: int = output_cfg.retries if output_cfg is not None else 0
        policy = getattr(getattr(plan.swarm, "spec", None), "policy", None)
        self.max_tool_calls: int = getattr(policy, "max_tool_calls_per_step", None) or DEFAULT_MAX_TOOL_CALLS_PER_STEP
        self.max_parallel_tools: int = (
            getattr(policy, "max_parallel_tool_calls", None) or DEFAULT_MAX_PARALLEL_TOOL_CALLS
        )
        self.steering = getattr(agent_spec, "steering", None) == "inject"
        self.approval = approvals.ApprovalPolicy.of_plan(plan)
        self._tools: dict[str, tuple[ModuleType, list[ToolEntry]]] = {}
        self._params: dict[str, Any] | None = None

    def model_params(self) -> dict[str, Any]:
        """``Agent.spec.modelConfig.params`` as the model request carries them (never changed in place)."""
        params = self._params
        if params is None:
            agent_spec: Any = self.plan.agent.spec
            raw = agent_spec.model_cfg.params
            params = self._params = raw.model_dump(by_alias=True, exclude_none=True) if raw is not None else {}
        return params

    def tool_entries(
        self, resource_name: str, module: ModuleType, build: Callable[[], list[ToolEntry]]
    ) -> list[ToolEntry]:
        """The entries of one Tool resource, built by ``build`` for the first instance and shared
        by the next ones, as long as the resource's module is the same object (a restart that
        forgot the module imports it again, and gets entries with the new handlers)."""
        cached = self._tools.get(resource_name)
        if cached is not None and cached[0] is module:
            return cached[1]
        entries = build()
        self._tools[resource_name] = (module, entries)
        return entries


def trace_llm_input() -> bool:
    """``GOONDAN_TRACE_LLM_INPUT``: read once per instance (an environment lookup per step is
    measurable on the hot path)."""
    return os.environ.get("GOONDAN_TRACE_LLM_INPUT", "") not in ("", "0")


__all__ = ["DEFAULT_MAX_TOOL_CALLS_PER_STEP", "AgentDefinition", "ImplicitExtension", "WorkdirFactory"]
