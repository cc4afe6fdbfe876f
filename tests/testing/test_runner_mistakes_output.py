"""What a pytest run of a user's agent test prints when the test itself is wrong, through the real
plugin (``pytester``, a pytest process of its own) and the real quickstart bundle:

- an error the runner raises shows its suggestion (``did you mean 'scripted'?``, the path meant):
  ``str()`` of a GoondanError is only ``[CODE] message``, and pytest printed nothing else;
- a bundle with several problems lists them all, each with its file:line;
- a test's model function (or list item) that returns something that is not a reply is named, with
  its file and line, instead of the module the runner generates (``python model model_m3_7f59.py``);
- the turn's error is printed whole in the transcript (it was cut at 160 characters of sorted JSON,
  code and help link first, so the message was lost)."""

from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

TESTS = f"""
from goondan.testing import tool_call

QUICKSTART = {str(EXAMPLES / "quickstart")!r}


def test_model_name_typo(goondan_runner):
    goondan_runner(QUICKSTART, override_models={{"scriptd": ["hi"]}})


def test_bundle_path_typo(goondan_runner):
    goondan_runner(QUICKSTART.replace("quickstart", "quikstart"))


def test_broken_bundle(goondan_runner, tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "goondan.yaml").write_text(
        "apiVersion: goondan.ai/v1\\nkind: Modl\\nmetadata: {{name: m}}\\nspec: {{}}\\n---\\n"
        "apiVersion: goondan.ai/v1\\nkind: Model\\nmetadata: {{name: n}}\\n"
        "spec: {{provider: scripted, model: x, optoins: {{}}}}\\n"
    )
    goondan_runner(tmp_path / "b")


def test_function_returns_a_number(goondan_runner):
    def model(request):
        return 42

    goondan_runner(QUICKSTART, override_models={{"scripted": model}}).request("x").assert_text("5")


def test_list_item_is_a_number(goondan_runner):
    replies = [tool_call("calc__add", {{"a": 2, "b": 3}}), 5]
    goondan_runner(QUICKSTART, override_models={{"scripted": replies}}).request("x").assert_text("5")
"""


def test_a_wrong_test_says_what_to_fix_in_the_pytest_output(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_agents=TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=5)
    out = result.stdout.str()
    assert "suggestion: did you mean 'scripted'? Models of the bundle: scripted" in out
    typo = out.split("_ test_bundle_path_typo _")[1].split("_ test_broken_bundle _")[0]
    assert "suggestion: did you mean " in typo and "examples/quickstart?" in typo
    broken = out.split("_ test_broken_bundle _")[1].split("_ test_function_returns_a_number _")[0]
    assert "2 problems:" in broken and "[E_CONFIG_UNKNOWN_KIND] unknown kind 'Modl' (goondan.yaml:2:1)" in broken
    assert "suggestion: did you mean 'Model'?" in broken and "did you mean 'options'?" in broken
    returned = out.split("_ test_function_returns_a_number _")[1].split("_ test_list_item_is_a_number _")[0]
    line = TESTS.lstrip("\n").splitlines().index("    def model(request):") + 1  # as pytester writes it
    assert (
        "error: [E_MODEL_BAD_RESPONSE] the function test_function_returns_a_number.<locals>.model "
        f"(test_agents.py:{line}) that replaces Model/scripted returned int; a reply is a string"
    ) in returned
    assert "suggestion: Return a string, text('...'), tool_call('tool__name', {...})" in returned
    assert "error: [E_MODEL_BAD_RESPONSE] reply 2 of the list that replaces Model/scripted returned int" in out
    assert "model_m" not in out  # the generated module is never named
