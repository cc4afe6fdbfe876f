"""Malformed bundles must only ever produce ConfigError / reports, never a Python traceback."""

from __future__ import annotations

import os
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import yaml
from bundle_testkit import SAMPLE_FILES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goondan.bundle import load_bundle, validate_bundle
from goondan.errors import ConfigError
from kit import write_files

SETTINGS = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "150")), deadline=None, suppress_health_check=list(HealthCheck)
)

SAMPLE_DOCS: list[Any] = list(yaml.safe_load_all(textwrap.dedent(SAMPLE_FILES["goondan.yaml"])))

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "x", "Tool/util", "Agent/main", "../x.py", "/abs.py", "Model/fake", "a/b/c", "__"]),
    st.text(max_size=8),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out.extend(_paths(item, (*prefix, i)))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any, delete: bool) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        copy = dict(value)
        if delete and not rest:
            copy.pop(head, None)
        else:
            copy[head] = _replace(value[head], rest, new, delete)
        return copy
    copy_list = list(value)
    if delete and not rest:
        copy_list.pop(head)
    else:
        copy_list[head] = _replace(value[head], rest, new, delete)
    return copy_list


def _assert_no_traceback(root: Path) -> None:
    report = validate_bundle(root, env={})
    for issue in report.errors + report.warnings:
        assert issue.code.startswith("E_CONFIG_")
        assert isinstance(issue.message, str) and issue.message
    try:
        load_bundle(root, env={})
    except ConfigError as exc:
        assert exc.errors
        assert not report.valid
    else:
        assert report.valid


@SETTINGS
@given(st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("latin-1")))
def test_garbage_yaml_never_raises_anything_but_config_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "goondan.yaml").write_text(text, encoding="utf-8", errors="surrogateescape")
        _assert_no_traceback(root)


@SETTINGS
@given(st.data())
def test_mutated_valid_bundle_never_raises_anything_but_config_error(data: st.DataObject) -> None:
    docs = list(SAMPLE_DOCS)
    for _ in range(data.draw(st.integers(1, 3))):
        index = data.draw(st.integers(0, len(docs) - 1))
        path = data.draw(st.sampled_from(_paths(docs[index])))
        delete = bool(path) and data.draw(st.booleans())
        docs[index] = _replace(docs[index], path, data.draw(json_values), delete)
    text = yaml.safe_dump_all(docs, sort_keys=False)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = dict(SAMPLE_FILES)
        files["goondan.yaml"] = text
        write_files(root, files)
        _assert_no_traceback(root)


@SETTINGS
@given(
    st.lists(
        st.sampled_from(
            [
                "a: &x [1, 2]",
                "b: *x",
                "c: [*x, *x, *x]",
                "- *x",
                "d: {<<: {e: 1}}",
                "---",
                "kind: Tool",
                "f: !!binary aGk=",
                "g: !custom 1",
                "h: 2001-01-01",
                "? [k]\n: v",
            ]
        ),
        max_size=8,
    )
)
def test_yaml_feature_soup_never_raises_anything_but_config_error(lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "goondan.yaml").write_text("\n".join(lines) + "\n")
        _assert_no_traceback(root)
