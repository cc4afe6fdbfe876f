"""``goondan.Runtime`` starts no connector, so a program embedding it needs neither a Connection's
port nor its secrets set: ``Runtime(path)`` of the webhook-approvals recipe failed with
E_CONFIG_ENV_MISSING for PORT, and so did a reload. A Model's own variables are still required."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

import goondan
from goondan.errors import ConfigError

RECIPE = Path(__file__).resolve().parents[2] / "docs" / "cookbook" / "webhook-approvals"


@pytest.fixture
def bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("PORT", "WEBHOOK_SECRET", "SIGNING_SECRET"):
        monkeypatch.delenv(name, raising=False)
    target = tmp_path / "ops"
    shutil.copytree(RECIPE, target)
    assert "PORT" in (target / "goondan.yaml").read_text(encoding="utf-8")  # the Connection reads it
    return target


def test_a_runtime_of_a_bundle_with_a_connection_needs_none_of_its_variables(bundle: Path, tmp_path: Path) -> None:
    async def main() -> tuple[str, str | None]:
        async with goondan.Runtime(bundle, state_root=tmp_path / "s", executor="inline") as rt:
            first = await rt.request("delete old.log")
            await rt.restart()  # reads the bundle again, with the same rule
            return first.finish_reason, (await rt.request("hello")).finish_reason

    assert asyncio.run(main()) == ("awaiting_approval", "text_response")


def test_a_model_variable_the_runtime_uses_is_still_required(bundle: Path, tmp_path: Path) -> None:
    manifest = bundle / "goondan.yaml"
    manifest.write_text(
        manifest.read_text(encoding="utf-8").replace(
            "  provider: scripted\n", "  provider: scripted\n  apiKey: {valueFrom: {env: OPS_MODEL_KEY}}\n", 1
        ),
        encoding="utf-8",
    )

    async def main() -> None:
        async with goondan.Runtime(bundle, state_root=tmp_path / "s", executor="inline", env={}) as rt:
            await rt.request("hello")

    with pytest.raises(ConfigError) as info:
        asyncio.run(main())
    assert info.value.code == "E_CONFIG_ENV_MISSING" and "OPS_MODEL_KEY" in info.value.message
