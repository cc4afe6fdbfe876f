"""Fixtures of the bundle tests: sample bundles, validation shortcuts (bundles are written with ``kit``)."""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import goondan.bundle  # noqa: F401
except ImportError:  # running from a checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from goondan.bundle import ValidationReport, validate_bundle
from goondan.errors import ConfigIssue
from kit import write_files

SAMPLE_MANIFEST = """
apiVersion: goondan.ai/v1
kind: Package
metadata:
  name: sample
spec:
  version: 1.0.0
---
apiVersion: goondan.ai/v1
kind: Model
metadata:
  name: fake
spec:
  provider: scripted
  model: test
  options:
    rules:
      - when: {role: user, contains: hi}
        reply: {text: "hello {{last}}"}
      - reply:
          toolCalls:
            - name: util__echo
              args: {text: x}
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: main
spec:
  modelConfig:
    modelRef: Model/fake
    params: {temperature: 0.5, maxTokens: 100}
  prompt:
    systemRef: ./prompts/main.md
  tools:
    - ref: Tool/util
    - Tool/util
  extensions:
    - ref: {kind: Extension, name: context-message, package: "@goondan/base"}
      config: {includeSwarmCatalog: true}
    - ref: Extension/local
      config: {b: 20}
  requiredTools: [util__echo]
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata:
  name: default
spec:
  entryAgent: Agent/main
  agents: [{ref: Agent/main}]
  policy: {maxStepsPerTurn: 5}
"""

SAMPLE_TOOLS = """
apiVersion: goondan.ai/v1
kind: Tool
metadata:
  name: util
spec:
  entry: ./tools/util.py
  exports:
    - name: echo
      description: Echo
      parameters: {type: object, properties: {text: {type: string}}}
---
apiVersion: goondan.ai/v1
kind: Extension
metadata:
  name: local
spec:
  entry: ./tools/ext.py
  config: {a: 1, b: 2}
"""

SAMPLE_FILES = {
    "goondan.yaml": SAMPLE_MANIFEST,
    "tools.yaml": SAMPLE_TOOLS,
    "tools/util.py": "import collections\n\nhandlers = collections.defaultdict(lambda: print)  # any export name\n",
    "tools/ext.py": "def register(api):\n    pass\n",
    "prompts/main.md": "You are main.\n",
}


HEADER = "apiVersion: goondan.ai/v1\n"


def codes(issues: list[ConfigIssue]) -> list[str]:
    return [i.code for i in issues]


def only(issues: list[ConfigIssue], code: str) -> ConfigIssue:
    matching = [i for i in issues if i.code == code]
    assert len(matching) == 1, issues
    return matching[0]


MODEL_DOC = """apiVersion: goondan.ai/v1
kind: Model
metadata:
  name: m
spec:
  provider: scripted
  model: x
  options:
    rules:
      - reply: {text: hi}
"""


def check(root: Path, files: dict[str, str], env: dict[str, str] | None = None) -> ValidationReport:
    """Write ``files`` (dedented) under ``root`` and validate; never raises."""
    write_files(root, files)
    return validate_bundle(root, env=env or {})


def real_base_root() -> Path:
    import goondan.bundle

    return Path(goondan.bundle.__file__).resolve().parent.parent / "base"
