"""A file a user saved in another encoding (Latin-1, UTF-16: Windows editors, old notes) is a
config or usage error naming the file, the line and column of its first bad byte and how to convert
it, from ``gdn validate`` and ``gdn run`` alike: never an INTERNAL_ERROR with a bare
UnicodeDecodeError, a wrong code, or a YAML syntax hint.

Real ``gdn`` processes over real files."""

from __future__ import annotations

import json
from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


def test_a_latin1_dotenv_is_a_config_error_at_its_line_not_an_internal_error(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    (bundle / ".env").write_bytes(b"GREETING=hello\nCITY=Montr\xe9al\n")
    validate = gdn(tmp_path, "validate", "b")
    assert validate.returncode == 4, validate.stdout + validate.stderr
    assert "[E_CONFIG_PARSE_ERROR] .env is not valid UTF-8 (byte 0xe9 at line 2, column 11)" in validate.stdout
    assert "iconv -f latin1 -t utf-8 .env" in validate.stdout
    run = gdn(tmp_path, "run", "b", "--input", "hi", "--json")
    assert run.returncode == 3, run.stderr
    error = json.loads(run.stderr.strip().splitlines()[-1])
    assert (error["code"], error["file"], error["line"], error["column"]) == ("E_CONFIG_PARSE_ERROR", ".env", 2, 11)
    assert "INTERNAL_ERROR" not in run.stderr and "Traceback" not in run.stderr


def test_a_latin1_env_file_option_is_named_as_the_user_typed_it(tmp_path: Path) -> None:
    write_bundle(tmp_path / "b", ECHO_BUNDLE)
    # beyond the 8 KiB a text reader decodes at a time: the line is still the file's
    (tmp_path / "local.env").write_bytes(b"".join(b"K%d=v\n" % i for i in range(3000)) + b"X=caf\xe9\n")
    run = gdn(tmp_path, "run", "b", "--input", "hi", "--env-file", "local.env")
    assert run.returncode == 3, run.stderr
    assert "[E_CONFIG_PARSE_ERROR] local.env is not valid UTF-8 (byte 0xe9 at line 3001, column 6)" in run.stderr


def test_a_latin1_input_file_is_a_usage_error_with_a_suggestion(tmp_path: Path) -> None:
    write_bundle(tmp_path / "b", ECHO_BUNDLE)
    (tmp_path / "question.txt").write_bytes(b"caf\xe9 or tea?")
    run = gdn(tmp_path, "run", "b", "--input-file", "question.txt")
    assert run.returncode == 2, run.stderr
    assert "[E_INVALID_ARGUMENT] --input-file question.txt is not UTF-8 text (byte 0xe9 at offset 3)" in run.stderr
    assert "suggestion: convert it (`iconv -f latin1 -t utf-8 question.txt`)" in run.stderr
    assert "--attach question.txt" in run.stderr
    assert "INTERNAL_ERROR" not in run.stderr


def test_a_yaml_file_not_in_utf8_is_reported_at_its_byte_with_how_to_convert_it(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    swarm = "apiVersion: goondan.ai/v1\nkind: Swarm\nmetadata: {name: other}\n# caf\xe9\n"
    (bundle / "swarm.yaml").write_bytes(swarm.encode("latin-1"))
    validate = gdn(tmp_path, "validate", "b")
    assert validate.returncode == 4
    assert "swarm.yaml: file is not valid UTF-8 (byte 0xe9" in validate.stdout
    assert "(swarm.yaml:4:6)" in validate.stdout
    assert "iconv -f latin1 -t utf-8 swarm.yaml > swarm.yaml.new" in validate.stdout
    assert "indentation" not in validate.stdout  # not the YAML syntax hint
    (bundle / "swarm.yaml").write_bytes(swarm.replace("\xe9", "e").encode("utf-16"))
    validate = gdn(tmp_path, "validate", "b")
    assert "it looks like UTF-16" in validate.stdout and "iconv -f utf-16 -t utf-8 swarm.yaml" in validate.stdout


def test_a_system_prompt_file_not_in_utf8_fails_validate_at_its_byte_not_the_start(tmp_path: Path) -> None:
    text = ECHO_BUNDLE.replace(
        "    modelRef: Model/echo\n", "    modelRef: Model/echo\n  prompt:\n    systemRef: ./prompts/talker.md\n", 1
    )
    bundle = write_bundle(tmp_path / "b", text)
    (bundle / "prompts").mkdir()
    (bundle / "prompts" / "talker.md").write_bytes("You answer in French.\nCaf\xe9 first.\n".encode("latin-1"))
    validate = gdn(tmp_path, "validate", "b")
    assert validate.returncode == 4, validate.stdout
    assert "[E_CONFIG_PARSE_ERROR] Agent/talker: prompts/talker.md is not valid UTF-8 (byte 0xe9" in validate.stdout
    assert "(prompts/talker.md:2:4)" in validate.stdout
    run = gdn(tmp_path, "run", "b", "--input", "hi")
    assert run.returncode == 3
    assert "[E_CONFIG_PARSE_ERROR]" in run.stderr and "E_CONFIG_ENTRY_NOT_FOUND" not in run.stderr
    assert "iconv -f latin1 -t utf-8 prompts/talker.md" in run.stderr
    # a BOM (Windows Notepad) is not part of the prompt
    (bundle / "prompts" / "talker.md").write_bytes(b"\xef\xbb\xbfYou answer in French.\n")
    assert gdn(tmp_path, "validate", "b").returncode == 0
