"""What people expect from a CLI: version, help in every form, did-you-mean, examples and defaults in
every ``--help``, shell completion, and a ``gdn --help`` that starts at once."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from cli_testkit import env_for, gdn

from goondan.cli import build_parser
from goondan.cli._argparse import walk


def test_bare_gdn_prints_help_to_stdout_and_exits_0(tmp_path: Path) -> None:
    proc = gdn(tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: gdn") and "examples:" in proc.stdout
    assert proc.stderr == ""


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flag_prints_the_installed_distribution_version(tmp_path: Path, flag: str) -> None:
    proc = gdn(tmp_path, flag)
    assert proc.returncode == 0
    assert proc.stdout.startswith(f"gdn {metadata.version('goondan-runtime')} (goondan-runtime, Python ")


def test_help_command_prints_what_dash_dash_help_prints(tmp_path: Path) -> None:
    via_help = gdn(tmp_path, "help", "instance", "list")
    via_flag = gdn(tmp_path, "instance", "list", "--help")
    assert via_help.returncode == 0 and via_help.stdout == via_flag.stdout
    assert via_help.stdout.startswith("usage: gdn instance list")


def test_help_for_a_mistyped_command_suggests_the_closest(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "help", "valdate")
    assert proc.returncode == 2
    assert "[E_INVALID_ARGUMENT]" in proc.stderr and "did you mean 'gdn help validate'?" in proc.stderr


def test_mistyped_command_gets_did_you_mean(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "valdiate")
    assert proc.returncode == 2
    assert "did you mean 'validate'?" in proc.stderr


def test_mistyped_subcommand_action_gets_did_you_mean_and_its_parent_usage(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "instance", "lsit")
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: gdn instance") and "did you mean 'list'?" in proc.stderr


def test_unknown_option_reports_the_subcommand_usage_and_the_closest_option(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "validate", "--fromat", "json")
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: gdn validate")
    assert "unrecognized arguments: --fromat" in proc.stderr
    assert "did you mean '--format' instead of '--fromat'?" in proc.stderr
    nested = gdn(tmp_path, "approvals", "list", "--agnet", "x")
    assert nested.stderr.startswith("usage: gdn approvals list") and "'--agent'" in nested.stderr


def test_every_help_has_examples_and_every_real_default_is_shown() -> None:
    missing = []
    for path, parser in walk(build_parser()):
        assert "examples:\n  gdn" in parser.format_help(), f"gdn {path} --help has no examples"
        formatter = parser._get_formatter()
        for action in parser._actions:
            real_default = action.default not in (None, False, "==SUPPRESS==", 0)
            if action.option_strings and real_default and "(default" not in formatter._format_action(action):
                missing.append(f"gdn {path} {action.option_strings[-1]}")
    assert missing == []


def test_help_starts_without_heavy_imports(tmp_path: Path) -> None:
    heavy = ("starlette", "uvicorn", "ray", "psycopg", "opentelemetry", "httpx", "pydantic", "yaml", "goondan.bundle")
    best = float("inf")
    for _ in range(3):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "goondan", "--help"],
            capture_output=True,
            text=True,
            env=env_for(tmp_path),
            check=True,
        )
        rows = [line.split("|") for line in proc.stderr.splitlines() if line.startswith("import time:")]
        modules = {row[2].strip() for row in rows}
        assert not {m for m in modules if m.split(".")[0] in heavy or m.startswith("goondan.bundle")}
        # cumulative time of our top-level imports (interpreter start-up itself is not ours to cut)
        ours = sum(int(row[1]) for row in rows if row[2].startswith(" goondan"))
        best = min(best, ours / 1e6)
    assert best < 0.1, f"gdn --help spent {best:.3f} s importing"


def _bash_complete(script: Path, *words: str, cwd: Path | None = None) -> list[str]:
    probe = (
        f"source {script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)})\n"
        "COMP_CWORD=$((${#COMP_WORDS[@]}-1)); COMPREPLY=(); _gdn; printf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True, cwd=cwd)
    return [w for w in done.stdout.splitlines() if w]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is part of every CI image we use")
def test_bash_completion_completes_commands_actions_options_and_choices(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "completion", "bash")
    assert proc.returncode == 0
    script = tmp_path / "gdn.bash"
    script.write_text(proc.stdout)
    assert _bash_complete(script, "gdn", "va") == ["validate"]
    assert _bash_complete(script, "gdn", "instance", "") == ["list", "delete", "restart"]
    assert _bash_complete(script, "gdn", "validate", "--fo") == ["--format"]
    assert _bash_complete(script, "gdn", "validate", "--format", "") == ["text", "json", "github"]
    assert "--find-links" in _bash_complete(script, "gdn", "package", "add", "--")
    # the value of an option is not mistaken for a command (options taking a value are per command)
    assert "validate" in _bash_complete(script, "gdn", "--state-root", "run", "")
    assert _bash_complete(script, "gdn", "instance", "--state-root", "list", "") == ["list", "delete", "restart"]
    assert _bash_complete(script, "gdn", "run", "-i", "--inp") == ["--input", "--input-file"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is part of every CI image we use")
def test_bash_completion_offers_files_only_where_a_path_goes(tmp_path: Path) -> None:
    """`gdn help <Tab>` and `--executor <Tab>` offered the files of the current directory, and so did
    `--agent`, `--instance-key` and `--input`, as if gdn wanted a file there."""
    script = tmp_path / "gdn.bash"
    script.write_text(gdn(tmp_path, "completion", "bash").stdout)
    (tmp_path / "team").mkdir()
    assert "package" in _bash_complete(script, "gdn", "help", "")
    assert _bash_complete(script, "gdn", "help", "package", "") == ["add", "install", "lock", "build"]
    assert _bash_complete(script, "gdn", "help", "instance", "l") == ["list"]
    assert _bash_complete(script, "gdn", "run", "--executor", "") == ["inline", "process", "ray"]
    for option in ("--agent", "--instance-key", "--input", "--store"):
        assert _bash_complete(script, "gdn", "run", option, "") == [], option
    assert _bash_complete(script, "gdn", "run", "--input-file", "te", cwd=tmp_path) == ["team"]
    assert _bash_complete(script, "gdn", "schema", "-o", "te", cwd=tmp_path) == ["team"]
    assert _bash_complete(script, "gdn", "run", "te", cwd=tmp_path) == ["team"]  # the bundle path itself
    fish = gdn(tmp_path, "completion", "fish").stdout
    assert "-n '__gdn_path run' -l agent -x -d" in fish and "-n '__gdn_path run' -l input-file -r -F" in fish
    assert "complete -c gdn -n '__gdn_path help' -a 'init validate run" in fish


def _require(shell: str) -> None:
    """These tests run the real shell: without it they fail and say what to install (skipping them
    hid them on a CI image that lacked the shells)."""
    assert shutil.which(shell), f"{shell} is not installed: apt-get install {shell} (.ci/run does)"


def test_the_zsh_script_loads_and_completes_through_bashcompinit(tmp_path: Path) -> None:
    """zsh runs _gdn through bashcompinit, whose compgen calls it under `emulate -L sh` (0-based
    arrays): the same words as bash (zsh filters them by the prefix itself)."""
    _require("zsh")
    script = tmp_path / "gdn.zsh"
    script.write_text(gdn(tmp_path, "completion", "zsh").stdout)
    probe = (
        f"autoload -U compinit && compinit -u -D\nsource {script}\n"
        'c() { local -a COMP_WORDS COMPREPLY; local COMP_CWORD; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ));\n'
        '  ( emulate -L sh; setopt kshglob noshglob braceexpand; _gdn; print -r -- "${COMPREPLY[*]}" ) }\n'
        "c gdn ''\nc gdn help package ''\nc gdn run --executor ''\nc gdn validate --format ''\n"
    )
    done = subprocess.run(["zsh", "-f", "-c", probe], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("init validate run") and lines[1:] == [
        "add install lock build",
        "inline process ray",
        "text json github",
    ], done.stdout


def test_the_fish_script_completes_in_a_real_fish(tmp_path: Path) -> None:
    _require("fish")
    script = tmp_path / "gdn.fish"
    script.write_text(gdn(tmp_path, "completion", "fish").stdout)
    (tmp_path / "team").mkdir()

    def complete(line: str) -> list[str]:
        probe = f"source {script}; complete -C {shlex.quote(line)}"
        done = subprocess.run(["fish", "-c", probe], capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return [row.split("\t")[0] for row in done.stdout.splitlines()]

    assert complete("gdn help pa") == ["package"]
    assert complete("gdn package a") == ["add"]
    assert complete("gdn run --executor ") == ["inline", "process", "ray"]
    assert complete("gdn run --agent ") == []  # a name, not a file
    assert complete("gdn run te") == ["team/"]


def test_zsh_and_fish_scripts_cover_every_command(tmp_path: Path) -> None:
    zsh = gdn(tmp_path, "completion", "zsh").stdout
    assert zsh.startswith("#compdef gdn") and "bashcompinit" in zsh and "complete -o filenames -F _gdn gdn" in zsh
    fish = gdn(tmp_path, "completion", "fish").stdout
    for name in ("validate", "run", "package", "completion"):
        assert f"-n '__gdn_path \"\"' -a {name} " in fish
    assert "complete -c gdn -n '__gdn_path package' -a add" in fish
    assert "-n '__gdn_path validate' -l format -x -a 'text json github'" in fish
    _require("fish")
    script = tmp_path / "gdn.fish"
    script.write_text(fish)
    assert subprocess.run(["fish", "--no-execute", str(script)]).returncode == 0


def test_words_after_the_bundle_path_of_gdn_run_suggest_input(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "run", "my-bot", "hello", "world")
    assert proc.returncode == 2 and "unrecognized arguments: hello world" in proc.stderr
    assert "to send text, use --input 'hello world'" in proc.stderr, proc.stderr
    short = gdn(tmp_path, "run", "my-bot", "-i", "hi")  # -i is --interactive, not --input
    assert "to send text, use --input hi" in short.stderr, short.stderr
    other = gdn(tmp_path, "validate", "a", "b")  # a command without --input: no such hint
    assert other.returncode == 2 and "--input" not in other.stderr


def test_the_python_api_name_isolation_on_the_command_line_points_to_executor(tmp_path: Path) -> None:
    """``Runtime(isolation="inline")`` is ``gdn run --executor inline``: the word after the unknown
    option is its value, not text to send (it used to suggest ``--input inline``)."""
    for args in (("--isolation", "inline"), ("--isolation=process",)):
        proc = gdn(tmp_path, "run", "my-bot", *args)
        assert proc.returncode == 2
        assert "did you mean '--executor' instead of '--isolation'?" in proc.stderr, proc.stderr
        assert "--input" not in proc.stderr.split("unrecognized arguments", 1)[1], proc.stderr
