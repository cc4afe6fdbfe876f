"""Prompt-cache benchmark (issue 17, item 4). Run: ``python bench/prompt_cache.py`` (``--quick``: 12 turns, 2 variants).

A real Goondan runtime replays one 50-turn conversation against a loopback Anthropic Messages API
(``tests/models/providers/fake_http.py``: ``CachingMessagesAPI``) that validates ``cache_control``
marks like the API and keeps a prompt cache with its semantics: a prefix ending at a marked block
is written once it holds 1024 tokens, and a request reads the longest cached prefix ending at a mark
or within the 20 blocks before one. The agent has a realistic system prompt (~1,300 tokens, through
the implicit context-message extension), five tools, and message-window + message-compaction
enabled; about one turn in three calls a tool.

For every request it reports the share of its input tokens inside an unchanged cached prefix
(``cache_read / all input``), and for the run the average share, the input tokens sent per request
and the *billed* input tokens per request (Anthropic's 5-minute cache: writes cost 1.25x, reads
0.1x), for several compaction settings, so the trade-off of compaction is visible: compaction sends
fewer tokens per request but every compaction rewrites the history after the agent prompt (which
message-compaction keeps ahead of its summary), so the request after it reads only tools + prompt.

Tokens are estimated as characters / 4 of each block's JSON, the same for every variant.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import goondan

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-ant-bench"


def _fake_http() -> Any:
    """The providers' test kit's fake HTTP server (stdlib only), loaded by path: it is not a package
    the installed distribution ships."""
    path = ROOT / "tests" / "models" / "providers" / "fake_http.py"
    spec = importlib.util.spec_from_file_location("goondan_bench_fake_http", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


WORDS = [
    "invoice",
    "customer",
    "shipment",
    "region",
    "quarter",
    "forecast",
    "margin",
    "supplier",
    "warehouse",
    "contract",
    "delivery",
    "refund",
    "ticket",
    "priority",
    "escalation",
    "account",
    "renewal",
    "discount",
    "audit",
    "policy",
    "compliance",
    "report",
    "summary",
]


def words(seed: int, count: int) -> str:
    """Deterministic filler text: the same run always sends the same bytes."""
    return " ".join(WORDS[(seed * 7 + i * 13 + (i * i) % 5) % len(WORDS)] for i in range(count))


SYSTEM_PROMPT = (
    "You are the operations assistant of a mid-sized distribution company. "
    + " ".join(f"Rule {i}: {words(i, 40)}." for i in range(1, 19))
    + " Answer concisely; call a tool whenever a figure is asked for."
)

TOOLS = ["orders", "inventory", "customers", "tickets", "reports"]


def questions(turns: int) -> list[str]:
    return [f"Question {n}: {words(100 + n, 25 + (n % 4) * 10)}?" for n in range(turns)]


def replies(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The scripted model: a tool call on every third question, an answer after tool results,
    otherwise a direct answer of a few sentences."""
    last = body["messages"][-1]["content"]
    users = sum(1 for m in body["messages"] if m["role"] == "user")
    if any(b.get("type") == "tool_result" for b in last):
        return [{"type": "text", "text": f"According to the records: {words(users, 60)}."}]
    question = next((b["text"] for b in reversed(last) if b.get("type") == "text"), "")
    number = int(question.split()[1].rstrip(":")) if question.startswith("Question ") else users
    if number % 3 == 2:
        tool = TOOLS[number % len(TOOLS)]
        return [
            {"type": "text", "text": "Let me look that up."},
            {"type": "tool_use", "id": f"toolu_{number}", "name": f"{tool}__lookup", "input": {"query": question[:40]}},
        ]
    return [{"type": "text", "text": f"Answer {number}: {words(number, 70)}."}]


TOOL_PY = """
def lookup(ctx, args):
    q = args.get("query", "")
    return {"rows": [{"id": i, "note": f"record {i} for {q}"} for i in range(6)]}

handlers = {"lookup": lookup}
"""


