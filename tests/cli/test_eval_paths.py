"""``gdn eval`` names a wrong suite or bundle path by its absolute form and suggests a near name.

A suite's ``bundle:`` is relative to the suite file, so ``../quikstart`` typed in ``evals/suite.yaml``
used to be shown as ``/x/evals/../quikstart`` with no hint that ``../quickstart`` exists.
"""

from __future__ import annotations

from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle

SUITE = """\
name: paths
bundle: {bundle}
judge:
  model: {{provider: python, model: judge, options: {{entry: ./judge.py}}}}
scenarios:
  - name: echoes
    input: hello
    expect:
      textContains: hello
"""

JUDGE = 'import json\n\n\ndef generate(request):\n    return {"text": json.dumps({"score": 1, "reason": "ok"})}\n'


def project(tmp_path: Path, bundle: str) -> Path:
    write_bundle(tmp_path / "quickstart", ECHO_BUNDLE)
    evals = tmp_path / "evals"
    evals.mkdir()
    (evals / "judge.py").write_text(JUDGE)
    suite = evals / "suite.yaml"
    suite.write_text(SUITE.format(bundle=bundle))
    return suite


def test_a_misspelt_suite_bundle_shows_the_absolute_path_and_the_near_directory_as_the_suite_would_write_it(
    tmp_path: Path,
) -> None:
    project(tmp_path, "../quikstart")
    out = gdn(tmp_path, "eval", "evals/suite.yaml")
    assert out.returncode == 3, out.stdout + out.stderr
    assert f"the bundle {(tmp_path / 'quikstart').resolve()} (the suite's `bundle: ../quikstart`)" in out.stderr
    assert "/../" not in out.stderr
    assert "did you mean `bundle: ../quickstart`?" in out.stderr
    assert "[1/1]" not in out.stderr  # no scenario ran


def test_a_misspelt_bundle_option_suggests_the_near_directory_and_the_right_one_runs(tmp_path: Path) -> None:
    project(tmp_path, "../quickstart")
    out = gdn(tmp_path, "eval", "evals/suite.yaml", "--bundle", "quickstrat")
    assert out.returncode == 3, out.stdout + out.stderr
    assert str((tmp_path / "quickstrat").resolve()) in out.stderr
    assert "did you mean --bundle quickstart?" in out.stderr
    ok = gdn(tmp_path, "eval", "evals/suite.yaml", "--bundle", "quickstart")
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_a_directory_above_bundles_suggests_the_one_bundle_inside_it(tmp_path: Path) -> None:
    project(tmp_path, "..")
    out = gdn(tmp_path, "eval", "evals/suite.yaml")
    assert out.returncode == 3, out.stdout + out.stderr
    assert "has no goondan.yaml" in out.stderr and "did you mean `bundle: ../quickstart`?" in out.stderr


def test_a_misspelt_suite_file_suggests_the_near_file(tmp_path: Path) -> None:
    project(tmp_path, "../quickstart")
    out = gdn(tmp_path, "eval", "evals/suit.yaml")
    assert out.returncode == 3 and "[E_EVAL_SUITE_NOT_FOUND]" in out.stderr, out.stderr
    assert str(tmp_path / "evals" / "suit.yaml") in out.stderr
    assert "did you mean evals/suite.yaml?" in out.stderr
    folder = gdn(tmp_path, "eval", "evals")
    assert folder.returncode == 3 and "did you mean evals/suite.yaml?" in folder.stderr, folder.stderr


def test_a_bundle_named_by_its_goondan_yaml_reads_the_env_file_beside_it(tmp_path: Path) -> None:
    project(tmp_path, "../quickstart/goondan.yaml")
    keyed = ECHO_BUNDLE.replace("  model: echo\n", "  model: echo\n  apiKey: {valueFrom: {env: ECHO_KEY}}\n", 1)
    write_bundle(tmp_path / "quickstart", keyed, files={".env": "ECHO_KEY=from-dotenv\n"})
    out = gdn(tmp_path, "eval", "evals/suite.yaml")
    assert out.returncode == 0, out.stdout + out.stderr
    named = gdn(tmp_path, "eval", "evals/suite.yaml", "--bundle", "quickstart/goondan.yaml")
    assert named.returncode == 0, named.stdout + named.stderr
