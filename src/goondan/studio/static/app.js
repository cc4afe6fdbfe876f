// Goondan Studio: a read-only view over the JSON API of goondan.studio (no framework, no build step).
// Long lists stay fast by paging on the server and keeping only a few pages in the DOM.
import { h, fmtTime, fmtMs, short, json, plural } from "./dom.js";
import { renderWaterfall, renderGraph } from "./views.js";

const PAGE = 100;          // conversation rows per page
const MAX_PAGES = 4;       // conversation pages kept in the DOM at once
const LIST_PAGE = 50;      // instances per page

const state = {
  ws: "", q: "", listOffset: 0, listTotal: null,  // null: not loaded yet
  sel: null,               // {workspace, agent, key}
  tab: "conversation",
  conv: null,              // {total, pages: [{offset, count, el}]}
  turnId: null, source: null,
};

async function api(path, params = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") url.searchParams.set(k, v);
  const res = await fetch(url, { credentials: "same-origin" });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error ? `[${body.error.code}] ${body.error.message}` : `HTTP ${res.status}`);
  return body;
}

function showError(where, err) {
  where.replaceChildren(h("p", { class: "pad err" }, String(err.message || err)));
}

// ---------------------------------------------------------------- instance list

async function loadOverview() {
  const ov = await api("/api/overview");
  document.getElementById("store").textContent = [ov.store, ov.bundle ? `bundle ${ov.bundle}` : ""].filter(Boolean).join(" · ");
  const sel = document.getElementById("ws-filter");
  sel.replaceChildren(h("option", { value: "" }, `all workspaces (${ov.workspaces.length})`),
    ...ov.workspaces.map((w) => h("option", { value: w.id }, `${w.package || w.bundle || w.id} · ${w.swarm || ""}`)));
  sel.value = state.ws;
}

async function loadInstances() {
  const box = document.getElementById("instances");
  let page;
  try {
    page = await api("/api/instances", { workspace: state.ws, q: state.q, offset: state.listOffset, limit: LIST_PAGE });
  } catch (err) { showError(box, err); return; }
  // a new instance may belong to a workspace that did not exist when the page loaded (Studio
  // opened before the first run): the workspace filter must offer it, so re-read the overview
  if (state.listTotal !== null && page.total > state.listTotal) loadOverview().catch(() => {});
  state.listTotal = page.total;
  if (!page.items.length) box.replaceChildren(h("p", { class: "pad muted" }, "No instances in this state root yet."));
  else box.replaceChildren(...page.items.map(instanceRow));
  const last = Math.min(page.offset + page.items.length, page.total);
  document.getElementById("page-info").textContent = page.total ? `${page.offset + 1}–${last} of ${page.total}` : "";
  document.getElementById("prev").disabled = page.offset === 0;
  document.getElementById("next").disabled = last >= page.total;
}

function instanceRow(it) {
  const selected = state.sel && state.sel.workspace === it.workspace && state.sel.agent === it.agent && state.sel.key === it.key;
  const row = h("div", { class: "inst" + (selected ? " sel" : ""), "data-testid": "instance-row", "data-agent": it.agent, "data-key": it.key },
    h("div", { class: "name" }, `${it.agent}`, h("span", { class: "muted" }, ` @ ${it.key}`), " ",
      h("span", { class: `badge ${it.status}`, "data-testid": "status", title: it.problem || "" }, it.status)),
    h("div", { class: "sub" },
      h("span", { "data-testid": "turn-count" }, plural(it.turns, "turn")),
      h("span", {}, plural(it.messages, "message")),
      h("span", { title: it.updatedAt }, fmtTime(it.updatedAt)),
      h("span", {}, it.bundle)));
  row.addEventListener("click", () => select({ workspace: it.workspace, agent: it.agent, key: it.key }));
  return row;
}

// ---------------------------------------------------------------- one instance

async function select(sel) {
  state.sel = sel;
  state.turnId = null;
  location.hash = `#/${encodeURIComponent(sel.workspace)}/${encodeURIComponent(sel.agent)}/${encodeURIComponent(sel.key)}/${state.tab}`;
  for (const el of document.querySelectorAll(".inst")) {
    el.classList.toggle("sel", el.dataset.agent === sel.agent && el.dataset.key === sel.key);
  }
  document.getElementById("empty").hidden = true;
  document.getElementById("detail").hidden = false;
  document.getElementById("inst-title").textContent = `${sel.agent} @ ${sel.key}`;
  await Promise.all([refreshSummary(), openTab(state.tab, true)]);
  watch();
}

