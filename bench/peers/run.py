"""Goondan side by side with the agent frameworks users would otherwise pick (issue #7).

Run: ``.venv/bin/python bench/peers/run.py`` (``--quick`` for a short, noisier run).

For every peer this creates (once) a separate virtual environment under ``bench/peers/.venvs/`` with
``uv`` from the pinned ``requirements/<peer>.txt`` (their dependencies conflict), then runs the same
scenario with that peer's interpreter (``frameworks/<peer>.py`` on top of ``_harness.py``) and Goondan's
with this interpreter, and prints the figures and their ratios to the fastest peer. A peer whose
environment cannot be built is reported with the installer's reason and the others still run.

Goondan runs as ``inline`` and ``process`` isolation, with persistence off and on. A variant the
runtime refuses (``E_ISOLATION_UNAVAILABLE``) shows as n/a; it is measured as soon as the runtime
accepts it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _harness import idle_config  # bench/peers is the script's directory

HERE = Path(__file__).resolve().parent
VENVS = HERE / ".venvs"
RESULTS = HERE / "results"

# key -> (adapter script, requirements file stem, display name)
PEERS: dict[str, tuple[str, str]] = {
    "langchain": ("langchain_v1.py", "LangChain v1"),
    "pydantic_ai": ("pydantic_ai_.py", "pydantic-ai"),
    "agent_framework": ("agent_framework_.py", "MS Agent Framework"),
    "openai_agents": ("openai_agents.py", "OpenAI Agents SDK"),
    "strands": ("strands_.py", "Strands Agents"),
}
GOONDAN_VARIANTS = [
    ("inline", "off"),
    ("inline", "on"),
    ("process", "off"),
    ("process", "on"),
]
LEVELS = ("turn", "model", "tool")


# --- environments -------------------------------------------------------------------------------


def find_uv() -> str:
    for candidate in (os.environ.get("UV"), shutil.which("uv"), str(Path(sys.executable).parent / "uv")):
        if candidate and Path(candidate).exists():
            return candidate
    raise SystemExit("uv not found: install it (`pip install uv`) or set UV=/path/to/uv")


def ensure_venv(key: str, uv: str, python: str, log: Any) -> tuple[Path | None, str]:
    """The peer's interpreter, (re)built when its requirements file changed; or None and the reason."""
    req = HERE / "requirements" / f"{key}.txt"
    venv = VENVS / key
    py = venv / "bin" / "python"
    stamp = venv / ".requirements.sha256"
    digest = hashlib.sha256(req.read_bytes()).hexdigest()
    if py.exists() and stamp.exists() and stamp.read_text() == digest:
        return py, ""
    log(f"  building {venv.relative_to(HERE.parent.parent)} from {req.name} ...")
    if venv.exists():
        shutil.rmtree(venv)
    VENVS.mkdir(exist_ok=True)
    steps = [
        [uv, "venv", "--quiet", "--python", python, str(venv)],
        [uv, "pip", "install", "--quiet", "--python", str(py), "-r", str(req)],
    ]
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            reason = (proc.stderr or proc.stdout).strip().splitlines()
            return None, " ".join(reason[-6:]) or f"{cmd[1]} exited {proc.returncode}"
    stamp.write_text(digest)
    return py, ""


# --- running adapters ----------------------------------------------------------------------------


def run_adapter(
    python: str, script: Path, mode: str, extra: list[str], timeout: float, pythonpath: str = ""
) -> dict[str, Any]:
    cmd = [python, str(script), mode, *extra]
    env = dict(os.environ, PYTHONHASHSEED="0")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"{mode}: timed out after {timeout:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH-JSON "):
            return dict(json.loads(line[len("BENCH-JSON ") :]))
    tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
    return {"error": f"{mode}: exit {proc.returncode}: {tail}"}


