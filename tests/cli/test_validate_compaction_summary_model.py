"""message-compaction's summaryModel with a missing entry file fails `gdn validate` and `gdn run`'s start
at the config's line (it failed only when compaction first ran); a retainLastMessages that can never be
kept is a validate warning."""

from __future__ import annotations

import shutil
from pathlib import Path

from cli_testkit import gdn

RECIPE = Path(__file__).resolve().parents[2] / "docs" / "cookbook" / "compaction"


def _recipe(tmp_path: Path) -> Path:
    bundle = tmp_path / "recipe"
    shutil.copytree(RECIPE, bundle)
    return bundle


def test_a_missing_summary_model_entry_fails_validate_and_run_at_its_line(tmp_path: Path) -> None:
    bundle = _recipe(tmp_path)
    (bundle / "summarizer.py").rename(bundle / "sumarizer.py")
    line = next(
        i for i, text in enumerate((bundle / "goondan.yaml").read_text().splitlines(), 1) if "summaryModel" in text
    )
    checked = gdn(tmp_path, "validate", str(bundle))
    assert checked.returncode != 0, checked.stdout
    assert "[E_CONFIG_ENTRY_NOT_FOUND]" in checked.stdout and "summaryModel.options.entry" in checked.stdout
    assert f"goondan.yaml:{line}:" in checked.stdout
    assert "did you mean './sumarizer.py'?" in checked.stdout

    run = gdn(tmp_path, "run", str(bundle), "--input", "hi", "--state-root", str(tmp_path / "state"))
    assert run.returncode == 3, run.stdout + run.stderr
    assert "[E_CONFIG_ENTRY_NOT_FOUND]" in run.stderr and f"goondan.yaml:{line}:" in run.stderr


def test_the_recipe_as_shipped_validates_without_warnings(tmp_path: Path) -> None:
    checked = gdn(tmp_path, "validate", str(_recipe(tmp_path)))
    assert checked.returncode == 0 and "warnings=0" in checked.stdout, checked.stdout


def test_a_retained_tail_over_max_messages_is_a_validate_warning(tmp_path: Path) -> None:
    bundle = _recipe(tmp_path)
    manifest = bundle / "goondan.yaml"
    manifest.write_text(manifest.read_text().replace("retainLastMessages: 2 ", "retainLastMessages: 6 "))
    checked = gdn(tmp_path, "validate", str(bundle))
    assert checked.returncode == 0, checked.stdout  # compaction still runs: a warning, not an error
    assert "retainLastMessages (6) plus the summary message (appendSummary) cannot fit in maxMessages (6)" in (
        checked.stdout
    )
    assert "make retainLastMessages at most 5" in checked.stdout


def test_a_summary_model_without_generate_or_that_does_not_compile_fails_validate_and_run(tmp_path: Path) -> None:
    # the file is there, so only its import when compaction first ran found these
    bundle = _recipe(tmp_path)
    summarizer = bundle / "summarizer.py"
    source = summarizer.read_text()
    summarizer.write_text(source.replace("def generate(", "def generat("))
    checked = gdn(tmp_path, "validate", str(bundle))
    assert checked.returncode == 4, checked.stdout
    assert "[E_CONFIG_ENTRY_EXPORT_MISSING]" in checked.stdout
    assert "summaryModel: ./summarizer.py defines no module-level `generate`" in checked.stdout
    run = gdn(tmp_path, "run", str(bundle), "--input", "hi", "--state-root", str(tmp_path / "state"))
    assert run.returncode == 3 and "[E_CONFIG_ENTRY_EXPORT_MISSING]" in run.stderr, run.stdout + run.stderr

    summarizer.write_text(source.replace("def generate(", "def generate(:"))
    checked = gdn(tmp_path, "validate", str(bundle))
    assert checked.returncode == 4 and "[E_CONFIG_ENTRY_SYNTAX]" in checked.stdout, checked.stdout


def test_a_max_messages_out_of_range_is_one_error_without_the_retained_tail_warning(tmp_path: Path) -> None:
    # maxMessages: 0 broke the schema's minimum and also warned "make retainLastMessages at most -1"
    bundle = _recipe(tmp_path)
    manifest = bundle / "goondan.yaml"
    for value in ("0", "-5"):
        manifest.write_text(manifest.read_text().replace("maxMessages: 6 ", f"maxMessages: {value} ", 1))
        checked = gdn(tmp_path, "validate", str(bundle))
        assert checked.returncode == 4, checked.stdout
        assert f"config.maxMessages: {value} is less than the minimum of 1" in checked.stdout
        assert "errors=1, warnings=0" in checked.stdout, checked.stdout
        assert "at most -" not in checked.stdout
        manifest.write_text(manifest.read_text().replace(f"maxMessages: {value} ", "maxMessages: 6 ", 1))
