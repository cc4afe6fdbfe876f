"""A tool that returns a pydantic model, a dataclass, a set, an enum member or a date hands the model
that value's data (its JSON form), not its ``str()`` (``Point(x=1, y=2)``, ``{1, 2}``,
``2026-11-24 21:00:00``). A real bundle and runtime; the model reports what the tool result held."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import goondan
import kit

MODEL = """\
import json


def generate(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return {"text": json.dumps(last["content"][0]["output"], sort_keys=True)}
    return {"toolCalls": [{"id": "c1", "name": "t__" + last["content"], "args": {}}]}
"""

TOOL = """\
import dataclasses
import datetime
import enum

import pydantic


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    y: int
    tags: set


class Booking(pydantic.BaseModel):
    room: int
    at: datetime.datetime
    where: Point


class Opaque:
    def __str__(self):
        return "opaque!"


def shapes(ctx, args):
    return {
        "point": Point(1, 2, {"b", "a"}),
        "booking": Booking(room=7, at=datetime.datetime(2026, 11, 24, 21, 0), where=Point(3, 4, set())),
        "color": Color.RED,
        "day": datetime.date(2026, 11, 24),
        "ids": frozenset({3, 1, 2}),
        "other": Opaque(),
    }


def one(ctx, args):
    return Point(5, 6, set())


handlers = {"shapes": shapes, "one": one}
"""


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_tool_result_made_of_objects_reaches_the_model_as_their_data(
    tmp_path: Path, state_root: Path, executor: str
) -> None:
    root = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc("objects"),
        kit.python_model_doc(),
        kit.tool_doc("t", "./t.py", [kit.export("shapes"), kit.export("one")]),
        kit.agent_doc("a", tools=["t"]),
        kit.swarm_doc(["a"]),
        files={"model.py": MODEL, "t.py": TOOL},
    )

    async def main() -> tuple[str, str]:
        async with goondan.Runtime(root, state_root=state_root, executor=executor) as rt:
            return (await rt.request("shapes", instance_key="k")).text, (await rt.request("one", instance_key="k")).text

    shapes, one = asyncio.run(main())
    assert json.loads(shapes) == {
        "type": "json",
        "value": {
            "point": {"x": 1, "y": 2, "tags": ["a", "b"]},
            "booking": {"room": 7, "at": "2026-11-24T21:00:00", "where": {"x": 3, "y": 4, "tags": []}},
            "color": "red",
            "day": "2026-11-24",
            "ids": [1, 2, 3],
            "other": "opaque!",  # anything else: its str(), as documented
        },
    }
    assert json.loads(one) == {"type": "json", "value": {"x": 5, "y": 6, "tags": []}}
