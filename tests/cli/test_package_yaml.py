"""``gdn package add`` edits goondan.yaml as text: the dependency lands in the Package document and
every other byte of the file stays as the user wrote it (property-tested over generated files)."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from goondan.cli._package import add_dependency

REST = (
    "---\n# the model\napiVersion: goondan.ai/v1\nkind: Model\nmetadata: {name: m}\n"
    "spec: {provider: scripted, model: m}\n"
)

names = st.from_regex(r"\A(@[a-z][a-z0-9-]{0,8}/)?[a-z][a-z0-9-]{0,12}\Z")
versions = st.sampled_from([">=1.0", ">=1.2,<2", "==0.3.1", "~=2.1", ">=0.1.0"])


@st.composite
def manifests(draw: st.DrawFn) -> tuple[str, list[dict[str, str]]]:
    """A Package document in one of the block styles people write, with 0-3 dependencies."""
    deps = draw(
        st.lists(st.fixed_dictionaries({"name": names, "version": versions}), max_size=3, unique_by=lambda d: d["name"])
    )
    indent = draw(st.sampled_from([2, 4]))
    pad = " " * indent
    comment = draw(st.sampled_from(["", "# deps below\n"]))
    lines = ["apiVersion: goondan.ai/v1", "kind: Package", "metadata:", f"{pad}name: app  # keep me", "spec:"]
    lines.append(f"{pad}version: 0.1.0")
    if deps:
        lines.append(f"{pad}dependencies:")
        for dep in deps:
            if draw(st.booleans()):
                lines.append(f"{pad}{pad}- {{name: '{dep['name']}', version: '{dep['version']}'}}")
            else:
                lines.append(f"{pad}{pad}- name: '{dep['name']}'")
                lines.append(f"{pad}{pad}  version: '{dep['version']}'")
    if draw(st.booleans()):
        lines.append(f"{pad}description: an app")
    return comment + "\n".join(lines) + "\n" + REST, deps


def recorded(text: str) -> list[dict[str, str]]:
    first = next(iter(yaml.safe_load_all(text)))
    return list(first["spec"].get("dependencies") or [])


@settings(max_examples=60, deadline=None)
@given(manifests(), names, versions)
def test_add_records_the_dependency_and_keeps_everything_else(
    manifest: tuple[str, list[dict[str, str]]], name: str, version: str
) -> None:
    text, before = manifest
    new = {"name": name, "version": version}
    out = add_dependency(text, new, "app")
    expected = [d for d in before if d["name"] != name]
    got = recorded(out)
    assert new in got and len(got) == len(expected) + 1
    assert all(d in got for d in expected)
    assert out.endswith(REST)  # the other documents and their comments are untouched
    assert "name: app  # keep me" in out
    # removing the lines that mention the new dependency gives back the original lines (or, when it
    # replaced an existing entry, the original lines minus that entry's)
    kept = [line for line in out.splitlines() if name not in line and "dependencies:" not in line]
    original = [line for line in text.splitlines() if "dependencies:" not in line]
    assert all(line in original for line in kept)
    assert add_dependency(out, new, "app") == out  # adding it again changes nothing


def test_a_file_without_package_document_gets_one_first() -> None:
    body = "apiVersion: goondan.ai/v1\nkind: Model\nmetadata: {name: m}\nspec: {provider: scripted, model: m}\n"
    out = add_dependency(body, {"name": "acme-tools", "version": ">=1"}, "my-app")
    docs = list(yaml.safe_load_all(out))
    assert docs[0]["kind"] == "Package" and docs[0]["metadata"]["name"] == "my-app"
    assert docs[0]["spec"]["dependencies"] == [{"name": "acme-tools", "version": ">=1"}]
    assert out.endswith(body)


def test_a_flow_style_package_spec_is_rewritten_as_one_document() -> None:
    text = "apiVersion: goondan.ai/v1\nkind: Package\nmetadata: {name: app}\nspec: {version: 0.1.0}\n" + REST
    out = add_dependency(text, {"name": "acme-tools", "version": ">=1"}, "app")
    assert recorded(out) == [{"name": "acme-tools", "version": ">=1"}]
    assert out.endswith(REST)
