"""The judge through a real provider SDK: an OpenAI-compatible loopback server receives the grading
request with the score schema as its structured-output format and the key from the suite's
``apiKey``; its answer becomes the criterion's score."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from goondan.eval import Grade, JudgeModel
from goondan.eval._suite import Criterion, Judge
from models.providers.fake_http import FakeServer, Reply, Req

KEY = "sk-judge-SECRET"


def grader(req: Req) -> Reply:
    answer = json.dumps({"score": 0.7, "reason": "mostly right"})
    choice = {"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}
    usage = {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59}
    return Reply(
        body={"id": "j", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice], "usage": usage}
    )


def grade_once(judge: Judge, root: Path, env: dict[str, str]) -> Grade:
    async def main() -> Grade:
        model = JudgeModel(judge, root, env)
        try:
            return await model.grade(Criterion(name="right", criterion="It is right."), "2+3?", "assistant: 5")
        finally:
            await model.aclose()

    return asyncio.run(main())


def test_an_openai_judge_grades_with_the_score_schema_and_the_suite_key(tmp_path: Path) -> None:
    with FakeServer(grader) as server:
        judge = Judge.model_validate(
            {
                "model": {
                    "provider": "openai",
                    "model": "judge-model",
                    "endpoint": server.url + "/v1",
                    "apiKey": {"valueFrom": {"env": "JUDGE_KEY"}},
                },
                "instructions": "Be strict.",
            }
        )
        grade = grade_once(judge, tmp_path, {"JUDGE_KEY": KEY})
        (request,) = server.requests
    assert grade.score == pytest.approx(0.7) and grade.reason == "mostly right"
    assert grade.usage == {"promptTokens": 50, "completionTokens": 9, "totalTokens": 59}
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = request.json
    assert body["model"] == "judge-model"
    assert body["messages"][0]["content"].startswith("Be strict.")
    assert "Criterion (right): It is right." in body["messages"][1]["content"]
    schema = json.dumps(body.get("response_format", {}))
    assert '"score"' in schema and '"reason"' in schema


def test_a_judge_without_api_key_gets_the_providers_variable_from_the_runs_environment(tmp_path: Path) -> None:
    # the run's environment holds the bundle's .env; the SDK itself would read only os.environ
    with FakeServer(grader) as server:
        judge = Judge.model_validate(
            {"model": {"provider": "openai", "model": "judge-model", "endpoint": server.url + "/v1"}}
        )
        grade = grade_once(judge, tmp_path, {"OPENAI_API_KEY": KEY})
        (request,) = server.requests
    assert grade.score == pytest.approx(0.7)
    assert request.headers["authorization"] == f"Bearer {KEY}"
