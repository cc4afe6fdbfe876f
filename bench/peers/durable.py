"""The "durable turn" side by side (issue 17, item 2): Goondan with its state on disk against LangGraph
with its durable checkpointers, the same scenario as ``run.py`` (one user message, a tool call, a final
answer: two model calls and one tool call, scripted model, trivial tool).

Run: ``.venv/bin/python bench/peers/durable.py`` (``--quick`` for a short, noisier run).

- Goondan, ``persist=True``: the filesystem store (every message event appended as it is emitted, the
  turn fsync'd before its result is returned), ``inline`` and ``process`` (the default mode), and the
  PostgreSQL store (``store=postgresql://...``: each event committed, the turn one transaction).
- LangGraph (``create_agent`` with the LangChain v1 adapter's model and tool) with
  ``AsyncSqliteSaver`` and ``AsyncPostgresSaver``; a fresh thread per turn (the checkpointer's
  cheapest case) and a thread per 10 turns (a short chat whose history grows to 40 messages).

PostgreSQL: one server for the whole run, started from the Debian binaries with ``initdb`` / ``pg_ctl``
in a temporary directory by ``tests/kit/postgres.py`` (fsync and synchronous_commit on), every variant
run with a database of its own. Both sides talk to it over TCP on 127.0.0.1.

Every variant runs ``--repeats`` times, each in a fresh process, the variants interleaved (round
robin) so a slow moment of the shared machine hits them alike; a run's figure is the median over its
blocks of the CPU time of the whole process tree (Goondan's agent processes included) per turn, the
reported figure the median of the runs. CPU time leaves out waiting for the disk (fsync) and for the
database server's own process, which the wall column shows (the server's CPU is not counted for
either side).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _harness import idle_config  # bench/peers is the script's directory

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
from run import RESULTS, ensure_venv, find_uv, run_adapter  # noqa: E402

PEER_KEY = "langgraph_durable"

# (label, adapter, arguments, needs PostgreSQL)
GOONDAN = [
    ("Goondan inline, file store", ["--isolation=inline", "--persist=on"], False),
    ("Goondan process, file store (default mode)", ["--isolation=process", "--persist=on"], False),
    ("Goondan inline, PostgreSQL store", ["--isolation=inline", "--persist=on", "--store={db}"], True),
    ("Goondan process, PostgreSQL store", ["--isolation=process", "--persist=on", "--store={db}"], True),
]
LANGGRAPH = [
    ("LangGraph + SQLite saver, thread per turn", ["--saver=sqlite", "--history=fresh"], False),
    ("LangGraph + SQLite saver, thread per 10 turns", ["--saver=sqlite", "--history=conv10"], False),
    ("LangGraph + Postgres saver, thread per turn", ["--saver=postgres", "--history=fresh", "--dsn={db}"], True),
    ("LangGraph + Postgres saver, thread per 10 turns", ["--saver=postgres", "--history=conv10", "--dsn={db}"], True),
]
DEFAULT_MODE = "Goondan process, file store (default mode)"


def start_postgres(log: Any) -> tuple[Any, str]:
    """A PostgreSQL server of our own (tests/kit/postgres.py), or None and why not."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from kit.postgres import PostgresServer, find_pg_bin
    except ImportError as exc:
        return None, f"tests/kit/postgres.py cannot be imported: {exc}"
    bin_dir = find_pg_bin()
    if bin_dir is None or not (bin_dir / "initdb").exists():
        return None, "PostgreSQL binaries not found (apt-get install postgresql)"
    server = PostgresServer(bin_dir)
    try:
        server.init()
        server.start()
    except RuntimeError as exc:
        server.destroy()
        return None, f"PostgreSQL did not start: {str(exc)[:300]}"
    log(f"PostgreSQL {bin_dir.parent.name} on 127.0.0.1:{server.port} (fsync on)")
    return server, ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer turns and runs (noisier figures)")
    parser.add_argument("--turns", type=int, default=600, help="timed turns per run")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3, help="runs per variant (fresh processes, interleaved)")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--only", default="", help="comma-separated substrings of variant labels to run")
    parser.add_argument("--python", default=sys.executable, help="interpreter the LangGraph venv is built on")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--out", default=str(RESULTS / "durable.json"))
    args = parser.parse_args()
    if args.quick:
        args.turns, args.warmup, args.repeats = 150, 10, 1

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    uv = find_uv()
    py, why = ensure_venv(PEER_KEY, uv, args.python, log)
    server, pg_why = (None, "--no-postgres") if args.no_postgres else start_postgres(log)
    variants: list[tuple[str, str, list[str], bool]] = [
        (label, "goondan", extra, pg) for label, extra, pg in GOONDAN
    ] + [(label, "langgraph", extra, pg) for label, extra, pg in LANGGRAPH]
    if args.only:
        wanted = [w.strip().lower() for w in args.only.split(",")]
        variants = [v for v in variants if any(w in v[0].lower() for w in wanted)]
    rows: dict[str, dict[str, Any]] = {
        label: {"label": label, "side": side, "runs": [], "errors": []} for label, side, _, _ in variants
    }
    started = time.time()
    load_before = os.getloadavg()
    timing = [f"--turns={args.turns}", f"--warmup={args.warmup}", f"--block={args.block}"]
    try:
        for repeat in range(args.repeats):
            for label, side, extra, needs_pg in variants:
                row = rows[label]
                if needs_pg and server is None:
                    row["unavailable"] = pg_why
                    continue
                if side == "langgraph" and py is None:
                    row["unavailable"] = f"cannot install the LangGraph venv: {why}"
                    continue
                db = server.create_database() if needs_pg else ""
                argv = [a.replace("{db}", db) for a in extra]
                if side == "goondan":
                    res = run_adapter(
                        sys.executable, HERE / "frameworks" / "goondan_.py", "durable", timing + argv, args.timeout
                    )
                else:
                    res = run_adapter(
                        str(py), HERE / "frameworks" / "langgraph_durable.py", "durable", timing + argv, args.timeout
                    )
                if needs_pg:
                    server.drop_database(db)
                if "error" in res or "durable_turn_cpu_us" not in res:
                    row["errors"].append(res.get("error") or res.get("unavailable") or "no figures")
                    log(f"  {label}: {row['errors'][-1][:300]}")
                    continue
                row.setdefault("version", res.get("version"))
                row.setdefault("notes", res.get("notes"))
                row["runs"].append({"cpu_us": res["durable_turn_cpu_us"], "wall_us": res["durable_turn_us"]})
                log(f"  [{repeat + 1}/{args.repeats}] {label}: {res['durable_turn_cpu_us']:.0f} µs CPU per turn")
    finally:
        if server is not None:
            server.destroy()
    for row in rows.values():
        if row["runs"]:
            row["cpu_us"] = statistics.median(r["cpu_us"] for r in row["runs"])
            row["wall_us"] = statistics.median(r["wall_us"] for r in row["runs"])
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()} | {os.cpu_count()} CPUs | {platform.system()} {platform.release()} | "
        + idle_config(),
        "python": platform.python_version(),
        "turns": args.turns,
        "repeats": args.repeats,
        "seconds": round(time.time() - started),
        "loadavg_1m_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
    }
    text = report(list(rows.values()), meta)
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "rows": list(rows.values())}, indent=1) + "\n")
    out.with_suffix(".txt").write_text(text + "\n")
    return 0


