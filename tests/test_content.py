"""Checking request content parts (``goondan._content``): what is accepted comes back normalized,
everything else is one clear ``E_CONTENT_*`` / ``E_REQUEST_INVALID`` error, never another exception."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goondan._content import normalize_input, sniff_image
from goondan.errors import GoondanError

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 16

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
part_like = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["text", "image", "file", "video", 3]),
        "text": json_values,
        "mediaType": st.sampled_from(["image/png", "image/jpeg", "application/pdf", "text/plain", "bogus", "IMAGE/PNG"])
        | json_values,
        "name": json_values,
        "data": st.sampled_from([base64.b64encode(PNG).decode(), base64.b64encode(JPEG).decode(), "!!", PNG])
        | json_values,
        "url": st.sampled_from(["https://e.com/a.png", "ftp://e.com/a", "file:///etc/passwd"]) | json_values,
        "path": st.sampled_from(["a.png", "/nonexistent/b.pdf", ""]) | json_values,
    },
)


@settings(max_examples=300, deadline=None)
@given(st.lists(part_like | json_values, max_size=4) | json_values)
def test_any_input_is_normalized_or_refused_with_a_content_error(value: Any) -> None:
    try:
        out = normalize_input(value, read_paths=False)
    except GoondanError as exc:
        assert exc.code in ("E_CONTENT_INVALID", "E_CONTENT_MEDIA_TYPE", "E_CONTENT_TOO_LARGE", "E_REQUEST_INVALID")
        assert exc.suggestion
        return
    if isinstance(out, str):
        assert out == value
        return
    for part in out:
        assert part["type"] in ("text", "image", "file")
        if part["type"] == "text":
            assert isinstance(part["text"], str)
            continue
        sources = [k for k in ("path", "url", "data") if k in part]
        assert len(sources) == 1 and part["mediaType"] == part["mediaType"].lower()
        if "data" in part:
            raw = base64.b64decode(part["data"], validate=True)
            if part["type"] == "image":
                assert sniff_image(raw) == part["mediaType"]
        if "url" in part:
            assert part["url"].startswith(("http://", "https://"))
        if part["type"] == "file":
            assert isinstance(part["name"], str) and part["name"]


@pytest.mark.parametrize(
    ("part", "code"),
    [
        ({"type": "image", "mediaType": "image/jpeg", "data": base64.b64encode(PNG).decode()}, "E_CONTENT_MEDIA_TYPE"),
        ({"type": "image", "mediaType": "image/tiff", "url": "https://e.com/a.tif"}, "E_CONTENT_MEDIA_TYPE"),
        (
            {"type": "image", "mediaType": "image/png", "data": base64.b64encode(b"not an image").decode()},
            "E_CONTENT_MEDIA_TYPE",
        ),
        ({"type": "file", "mediaType": "application/pdf", "data": "JVBERg=="}, "E_CONTENT_INVALID"),
        ({"type": "image", "mediaType": "image/png"}, "E_CONTENT_INVALID"),
        ({"type": "image", "path": 5}, "E_CONTENT_INVALID"),
        (
            {"type": "image", "mediaType": "image/png", "url": "https://e.com/a.png", "data": "AA=="},
            "E_CONTENT_INVALID",
        ),
        ({"type": "image", "mediaType": "image/png", "data": "not base64!"}, "E_CONTENT_INVALID"),
    ],
)
def test_bad_parts_name_what_is_wrong(part: dict[str, Any], code: str) -> None:
    with pytest.raises(GoondanError) as info:
        normalize_input([part])
    assert info.value.code == code and "part 0" in info.value.message


def test_a_path_is_read_its_media_type_guessed_and_its_size_limited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = tmp_path / "a.png"
    image.write_bytes(PNG)
    [part] = normalize_input([{"type": "image", "path": str(image)}])
    assert part == {"type": "image", "mediaType": "image/png", "data": base64.b64encode(PNG).decode()}
    [doc] = normalize_input([{"type": "file", "path": str(image), "mediaType": "application/octet-stream"}])
    assert doc["name"] == "a.png"
    monkeypatch.setenv("GOONDAN_MAX_ATTACHMENT_BYTES", str(len(PNG) - 1))
    with pytest.raises(GoondanError) as info:
        normalize_input([{"type": "image", "path": str(image)}])
    assert info.value.code == "E_CONTENT_TOO_LARGE" and str(len(PNG)) in info.value.message
    monkeypatch.setenv("GOONDAN_MAX_ATTACHMENT_BYTES", "lots")
    with pytest.raises(GoondanError) as info:
        normalize_input([{"type": "image", "path": str(image)}])
    assert info.value.code == "E_CONTENT_INVALID" and "GOONDAN_MAX_ATTACHMENT_BYTES" in info.value.message


def test_common_names_of_an_image_type_are_sent_as_the_type_providers_know() -> None:
    """image/jpg (what many upload forms and S3 objects say) was refused for an image part."""
    data = base64.b64encode(JPEG).decode()
    [part] = normalize_input([{"type": "image", "mediaType": "image/jpg", "data": data}])
    assert part["mediaType"] == "image/jpeg"
    [part] = normalize_input([{"type": "image", "mediaType": "IMAGE/PJPEG", "data": data}])
    assert part["mediaType"] == "image/jpeg"
