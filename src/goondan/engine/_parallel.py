"""Running the tool calls of one step at the same time (docs/architecture.md#tools).

A model that asks for several tools in one response usually wants independent things (read three
files, query two services); running them one after the other makes the turn as slow as their sum.
So the calls of a step run concurrently, at most ``limit`` at a time, and a tool exported with
``parallel: false`` runs alone: the calls before it finish first, the calls after it wait for it.
The caller appends the results in the order the model made the calls, whatever order they finish
in, so the history is the same as if they had run one by one.

:data:`CONCURRENT` tells the code under a call (the toolCall chain's core) that other calls of the
step may be running beside it, so a synchronous handler must go to a worker thread rather than hold
the event loop; :data:`DEFERRED` that the call's result is handed back to be appended in call order.
They are context variables because each call runs in its own task, which starts with a copy of the
context. Their value is the step they were set for, not a flag: a call may start another agent's
turn in the same event loop (an inter-agent request in the inline executor), whose tasks inherit
the context, and that turn's own calls must not take the marks of the step that started it.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

# How many tool calls of one step run at the same time (Swarm.spec.policy.maxParallelToolCalls overrides it).
DEFAULT_MAX_PARALLEL_TOOL_CALLS = 8

# the step whose calls run beside each other (compare with ``is``; see the module docstring)
CONCURRENT: contextvars.ContextVar[object] = contextvars.ContextVar("goondan_concurrent_tool_call", default=None)
# the step whose calls hand their results back to be appended in call order, not where they finish
DEFERRED: contextvars.ContextVar[object] = contextvars.ContextVar("goondan_deferred_tool_result", default=None)

# (exclusive, start): ``start()`` runs the call; ``exclusive`` calls run alone
Job = tuple[bool, Callable[[], Awaitable[T]]]


def ready(value: T) -> Callable[[], Awaitable[T]]:
    """A job start for a call answered without running (over the per-step limit, unusable arguments)."""

    async def start() -> T:
        return value

    return start


async def run_jobs(jobs: Sequence[Job[T]], limit: int, deliver: Callable[[int, T], None], step: object) -> None:
    """Run ``jobs`` concurrently, at most ``limit`` at once and exclusive ones alone, and hand each
    result to ``deliver(index, result)`` in the order of ``jobs``, as soon as it and every job
    before it are done (a finished result is not held back until the slowest call ends).

    An exclusive job runs as a lone call would (a synchronous handler in place: a tool that must run
    alone is often one that is not thread-safe). A job that raises stops the rest (they are
    cancelled) and its exception propagates, as it would have when the calls ran one by one;
    cancelling the caller cancels every job. ``step`` is the value :data:`CONCURRENT` and
    :data:`DEFERRED` take in the jobs' tasks."""
    gate = asyncio.Semaphore(limit)
    tasks: list[asyncio.Task[T]] = []
    delivered = 0

    async def bounded(start: Callable[[], Awaitable[T]], concurrent: bool) -> T:
        async with gate:
            CONCURRENT.set(step if concurrent else None)
            DEFERRED.set(step)
            return await start()

    async def deliver_up_to(end: int) -> None:
        nonlocal delivered
        while delivered < end:
            value = await tasks[delivered]
            deliver(delivered, value)
            delivered += 1

    try:
        for exclusive, start in jobs:
            if exclusive:
                await deliver_up_to(len(tasks))  # everything before it has finished
                tasks.append(asyncio.ensure_future(bounded(start, False)))
                await deliver_up_to(len(tasks))  # and nothing after it starts before it ends
            else:
                tasks.append(asyncio.ensure_future(bounded(start, True)))
        await deliver_up_to(len(tasks))
    finally:
        pending = [task for task in tasks if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)


__all__ = ["CONCURRENT", "DEFAULT_MAX_PARALLEL_TOOL_CALLS", "DEFERRED", "Job", "ready", "run_jobs"]
