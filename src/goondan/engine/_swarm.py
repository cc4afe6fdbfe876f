"""What every agent instance of one swarm shares: the loaded bundle, the selected swarm, the
workspace, and how to build an :class:`AgentInstance`. Every executor builds its instances through
this one class (wherever they run), so all of them run the same code for everything inside a turn."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import GoondanError
from ._agents import AgentLimits
from ._definition import AgentDefinition
from ._info import SwarmInfo
from ._instance import AgentInstance, RuntimeEventListener

if TYPE_CHECKING:
    from ..storage import InstanceStore, StoreBackend, WorkspaceStore
    from ._agents import AgentsHub

BASE_PACKAGE = "@goondan/base"
DEFAULT_GRACE_MS = 30000


class SwarmContext:
    def __init__(
        self,
        bundle: Any,
        *,
        swarm: str | None,
        state_root: Path,
        persist: bool,
        store: StoreBackend | str | None = None,
    ) -> None:
        from ..storage import bundle_workspace_identity, runtime_store

        self.bundle = bundle
        self.swarm = bundle.select_swarm(swarm)
        spec = self.swarm.spec
        self.swarm_name: str = self.swarm.name
        self.entry_agent: str = bundle.resolve_ref(spec.entry_agent, self.swarm, "Agent").name
        self.agent_names: frozenset[str] = frozenset(
            bundle.resolve_ref(a, self.swarm, "Agent").name for a in spec.agents
        )
        self.swarm_instance_key: str = spec.instance_key or self.swarm_name
        self.state_root = state_root
        self.persist = persist
        # the workspace belongs to this bundle and swarm: other bundles never share its conversations
        self.workspace_identity = bundle_workspace_identity(bundle, self.swarm)
        # ``store`` is the runtime's backend, or its URL where an executor opens it again elsewhere
        self.store_backend = runtime_store(store, persist=persist, state_root=state_root, env={})
        self.persist = self.store_backend.durable
        self.workspace: WorkspaceStore = self.store_backend.workspace(
            self.workspace_identity.workspace_id, identity=self.workspace_identity
        )
        self._plans: dict[str, Any] = {}
        self._definitions: dict[str, AgentDefinition] = {}
        self._tmpdir: str | None = None

    # --- policy -------------------------------------------------------------------------------

    @property
    def ttl_seconds(self) -> int | None:
        policy = self.swarm.spec.policy
        if policy is None or policy.lifecycle is None:
            return None
        ttl: int | None = policy.lifecycle.ttl_seconds
        return ttl

    @property
    def grace_period_ms(self) -> int:
        policy = self.swarm.spec.policy
        if policy is None or policy.shutdown is None or policy.shutdown.grace_period_seconds is None:
            return DEFAULT_GRACE_MS
        return int(policy.shutdown.grace_period_seconds) * 1000

    @property
    def agent_limits(self) -> AgentLimits:
        return AgentLimits.from_policy(self.swarm.spec.policy)

    @property
    def max_call_depth(self) -> int:
        return self.agent_limits.max_call_depth

    # --- instances ------------------------------------------------------------------------------

    def check_agent(self, agent: str) -> None:
        if agent not in self.agent_names:
            raise GoondanError(
                "E_AGENT_NOT_FOUND",
                f"agent '{agent}' is not part of swarm '{self.swarm_name}'",
                suggestion=f"Use one of: {', '.join(sorted(self.agent_names))}.",
            )

    def plan(self, agent: str) -> Any:
        plan = self._plans.get(agent)
        if plan is None:
            plan = self.bundle.agent_plan(agent, self.swarm)
            self._plans[agent] = plan
        return plan

    def output_schema(self, agent: str) -> dict[str, Any] | None:
        """``Agent.spec.output.schema`` of ``agent``, None without one (or for an unknown agent)."""
        if agent not in self.agent_names:
            return None
        output = getattr(self.plan(agent).agent.spec, "output", None)
        return output.json_schema if output is not None else None

    def swarm_info(self, agent: str) -> SwarmInfo:
        return SwarmInfo(
            swarm_name=self.swarm_name,
            entry_agent=self.entry_agent,
            self_agent=agent,
            available_agents=tuple(sorted(self.agent_names)),
            callable_agents=tuple(sorted(a for a in self.agent_names if a != agent)),
        )

    def _implicit_context_message(self, plan: Any) -> list[tuple[str, Path, dict[str, Any]]]:
        """Built-in extensions an agent gets without listing them: ``context-message`` when it has a
        prompt (so the prompt reaches the model) and ``required-tools-guard`` when it declares
        ``spec.requiredTools`` (so the declaration is enforced)."""
        listed = {b.resource.name for b in plan.extensions}
        out: list[tuple[str, Path, dict[str, Any]]] = []
        if plan.required_tools and "required-tools-guard" not in listed:
            guard = self.bundle.get("Extension", "required-tools-guard", package=BASE_PACKAGE)
            if guard is not None:
                config = dict(getattr(guard.spec, "config", None) or {})
                config["requiredTools"] = list(plan.required_tools)
                out.append(("required-tools-guard", guard.entry_path(), config))
        if plan.prompt_system and "context-message" not in listed:
            builtin = self.bundle.get("Extension", "context-message", package=BASE_PACKAGE)
            if builtin is not None:
                out.append(("context-message", builtin.entry_path(), dict(getattr(builtin.spec, "config", None) or {})))
        return out

    def store(self, agent: str, key: str) -> InstanceStore:
        return self.workspace.instance(agent, key)

    def _make_workdir(self, agent: str, key: str, store: InstanceStore) -> Path:
        """The working directory of one instance (``ToolContext.workdir``), created when asked for."""
        if store.path is not None:
            path = Path(store.path) / "workdir"
        else:
            if self._tmpdir is None:
                self._tmpdir = tempfile.mkdtemp(prefix="goondan-")
            from ..storage import instance_dir_name

            path = Path(self._tmpdir) / instance_dir_name(agent, key)
        from ..storage._atomic import ensure_private_dirs

        ensure_private_dirs(path)
        return path

    def build_instance(
        self,
        agent: str,
        key: str,
        *,
        hub: AgentsHub,
        listeners: list[RuntimeEventListener],
        delta_listeners: list[RuntimeEventListener],
    ) -> AgentInstance:
        return AgentInstance(
            definition=self.definition(agent),
            instance_key=key,
            store=self.store(agent, key),
            hub=hub,
            listeners=listeners,
            delta_listeners=delta_listeners,
        )

    def definition(self, agent: str) -> AgentDefinition:
        """What every instance of ``agent`` shares (engine/_definition.py), built on first use."""
        found = self._definitions.get(agent)
        if found is None:
            plan = self.plan(agent)
            found = self._definitions[agent] = AgentDefinition(
                plan,
                swarm_info=self.swarm_info(agent),
                bundle_root=Path(self.bundle.root),
                make_workdir=self._make_workdir,
                implicit_extensions=self._implicit_context_message(plan),
                env=self.bundle.env,
            )
        return found

    def clear_histories(self, agents: set[str] | None) -> None:
        """Forget the conversation and extension state of every stored instance of ``agents`` (all
        when ``None``): a fresh restart. Their instances must be stopped first."""
        for info in self.workspace.list_instances():
            if agents is None or info.agent_name in agents:
                store = self.workspace.instance(info.agent_name, info.instance_key)
                try:
                    store.clear_history()
                finally:
                    store.close()

    def entry_paths(self, agent: str) -> list[Path]:
        """Python files an agent's instances import (model, tools, extensions)."""
        plan = self.plan(agent)
        paths = [r.entry_path() for r in plan.tools]
        paths += [b.resource.entry_path() for b in plan.extensions]
        entry = (getattr(plan.model.spec, "options", None) or {}).get("entry")
        if isinstance(entry, str):
            paths.append(Path(plan.model.root) / entry)
        return paths

    def close(self) -> None:
        self.workspace.close()
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None


def swarm_env(bundle: Any) -> Mapping[str, str]:
    return dict(bundle.env)


__all__ = ["DEFAULT_GRACE_MS", "SwarmContext"]
