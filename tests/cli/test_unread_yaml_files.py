"""A resource written in a YAML file the bundle does not read (``coordinator.yaml``,
``team-swarm.yaml``: only ``goondan.yaml`` and files named after a kind are read) is named with the
file and the rename to make, where the reference is "not found" or the Swarm "missing": the user saw
the resource in their editor and the message said it does not exist."""

from __future__ import annotations

from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle

PACKAGE, MODEL, TALKER, HELPER, SWARM = ECHO_BUNDLE.split("---\n")


def test_an_agent_in_an_unread_file_is_named_where_its_reference_is_not_found(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", "---\n".join([PACKAGE, MODEL, HELPER, SWARM]))
    (bundle / "agents").mkdir()
    (bundle / "agents" / "talker.yaml").write_text(TALKER)
    validate = gdn(tmp_path, "validate", "b")
    assert validate.returncode == 4, validate.stdout
    assert "references Agent/talker, which does not exist" in validate.stdout
    assert (
        "suggestion: Agent/talker is defined in agents/talker.yaml, which the bundle does not read: it reads "
        "goondan.yaml and files named after a kind (agents.yaml, tools.yaml"
    ) in validate.stdout
    assert "rename agents/talker.yaml (e.g. to agents.yaml in the same directory)" in validate.stdout
    run = gdn(tmp_path, "run", "b", "--input", "hi")
    assert run.returncode == 3 and "is defined in agents/talker.yaml" in run.stderr
    # renamed as told, it runs
    (bundle / "agents" / "talker.yaml").rename(bundle / "agents" / "agents.yaml")
    assert gdn(tmp_path, "run", "b", "--input", "hi").stdout == "echo: hi\n"


def test_a_swarm_in_an_unread_file_is_named_by_validate_and_run(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", "---\n".join([PACKAGE, MODEL, TALKER, HELPER]))
    (bundle / "team-swarm.yaml").write_text(SWARM)
    validate = gdn(tmp_path, "validate", "b")
    assert "[E_CONFIG_SWARM_MISSING]" in validate.stdout
    assert "suggestion: its Swarm is in team-swarm.yaml, which the bundle does not read" in validate.stdout
    run = gdn(tmp_path, "run", "b", "--input", "hi")
    assert run.returncode == 3, run.stderr
    assert "[E_CONFIG_SWARM_NOT_FOUND] the bundle defines no Swarm" in run.stderr
    assert "its Swarm is in team-swarm.yaml, which the bundle does not read" in run.stderr
    # an unrelated YAML file (a CI config, an eval suite) changes nothing
    (bundle / "team-swarm.yaml").unlink()
    (bundle / "mkdocs.yml").write_text("site_name: docs\n")
    assert "add a Swarm resource" in gdn(tmp_path, "run", "b", "--input", "hi").stderr