def report(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    peers = [r["cpu_us"] for r in rows if r["side"] == "langgraph" and "cpu_us" in r]
    best = min(peers) if peers else None
    head = f"{'durable turn':<50}{'version':>9}{'CPU µs':>10}{'wall µs':>10}{'vs best durable peer (CPU)':>28}"
    lines = [
        f"{meta['date']} | {meta['machine']} | Python {meta['python']} | {meta['turns']} timed turns per run, "
        f"median of {meta['repeats']} runs | load {meta['loadavg_1m_before_after']}",
        "",
        head,
        "-" * len(head),
    ]
    for r in rows:
        if "cpu_us" not in r:
            why = r.get("unavailable") or "; ".join(r["errors"]) or "not run"
            lines.append(f"{r['label']:<50}  n/a: {why[:200]}")
            continue
        rel = "n/a"
        if best is not None:
            rel = f"{best / r['cpu_us']:.2f}x" if best >= r["cpu_us"] else f"1/{r['cpu_us'] / best:.2f}x"
        lines.append(f"{r['label']:<50}{r.get('version') or ''!s:>9}{r['cpu_us']:>10.0f}{r['wall_us']:>10.0f}{rel:>28}")
    default = next((r for r in rows if r["label"] == DEFAULT_MODE and "cpu_us" in r), None)
    if default is not None and best is not None:
        speed = best / default["cpu_us"]
        lines += [
            "",
            f"target: Goondan's default mode >= 3x less CPU per durable turn than the best durable peer "
            f"({best:.0f} µs vs {default['cpu_us']:.0f} µs): {speed:.1f}x  {'ok' if speed >= 3 else 'MISSED'}",
        ]
    lines += [
        "",
        "CPU: process tree (Goondan's agent processes included), median over blocks of turns; the database",
        "server's CPU and time waiting for fsync are not in it (wall is). Every turn is durable when it returns.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
