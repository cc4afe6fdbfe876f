"""The summary transcript mentions images and files (the summary model never gets their bytes)."""

from __future__ import annotations

from goondan.base.extensions._summarizer import transcript
from goondan.messages import user_message


def test_media_parts_appear_in_the_summary_transcript_as_notes() -> None:
    image = {"type": "image", "mediaType": "image/png", "attachment": "a" * 64, "size": 10}
    doc = {"type": "file", "mediaType": "application/pdf", "name": "r.pdf", "data": "JVBERg=="}
    text = transcript([user_message([{"type": "text", "text": "see"}, image, doc])], 10_000)
    assert text == "user: see\n[image image/png]\n[file r.pdf]"
