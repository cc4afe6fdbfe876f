"""The facade picks its executor by name: ``executor=`` (``isolation=`` is the old name of the same
option), else ``GOONDAN_EXECUTOR`` (``GOONDAN_ISOLATION``), else ``process``. A name nobody provides is
a clear ``E_EXECUTOR_UNSUPPORTED`` with the known names, and a registered executor plugs in without a
branch in the facade."""

from __future__ import annotations

import ast
import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import goondan
import kit
from goondan import GoondanError
from goondan.executors import (
    ExecutorOptions,
    InlineExecutor,
    executor_names,
    open_executor,
    register_executor,
    resolve_executor_name,
)

ROOT = Path(__file__).resolve().parents[2]


def bundle(root: Path) -> Path:
    model = "def generate(request):\n    return {'text': 'hello from ' + request.agent_name}\n"
    docs = [kit.package_doc(), kit.python_model_doc(), kit.agent_doc("a"), kit.swarm_doc(["a"])]
    return kit.write_bundle(root, *docs, files={"model.py": model})


@pytest.fixture(autouse=True)
def _no_executor_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOONDAN_EXECUTOR", raising=False)
    monkeypatch.delenv("GOONDAN_ISOLATION", raising=False)


def test_executor_defaults_to_process_and_isolation_is_an_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    assert goondan.Runtime(".").executor.name == "process"
    assert goondan.Runtime(".", executor="inline").executor.name == "inline"
    assert goondan.Runtime(".", isolation="inline").executor.name == "inline"
    assert goondan.Runtime(".", executor="inline", isolation="inline").isolation == "inline"
    monkeypatch.setenv("GOONDAN_ISOLATION", "inline")
    assert goondan.Runtime(".").executor.name == "inline"
    monkeypatch.setenv("GOONDAN_EXECUTOR", "process")
    assert goondan.Runtime(".").executor.name == "process"  # the new name wins over the old one
    assert goondan.Runtime(".", executor="inline").executor.name == "inline"  # the argument wins


def test_executor_and_isolation_that_disagree_are_refused() -> None:
    with pytest.raises(GoondanError) as info:
        goondan.Runtime(".", executor="inline", isolation="process")
    assert info.value.code == "E_RUNTIME_OPTION"
    assert info.value.suggestion


def test_ray_without_its_extra_is_a_clear_error_naming_the_extra(tmp_path: Path) -> None:
    """A machine without ``goondan-runtime[ray]``: a child Python in which ``import ray`` fails."""
    script = (
        "import sys; sys.modules['ray'] = None\n"
        "import goondan\n"
        "try:\n"
        "    goondan.Runtime('.', executor='ray')\n"
        "except goondan.GoondanError as exc:\n"
        "    print(exc.code, '|', exc.suggestion)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "E_RAY_NOT_INSTALLED | pip install 'goondan-runtime[ray]'"


def test_a_bad_executor_in_the_environment_is_an_error_not_a_silent_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOONDAN_EXECUTOR", "inlien")
    with pytest.raises(GoondanError) as info:
        goondan.Runtime(".")
    assert info.value.code == "E_EXECUTOR_UNSUPPORTED"
    assert "'inlien'" in info.value.message


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=20), st.sampled_from(["inline", "process", " Inline ", "PROCESS", "ray", "r"])))
def test_any_executor_name_is_an_executor_or_a_clear_error(name: str) -> None:
    try:
        chosen = resolve_executor_name(name, None, {})
        built = open_executor(chosen)
    except GoondanError as exc:
        assert exc.code in ("E_EXECUTOR_UNSUPPORTED",)
        assert exc.suggestion
        return
    assert built.name in executor_names()
    assert built.name == (name.strip().lower() or "process")


def test_a_registered_executor_plugs_in_by_name(tmp_path: Path) -> None:
    class Counting(InlineExecutor):
        """An inline executor that counts the turns it ran: the facade needs nothing else."""

        name = "counting"
        turns = 0

        async def submit(self, agent: str, instance_key: str, event: dict[str, object]) -> goondan.TurnResult:
            type(self).turns += 1
            return await super().submit(agent, instance_key, event)

    def factory(options: ExecutorOptions) -> Counting:
        return Counting(options)

    register_executor("counting", factory)
    assert "counting" in executor_names()
    root = bundle(tmp_path / "b")

    async def main() -> str | None:
        async with goondan.Runtime(root, state_root=tmp_path / "state", executor="counting") as rt:
            return (await rt.request("hi")).text

    assert asyncio.run(main()) == "hello from a"
    assert Counting.turns == 1


def test_builtin_names_cannot_be_taken_over() -> None:
    with pytest.raises(GoondanError) as info:
        register_executor("process", InlineExecutor)
    assert info.value.code == "E_EXECUTOR_UNSUPPORTED"


def test_the_facade_never_branches_on_the_executor_or_touches_its_internals() -> None:
    """Everything that depends on where instances run lives behind the Executor protocol."""
    source = (ROOT / "src" / "goondan" / "runtime" / "_runtime.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    names = {"inline", "process", "ray"}
    compares = [
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        and any(isinstance(c, ast.Constant) and c.value in names for c in [node.left, *node.comparators])
    ]
    assert compares == []
    private = sorted(
        {
            ast.unparse(node)
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and isinstance(node.value, ast.Attribute)
            and node.value.attr in ("executor", "orchestrator", "_orch")
        }
    )
    assert private == []
    assert "handles" not in source
