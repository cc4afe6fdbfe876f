"""skills: exposes ``SKILL.md`` bundles to the model.

**Discovery.** Every direct sub-directory of a directory in ``discovery.repoSkillDirs`` that holds a
``SKILL.md`` is a skill. Relative directories resolve against the **bundle root**
(``ctx.runtime.agent.bundle_root``): the v0.9 "repo root" is the project that ships the skills, and
the extension API hands out no other root (an instance's workdir starts empty and is not visible to
middleware). Absolute and ``~`` paths are used as they are. The directories are rescanned at the
start of every turn and by ``skills__list``, so skills added while the swarm runs appear without a
restart. Missing directories are skipped.

**Context.** Before each step (step middleware) the extension keeps ONE system message in the
conversation: a ``[skills.catalog]`` block listing each skill's name and description, followed by
a ``[skills.open ...]`` block with the full ``SKILL.md`` of every open skill. It is deduplicated by
a content hash: unchanged → no message event; changed → ``replace`` of the same message (so history
never holds two generations); gone (e.g. removed by compaction) → appended again. A system message
rather than catalog descriptions, because open skills carry long instructions a tool description
should not.

**Tools** (named ``<extension>__...``, i.e. ``skills__...`` under the default name):
``list`` (rescan; name, description, dir, open), ``open`` (returns SKILL.md and keeps the skill open),
``close``, and ``run`` (``name``, ``command``, ``args``, ``timeoutMs``): runs ``/bin/sh -c`` with the
command line inside the skill's directory as its own process group, captures stdout/stderr (head and
tail kept within ``run.outputLimit``), and kills the whole group at the timeout. A non-zero exit code
is reported, not raised. ``GOONDAN_SKILL_DIR``, ``GOONDAN_SKILL_NAME`` and ``GOONDAN_WORKDIR`` (the
instance workdir) are set for the command.

**State.** ``api.state`` holds ``{"openSkills": [...], "messageId": ...}``; it is saved at turn end,
so open skills survive turns and restarts.

Config: ``discovery.repoSkillDirs`` (default ``["skills", ".claude/skills", ".agent/skills"]``),
``injectCatalog`` (true), ``maxSkillChars`` (20000), ``run.timeoutMs`` (60000), ``run.maxTimeoutMs``
(600000), ``run.outputLimit`` (20000 bytes per stream).
"""

from goondan.base.extensions.skills._extension import CONFIG_SCHEMA, register

__all__ = ["CONFIG_SCHEMA", "register"]
