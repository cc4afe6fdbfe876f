"""A misspelt bundle path given as an absolute path (``goondan_runner(EXAMPLES / "quikstart")`` in a
test, a script) gets the path meant as an absolute path: it was made relative to the working
directory, ``did you mean ../../../../work/proj/examples/quickstart?``."""

from __future__ import annotations

from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


def test_an_absolute_misspelt_path_gets_the_absolute_path_meant(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "deep" / "er" / "quickstart", ECHO_BUNDLE)
    (tmp_path / "cwd" / "a" / "b").mkdir(parents=True)
    typo = str(bundle).replace("quickstart", "quikstart")
    proc = gdn(tmp_path / "cwd" / "a" / "b", "validate", typo)
    assert proc.returncode == 4, proc.stdout
    assert f"suggestion: did you mean {bundle}? pass a bundle directory" in proc.stdout
    relative = gdn(tmp_path, "validate", "deep/er/quikstart")
    assert "suggestion: did you mean deep/er/quickstart? " in relative.stdout
