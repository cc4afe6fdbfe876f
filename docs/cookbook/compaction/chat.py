"""Ten turns on one conversation; the history the model sees stays bounded."""

import asyncio
import tempfile
from pathlib import Path

import goondan

BUNDLE = Path(__file__).parent


async def main() -> None:
    async with goondan.Runtime(BUNDLE, state_root=tempfile.mkdtemp()) as rt:
        for day in range(1, 11):
            result = await rt.request(f"day {day}")
            print(f"day {day}: {result.text}")


asyncio.run(main())
