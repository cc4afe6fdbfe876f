"""The ``python`` provider: a user module's ``generate(request)`` is the model (docs/python-provider.md).

Useful for tests, deterministic demos and wrapping any in-house inference code. ``docs/python-provider.md``
is the user-facing description; in short:

* ``generate(request)`` (sync or ``async``) gets a :class:`~goondan.models.ModelRequest`:
  ``messages`` (read-only sequence of ``{"role", "content"}`` dicts, oldest first; content is a string
  or a list of ``text`` / ``tool-call`` / ``tool-result`` parts), ``tools`` (the step's catalog,
  ``{"name", "description", "parameters"}``), ``params`` (``Agent.spec.modelConfig.params``),
  ``model``, ``agent_name``, ``instance_key`` and ``on_text_delta`` (a callable or None).
* The system prompt has no field of its own: ``spec.prompt`` is one ``role: "system"`` message in
  ``messages`` (appended once per history by the context-message extension, after the first turn's
  user message).
* It returns ``{"text": str | None, "toolCalls": [{"name", "args", "id"?}], "usage"?: {...},
  "finishReason"?: str}``, e.g. ``{"toolCalls": [{"name": "calc__add", "args": {"a": 2, "b": 3}}]}``
  and, once the tool result is the last message, ``{"text": "5"}``.

What ``generate`` prints is kept out of the answer stream and logged; an exception (or
``sys.exit()``) in it is ``E_MODEL_CALL`` with the traceback kept on the ``turn.failed`` event.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from pathlib import Path
from typing import Any

from .._ids import new_id
from .._modules import import_path, reproduce_command
from .._usercode import captured, exit_error, import_failure, interrupt_error, stray_cancel, user_output
from .._usercode import install as install_capture
from ..errors import ModelError
from ._base import ModelRequest, ModelResponse, ModelToolCall, normalize_usage

_log = logging.getLogger("goondan.model.python")


@functools.lru_cache(maxsize=256)
def _label(name: str) -> str:
    return f"python model {name}"


class PythonModel:
    provider = "python"

    def __init__(self, entry: Path, model: str) -> None:
        self._entry = entry
        self._model = model
        self._fn: Any = None
        self._label = _label(entry.name)  # names every call's output and errors: built once, shared

    def _load(self) -> Any:
        if self._fn is None:
            if not self._entry.is_file():  # else the import names a synthetic module, not the file
                raise ModelError(
                    "E_MODEL_LOAD",
                    f"python model entry {self._entry} does not exist",
                    suggestion="Check the Model's options.entry: it is relative to the bundle root (for a "
                    "gdn eval judge, to the suite file).",
                )
            try:
                module = import_path(self._entry)
            except Exception as exc:
                # names the user's line (the module's or a helper it imports), as a Tool's does
                raise ModelError(
                    "E_MODEL_LOAD",
                    import_failure(f"python model {self._entry}", self._entry, exc),
                    suggestion=f"`gdn run -v` prints the traceback of its import (or run "
                    f"`{reproduce_command(self._entry)}`).",
                ) from exc
            fn = getattr(module, "generate", None)
            if not callable(fn):
                raise ModelError(
                    "E_MODEL_LOAD",
                    f"python model {self._entry} has no generate(request) function",
                    suggestion="Define `def generate(request): return {'text': '...'}` in the module.",
                )
            # refused here (exit 3), like a tool handler: every call failed as E_MODEL_CALL TypeError
            from ..tools import handler_call_problem

            problem = handler_call_problem(fn, "generate", ("request",))
            if problem is not None:
                raise ModelError(
                    "E_MODEL_LOAD",
                    f"python model {self._entry.name}: {problem.removeprefix('handler ')}",
                    suggestion="Define it as `def generate(request): ...` (sync or async; request: the "
                    "ModelRequest, docs/python-provider.md).",
                )
            self._fn = fn
        return self._fn

    async def generate(self, request: ModelRequest) -> ModelResponse:
        fn = self._fn
        if fn is None:  # the first call imports the module (a call less on every later one)
            fn = self._load()
        capture = captured(self._label, _log)
        try:
            # ``with capture:`` spelled out (its __enter__ and __exit__ calls cost about a third of it)
            install_capture()
            token = user_output.set(capture)
            try:
                out = fn(request)
                if type(out) is not dict and inspect.isawaitable(out):  # a sync generate() returns a dict
                    out = await out
            finally:
                user_output.reset(token)
                if capture.parts or capture.dropped:
                    capture.report()
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(
                "E_MODEL_CALL",
                f"python model generate() raised {type(exc).__name__}: {exc}",
                suggestion="Fix generate() in the model module; `gdn run -v` prints the traceback, and "
                "`gdn logs -v` shows it from the turn.failed event.",
            ) from exc
        except SystemExit as exc:  # sys.exit() in a model must not end the host
            raise ModelError(
                "E_MODEL_CALL",
                f"python model generate() called sys.exit({exc.code!r})",
                suggestion="Raise an exception instead of calling sys.exit().",
            ) from exit_error(self._label, exc)
        except KeyboardInterrupt as exc:  # one generate() raised itself, not a Ctrl+C
            interrupt = interrupt_error("python model generate()", exc)
            if interrupt is None:
                raise
            raise ModelError("E_MODEL_CALL", interrupt.message, suggestion=interrupt.suggestion) from exc
        except asyncio.CancelledError as exc:  # one generate() raised itself, not a cancellation of the turn
            stray = stray_cancel("python model generate()", "E_MODEL_CALL", exc)
            if stray is None:
                raise
            raise ModelError(stray.code, stray.message, suggestion=stray.suggestion) from exc
        return parse_model_output(out, self._label)

    async def aclose(self) -> None:
        return None


# the suggestion of a result that is not a dict: a bad return value has no traceback to point at
_RETURN_SHAPE = (
    "Return a dict from generate(): {'text': 'the answer'} or "
    "{'toolCalls': [{'name': 'calc__add', 'args': {'a': 1}}]} (docs/python-provider.md)."
)


_RESPONSE_KEYS = ("text", "toolCalls", "usage", "finishReason")
_CALL_KEYS = ("id", "name", "args")
# what a Python developer writes from the OpenAI or Anthropic APIs
_MEANT = {
    "tool_calls": "toolCalls",
    "toolcalls": "toolCalls",
    "tools": "toolCalls",
    "finish_reason": "finishReason",
    "content": "text",
    "message": "text",
    "arguments": "args",
    "input": "args",
    "parameters": "args",
    "kwargs": "args",
}


def _refuse_unknown(value: dict[str, Any], known: tuple[str, ...], where: str, prefix: str) -> None:
    """A response (or one of its calls) with a key the provider does not read: ``{'tool_calls': [...]}``
    was an empty response, retried three times and ended as "I could not produce a usable response",
    and ``{'name': ..., 'arguments': {...}}`` a call without arguments."""
    unknown = [key for key in value if key not in known]
    if not unknown:
        return
    from .._hints import did_you_mean

    key = unknown[0]
    meant = _MEANT.get(str(key).lower())
    hint = f"did you mean {meant!r}?" if meant in known else did_you_mean(str(key), known)
    raise ModelError(
        "E_MODEL_BAD_RESPONSE",
        f"{where} returned {prefix}with unknown key(s) {', '.join(repr(k) for k in unknown)}; "
        f"it reads only {', '.join(known)}",
        suggestion=(f"{hint} " if hint else "") + _RETURN_SHAPE,
    )


def parse_model_output(out: Any, where: str) -> ModelResponse:
    """Turn the dict a python/scripted model returns into a :class:`ModelResponse`.

    Shape errors in individual tool calls are reported as ``issues`` (the runtime retries them as
    malformed tool calls); a result that is not a dict at all is a model error."""
    if not isinstance(out, dict):
        raise ModelError(
            "E_MODEL_BAD_RESPONSE",
            f"{where} returned {type(out).__name__}; expected a dict like "
            "{'text': str | None, 'toolCalls': [{'name', 'args'}]}",
            suggestion=_RETURN_SHAPE,
        )
    text = out.get("text")
    if text is not None and not isinstance(text, str):
        raise ModelError(
            "E_MODEL_BAD_RESPONSE",
            f"{where} returned 'text' of type {type(text).__name__}; it must be a string or None",
            suggestion="Convert the answer to a string (json.dumps() for data), or return None with 'toolCalls'.",
        )
    raw_calls = out.get("toolCalls") or []
    if not isinstance(raw_calls, list):
        raise ModelError(
            "E_MODEL_BAD_RESPONSE",
            f"{where} returned 'toolCalls' of type {type(raw_calls).__name__}; it must be a list",
            suggestion="Return 'toolCalls' as a list of calls, one dict per call: "
            "[{'name': 'calc__add', 'args': {'a': 1}}].",
        )
    if not raw_calls and (text is None or len(out) > 1):  # not on a plain {'text': ...}: no cost there
        _refuse_unknown(out, _RESPONSE_KEYS, where, "a response ")
    calls: list[ModelToolCall] = []
    issues: list[str] = []
    for index, raw in enumerate(raw_calls):
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw.get("name"):
            issues.append(f"toolCalls[{index}] needs a string 'name'")
            continue
        if "args" not in raw:  # {'name': ..., 'arguments': {...}} called the tool with no arguments
            _refuse_unknown(raw, _CALL_KEYS, where, f"toolCalls[{index}] ")
        call_id = raw.get("id")
        calls.append(
            ModelToolCall(
                call_id if isinstance(call_id, str) and call_id else new_id("call"),
                raw["name"],
                raw.get("args", {}),
            )
        )
    finish = out.get("finishReason")
    finish = finish if isinstance(finish, str) and finish.strip() else None
    # positional (text, tool_calls, usage, finish_reason, raw_finish_reason, issues): twice per turn
    return ModelResponse(
        text, calls, normalize_usage(out.get("usage")), finish or ("tool-calls" if calls else "stop"), finish, issues
    )
