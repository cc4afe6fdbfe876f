"""Run `gdn` the way a user types it, with HOME and the state root inside the test's tmp_path.

:data:`ECHO_BUNDLE` is the default bundle of the CLI tests (write it with ``kit.write_bundle``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ECHO_BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Package
metadata:
  name: cli-suite
spec:
  version: 0.1.0
---
apiVersion: goondan.ai/v1
kind: Model
metadata:
  name: echo
spec:
  provider: scripted
  model: echo
  options:
    rules:
      - reply:
          text: "echo: {{last}}"
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: talker
spec:
  modelConfig:
    modelRef: Model/echo
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: helper
spec:
  modelConfig:
    modelRef: Model/echo
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata:
  name: default
spec:
  entryAgent: Agent/talker
  agents: [Agent/talker, Agent/helper]
"""


#: a webhook Connection whose config and secret come from HOOK_PATH and WEBHOOK_SECRET
WEBHOOK_CONNECTION = """\
---
apiVersion: goondan.ai/v1
kind: Connection
metadata:
  name: http
spec:
  connectorRef: { kind: Connector, name: webhook, package: "@goondan/base" }
  config:
    path: { valueFrom: { env: HOOK_PATH } }
  secrets:
    signingSecret: { valueFrom: { env: WEBHOOK_SECRET } }
"""

AUDIT_EXTENSION = """\
---
apiVersion: goondan.ai/v1
kind: Extension
metadata: {name: audit}
spec:
  entry: ./audit.py
"""


def bundle_with_audit(tmp_path: Path, source: str) -> Path:
    """:data:`ECHO_BUNDLE` whose entry agent carries Extension/audit, written from ``source``."""
    from kit import write_bundle

    agent = "    modelRef: Model/echo\n  extensions: [Extension/audit]\n"
    text = ECHO_BUNDLE.replace("    modelRef: Model/echo\n", agent, 1) + AUDIT_EXTENSION
    return write_bundle(tmp_path / "b", text, files={"audit.py": source})


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GOONDAN_STATE_ROOT" and not k.endswith("_API_KEY")}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    # inline isolation keeps the suite fast; tests that need the default pass GOONDAN_ISOLATION="process"
    env.update({"HOME": str(home), "NO_COLOR": "1", "TERM": "dumb", "GOONDAN_ISOLATION": "inline"})
    env.update(extra)
    return env


def gdn(
    tmp_path: Path, *args: str, stdin: str | None = None, timeout: float = 60, **extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "goondan", *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env_for(tmp_path, **extra),
        timeout=timeout,
        cwd=tmp_path,
    )


def fresh_venv(path: Path, *pth_lines: str) -> Path:
    """A new virtual environment (``python -m venv``) that also sees this environment's packages.

    The runtime and its dependencies come from here through a ``.pth`` adding our site directories
    (what ``--system-site-packages`` does for a system Python); whatever is installed into the new
    venv stays there. ``pth_lines`` are more ``.pth`` lines run at its start-up. Returns its python.
    """
    import site

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=60)
    (lib,) = (path / "lib").glob("python3*/site-packages")
    parents = [p for p in site.getsitepackages() if Path(p).is_dir()]
    lines = [f"import site; site.addsitedir({p!r})" for p in parents] + list(pth_lines)
    (lib / "_parent_env.pth").write_text("".join(f"{line}\n" for line in lines))
    return path / "bin" / "python"