def measure(
    python: str, script: Path, args: argparse.Namespace, extra: list[str], modes: list[str], pythonpath: str = ""
) -> dict[str, Any]:
    timing = [
        f"--turns={args.turns}",
        f"--warmup={args.warmup}",
        f"--block={args.block}",
        f"--convs={args.convs}",
        f"--turns-per-conv={args.turns_per_conv}",
        f"--repeats={args.repeats}",
        f"--agents={args.agents}",
        f"--slope-layers={args.slope_layers}",
        f"--import-runs={args.import_runs}",
    ]
    out: dict[str, Any] = {}
    for mode in modes:
        res = run_adapter(python, script, mode, timing + extra, args.timeout, pythonpath)
        if "error" in res:
            out.setdefault("errors", []).append(res["error"])
            continue
        for k, v in res.items():
            if k in ("name", "version", "levels", "fake_model", "notes", "python"):
                out.setdefault(k, v)
            else:
                out[k] = v
        if "unavailable" in res:
            break
    return out


# --- report --------------------------------------------------------------------------------------


def fmt(v: Any, spec: str, width: int) -> str:
    if v is None:
        return "n/a".rjust(width)
    return format(v, spec).rjust(width)


def ratio(v: float | None, best: float | None, higher_is_better: bool = False) -> str:
    """How many times better (Nx) or worse (1/Nx) than the best peer."""
    if v is None or best is None or v <= 0 or best <= 0:
        return "n/a"
    r = (v / best) if higher_is_better else (best / v)
    return f"{r:.2f}x" if r >= 1 else f"1/{1 / r:.1f}x"


NOISE_US = 0.1  # per-layer figures at or below this are indistinguishable from 0 with 3 layers
W = 44  # label column


def layer_ratio(v: float | None, best: float | None) -> str:
    """Layer cost ratio; figures within noise of 0 are shown as ~0 instead of a meaningless quotient."""
    if v is None or best is None:
        return "n/a"
    if v < -NOISE_US:
        return "noise"
    if v <= NOISE_US:
        return "~0"
    if best <= NOISE_US:
        return "best~0"
    return ratio(v, best)


CPU_KEYS = {
    "turn_us": "turn_cpu_us",
    "turn_3layers_us": "turn_3layers_cpu_us",
    "per_layer_us": "per_layer_cpu_us",
    "import_ms": "import_cpu_ms",
    "turns_per_s": "turns_per_cpu_s",
}


def pick(r: dict[str, Any], key: str, basis: str) -> float | None:
    """A figure of one row on the ``cpu`` or ``wall`` basis (memory has one basis)."""
    if key.startswith("layer_"):
        level = key[len("layer_") :]
        if level not in r.get("levels", {}):
            return None
        table = r.get(CPU_KEYS["per_layer_us"] if basis == "cpu" else "per_layer_us", {})
        v = table.get(level)
        return None if v is None else float(v)
    if key == "kib_per_agent":
        v = r.get("bytes_per_agent")
        return None if v is None else float(v) / 1024
    v = r.get(CPU_KEYS.get(key, key) if basis == "cpu" else key)
    return None if v is None else float(v)


def measured(r: dict[str, Any]) -> bool:
    return "turn_us" in r or "bytes_per_agent" in r


