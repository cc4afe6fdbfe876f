"""``gdn run --attach FILE`` (repeatable): the files reach the model as image and file parts, the
conversation on disk keeps them by reference, and a bad or oversized file is a clear error."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

from cli_testkit import ECHO_BUNDLE, env_for, gdn

import kit
from goondan.cli._attach import attachment_part

ONE_SHOT = ("--input", "look", "--attach", "cat.png", "-v")
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4

# the python model answers with the parts of the last message: type, media type, name, hash of the bytes
MODEL = """\
import base64, hashlib, json


def generate(request):
    out = []
    content = request.messages[-1]["content"]
    for p in [{"type": "text", "text": content}] if isinstance(content, str) else content:
        if p["type"] == "text":
            out.append(["text", p["text"]])
        else:
            digest = hashlib.sha256(base64.b64decode(p["data"])).hexdigest()
            out.append([p["type"], p["mediaType"], p.get("name"), digest])
    return {"text": json.dumps(out)}
"""


def bundle(root: Path) -> Path:
    docs = [kit.package_doc(), kit.python_model_doc(), kit.agent_doc("a"), kit.swarm_doc(["a"])]
    return kit.write_bundle(root, *docs, files={"model.py": MODEL})


def test_attached_files_reach_the_model_as_parts_and_are_stored_by_reference(tmp_path: Path) -> None:
    root = bundle(tmp_path / "b")
    (tmp_path / "cat.png").write_bytes(PNG)
    (tmp_path / "notes.txt").write_text("hello", encoding="utf-8")
    state = tmp_path / "state"
    proc = gdn(
        tmp_path,
        "run",
        str(root),
        "--state-root",
        str(state),
        "--input",
        "look",
        "--attach",
        "cat.png",
        "--attach",
        "notes.txt",
        GOONDAN_EXECUTOR="process",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [
        ["text", "look"],
        ["image", "image/png", None, hashlib.sha256(PNG).hexdigest()],
        ["file", "text/plain", "notes.txt", hashlib.sha256(b"hello").hexdigest()],
    ]
    [inst] = kit.instance_dirs(state)
    assert base64.b64encode(PNG).decode()[:40] not in (inst / "messages" / "base.jsonl").read_text(encoding="utf-8")
    assert sorted(p.name for p in (inst / "attachments").iterdir()) == sorted(
        hashlib.sha256(b).hexdigest() for b in (PNG, b"hello")
    )


def test_a_media_type_suffix_overrides_the_guess() -> None:
    assert attachment_part("/tmp/scan.bin:image/png")["mediaType"] == "image/png"
    assert attachment_part("/tmp/scan.bin:image/png")["type"] == "image"
    assert attachment_part("/tmp/report.pdf") == {
        "type": "file",
        "mediaType": "application/pdf",
        "name": "report.pdf",
        "path": "/tmp/report.pdf",
    }


def test_a_media_type_one_typo_from_a_known_one_is_refused_with_the_type_meant(tmp_path: Path) -> None:
    """`--attach notes.txt:text/plainn` was sent as a file of type text/plainn, which providers refuse
    once the turn is under way; `:image/jpg` (a common name for image/jpeg) became a file part."""
    root = bundle(tmp_path / "b")
    (tmp_path / "notes.txt").write_text("hello", encoding="utf-8")
    state = str(tmp_path / "state")
    typo = gdn(tmp_path, "run", str(root), "--state-root", state, "--input", "x", "--attach", "notes.txt:text/plainn")
    assert typo.returncode == 2 and "Traceback" not in typo.stderr, typo.stderr
    assert typo.stderr.startswith(
        "[E_CONTENT_MEDIA_TYPE] --attach notes.txt:text/plainn: text/plainn is not a known media type; "
        "did you mean 'text/plain'?\n"
    )
    assert "suggestion: Attach it as notes.txt:text/plain, or leave the type out" in typo.stderr
    # a type far from every known one is the user's own (a vendor type): taken as written
    vendor = gdn(
        tmp_path,
        "run",
        str(root),
        "--state-root",
        state,
        "--input",
        "x",
        "--attach",
        "notes.txt:application/vnd.acme+json",
    )
    assert vendor.returncode == 0, vendor.stderr
    assert json.loads(vendor.stdout)[1][:3] == ["file", "application/vnd.acme+json", "notes.txt"]
    (tmp_path / "cat.bin").write_bytes(b"\xff\xd8\xff\xe0" + bytes(64))
    jpg = gdn(tmp_path, "run", str(root), "--state-root", state, "--input", "x", "--attach", "cat.bin:image/jpg")
    assert jpg.returncode == 0, jpg.stderr
    assert json.loads(jpg.stdout)[1][:2] == ["image", "image/jpeg"]


def test_a_missing_or_oversized_attachment_is_a_clear_error(tmp_path: Path) -> None:
    root = bundle(tmp_path / "b")
    state = str(tmp_path / "state")
    missing = gdn(tmp_path, "run", str(root), "--state-root", state, "--input", "x", "--attach", "nope.png")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "E_CONTENT_INVALID" in missing.stderr and "--attach nope.png" in missing.stderr
    (tmp_path / "big.png").write_bytes(PNG)
    big = gdn(
        tmp_path,
        "run",
        str(root),
        "--state-root",
        state,
        "--attach",
        "big.png",
        GOONDAN_MAX_ATTACHMENT_BYTES="100",
    )
    assert big.returncode == 2 and "Traceback" not in big.stderr
    assert "E_CONTENT_TOO_LARGE" in big.stderr and "GOONDAN_MAX_ATTACHMENT_BYTES" in big.stderr


def test_an_attached_directory_is_named_as_one_with_what_to_attach_instead(tmp_path: Path) -> None:
    """`--attach docs/` suggested the shapes of a content part ({type: text, text} | ...), which a
    command-line user never writes; it now says the path is a directory and what to attach."""
    root = bundle(tmp_path / "b")
    (tmp_path / "docs").mkdir()
    state = str(tmp_path / "state")
    result = gdn(tmp_path, "run", str(root), "--state-root", state, "--input", "x", "--attach", "docs")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"[E_CONTENT_INVALID] --attach docs: {tmp_path / 'docs'} is a directory\n")
    suggestion = "suggestion: Attach a file (one per part); to send a directory's files, attach each of them."
    assert suggestion in result.stderr


def test_attachments_are_handed_to_a_running_gdn_run_of_the_same_bundle(tmp_path: Path) -> None:
    root = kit.write_bundle(tmp_path / "a", ECHO_BUNDLE)
    state = tmp_path / "state"
    session = subprocess.Popen(
        [sys.executable, "-m", "goondan", "run", str(root), "--state-root", str(state)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(tmp_path),
    )
    try:
        deadline = time.monotonic() + 20
        while not list((state / "runtime" / "runs").glob("*.json")) and time.monotonic() < deadline:
            assert session.poll() is None
            time.sleep(0.05)
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        (elsewhere / "cat.png").write_bytes(PNG)
        # a relative path, from another directory than the running session's: made absolute by the CLI
        proc = subprocess.run(
            [sys.executable, "-m", "goondan", "run", str(root), "--state-root", str(state), *ONE_SHOT],
            capture_output=True,
            text=True,
            env=env_for(tmp_path),
            cwd=elsewhere,
            timeout=60,
        )
    finally:
        session.kill()
        session.wait()
    assert proc.returncode == 0, proc.stderr
    assert "delegating to running gdn run" in proc.stderr and proc.stdout == "echo: look\n"
    stored = [p.name for d in kit.instance_dirs(state) for p in (d / "attachments").glob("*")]
    assert stored == [hashlib.sha256(PNG).hexdigest()]


def test_attach_in_a_chat_session_sends_the_file_with_the_next_message_only(tmp_path: Path) -> None:
    root = bundle(tmp_path / "b")
    (tmp_path / "cat.png").write_bytes(PNG)
    lines = "/attach cat.png\n/attach missing.png\nlook\nagain\n/quit\n"
    proc = gdn(tmp_path, "run", str(root), "--state-root", str(tmp_path / "state"), stdin=lines)
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.splitlines()
    assert json.loads(first) == [["text", "look"], ["image", "image/png", None, hashlib.sha256(PNG).hexdigest()]]
    assert json.loads(second) == [["text", "again"]]
    assert "attached cat.png (image/png)" in proc.stderr
    assert "[E_CONTENT_INVALID] /attach missing.png: cannot read" in proc.stderr and "(not attached)" in proc.stderr


def test_attach_in_a_chat_refuses_at_once_what_the_runtime_would(tmp_path: Path) -> None:
    root = bundle(tmp_path / "b")
    (tmp_path / "notes.txt").write_text("just text\n")
    (tmp_path / "big.bin").write_bytes(b"x" * 200)
    lines = "/attach notes.txt:image/png\n/attach big.bin\nlook\n/quit\n"
    proc = gdn(
        tmp_path, "run", str(root), "--state-root", str(tmp_path / "state"), stdin=lines,
        GOONDAN_MAX_ATTACHMENT_BYTES="100",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr  # the message went, without the refused files
    assert json.loads(proc.stdout) == [["text", "look"]]
    assert "[E_CONTENT_MEDIA_TYPE] /attach notes.txt:image/png: the part says image/png" in proc.stderr
    assert "[E_CONTENT_TOO_LARGE] /attach big.bin is 200 bytes" in proc.stderr
    assert proc.stderr.count("(not attached)") == 2 and "input part" not in proc.stderr


def test_an_attachment_whose_bytes_are_not_the_image_it_claims_is_a_usage_error(tmp_path: Path) -> None:
    root = bundle(tmp_path / "b")
    state = str(tmp_path / "state")
    (tmp_path / "notes.txt").write_text("just text\n")
    (tmp_path / "photo.jpg").write_bytes(PNG)  # a PNG saved under a .jpg name
    for arg, found in (("notes.txt:image/png", "its bytes are not an image"), ("photo.jpg", "its bytes are image/png")):
        out = gdn(tmp_path, "run", str(root), "--state-root", state, "--input", "x", "--attach", arg)
        assert out.returncode == 2, out.stdout + out.stderr  # was 1: refused only inside the runtime
        assert f"[E_CONTENT_MEDIA_TYPE] --attach {arg}: the part says image/" in out.stderr and found in out.stderr
        assert "suggestion:" in out.stderr and "Traceback" not in out.stderr
