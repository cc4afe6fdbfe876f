"""Goondan adapter: the scenario as a bundle (python-provider model, one python tool, an extension that
registers the pass-through middlewares), run through ``goondan.Runtime``.

Variants (``--isolation inline|process``, ``--persist on|off``, ``--store URL``: the store of a
persisted run, default the filesystem store under a temporary state root; ``postgresql://...`` for
the PostgreSQL store). A variant the runtime refuses with
``E_ISOLATION_UNAVAILABLE`` is reported as n/a, so process isolation is picked up by the next run once
it exists, with no change here.
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _harness as h

MODEL = """
def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return {"text": "done"}
    return {"toolCalls": [{"name": "calc__add", "args": {"a": 1, "b": 2}}]}
"""

# With isolation="process" the tool and the middlewares run in another OS process, so probed runs count
# by appending one line per event to a file (PROBE); timed runs are written with PROBE = "".
TOOL = """
PROBE = {probe!r}


def add(ctx, args):
    if PROBE:
        with open(PROBE, "a") as f:
            f.write("call\\n")
    return args["a"] + args["b"]


handlers = {{"add": add}}
"""

EXT = """
PROBE = {probe!r}
LEVEL = {{"turn": "turn", "step": "model", "toolCall": "tool"}}


def register(api, config):
    for kind, n in dict(config.get("layers", {{}})).items():
        for _ in range(int(n)):
            if PROBE:

                async def layer(ctx, level=LEVEL[kind]):
                    with open(PROBE, "a") as f:
                        f.write(level + "\\n")
                    return await ctx.next()
            else:

                async def layer(ctx):
                    return await ctx.next()

            api.pipeline.register(kind, layer)
"""

KIND = {"turn": "turn", "model": "step", "tool": "toolCall"}


def write_bundle(root: Path, layers: dict[str, int], probe: str) -> Path:
    """The scenario bundle; ``probe`` is the file probed runs count into ("" = timed run, no counting)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "model.py").write_text(MODEL)
    (root / "calc.py").write_text(TOOL.format(probe=probe))
    (root / "ext.py").write_text(EXT.format(probe=probe))
    layer_yaml = "{" + ", ".join(f"{KIND[k]}: {n}" for k, n in layers.items()) + "}"
    (root / "goondan.yaml").write_text(
        f"""apiVersion: goondan.ai/v1
kind: Model
metadata: {{name: m}}
spec: {{provider: python, model: bench, options: {{entry: ./model.py}}}}
---
apiVersion: goondan.ai/v1
kind: Tool
metadata: {{name: calc}}
spec:
  entry: ./calc.py
  exports:
    - name: add
      description: add two numbers
      parameters: {{type: object, properties: {{a: {{type: integer}}, b: {{type: integer}}}}, required: [a, b]}}
---
apiVersion: goondan.ai/v1
kind: Extension
metadata: {{name: layers}}
spec: {{entry: ./ext.py, config: {{layers: {layer_yaml}}}}}
---
apiVersion: goondan.ai/v1
kind: Agent
metadata: {{name: a}}
spec:
  modelConfig: {{modelRef: Model/m}}
  tools: [Tool/calc]
  extensions: [Extension/layers]
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata: {{name: default}}
spec: {{entryAgent: Agent/a, agents: [Agent/a]}}
"""
    )
    return root


class GoondanRunner:
    def __init__(self, rt: Any, tmp: str) -> None:
        self.rt = rt
        self.tmp = tmp

    async def turn(self, conv: int) -> None:
        result = await self.rt.request("go", instance_key=f"c{conv}")
        if result.text != "done":
            raise AssertionError(f"goondan turn ended with {result!r}")

    async def close(self) -> None:
        await self.rt.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class GoondanAdapter(h.Adapter):
    def __init__(self) -> None:
        super().__init__(
            name="goondan",
            package="goondan-runtime",  # the distribution's name on PyPI (the import name is goondan)
            import_stmt="from goondan import Runtime",
            levels={
                "turn": "turn middleware `async def layer(ctx): return await ctx.next()` (api.pipeline.register)",
                "model": "step middleware (one step = one model call plus its tool calls), same body",
                "tool": "toolCall middleware, same body",
            },
            fake_model="a `python`-provider Model whose entry module's `generate(request)` returns the scripted "
            "tool call, then the text 'done'",
        )
        self.isolation = "inline"
        self.persist = False
        self.store: str | None = None
        self._mem_rt: Any = None
        self._mem_n = 0
        self._probe_file = Path(tempfile.mkdtemp(prefix="gdn-probe-")) / "probe.log"
        atexit.register(shutil.rmtree, self._probe_file.parent, True)

    def configure(self, args: argparse.Namespace) -> None:
        self.isolation = args.isolation
        self.persist = args.persist == "on"
        self.store = args.store or None
        self.tree_cpu = self.isolation == "process"  # instances run in child processes
        self.name = f"goondan {self.isolation} persist={'on' if self.persist else 'off'}"
        if self.store:
            self.name += f" store={self.store.split(':', 1)[0]}"
        self.notes = (
            "each conversation is a Runtime instance (instance_key) whose history grows across the timed turns"
            + ("; every message event is appended to disk, the turn fsync'd" if self.persist else "")
        )

    def version(self) -> str:
        import goondan

        return str(goondan.__version__)  # also right when run from a source tree (--goondan-src)

    def read_probe(self) -> tuple[int, dict[str, int]]:
        lines = self._probe_file.read_text().split() if self._probe_file.exists() else []
        return lines.count("call"), {level: lines.count(level) for level in h.LEVELS}

    async def _runtime(self, layers: dict[str, int], probe: bool) -> tuple[Any, str]:
        import goondan

        tmp = tempfile.mkdtemp(prefix="gdn-peers-")
        bundle = write_bundle(Path(tmp) / "bundle", layers, str(self._probe_file) if probe else "")
        try:
            rt = goondan.Runtime(
                bundle,
                state_root=Path(tmp) / "state",
                isolation=self.isolation,
                persist=self.persist,
                **({"store": self.store} if self.store else {}),  # older sources (--goondan-src) have no store=
            )
        except goondan.GoondanError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if exc.code == "E_ISOLATION_UNAVAILABLE":
                raise h.Unavailable(f"{exc.code}: {exc.message}") from exc
            raise
        await rt.start()
        return rt, tmp

    async def make(self, layers: dict[str, int], probe: bool = False) -> h.Runner:
        rt, tmp = await self._runtime(layers, probe)
        return GoondanRunner(rt, tmp)

    async def new_agent(self) -> Any:
        """One more started agent instance in a running Runtime (the bundle is loaded once)."""
        if self._mem_rt is None:
            self._mem_rt, tmp = await self._runtime({}, False)
            atexit.register(shutil.rmtree, tmp, True)
        self._mem_n += 1
        return await self._mem_rt.get_instance("a", f"m{self._mem_n}")


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--isolation", default="inline", choices=["inline", "process"])
    parser.add_argument("--persist", default="off", choices=["on", "off"])
    parser.add_argument("--store", default="", help="store URL of a persisted run (default: the filesystem store)")


if __name__ == "__main__":
    h.main(GoondanAdapter(), _args)
