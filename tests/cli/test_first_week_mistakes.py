"""What a new user gets wrong in the first week, through real `gdn` subprocesses: a clear
``[CODE] message`` with a suggestion and the exit code of CONTRACT §9, never an INTERNAL_ERROR."""

from __future__ import annotations

from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


def test_init_into_a_file_or_an_unwritable_place_is_a_usage_error(tmp_path: Path) -> None:
    """`gdn init notes.txt` and a path under a file or a missing mount were INTERNAL_ERROR (exit 1)."""
    (tmp_path / "notes.txt").write_text("mine\n")
    on_file = gdn(tmp_path, "init", "notes.txt")
    assert on_file.returncode == 2, on_file.stderr
    assert on_file.stderr.startswith(f"[E_INVALID_ARGUMENT] {tmp_path / 'notes.txt'} is a file, not a directory")
    assert "suggestion: Give gdn init a directory" in on_file.stderr
    under_file = gdn(tmp_path, "init", "notes.txt/bot")
    assert under_file.returncode == 2, under_file.stderr
    assert under_file.stderr.startswith(f"[E_INVALID_ARGUMENT] cannot write {tmp_path / 'notes.txt' / 'bot'}")
    assert "Not a directory" in under_file.stderr and "suggestion: Choose a directory" in under_file.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_schema_output_to_a_missing_directory_or_a_directory_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "bundle").mkdir()
    for target, why in [("missing/goondan.schema.json", "No such file or directory"), ("bundle", "Is a directory")]:
        result = gdn(tmp_path, "schema", "-o", target)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"[E_INVALID_ARGUMENT] cannot write the schema to {target}: {why}")
        assert "suggestion: Give -o a file path" in result.stderr


def test_a_misspelt_dependency_names_the_installed_package(tmp_path: Path) -> None:
    """E_PACKAGE_MISSING only said how to install the misspelt name from the index (another
    project's, or nobody's); the installed package it is near comes first."""
    bundle = ECHO_BUNDLE.replace(
        "  version: 0.1.0\n", '  version: 0.1.0\n  dependencies: [{name: "@goondan/bsae"}]\n', 1
    )
    write_bundle(tmp_path / "b", bundle)
    result = gdn(tmp_path, "validate", "b")
    assert result.returncode == 4
    assert "[E_PACKAGE_MISSING] package @goondan/bsae is not installed" in result.stdout
    assert "suggestion: did you mean '@goondan/base', which is installed? Else install it" in result.stdout


