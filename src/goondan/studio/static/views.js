// The trace waterfall and the swarm graph.
import { h, svg, fmtMs, json } from "./dom.js";

export function renderWaterfall(box, trace, detail) {
  const total = Math.max(trace.duration, 0.001);
  detail.hidden = true;
  const rows = trace.spans.map((s) => {
    const left = s.offset === null ? 0 : (s.offset / total) * 100;
    const width = s.duration === null ? 0 : Math.max((s.duration / total) * 100, 0.3);
    const a = s.attrs;
    const who = a.agentName ? `${a.agentName}@${a.instanceKey}` : "";
    const bar = h("div", { class: `bar ${s.kind} ${s.status}`, style: `left:${left}%;width:${width}%` });
    const late = left + width > 85;
    const label = h("span", { class: "bar-label", style: late ? `right:${100 - left}%` : `left:${left + width}%` }, ` ${fmtMs(s.duration)} `);
    const row = h("div", {
      class: "span", "data-testid": "span-row", "data-kind": s.kind, "data-depth": s.depth, "data-agent": a.agentName || "",
      "data-status": s.status, "data-span": s.id, "data-parent": s.parent || "",
    },
      h("div", { class: "sname", style: `padding-left:${s.depth * 14}px`, title: `${s.name} ${who}` },
        h("span", { class: "kind" }, s.kind), s.name, " ", h("span", { class: "muted" }, s.kind === "turn" ? who : ""),
        a.error ? h("span", { class: "err" }, ` [${a.error.code || "error"}]`) : ""),
      h("div", { class: "track" }, bar, label));
    row.addEventListener("click", () => {
      for (const el of box.querySelectorAll(".span.sel")) el.classList.remove("sel");
      row.classList.add("sel");
      showSpan(detail, s);
    });
    return row;
  });
  box.replaceChildren(...rows);
}

function showSpan(detail, s) {
  const a = s.attrs;
  const kv = h("div", { class: "kv" });
  const add = (k, v) => { if (v !== undefined && v !== null && v !== "") kv.append(h("span", { class: "muted" }, k), h("span", {}, v)); };
  add("kind", s.kind);
  add("status", s.status);
  add("agent", a.agentName ? `${a.agentName} @ ${a.instanceKey}` : "");
  add("turn", a.turnId);
  add("duration", fmtMs(s.duration));
  add("starts at", fmtMs(s.offset));
  add("tool call", a.toolCallId);
  add("finish reason", a.finishReason);
  if (a.tokenUsage) add("tokens", `${a.tokenUsage.promptTokens ?? "?"} in · ${a.tokenUsage.completionTokens ?? "?"} out · ${a.tokenUsage.totalTokens ?? "?"} total`);
  add("steps", a.stepCount);
  add("tool calls", a.toolCallCount);
  if (a.error) kv.append(h("span", { class: "muted" }, "error"), h("span", { class: "err", "data-testid": "span-error" }, `[${a.error.code || "error"}] ${a.error.message || ""}`));
  for (const ap of a.approvals || []) {
    add(ap.type === "approval.requested" ? "approval asked" : "approval decided",
      `${ap.toolName}${ap.approved === undefined || ap.approved === null ? "" : ap.approved ? " · approved" : " · denied"}${ap.decidedBy ? " by " + ap.decidedBy : ""}${ap.reason ? " · " + ap.reason : ""}`);
  }
  detail.replaceChildren(h("h3", {}, s.name), kv);
  if (a.llmInputMessages) {
    detail.append(h("h3", {}, `model input (${a.llmInputMessages.length} messages)`),
      ...a.llmInputMessages.map((m) => h("pre", { "data-testid": "model-input" }, `${m.role}: ${typeof m.content === "string" ? m.content : json(m.content)}`)));
  } else if (s.kind === "step") {
    detail.append(h("p", { class: "muted" }, "The model input of this step was not recorded (run with GOONDAN_TRACE_LLM_INPUT=1)."));
  }
  detail.hidden = false;
}

export function renderGraph(box, graph) {
  const agents = graph.agents;
  const conns = graph.connectors || [];
  const W = 760, H = Math.max(360, 120 + agents.length * 40), cx = W / 2 + 80, cy = H / 2, R = Math.min(W, H) / 2 - 80;
  const pos = new Map();
  agents.forEach((a, i) => {
    const t = (2 * Math.PI * i) / Math.max(agents.length, 1) - Math.PI / 2;
    pos.set(a.id, agents.length === 1 ? [cx, cy] : [cx + R * Math.cos(t), cy + R * Math.sin(t)]);
  });
  const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-testid": "graph-svg" });
  root.append(svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto" },
    svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#888" }))));
  conns.forEach((c, i) => {
    const y = 40 + i * 70, x = 70;
    root.append(svg("rect", { x: x - 60, y: y - 16, width: 120, height: 32, rx: 5, fill: "#fff7e8", stroke: "#d08a2f" }),
      svg("text", { x, y: y + 4, "text-anchor": "middle", "data-testid": "graph-connector" }, c.connection));
    for (const r of c.routes) {
      const p = pos.get(r.agent);
      if (!p) continue;
      root.append(svg("line", { x1: x + 60, y1: y, x2: p[0], y2: p[1], stroke: "#d08a2f", "stroke-dasharray": "4 3", "marker-end": "url(#arrow)" }),
        svg("text", { x: (x + 60 + p[0]) / 2, y: (y + p[1]) / 2 - 4, fill: "#a06a20" }, r.event || "*"));
    }
  });
  for (const e of graph.edges) {
    const [ax, ay] = pos.get(e.from) || [0, 0];
    const [bx, by] = pos.get(e.to) || [0, 0];
    const len = Math.hypot(bx - ax, by - ay) || 1, ux = (bx - ax) / len, uy = (by - ay) / len;
    const [x1, y1, x2, y2] = [ax + ux * 28, ay + uy * 28, bx - ux * 30, by - uy * 30];
    root.append(svg("line", { x1, y1, x2, y2, stroke: e.errors ? "#c0392b" : "#888", "stroke-width": 1 + Math.min(4, Math.log2(e.count + 1)), "marker-end": "url(#arrow)" }),
      svg("text", { x: (x1 + x2) / 2 + 8, y: (y1 + y2) / 2, "data-testid": "graph-edge" },
        `${e.count}× · ${fmtMs(e.meanMs)}${e.errors ? ` · ${e.errors} errors` : ""}`));
  }
  for (const a of agents) {
    const [x, y] = pos.get(a.id);
    root.append(svg("circle", { cx: x, cy: y, r: 26, fill: a.entry ? "#2f5fd0" : "#6f8fd8" }),
      svg("text", { x: x + 32, y: y - 14, "data-testid": "graph-agent" }, a.id),
      svg("text", { x, y: y + 4, "text-anchor": "middle", fill: "#fff" }, `${a.turns}`));
  }
  box.replaceChildren(root, h("p", { class: "muted" }, "Circles: agents (number = turns; darker = entry agent). Arrows: calls between agents (count · mean latency)."
    + (conns.length ? " Dashed: connector routes." : " Give gdn studio the bundle PATH to see connectors and routes.")));
}
