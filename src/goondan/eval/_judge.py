"""Grading rubric criteria with the judge model of a suite.

The judge is a Model built the same way an agent's is (any provider, ``python`` included), called
directly: one request per criterion, asking for ``{"score": 0..1, "reason": "..."}``. The request
carries that shape as ``output_schema``, so providers with structured output (and the local model's
grammar) answer in it; the answer is still parsed leniently (a JSON object anywhere in the text, or a
bare number) because small models and hand-written judges do not always comply.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import GoondanError
from ._suite import Criterion, Judge

log = logging.getLogger("goondan.eval")

SCORE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}, "reason": {"type": "string"}},
    "required": ["score", "reason"],
    "additionalProperties": False,
}

SYSTEM = (
    "You grade the answer of an AI agent against one criterion. Read the user's input and the agent's "
    'transcript, then reply with JSON only: {"score": <number from 0 to 1>, "reason": "<one sentence>"}. '
    "1 means the criterion is fully met, 0 means not at all."
)


@dataclass
class Grade:
    score: float
    reason: str
    error: str | None = None
    usage: dict[str, int] | None = None


def judge_api_key(judge: Judge, env: Any) -> str | None:
    """The judge's API key: its ``apiKey``, else the provider's usual variable read from ``env``.

    ``env`` is the run's environment, the bundle's ``.env`` included; the provider SDKs read only
    the process environment, so ``judge: {model: openai/gpt-4o-mini}`` with ``OPENAI_API_KEY`` in
    ``.env`` (where the agents' keys are) failed every rubric criterion with E_MODEL_AUTH. A key that
    is nowhere is refused here, before any scenario runs, instead of in each criterion's row.
    """
    cfg = judge.model
    if cfg.api_key is not None:
        from ..bundle import resolve_value_source

        return resolve_value_source(cfg.api_key, env, required=True, path="suite judge.model.apiKey")
    from ..models import DEFAULT_KEY_VARIABLES, default_api_key

    found = default_api_key(cfg.provider, env)
    if found is not None:
        return found
    variables = DEFAULT_KEY_VARIABLES.get(cfg.provider, ())
    if not variables or cfg.endpoint:
        return None  # providers without keys, and self-hosted endpoints (which often take none)
    names = " or ".join(variables)
    raise GoondanError(
        "E_MODEL_AUTH",
        f"the suite's judge ({cfg.provider}/{cfg.model}) has no API key: {names} is not set; no scenario was run",
        suggestion=f"export {variables[0]}=... or put it in the bundle's .env, or give the judge "
        "model an apiKey: {valueFrom: {env: NAME}}.",
    )


class JudgeModel:
    def __init__(self, judge: Judge, root: Path, env: Any = None) -> None:
        from ..models import create_model_adapter

        cfg = judge.model
        api_key = judge_api_key(judge, os.environ if env is None else env)
        self.config = cfg
        self.instructions = judge.instructions
        self.adapter = create_model_adapter(
            cfg.provider, model=cfg.model, options=dict(cfg.options), root=root, api_key=api_key, endpoint=cfg.endpoint
        )

    async def grade(self, criterion: Criterion, user_input: str, transcript: str) -> Grade:
        from ..models import ModelRequest

        system = SYSTEM if not self.instructions else f"{self.instructions}\n\n{SYSTEM}"
        prompt = (
            f"Criterion ({criterion.name}): {criterion.criterion}\n\n"
            f"User input:\n{user_input}\n\nAgent transcript:\n{transcript}\n\n"
            "Reply with the JSON object only."
        )
        request = ModelRequest(
            messages=[{"role": "system", "content": system}, {"role": "user", "content": prompt}],
            tools=[],
            params={"temperature": 0},
            model=self.config.model,
            agent_name="eval-judge",
            instance_key=criterion.name,
            output_schema=SCORE_SCHEMA,
        )
        try:
            response = await self.adapter.generate(request)
        except GoondanError as exc:
            if exc.__cause__ is not None:  # the judge's own code raised (a python judge): its traceback for -v
                log.info("traceback of the judge grading %r:", criterion.name, exc_info=exc.__cause__)
            return Grade(0.0, "", error=f"[{exc.code}] {exc.message}")
        grade = parse_grade(response.text or "")
        grade.usage = response.usage
        return grade

    async def aclose(self) -> None:
        await self.adapter.aclose()


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _is_score(value: Any) -> bool:
    """A finite number (JSON also parses ``Infinity`` and ``NaN``, which grade nothing)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def parse_grade(text: str) -> Grade:
    """``{"score", "reason"}`` from the judge's answer; a score outside 0..1 is clamped, an answer
    without any score is an error grade (score 0) that quotes the answer."""
    candidates = [text.strip()]
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if match:
        candidates.append(match.group(0))
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict) and _is_score(data.get("score")):
            return Grade(min(1.0, max(0.0, float(data["score"]))), str(data.get("reason") or ""))
        if _is_score(data):
            return Grade(min(1.0, max(0.0, float(data))), "")
    number = _NUMBER.fullmatch(text.strip())
    if number:
        return Grade(min(1.0, max(0.0, float(number.group(0)))), "")
    return Grade(0.0, "", error=f"the judge's answer has no score: {text[:200]!r}")


__all__ = ["SCORE_SCHEMA", "Grade", "JudgeModel", "parse_grade"]
