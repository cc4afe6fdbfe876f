"""The skills extension: discovery, the context block, and the four tools (see the package docstring)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from goondan.base.extensions.skills._catalog import Skill, read_skill, resolve_dirs, scan
from goondan.base.extensions.skills._synced_message import sync_system_message
from goondan.base.extensions.tool_search import extension_name
from goondan.base.tools._env import child_env, parse_env_policy
from goondan.base.tools._process import run_process
from goondan.types import ExtensionApi, StepContext, StepResult, ToolContext, TurnContext, TurnResult

DEFAULT_EXTENSION_NAME = "skills"
DEFAULT_DIRS = ["skills", ".claude/skills", ".agent/skills"]
DEFAULT_TIMEOUT_MS = 60_000
DEFAULT_MAX_TIMEOUT_MS = 600_000
DEFAULT_OUTPUT_LIMIT = 20_000
DEFAULT_MAX_SKILL_CHARS = 20_000
MARKER = "__goondanSkills"

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "discovery": {
            "type": "object",
            "properties": {"repoSkillDirs": {"type": "array", "items": {"type": "string", "minLength": 1}}},
            "additionalProperties": False,
        },
        "injectCatalog": {"type": "boolean"},
        "maxSkillChars": {"type": "integer", "minimum": 100},
        "run": {
            "type": "object",
            "properties": {
                "timeoutMs": {"type": "integer", "minimum": 1},
                "maxTimeoutMs": {"type": "integer", "minimum": 1},
                "outputLimit": {"type": "integer", "minimum": 100},
                # the same shape as the bash Tool's env config (goondan.base.tools._env)
                "env": {
                    "type": "object",
                    "properties": {
                        "allow": {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z0-9_*?\\[\\]!]+$"}},
                        "set": {
                            "type": "object",
                            "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
                            "additionalProperties": {"type": ["string", "number", "boolean"]},
                        },
                    },
                    "additionalProperties": False,
                },
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}


class _Skills:
    """The per-instance view: the latest scan and the open-skill list (mirrored in ``api.state``)."""

    def __init__(self, api: ExtensionApi, config: dict[str, Any]) -> None:
        self.api = api
        self.name = extension_name(api, DEFAULT_EXTENSION_NAME)
        discovery = config.get("discovery") or {}
        self.dirs: list[str] = list(discovery.get("repoSkillDirs") or DEFAULT_DIRS)
        self.inject = bool(config.get("injectCatalog", True))
        self.max_chars = int(config.get("maxSkillChars", DEFAULT_MAX_SKILL_CHARS))
        run = config.get("run") or {}
        self.timeout_ms = int(run.get("timeoutMs", DEFAULT_TIMEOUT_MS))
        self.max_timeout_ms = int(run.get("maxTimeoutMs", DEFAULT_MAX_TIMEOUT_MS))
        self.output_limit = int(run.get("outputLimit", DEFAULT_OUTPUT_LIMIT))
        # a skill's command output lands in the history: never hand it the runtime's secrets
        self.env_policy = parse_env_policy(run.get("env"), "Extension/skills config run")
        self.base: Path | None = None
        self.skills: dict[str, Skill] = {}
        self.reported: set[str] = set()  # problems already logged: a rescan runs every turn

    # --- discovery ---------------------------------------------------------------------------

    def rescan(self) -> dict[str, Skill]:
        problems: list[str] = []
        self.skills = scan(resolve_dirs(self.dirs, self.base), problems)
        for problem in problems:
            if problem not in self.reported:
                self.reported.add(problem)
                self.api.logger.warning("%s", problem)
        return self.skills

    def note_runtime(self, runtime: Any) -> None:
        root = getattr(getattr(runtime, "agent", None), "bundle_root", None)
        if isinstance(root, str) and root:
            self.base = Path(root)

    def get(self, name: str) -> Skill:
        skill = self.skills.get(name) or self.rescan().get(name)
        if skill is None:
            known = ", ".join(sorted(self.skills)) or "(none)"
            raise _SkillError(
                "E_SKILL_NOT_FOUND",
                f"Skill not found: {name}",
                f"Available skills: {known}. Call {self.name}__list to refresh.",
            )
        return skill

    # --- state ---------------------------------------------------------------------------------

    async def state(self) -> dict[str, Any]:
        value = await self.api.state.get()
        return value if isinstance(value, dict) else {}

    async def open_names(self) -> list[str]:
        names = (await self.state()).get("openSkills")
        return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []

    async def set_open(self, names: list[str]) -> None:
        await self.api.state.set({**(await self.state()), "openSkills": names})

    # --- the context block -------------------------------------------------------------------------

    def block(self, open_names: list[str]) -> str:
        if not self.skills and not open_names:
            return ""
        lines = [
            "[skills.catalog]",
            f"Skills are task guides with scripts. Read one with {self.name}__open, run a command in its "
            f"directory with {self.name}__run, and {self.name}__close it when done.",
        ]
        lines += [f"- {s.name}: {s.description}" for s in self.skills.values()]
        lines.append("[/skills.catalog]")
        for name in open_names:
            skill = self.skills.get(name)
            if skill is None:
                continue
            try:
                content, _ = read_skill(skill, self.max_chars)
            except OSError:
                continue
            lines += ["", f"[skills.open name={skill.name} dir={skill.dir}]", content.rstrip(), "[/skills.open]"]
        return "\n".join(lines)


class _SkillError(Exception):
    def __init__(self, code: str, message: str, suggestion: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.suggestion = suggestion


def register(api: ExtensionApi, config: dict[str, Any]) -> None:
    sk = _Skills(api, config)
    tool = sk.name

    async def turn(ctx: TurnContext) -> TurnResult:
        # a fresh scan per turn: skills added while the swarm runs show up at the next turn
        sk.note_runtime(ctx.runtime)
        sk.rescan()
        return await ctx.next()

    async def step(ctx: StepContext) -> StepResult:
        if sk.inject:
            state = await sk.state()
            open_names = [n for n in await sk.open_names() if n in sk.skills]
            message_id = sync_system_message(
                ctx, marker=MARKER, extension=tool, text=sk.block(open_names), remembered_id=state.get("messageId")
            )
            if message_id != state.get("messageId"):
                await api.state.set({**(await sk.state()), "messageId": message_id})
        return await ctx.next()

    async def list_skills(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        skills = sk.rescan()
        open_names = set(await sk.open_names())
        items = [{**s.summary(), "open": s.name in open_names} for s in skills.values()]
        return {"skills": items, "count": len(items)}

    async def open_skill(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        skill = sk.get(str(args["name"]))
        content, truncated = read_skill(skill, sk.max_chars)
        names = await sk.open_names()
        if skill.name not in names:
            await sk.set_open([*names, skill.name])
        return {
            "name": skill.name,
            "dir": str(skill.dir),
            "path": str(skill.path),
            "truncated": truncated,
            "content": content,
            "hint": f"Kept in your context until {tool}__close. Run commands in its directory with {tool}__run.",
        }

    async def close_skill(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        name = str(args["name"])
        names = await sk.open_names()
        if name in names:
            await sk.set_open([n for n in names if n != name])
        return {"name": name, "closed": name in names}

    async def run_skill(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        skill = sk.get(str(args["name"]))
        command = str(args["command"])
        extra = [str(a) for a in args.get("args") or []]
        timeout_ms = min(int(args.get("timeoutMs") or sk.timeout_ms), sk.max_timeout_ms)
        line = " ".join([command, *(shlex.quote(a) for a in extra)])
        workdir = getattr(ctx, "workdir", None)
        env = child_env(sk.env_policy, Path(workdir) if workdir is not None else skill.dir)
        env.update({"GOONDAN_SKILL_NAME": skill.name, "GOONDAN_SKILL_DIR": str(skill.dir)})
        if workdir is not None:
            env["GOONDAN_WORKDIR"] = str(workdir)
        outcome = await run_process(
            ["/bin/sh", "-c", line], cwd=skill.dir, env=env, timeout_ms=timeout_ms, output_limit=sk.output_limit
        )
        return {
            "skill": skill.name,
            "command": line,
            "cwd": str(skill.dir),
            "exitCode": outcome.exit_code,
            "signal": outcome.signal,
            "timedOut": outcome.timed_out,
            "durationMs": outcome.duration_ms,
            "stdout": outcome.stdout,
            "stderr": outcome.stderr,
            "stdoutTruncated": outcome.stdout_truncated,
            "stderrTruncated": outcome.stderr_truncated,
        }

    name_param = {"name": {"type": "string", "minLength": 1, "description": "The skill's name."}}
    api.tools.register(
        {
            "name": f"{tool}__list",
            "description": "List the available skills (rescans the skill directories).",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
        list_skills,
    )
    api.tools.register(
        {
            "name": f"{tool}__open",
            "description": "Open a skill: returns its SKILL.md and keeps it in your context until closed.",
            "parameters": {
                "type": "object",
                "properties": name_param,
                "required": ["name"],
                "additionalProperties": False,
            },
        },
        open_skill,
    )
    api.tools.register(
        {
            "name": f"{tool}__close",
            "description": "Close an open skill (removes its SKILL.md from your context).",
            "parameters": {
                "type": "object",
                "properties": name_param,
                "required": ["name"],
                "additionalProperties": False,
            },
        },
        close_skill,
    )
    api.tools.register(
        {
            "name": f"{tool}__run",
            "description": "Run a shell command inside a skill's directory (e.g. './deploy.sh staging'). "
            "Returns exit code, stdout and stderr; the command is killed at the timeout.",
            "parameters": {
                "type": "object",
                "properties": {
                    **name_param,
                    "command": {"type": "string", "minLength": 1, "description": "Shell command line."},
                    "args": {"type": "array", "items": {"type": "string"}, "description": "Extra arguments."},
                    "timeoutMs": {
                        "type": "integer",
                        "minimum": 1,
                        "description": f"Timeout in ms (default {sk.timeout_ms}, max {sk.max_timeout_ms}).",
                    },
                },
                "required": ["name", "command"],
                "additionalProperties": False,
            },
            "errorMessageLimit": 2000,
        },
        run_skill,
    )
    api.pipeline.register("turn", turn)
    api.pipeline.register("step", step)