def test_deleting_the_instance_of_a_running_chat_suggests_a_fresh_restart_that_works(tmp_path: Path) -> None:
    """E_RUN_ACTIVE said 'Stop that gdn run first, or pass --force'; --force deletes the conversation
    under the chat, whose every later line then failed with E_INSTANCE_LEASE_LOST. The suggestion now
    names the command that starts the conversation over inside the running chat; run as written, it works."""
    import shlex
    import subprocess
    import sys

    from cli_testkit import env_for

    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    env = env_for(tmp_path, GOONDAN_STATE_ROOT=str(tmp_path / "state"))
    chat = subprocess.Popen(
        [sys.executable, "-m", "goondan", "run", str(bundle)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert chat.stdin is not None and chat.stdout is not None
    try:
        chat.stdin.write("first\n")
        chat.stdin.flush()
        assert chat.stdout.readline() == "echo: first\n"
        state = ("--state-root", str(tmp_path / "state"))
        busy = gdn(tmp_path, "instance", "delete", "default", "--agent", "talker", "-y", *state)
        assert busy.returncode == 1 and busy.stderr.startswith("[E_RUN_ACTIVE]"), busy.stderr
        suggested = "gdn restart --fresh --agent talker --instance-key default"
        assert f"suggestion: To start the conversation over while it runs: {suggested}." in busy.stderr
        restarted = gdn(tmp_path, *shlex.split(suggested)[1:], *state)
        assert restarted.returncode == 0, restarted.stderr
        typo = gdn(tmp_path, "instance", "restart", "defualt", *state)
        assert typo.returncode == 1 and typo.stderr.startswith("[E_NO_ACTIVE_RUN]"), typo.stderr
        assert "suggestion: Did you mean 'default'?" in typo.stderr  # it said: start one with `gdn run`
        listed = gdn(tmp_path, "instance", "list", "--workspace", "nope", *state)
        assert listed.returncode == 0 and "There is no workspace 'nope'." in listed.stdout
        chat.stdin.write("second\n")
        chat.stdin.flush()
        assert chat.stdout.readline() == "echo: second\n"
        chat.stdin.close()
        assert chat.wait(30) == 0
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait()
    assert chat.stderr is not None and "E_INSTANCE_LEASE_LOST" not in chat.stderr.read()


def test_a_tab_in_the_indentation_is_named_with_its_line(tmp_path: Path) -> None:
    """An editor that indents with tabs: the error said 'found character that cannot start any token'
    and a suggestion listing five possible causes; the tab, which the editor does not show, is named."""
    assert gdn(tmp_path, "init", "-q", "-t", "minimal", "bot").returncode == 0
    manifest = tmp_path / "bot" / "goondan.yaml"
    text = manifest.read_text()
    manifest.write_text(text.replace("\n    modelRef:", "\n\t\tmodelRef:"))
    line = text[: text.index("    modelRef:")].count("\n") + 1
    for command, code in [("validate", 4), ("run", 3)]:
        result = gdn(tmp_path, command, "bot", *(["--input", "hi"] if command == "run" else []))
        assert result.returncode == code, result.stderr
        out = result.stdout + result.stderr
        assert f"[E_CONFIG_PARSE_ERROR] goondan.yaml: YAML parse error: line {line} is indented with a tab" in out
        assert f"(goondan.yaml:{line}:1)" in out and "suggestion: replace the tabs at the start of that line" in out


def test_a_renamed_agent_names_what_the_bundle_defines(tmp_path: Path) -> None:
    """Renaming the Agent of `gdn init -t minimal` (agent -> helper) left the Swarm's references with
    no suggestion at all: nothing is near enough for 'did you mean'. It now lists the Agents there are."""
    assert gdn(tmp_path, "init", "-q", "-t", "minimal", "bot").returncode == 0
    manifest = tmp_path / "bot" / "goondan.yaml"
    manifest.write_text(manifest.read_text().replace("\n  name: agent\n", "\n  name: helper\n"))
    result = gdn(tmp_path, "validate", "bot")
    assert result.returncode == 4
    assert "spec.entryAgent references Agent/agent, which does not exist" in result.stdout
    expected = "suggestion: Agents defined here: 'helper'; rename the reference or the resource to match"
    assert result.stdout.count(expected) == 2, result.stdout  # entryAgent and agents[0]


def test_output_into_a_pipe_closed_by_its_reader_is_not_an_internal_error(tmp_path: Path) -> None:
    """`gdn validate | head -5`, `gdn logs | head`: when the reader stops, gdn printed
    '[INTERNAL_ERROR] BrokenPipeError ... report it' (exit 1). It now exits 141 (128 + SIGPIPE, as a
    Unix tool killed by it) and says nothing."""
    import os
    import subprocess
    import sys

    from cli_testkit import env_for

    for command in (["schema"], ["completion", "bash"]):
        read, write = os.pipe()
        os.close(read)  # the reader is gone before gdn writes a byte
        try:
            done = subprocess.run(
                [sys.executable, "-m", "goondan", *command],
                stdout=write,
                stderr=subprocess.PIPE,
                text=True,
                env=env_for(tmp_path),
                timeout=60,
            )
        finally:
            os.close(write)
        assert done.returncode == 141, done.stderr
        assert done.stderr == "", done.stderr


def test_the_package_template_validates_without_a_warning(tmp_path: Path) -> None:
    """`gdn init -t package` prints 'Next: gdn validate acme/acme' whose first answer was a warning
    that the package defines no Swarm, 'nothing to run' (and --strict failed): a package's users' bundles
    hold the Swarm. A bundle that is not an import package still gets the warning."""
    created = gdn(tmp_path, "init", "-t", "package", "acme")
    assert created.returncode == 0 and "Next: gdn validate acme/acme &&" in created.stdout
    for strict in ([], ["--strict"]):
        result = gdn(tmp_path, "validate", "acme/acme", *strict)
        assert result.returncode == 0, result.stdout
        assert "Summary: errors=0, warnings=0" in result.stdout
    (tmp_path / "acme" / "acme" / "__init__.py").unlink()
    assert "E_CONFIG_SWARM_MISSING" in gdn(tmp_path, "validate", "acme/acme").stdout


def test_init_into_a_project_whose_yaml_the_bundle_would_read_writes_nothing(tmp_path: Path) -> None:
    """`gdn init .` in a machine-learning project: its configs/models.yaml is read as the bundle's
    resources, so the bundle gdn init had just called valid failed validate and run with five errors
    about the user's own file. Now nothing is written and the suggested directory works."""
    project = tmp_path / "proj"
    (project / "configs").mkdir(parents=True)
    (project / "configs" / "models.yaml").write_text("learning_rate: 0.1\nlayers: 3\n")
    (project / "config.yml").write_text("name: x\n")  # not a resource file name: fine
    (project / "tools.yaml").write_text("# to do\n---\n")  # empty documents: the loader skips them too
    refused = gdn(tmp_path, "init", "proj")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith(f"[E_INIT_CONFLICT] {project} holds YAML files")
    assert "not Goondan resources: configs/models.yaml;" in refused.stderr
    assert "Create it in a directory of its own (gdn init proj/bot)" in refused.stderr
    assert sorted(p.name for p in project.iterdir()) == ["config.yml", "configs", "tools.yaml"]
    assert gdn(tmp_path, "init", "proj/bot").returncode == 0
    assert gdn(tmp_path, "run", "proj/bot", "--input", "hello").returncode == 0
    assert gdn(tmp_path, "init", "proj", "--force").returncode == 0  # as the suggestion says
    assert (project / "goondan.yaml").is_file()


def test_another_bundles_manifest_copied_in_as_a_resource_file_is_named_as_such(tmp_path: Path) -> None:
    """Two bundles in one folder: the multi-agent template's goondan.yaml saved as agents.yaml beside
    the default template's. The error said to 'move the Package document to the top of goondan.yaml'."""
    assert gdn(tmp_path, "init", "-q", "bot").returncode == 0
    assert gdn(tmp_path, "init", "-q", "-t", "multi-agent", "team").returncode == 0
    (tmp_path / "bot" / "agents.yaml").write_text((tmp_path / "team" / "goondan.yaml").read_text())
    result = gdn(tmp_path, "validate", "bot")
    assert result.returncode == 4
    assert (
        "[E_CONFIG_PACKAGE_DOC_POSITION] agents.yaml has a Package document, which only goondan.yaml may have"
        in result.stdout
    )
    assert "suggestion: if agents.yaml is another bundle's goondan.yaml, give that bundle a directory" in result.stdout


def test_init_beside_a_goondan_yml_refuses_instead_of_doubling_every_resource(tmp_path: Path) -> None:
    """A bundle whose manifest is spelt goondan.yml: gdn init wrote goondan.yaml beside it, and the
    .yml was then read as a resource file: two Packages, every name defined twice."""
    write_bundle(tmp_path / "b", ECHO_BUNDLE)
    (tmp_path / "b" / "goondan.yaml").rename(tmp_path / "b" / "goondan.yml")
    refused = gdn(tmp_path, "init", "b")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith(f"[E_INIT_EXISTS] {tmp_path / 'b'} already holds a bundle (goondan.yml)")
    assert "`gdn validate --fix` does it" in refused.stderr
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["goondan.yml"]


def test_validate_in_the_bundle_names_its_directory(tmp_path: Path) -> None:
    """`gdn validate` run inside the bundle printed 'Validating ....' (the path '.' and three dots)."""
    bundle = write_bundle(tmp_path / "my-bot", ECHO_BUNDLE)
    for args in ([], ["."]):
        result = gdn(bundle, "validate", *args)
        assert result.returncode == 0, result.stdout
        assert result.stdout.startswith("Validating my-bot...\n"), result.stdout


def test_restart_fresh_without_a_running_run_says_how_to_start_over(tmp_path: Path) -> None:
    """getting-started said `gdn restart --fresh` starts a conversation over; after `gdn run --input`
    nothing runs, and the error only said to start a gdn run first."""
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    assert gdn(tmp_path, "run", str(bundle), "--input", "remember me").returncode == 0
    result = gdn(tmp_path, "restart", "--fresh")
    assert result.returncode == 1 and result.stderr.startswith("[E_NO_ACTIVE_RUN]"), result.stderr
    assert "with none running, `gdn instance delete KEY` deletes them" in result.stderr
    assert gdn(tmp_path, "instance", "delete", "default", "-y", "-A").returncode == 0  # as it says
    assert "No instances" in gdn(tmp_path, "instance", "list", "-A").stdout


def test_files_of_the_user_are_replaced_in_one_rename_keeping_their_mode(tmp_path: Path) -> None:
    """gdn validate --fix and gdn package lock rewrote goondan.yaml / goondan.lock in place (truncate,
    then write): a Ctrl+C or a full disk in between left the user's file empty or cut off. They are
    now replaced by a rename (a new inode), with the file's own permissions."""
    import os

    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE.replace("  entryAgent:", "  entry_agent:"))
    manifest = bundle / "goondan.yaml"
    manifest.chmod(0o640)
    before = manifest.stat().st_ino
    fixed = gdn(tmp_path, "validate", "b", "--fix", "-y")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "entryAgent:" in manifest.read_text()
    assert manifest.stat().st_ino != before and manifest.stat().st_mode & 0o777 == 0o640
    lock = bundle / "goondan.lock"
    assert gdn(tmp_path, "package", "lock", "--path", "b").returncode == 0
    lock.chmod(0o644)
    before = lock.stat().st_ino
    assert gdn(tmp_path, "package", "lock", "--path", "b").returncode == 0
    assert lock.stat().st_ino != before and lock.stat().st_mode & 0o777 == 0o644
    assert not [p for p in os.listdir(bundle) if p.endswith(".tmp")]