async function refreshSummary(summary) {
  const s = summary || await api("/api/instance", state.sel).catch(() => null);
  if (!s) return;
  document.getElementById("inst-meta").textContent =
    `${s.status} · ${plural(s.turns, "turn")} · ${plural(s.messages, "message")} · last activity ${fmtTime(s.updatedAt)} · ${s.workspace}`;
}

async function openTab(tab, fresh) {
  state.tab = tab;
  for (const b of document.querySelectorAll(".tabs button")) b.classList.toggle("on", b.dataset.tab === tab);
  for (const t of ["conversation", "trace", "graph"]) document.getElementById(`tab-${t}`).hidden = t !== tab;
  if (tab === "conversation") await (fresh || !state.conv ? loadConversation() : Promise.resolve());
  if (tab === "trace") await loadTurns(fresh);
  if (tab === "graph") await loadGraph();
}

// ---------------------------------------------------------------- conversation (windowed)

function messageRow(r) {
  const raw = h("div", { class: "raw", title: "click to expand" }, h("pre", {}, JSON.stringify(r.record)));
  raw.addEventListener("click", () => raw.classList.toggle("open"));
  if (r.foldedInto !== null && r.foldedInto !== undefined) {
    const names = r.blocks.filter((b) => b.type === "tool-result").map((b) => b.toolName).join(", ");
    return h("div", { class: "row", "data-testid": "conversation-row", "data-role": r.role, "data-index": r.index },
      h("div", { class: "folded" }, `↳ result of ${names} shown under its call (#${r.foldedInto})`), raw);
  }
  const who = h("div", { class: "who" }, h("span", { class: "role" }, r.role), h("span", {}, `#${r.index}`),
    h("span", { title: r.createdAt }, fmtTime(r.createdAt)));
  if (r.label) who.append(h("span", { class: "label", "data-testid": "source-label" }, r.label));
  if (r.compaction) who.append(h("span", { class: "label compaction", "data-testid": "compaction" }, "compaction summary"));
  const body = h("div", { class: `msg ${r.role}${r.compaction ? " compaction" : ""}` }, who);
  for (const b of r.blocks) {
    if (b.type === "text" || b.type === "media") body.append(h("div", { class: "text" }, b.text));
    else if (b.type === "tool-call") body.append(toolCall(b));
    else if (b.type === "tool-result") body.append(h("div", { class: `result ${b.status}`, "data-testid": "tool-result" },
      h("span", { class: "muted" }, `result of ${b.toolName} (${b.status})`), h("pre", {}, json(b.value))));
  }
  return h("div", { class: "row", "data-testid": "conversation-row", "data-role": r.role, "data-index": r.index }, body, raw);
}

function toolCall(b) {
  const res = b.result;
  const d = h("details", { class: "call", open: "", "data-testid": "tool-call", "data-tool": b.toolName },
    h("summary", {}, h("span", { class: "name" }, b.toolName), " ", h("span", { class: "muted" }, short(json(b.input), 80))),
    h("pre", {}, json(b.input)));
  d.append(res
    ? h("div", { class: `result ${res.status}`, "data-testid": "tool-result" },
      h("span", { class: "muted" }, ` ↳ result (${res.status}, #${res.index})`), h("pre", {}, json(res.value)))
    : h("div", { class: "result muted" }, " ↳ waiting for the result…"));
  return d;
}

function pageEl(offset, rows) {
  const el = h("div", { class: "page", "data-offset": offset }, ...rows.map(messageRow));
  el._count = rows.length;
  return el;
}

async function loadConversation() {
  const box = document.getElementById("conversation");
  const sel = state.sel;
  let data;
  try { data = await api("/api/conversation", { ...sel, limit: PAGE }); } catch (err) { showError(box, err); return; }
  if (state.sel !== sel) return;
  state.conv = { total: data.total, pages: [] };
  const top = h("div", { class: "sentinel", id: "top-sentinel" });
  const bottom = h("div", { class: "sentinel", id: "bottom-sentinel" });
  const page = pageEl(data.offset, data.rows);
  state.conv.pages.push({ offset: data.offset, el: page });
  box.replaceChildren(top, page, bottom);
  renderPending(data.pendingEvents);
  box.scrollTop = box.scrollHeight;
  observe(box, top, bottom);
  performance.mark("studio-conversation-ready");
}