def write_bundle(root: Path, endpoint: str, extensions: list[dict[str, Any]], cache: list[str] | None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.py").write_text(TOOL_PY)
    options: dict[str, Any] = {"retryBaseDelaySeconds": 0.01}
    if cache is not None:
        options["cacheBreakpoints"] = cache
    docs: list[dict[str, Any]] = [
        {"apiVersion": "goondan.ai/v1", "kind": "Package", "metadata": {"name": "prompt-cache-bench"}},
        {
            "apiVersion": "goondan.ai/v1",
            "kind": "Model",
            "metadata": {"name": "claude"},
            "spec": {
                "provider": "anthropic",
                "model": "claude-bench",
                "endpoint": endpoint,
                "apiKey": {"valueFrom": {"env": "BENCH_ANTHROPIC_KEY"}},
                "options": options,
            },
        },
    ]
    for tool in TOOLS:
        schema = {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": f"What to look up in {tool}: {words(len(tool), 12)}"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            },
            "required": ["query"],
        }
        docs.append(
            {
                "apiVersion": "goondan.ai/v1",
                "kind": "Tool",
                "metadata": {"name": tool},
                "spec": {
                    "entry": "./tools.py",
                    "exports": [
                        {
                            "name": "lookup",
                            "description": f"Search {tool}. {words(len(tool) * 3, 30)}.",
                            "parameters": schema,
                        }
                    ],
                },
            }
        )
    docs.append(
        {
            "apiVersion": "goondan.ai/v1",
            "kind": "Agent",
            "metadata": {"name": "ops"},
            "spec": {
                "modelConfig": {"modelRef": "Model/claude", "params": {"maxTokens": 1024}},
                "prompt": {"system": SYSTEM_PROMPT},
                "tools": [{"ref": f"Tool/{t}"} for t in TOOLS],
                "extensions": extensions,
            },
        }
    )
    docs.append(
        {
            "apiVersion": "goondan.ai/v1",
            "kind": "Swarm",
            "metadata": {"name": "default"},
            "spec": {"entryAgent": "Agent/ops", "agents": [{"ref": "Agent/ops"}]},
        }
    )
    (root / "goondan.yaml").write_text("\n---\n".join(json.dumps(d) for d in docs) + "\n")
    return root


def base(name: str, config: dict[str, Any]) -> dict[str, Any]:
    return {"ref": {"kind": "Extension", "name": name, "package": "@goondan/base"}, "config": config}


def variants() -> dict[str, tuple[list[dict[str, Any]], list[str] | None]]:
    """name -> (extensions, cacheBreakpoints option or None for the default)."""
    window = base("message-window", {"maxMessages": 120})
    big = {"maxCharacters": 200000}

    def compaction(max_messages: int, retain: int, mode: str = "truncate") -> dict[str, Any]:
        config = {"maxMessages": max_messages, "retainLastMessages": retain, "mode": mode, **big}
        return base("message-compaction", config)

    return {
        "compaction truncate 40/8 + window 120": ([compaction(40, 8), window], None),
        "compaction truncate 24/8 + window 120": ([compaction(24, 8), window], None),
        "compaction truncate 80/8 + window 120": ([compaction(80, 8), window], None),
        "compaction truncate 40/24 + window 120": ([compaction(40, 24), window], None),
        "compaction remove 40/8 + window 120": ([compaction(40, 8, "remove"), window], None),
        "window 30 alone (slides every turn)": ([base("message-window", {"maxMessages": 30})], None),
        "truncate 40/8 + window 120, no marks": ([compaction(40, 8), window], []),
    }


async def replay(bundle: Path, state: Path, turns: int) -> None:
    async with goondan.Runtime(bundle, state_root=state, executor="inline", env={"BENCH_ANTHROPIC_KEY": KEY}) as rt:
        for question in questions(turns):
            result = await rt.request(question)
            if result.finish_reason != "text_response":
                raise SystemExit(f"turn ended with {result.finish_reason}: {result.error}")


def run_variant(
    fake: Any, name: str, extensions: list[dict[str, Any]], cache: list[str] | None, turns: int
) -> dict[str, Any]:
    api = fake.CachingMessagesAPI(replies, min_tokens=1024)
    with fake.FakeServer(api) as server, tempfile.TemporaryDirectory() as tmp:
        bundle = write_bundle(Path(tmp) / "bundle", server.url, extensions, cache)
        asyncio.run(replay(bundle, Path(tmp) / "state", turns))
    if api.rejections:
        raise SystemExit(f"{name}: the fake API rejected requests: {api.rejections[:3]}")
    uses = api.uses
    shares = [u.read_share for u in uses]
    billed = [u.input_tokens + 1.25 * u.cache_creation_input_tokens + 0.1 * u.cache_read_input_tokens for u in uses]
    return {
        "variant": name,
        "turns": turns,
        "requests": len(uses),
        "avg_cached_share": statistics.fmean(shares),
        "min_cached_share_after_first": min(shares[1:]) if len(shares) > 1 else 0.0,
        "avg_input_tokens": statistics.fmean(u.total for u in uses),
        "avg_billed_tokens": statistics.fmean(billed),
        "per_request": [
            {"total": u.total, "read": u.cache_read_input_tokens, "written": u.cache_creation_input_tokens}
            for u in uses
        ],
    }


def render(results: list[dict[str, Any]]) -> str:
    head = f"{'variant':44} {'requests':>8} {'cached share':>12} {'input tok/req':>13} {'billed tok/req':>14}"
    lines = [head, "-" * len(head)]
    for r in results:
        lines.append(
            f"{r['variant']:44} {r['requests']:>8} {r['avg_cached_share'] * 100:>11.1f}% "
            f"{r['avg_input_tokens']:>13.0f} {r['avg_billed_tokens']:>14.0f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, help="turns per variant (default 50, with --quick 12)")
    parser.add_argument("--quick", action="store_true", help="12 turns, default variant and cache-off only")
    parser.add_argument("--json", type=Path, help="write the raw figures (per request too) here")
    parser.add_argument("--per-request", action="store_true", help="print the default variant's requests")
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    fake = _fake_http()
    chosen = variants()
    turns = args.turns if args.turns is not None else 12 if args.quick else 50
    if args.quick:
        chosen = {k: v for i, (k, v) in enumerate(chosen.items()) if i == 0 or v[1] == []}
    selected: list[tuple[str, tuple[list[dict[str, Any]], list[str] | None]]] = list(chosen.items())
    results = [run_variant(fake, name, ext, cache, turns) for name, (ext, cache) in selected]
    print(f"prompt cache, {turns} turns, tokens = JSON chars / 4, cache written from 1024 tokens")
    print(render(results))
    if args.per_request:
        first = results[0]
        print(f"\n{first['variant']}: per request (cached share of input tokens)")
        for i, r in enumerate(first["per_request"]):
            share = r["read"] / r["total"] if r["total"] else 0.0
            print(f"  {i:3d} total={r['total']:6d} read={r['read']:6d} written={r['written']:6d} {share * 100:5.1f}%")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print("BENCH-JSON " + json.dumps([{k: v for k, v in r.items() if k != "per_request"} for r in results]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