def figures_table(rows: list[dict[str, Any]], basis: str) -> list[str]:
    turns = "turns/CPU-s" if basis == "cpu" else "turns/s"
    head = (
        f"{'framework':<{W}}{'version':>9}{'turn µs':>10}{'3 layers':>10}{'+turn':>9}{'+model':>9}{'+tool':>9}"
        f"{'import ms':>11}{'KiB/agent':>11}{turns:>13}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        if not measured(r):
            why = r.get("unavailable") or r.get("install_error") or "; ".join(r.get("errors", []))
            lines.append(f"{r['label']:<{W}}{r.get('version', ''):>9}  n/a: {why[:240]}")
            continue
        layer = []
        for level in LEVELS:
            v = pick(r, f"layer_{level}", basis)
            cell = "—" if v is None else f"{v:.2f}" + ("†" if level in r.get("wrapper", ()) else "")
            layer.append(cell.rjust(9))
        lines.append(
            f"{r['label']:<{W}}{r.get('version', ''):>9}{fmt(pick(r, 'turn_us', basis), '.1f', 10)}"
            f"{fmt(pick(r, 'turn_3layers_us', basis), '.1f', 10)}{''.join(layer)}"
            f"{fmt(pick(r, 'import_ms', basis), '.1f', 11)}{fmt(pick(r, 'kib_per_agent', basis), '.1f', 11)}"
            f"{fmt(pick(r, 'turns_per_s', basis), '.0f', 13)}"
        )
    return lines


def report(rows: list[dict[str, Any]], meta: dict[str, Any], basis: str) -> str:
    peers = [r for r in rows if r["kind"] == "peer" and "turn_us" in r]

    def best_of(key: str, lowest: bool = True, level: str = "") -> float | None:
        vals = [
            v
            for r in peers
            if (v := pick(r, key, basis)) is not None and (v > 0 or level) and level not in r.get("wrapper", ())
        ]
        if not vals:
            return None
        return min(vals) if lowest else max(vals)

    best: dict[str, float | None] = {k: best_of(k) for k in ("turn_us", "turn_3layers_us", "import_ms")}
    best["kib_per_agent"] = best_of("kib_per_agent")
    best["turns_per_s"] = best_of("turns_per_s", lowest=False)
    for level in LEVELS:
        best[f"layer_{level}"] = best_of(f"layer_{level}", level=level)

    lines = [
        f"{meta['date']} | {meta['machine']} | Python {meta['python']} | {meta['turns']} timed turns per "
        f"configuration (median) | {meta['convs']} concurrent conversations x {meta['turns_per_conv']} turns",
        "",
        "CPU time (process CPU, all threads; robust to other load on the machine)",
        *figures_table(rows, "cpu"),
        "",
        "Wall time",
        *figures_table(rows, "wall"),
        "",
        f"Ratios to the best peer in each column, {basis} basis (Nx = N times better, 1/Nx = N times worse)",
    ]
    head2 = (
        f"{'framework':<{W}}{'turn':>9}{'3 layers':>10}{'+turn':>10}{'+model':>10}{'+tool':>10}{'import':>9}"
        f"{'memory':>9}{'turns/s':>9}"
    )
    lines += [head2, "-" * len(head2)]
    for r in rows:
        if not measured(r):
            continue
        cells = [
            ratio(pick(r, "turn_us", basis), best["turn_us"]).rjust(9),
            ratio(pick(r, "turn_3layers_us", basis), best["turn_3layers_us"]).rjust(10),
        ]
        for level in LEVELS:
            cell = layer_ratio(pick(r, f"layer_{level}", basis), best[f"layer_{level}"])
            if level in r.get("wrapper", ()):
                cell += "†"
            cells.append(cell.rjust(10))
        cells += [
            ratio(pick(r, "import_ms", basis), best["import_ms"]).rjust(9),
            ratio(pick(r, "kib_per_agent", basis), best["kib_per_agent"]).rjust(9),
            ratio(pick(r, "turns_per_s", basis), best["turns_per_s"], higher_is_better=True).rjust(9),
        ]
        lines.append(f"{r['label']:<{W}}{''.join(cells)}")
    lines += [
        "",
        "turn µs: one turn, 0 layers. 3 layers: 3 pass-through layers at every level the framework offers.",
        f"+turn/+model/+tool: µs one pass-through layer adds per wrapped call = ({meta.get('slope_layers', 3)} layers "
        "at that level - 0 layers) /",
        f"({meta.get('slope_layers', 3)} x wrapped calls per turn: turn 1, model 2, tool 1); values <= 0.1 µs "
        "(or below 0) are within noise",
        "of 0 (~0 in the ratios; best~0: the best peer at that level is); noise: clearly negative, i.e. the",
        "run's noise was larger than the layer cost.",
        "† no framework mechanism at that level: a hand-written delegating wrapper, left out of the best-peer",
        "figure for layer ratios. — level not offered. n/a: not measured (reason given).",
    ]
    for inline in rows:
        if not (inline["key"].startswith("goondan-inline-off") and "turn_us" in inline and best["turn_us"]):
            continue
        g_turn = pick(inline, "turn_us", basis) or float("nan")
        speed = best["turn_us"] / g_turn
        lines += [
            "",
            f"{inline['label']}:",
            f"target: >= 5x faster per turn than the fastest peer ({best['turn_us']:.1f} µs vs {g_turn:.1f} µs): "
            f"{speed:.2f}x  {'ok' if speed >= 5 else 'MISSED'}",
        ]
        for level in LEVELS:
            g = pick(inline, f"layer_{level}", basis)
            b = best[f"layer_{level}"]
            if g is None or b is None:
                continue
            if g < -NOISE_US:
                shown, ok = "not measurable in this run (noise larger than the layer cost)", False
            elif b <= NOISE_US:
                shown, ok = "the cheapest peer is within noise of 0 µs, no 10x margin exists", False
            elif g <= NOISE_US:
                shown, ok = f">= {b / NOISE_US:.0f}x (Goondan within noise of 0 µs)", b / NOISE_US >= 10
            else:
                shown, ok = f"{b / g:.1f}x", b / g >= 10
            lines.append(
                f"target: {level:<5} layer >= 10x cheaper than the cheapest peer mechanism ({b:.2f} µs vs "
                f"{g:.2f} µs): {shown}  {'ok' if ok else 'MISSED'}"
            )
        floor = meta.get("coroutine_floor_us")
        cheapest = [b for lv in LEVELS if (b := best.get(f"layer_{lv}")) is not None and b > NOISE_US]
        if isinstance(floor, int | float) and cheapest:
            need = min(cheapest) / 10
            lines.append(
                f"interpreter floor: one `async def` pass-through level costs {floor:.3f} µs on this machine "
                f"(Python {meta.get('python', '?')}, no framework code at all); 10x under the cheapest peer "
                f"needs <= {need:.3f} µs per layer{', below that floor' if floor >= need else ''}"
            )
    return "\n".join(lines)


# --- the interpreter's floor for one layer ---------------------------------------------------------


def coroutine_floor_us(n: int = 200_000, trials: int = 15) -> float:
    """µs one ``async def layer(): return await inner()`` level adds to awaiting ``inner()`` directly on
    this interpreter: what any async pass-through layer costs at the very least (its own coroutine),
    before the framework does anything. It bounds how much cheaper than a peer a layer can be.

    Direct and wrapped loops run back to back in each trial (so both see the same machine speed) and
    the median of the per-trial differences is reported."""
    import asyncio
    import statistics

    async def inner() -> int:
        return 1

    async def layer() -> int:
        return await inner()

    async def direct(k: int) -> None:
        for _ in range(k):
            await inner()

    async def wrapped(k: int) -> None:
        for _ in range(k):
            await layer()

    def timed(fn: Any) -> float:
        t0 = time.process_time()
        asyncio.run(fn(n))
        return time.process_time() - t0

    diffs = []
    for i in range(trials):
        if i % 2:
            w, d = timed(wrapped), timed(direct)
        else:
            d, w = timed(direct), timed(wrapped)
        diffs.append((w - d) / n * 1e6)
    return statistics.median(diffs)


# --- main ----------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer turns and runs (noisier figures)")
    parser.add_argument("--only", default="", help="comma-separated peers to run (default: all); 'none' = Goondan only")
    parser.add_argument("--no-goondan", action="store_true")
    parser.add_argument("--python", default=sys.executable, help="interpreter the peer venvs are built on")
    parser.add_argument("--turns", type=int, default=2000, help="timed turns per configuration")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--convs", type=int, default=100)
    parser.add_argument("--turns-per-conv", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--slope-layers", type=int, default=30, help="layers at one level for the per-layer cost")
    parser.add_argument("--import-runs", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--basis", choices=["cpu", "wall"], default="cpu", help="time basis of the ratios")
    parser.add_argument("--goondan-python", default=sys.executable, help="interpreter with goondan installed")
    parser.add_argument(
        "--goondan-src", default="", help="run Goondan from this source tree (PYTHONPATH) instead of the installed one"
    )
    parser.add_argument("--goondan-tag", default="", help="suffix for Goondan row labels (e.g. a commit)")
    parser.add_argument(
        "--out",
        default=None,
        help="where to write the raw results (default: results/last.json for a run; with --from, only if given)",
    )
    parser.add_argument(
        "--from", dest="sources", action="append", default=[], help="render rows of earlier result JSON files instead"
    )
    args = parser.parse_args()
    if args.quick:
        args.turns, args.warmup, args.repeats, args.agents, args.import_runs = 300, 20, 2, 50, 3

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.sources:
        rows: list[dict[str, Any]] = []
        metas = []
        for src in args.sources:
            data = json.loads(Path(src).read_text())
            rows += data["rows"]
            metas.append(data["meta"])
        meta = dict(metas[0], sources=[{"file": f, **m} for f, m in zip(args.sources, metas, strict=True)])
        text = report(rows, meta, args.basis)
        print(text)
        if args.out:  # rendering earlier files must not overwrite the last full run's results
            write_results(Path(args.out), rows, meta, text)
        return 0
    selected = list(PEERS) if not args.only else [p for p in args.only.split(",") if p in PEERS]
    uv = find_uv() if selected else ""
    rows = []
    started = time.time()
    load_before = os.getloadavg()
    for key in selected:
        script_name, label = PEERS[key]
        log(f"{label}:")
        py, why = ensure_venv(key, uv, args.python, log)
        if py is None:
            rows.append({"kind": "peer", "key": key, "label": label, "install_error": why})
            log(f"  cannot install: {why}")
            continue
        res = measure(str(py), HERE / "frameworks" / script_name, args, [], ["import", "memory", "bench"])
        res.update(kind="peer", key=key, label=label)
        rows.append(res)
        log(f"  turn {res.get('turn_us', float('nan')):.1f} µs " + "; ".join(res.get("errors", [])))
    if not args.no_goondan:
        script = HERE / "frameworks" / "goondan_.py"
        for isolation, persist in GOONDAN_VARIANTS:
            label = f"Goondan {isolation}, persist {persist}" + (f" @{args.goondan_tag}" if args.goondan_tag else "")
            log(f"{label}:")
            extra = [f"--isolation={isolation}", f"--persist={persist}"]
            modes = ["bench", "memory"] if isolation == "inline" else ["bench"]
            if (isolation, persist) == ("inline", "off"):
                modes = ["import", *modes]
            res = measure(args.goondan_python, script, args, extra, modes, pythonpath=args.goondan_src)
            tag = f"@{args.goondan_tag}" if args.goondan_tag else ""
            res.update(kind="goondan", key=f"goondan-{isolation}-{persist}{tag}", label=label)
            rows.append(res)
            log(f"  turn {res.get('turn_us', float('nan')):.1f} µs {res.get('unavailable', '')}")
        inline_off = next(r for r in rows if r["kind"] == "goondan" and r["key"].startswith("goondan-inline-off"))
        for r in rows:  # import time does not depend on the variant
            if r["kind"] == "goondan" and "import_ms" not in r and "turn_us" in r:
                r["import_ms"] = inline_off.get("import_ms")
                r["import_cpu_ms"] = inline_off.get("import_cpu_ms")
    meta = {
        "machine": f"{platform.machine()} | {os.cpu_count()} CPUs | {platform.system()} {platform.release()} | "
        + idle_config(),
        "python": platform.python_version(),
        "turns": args.turns,
        "convs": args.convs,
        "turns_per_conv": args.turns_per_conv,
        "slope_layers": args.slope_layers,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": round(time.time() - started),
        "argv": sys.argv[1:],
        "loadavg_1m_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "coroutine_floor_us": round(coroutine_floor_us(), 4),
    }
    for r in rows:
        if r["kind"] == "peer":
            r["wrapper"] = [lv for lv, how in r.get("levels", {}).items() if "wrapper (plain Python)" in how]
    text = report(rows, meta, args.basis)
    print(text)
    write_results(Path(args.out or RESULTS / "last.json"), rows, meta, text)
    return 0


def write_results(out: Path, rows: list[dict[str, Any]], meta: dict[str, Any], text: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    out.with_suffix(".txt").write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