function renderPending(events) {
  const el = document.getElementById("pending");
  el.hidden = !events.length;
  el.replaceChildren(h("b", {}, `turn in progress: ${events.length} pending message event(s)`),
    ...events.map((e) => h("div", {}, `${e.type} ${e.message ? e.message.id + " (" + e.message.data.role + ")" : e.targetId || ""}`)));
}

let observer = null;
function observe(box, top, bottom) {
  if (observer) observer.disconnect();
  observer = new IntersectionObserver((entries) => {
    for (const e of entries) {
      if (!e.isIntersecting) continue;
      if (e.target === top) loadAdjacent(-1);
      else loadAdjacent(1);
    }
  }, { root: box, rootMargin: "400px 0px" });
  observer.observe(top);
  observer.observe(bottom);
}

let loadingAdjacent = false;
async function loadAdjacent(dir) {
  const c = state.conv;
  if (!c || loadingAdjacent) return;
  const first = c.pages[0], last = c.pages[c.pages.length - 1];
  let offset, limit = PAGE;
  if (dir < 0) {
    if (first.offset === 0) return;
    offset = Math.max(0, first.offset - PAGE); limit = first.offset - offset;
  } else {
    offset = last.offset + last.el._count;
    if (offset >= c.total) return;
  }
  loadingAdjacent = true;
  const box = document.getElementById("conversation");
  try {
    const data = await api("/api/conversation", { ...state.sel, offset, limit });
    if (state.conv !== c || !data.rows.length) return;
    const el = pageEl(offset, data.rows);
    if (dir < 0) {
      const before = box.scrollHeight;
      first.el.before(el);
      c.pages.unshift({ offset, el });
      box.scrollTop += box.scrollHeight - before;
      if (c.pages.length > MAX_PAGES) c.pages.pop().el.remove();
    } else {
      last.el.after(el);
      c.pages.push({ offset, el });
      if (c.pages.length > MAX_PAGES) {
        const gone = c.pages.shift();
        const h0 = box.scrollHeight;
        gone.el.remove();
        box.scrollTop -= h0 - box.scrollHeight;
      }
    }
    c.total = data.total;
  } finally { loadingAdjacent = false; }
}

async function liveConversation() {
  // new messages: when the window reaches the end, re-read its last page and what follows
  const c = state.conv;
  if (!c) return loadConversation();
  const last = c.pages[c.pages.length - 1];
  const atEnd = last.offset + last.el._count >= c.total;
  const box = document.getElementById("conversation");
  const stick = box.scrollTop + box.clientHeight >= box.scrollHeight - 40;
  const data = await api("/api/conversation", { ...state.sel, offset: last.offset, limit: 500 });
  if (state.conv !== c) return;
  c.total = data.total;
  renderPending(data.pendingEvents);
  if (!atEnd) return;
  const el = pageEl(last.offset, data.rows);
  last.el.replaceWith(el);
  last.el = el;
  if (stick) box.scrollTop = box.scrollHeight;
}

// ---------------------------------------------------------------- turns and traces

async function loadTurns(fresh) {
  const box = document.getElementById("turns");
  let data;
  try { data = await api("/api/turns", { ...state.sel, limit: 200 }); } catch (err) { showError(box, err); return; }
  box.replaceChildren(...data.items.map((t) => {
    const el = h("div", { class: "turn" + (t.turnId === state.turnId ? " sel" : ""), "data-testid": "turn-row", "data-turn": t.turnId },
      h("div", {}, h("span", { class: `badge ${t.status}` }, t.status), " ", fmtTime(t.startedAt)),
      h("div", { class: "muted" }, `${t.stepCount ?? "…"} steps · ${fmtMs(t.duration)} · ${t.tokenUsage ? t.tokenUsage.totalTokens + " tokens" : "no usage"}`),
      t.error ? h("div", { class: "err" }, `[${t.error.code || "error"}] ${t.error.message || ""}`) : "",
      h("div", { class: "muted" }, `trace ${String(t.traceId).slice(0, 12)}`));
    el.addEventListener("click", () => loadTrace(t));
    return el;
  }));
  if (!data.items.length) box.replaceChildren(h("p", { class: "pad muted" }, "No turns yet."));
  const current = data.items.find((t) => t.turnId === state.turnId) || data.items[0];
  if (current && (fresh || !state.turnId || current.turnId === state.turnId)) await loadTrace(current);
}

async function loadTrace(turn) {
  state.turnId = turn.turnId;
  for (const el of document.querySelectorAll(".turn")) el.classList.toggle("sel", el.dataset.turn === turn.turnId);
  const box = document.getElementById("waterfall");
  let trace;
  try { trace = await api("/api/trace", { workspace: state.sel.workspace, trace: turn.traceId }); } catch (err) { showError(box, err); return; }
  document.getElementById("trace-head").textContent =
    `trace ${trace.traceId} · ${trace.spanCount} spans · ${fmtMs(trace.duration)} · agents: ${trace.agents.join(", ")}`;
  renderWaterfall(box, trace, document.getElementById("span-detail"));
}

async function loadGraph() {
  const box = document.getElementById("graph");
  try { renderGraph(box, await api("/api/graph", { workspace: state.sel.workspace })); } catch (err) { showError(box, err); }
}

// ---------------------------------------------------------------- live updates (Server-Sent Events)

function watch() {
  if (state.source) state.source.close();
  const params = new URLSearchParams({ workspace: state.sel ? state.sel.workspace : state.ws });
  if (state.sel) { params.set("agent", state.sel.agent); params.set("key", state.sel.key); }
  const src = new EventSource(`/api/stream?${params}`);
  state.source = src;
  const dot = document.getElementById("live");
  src.onopen = () => dot.classList.add("on");
  src.onerror = () => dot.classList.remove("on");
  src.addEventListener("instance", async (ev) => {
    const summary = JSON.parse(ev.data);
    await refreshSummary(summary);
    if (state.tab === "conversation") await liveConversation();
    else if (state.tab === "trace") await loadTurns(false);
    else await loadGraph();
    await loadInstances();
  });
  src.addEventListener("instances", () => loadInstances());
  // the store went away (PostgreSQL down): the dot turns red and says why; the stream stays open
  src.addEventListener("unavailable", (ev) => {
    const err = JSON.parse(ev.data);
    dot.classList.add("down");
    dot.title = `[${err.code}] ${err.message}`;
  });
  src.addEventListener("available", () => { dot.classList.remove("down"); dot.title = "live updates"; });
}

// ---------------------------------------------------------------- wiring

function wire() {
  document.getElementById("prev").addEventListener("click", () => { state.listOffset = Math.max(0, state.listOffset - LIST_PAGE); loadInstances(); });
  document.getElementById("next").addEventListener("click", () => { state.listOffset += LIST_PAGE; loadInstances(); });
  let timer = null;
  document.getElementById("search").addEventListener("input", (e) => {
    clearTimeout(timer);
    timer = setTimeout(() => { state.q = e.target.value; state.listOffset = 0; loadInstances(); }, 150);
  });
  document.getElementById("ws-filter").addEventListener("change", (e) => { state.ws = e.target.value; state.listOffset = 0; loadInstances(); if (!state.sel) watch(); });
  for (const b of document.querySelectorAll(".tabs button")) b.addEventListener("click", () => {
    openTab(b.dataset.tab, false);
    if (state.sel) history.replaceState(null, "", `#/${encodeURIComponent(state.sel.workspace)}/${encodeURIComponent(state.sel.agent)}/${encodeURIComponent(state.sel.key)}/${b.dataset.tab}`);
  });
}

async function main() {
  wire();
  const m = location.hash.match(/^#\/([^/]+)\/([^/]+)\/([^/]+)(?:\/(\w+))?/);
  await Promise.all([loadOverview(), loadInstances()]);
  performance.mark("studio-interactive");
  document.body.dataset.ready = "1";
  if (m) {
    state.tab = m[4] || "conversation";
    await select({ workspace: decodeURIComponent(m[1]), agent: decodeURIComponent(m[2]), key: decodeURIComponent(m[3]) });
  } else watch();
}

main();
