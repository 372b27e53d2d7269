// The operator's console: plain JS, no framework, no build step. Everything shown comes from
// the service's /api/v1 (contract: docs/console.md); live updates come from its event stream.
// Text from the ledger (briefs, reports, reasons) is untrusted: it is only ever set as text,
// never parsed as HTML.
"use strict";

const API = "/api/v1";
const DEFAULT_BANDS = { name: "relief", amber: 25, red: 33, critical: 38 };
const COLORS = ["#1f5fbf", "#c8382e", "#2e8b57", "#8a4fbf", "#d98c00", "#0f8a8a", "#7a5230",
  "#d0479b"];
const BAD_VERDICTS = new Set(["QUARANTINED", "HIBERNATE", "BLOCKED", "INVALID"]);
const SVG_NS = "http://www.w3.org/2000/svg";

const state = {
  me: null, team: [], now: null, reliefs: [], queue: null, halts: [], hull: {},
  openRelief: null, reliefShown: 0, reliefDrawn: null, source: null, refreshTimer: null, refreshing: false, again: false,
};

// -- small helpers ----------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "testid") el.dataset.testid = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== null && value !== undefined) el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const $ = (id) => document.getElementById(id);

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: { "X-Onstation-Csrf": "1" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
    if (method === "POST") init.headers["Idempotency-Key"] = newKey();
  }
  const response = await fetch(API + path, init);
  let data = null;
  try { data = await response.json(); } catch (_) { data = null; }
  if (response.status === 401 && path !== "/session") showLogin();
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

function newKey() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
  return `${Date.now()}-${Math.random().toString(16).slice(2)}`;
}

function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toISOString().slice(11, 19);
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 90) return `${Math.round(seconds)} s ago`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min ago`;
  return `${(seconds / 3600).toFixed(1)} h ago`;
}

function tierOf(percent, bands) {
  if (percent === null || percent === undefined) return "none";
  if (percent >= bands.critical) return "critical";
  if (percent >= bands.red) return "red";
  if (percent >= bands.amber) return "amber";
  return "green";
}

function toast(text, isError) {
  const el = $("toast");
  el.textContent = text;
  el.className = isError ? "error" : "";
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => el.classList.add("hidden"), isError ? 8000 : 3500);
}

function colorOf(node) {
  const index = state.team.findIndex((row) => row.node === node);
  return COLORS[(index < 0 ? 0 : index) % COLORS.length];
}

// -- login ------------------------------------------------------------------------------------

function showLogin() {
  stopStream();
  $("login").classList.remove("hidden");
  $("login-token").focus();
}

async function login(event) {
  event.preventDefault();
  $("login-error").textContent = "";
  try {
    const answer = await api("POST", "/session", { token: $("login-token").value.trim() });
    $("login-token").value = "";
    await start(answer.token);
  } catch (err) {
    $("login-error").textContent = err.status === 401 ? "That token is not valid." : err.message;
  }
}

async function logout() {
  try { await api("DELETE", "/session"); } catch (_) { /* signed out either way */ }
  state.me = null;
  showLogin();
}

async function start(me) {
  state.me = me;
  $("operator").textContent = `${me.name || "?"} (${me.kind})`;
  $("login").classList.add("hidden");
  await refresh();
  startStream();
}

// -- live updates -----------------------------------------------------------------------------

function startStream() {
  stopStream();
  // Only events after now: what happened before is already in the first refresh. The browser
  // resumes with Last-Event-ID by itself when the connection drops.
  // unnamed: every event arrives as a "message", whatever its kind (EventSource hands a
  // named event only to listeners of that exact name, and the ledger's kinds are open-ended).
  const source = new EventSource(`${API}/events?unnamed=true`, { withCredentials: true });
  state.source = source;
  source.onopen = () => setLive(true);
  source.onerror = () => {
    setLive(false);
    // A dropped connection is retried by the browser (with Last-Event-ID); an answer that is
    // not a stream (401 after a sign-out elsewhere, a restart mid-way) closes it for good:
    // ask who we are (a 401 shows the sign-in), then listen again with a full reload of data.
    if (source.readyState === EventSource.CLOSED && state.source === source) {
      setTimeout(() => {
        if (state.source !== source) return;
        api("GET", "/session").then(() => { startStream(); scheduleRefresh(); }, () => {});
      }, 2000);
    }
  };
  source.onmessage = onEvent;
  source.addEventListener("denied", () => showLogin());
}

function onEvent(event) {
  document.body.dataset.lastEvent = event.lastEventId || "";
  scheduleRefresh();
}

function stopStream() {
  if (state.source) state.source.close();
  state.source = null;
  setLive(false);
}

function setLive(on) {
  const el = $("live");
  el.className = on ? "on" : "off";
  el.textContent = on ? "live" : "offline";
}

function scheduleRefresh() {
  if (state.refreshTimer) return;
  state.refreshTimer = setTimeout(() => {
    state.refreshTimer = null;
    void refresh();
  }, 250);
}

// -- loading ----------------------------------------------------------------------------------

async function refresh() {
  if (state.refreshing) { state.again = true; return; }
  state.refreshing = true;
  try {
    const [team, reliefs, queue, halts] = await Promise.all([
      api("GET", "/team"), api("GET", "/reliefs"), api("GET", "/queue"), api("GET", "/halts"),
    ]);
    state.team = team.team || [];
    state.now = team.now;
    state.reliefs = reliefs.reliefs || [];
    state.queue = queue;
    state.halts = halts.halts || [];
    const hulls = await Promise.all(state.team.map((row) =>
      api("GET", `/nodes/${encodeURIComponent(row.node)}/hull`).catch(() => null)));
    state.hull = {};
    state.team.forEach((row, i) => { if (hulls[i]) state.hull[row.node] = hulls[i]; });
    render();
    if (state.openRelief !== null) await showRelief(state.openRelief, true);
  } catch (err) {
    if (err.status !== 401) toast(`could not load: ${err.message}`, true);
  } finally {
    state.refreshing = false;
    if (state.again) { state.again = false; scheduleRefresh(); }
  }
}

function render() {
  renderGate();
  renderTeam();
  renderPlot();
  renderTimeline();
  renderQueue();
  renderHalts();
  renderReliefs();
}

// -- the team ---------------------------------------------------------------------------------

function globalHalt() {
  return state.halts.find((halt) => halt.node === null && !halt.lifted_at) || null;
}

function nodeHalt(node) {
  return state.halts.find((halt) => halt.node === node && !halt.lifted_at) || null;
}

function renderGate() {
  const halt = globalHalt();
  const gate = $("gate");
  gate.className = `gate ${halt ? "halted" : "open"}`;
  gate.textContent = halt ? `HALTED: ${halt.why}` : "gate open";
  gate.dataset.state = halt ? "halted" : "open";
  const button = $("halt-all");
  button.textContent = halt ? "Lift global halt…" : "Halt all…";
  button.onclick = halt ? () => confirmLift(null) : () => confirmHalt(null);
}

function renderTeam() {
  const rows = state.team.map((row) => {
    const bands = bandsOf(row.node);
    // The latest reading may be the predecessor's: a new body has not reported yet, and the
    // old body's Red is not the new one's.
    const stale = row.fill && row.fill.generation !== null && row.fill.generation !== undefined
      && row.fill.generation !== row.generation;
    const tier = stale ? "none" : row.tier_name || tierOf(row.percent, bands);
    const percent = row.percent === null || row.percent === undefined
      ? "—" : `${Number(row.percent).toFixed(0)} %`;
    const tierText = stale ? `no reading for g${row.generation} yet`
      : tier === "none" ? "no reading" : `${tier} ${percent}`;
    const witness = row.witness || witnessText(row.witnesses);
    const effects = row.open_effects || 0;
    const halted = nodeHalt(row.node);
    return h("tr", { testid: `team-row-${row.node}`, dataset: { node: row.node } },
      h("td", {}, h("strong", {}, row.node), h("div", { class: "muted" }, row.role || ""),
        row.halted ? h("span", { class: "badge", testid: `halted-${row.node}` }, "halted") : null,
        row.breaker_open ? h("span", { class: "badge" }, "breaker open") : null),
      h("td", { testid: `gen-${row.node}` }, `g${row.generation}`),
      h("td", {}, h("span", { class: `tier ${tier}`, testid: `tier-${row.node}`,
        dataset: { tier }, title: stale ? `g${row.fill.generation}: ${row.tier || ""}` : null },
      tierText)),
      h("td", { class: "mono", title: row.body || "" },
        row.body ? shortHolder(row.body) : h("span", { class: "muted" }, "no live body"),
        witness ? h("div", { class: "muted" }, witness) : null),
      h("td", { testid: `heartbeat-${row.node}`, class: "nowrap",
        dataset: { age: row.heartbeat_age_s ?? "" } }, age(row.heartbeat_age_s)),
      h("td", { testid: `effects-${row.node}` }, String(effects),
        row.ambiguous ? h("span", { class: "badge", title: "AMBIGUOUS" },
          `${row.ambiguous} ambiguous`) : null),
      h("td", {}, halted
        ? h("button", { testid: `lift-node-${row.node}`, type: "button",
          onclick: () => confirmLift(row.node) }, "Lift halt…")
        : h("button", { testid: `halt-node-${row.node}`, type: "button",
          onclick: () => confirmHalt(row.node) }, "Halt…")));
  });
  $("team-rows").replaceChildren(...rows);
  state.teamAt = Date.now();
  $("team-count").textContent = `${state.team.length} identities`;
}

// "claude-code session 0a62efc6-c4aa-…" is shown by its first eight hex digits (the whole
// holder is in the cell's title).
function shortHolder(holder) {
  return holder.replace(/\b([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g,
    "$1…");
}

// A long destination (a file:// URL in a scratch directory) keeps its end, where the name is.
function shortPlace(text) {
  const value = String(text ?? "");
  return value.length > 56 ? `…${value.slice(-55)}` : value;
}

function witnessText(witnesses) {
  if (!witnesses) return "";
  const seen = witnesses.answer_witness || witnesses.launch_witness;
  return seen ? `pid ${seen.pid} on ${seen.host}` : "";
}

function bandsOf(node) {
  const hull = state.hull[node];
  return (hull && hull.policy) || DEFAULT_BANDS;
}

// -- the plot and the timeline ----------------------------------------------------------------

function timeDomain() {
  let lo = Infinity;
  for (const hull of Object.values(state.hull)) {
    for (const point of hull.series || []) lo = Math.min(lo, Date.parse(point.at));
    for (const gen of hull.generations || []) lo = Math.min(lo, Date.parse(gen.from));
  }
  const hi = state.now ? Date.parse(state.now) : Date.now();
  if (!Number.isFinite(lo) || lo >= hi) lo = hi - 60_000;
  return [lo, hi];
}

function renderPlot() {
  const width = 760, left = 96, right = 34, rowHeight = 84, top = 4;
  const [lo, hi] = timeDomain();
  const x = (t) => left + ((t - lo) / (hi - lo)) * (width - left - right);
  const nodes = state.team.map((row) => row.node);
  const height = top + nodes.length * rowHeight + 16;
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": "context fill over time", style: `height:${height}px` });
  nodes.forEach((node, index) => {
    const hull = state.hull[node] || { series: [], reliefs: [] };
    const bands = bandsOf(node);
    const y0 = top + index * rowHeight, plotH = rowHeight - 12;
    const max = Math.max(bands.critical + 7, ...(hull.series || []).map((p) => p.percent + 4));
    const y = (pct) => y0 + plotH - (Math.min(pct, max) / max) * plotH;
    const group = s("g", { "data-testid": `plot-${node}` });
    for (const [from, to, cls] of [[0, bands.amber, "green"], [bands.amber, bands.red, "amber"],
      [bands.red, bands.critical, "red"], [bands.critical, max, "critical"]]) {
      group.append(s("rect", { x: left, y: y(to), width: width - left - right,
        height: Math.max(0, y(from) - y(to)), fill: `var(--${cls}-band)` }));
    }
    group.append(s("line", { class: "axis", x1: left, x2: width - right, y1: y0 + plotH,
      y2: y0 + plotH }));
    // Band edges on the right, each only where it does not sit on the previous one.
    const placed = [];
    for (const pct of [0, bands.critical, bands.amber, bands.red]) {
      if (placed.some((other) => Math.abs(other - y(pct)) < 9)) continue;
      placed.push(y(pct));
      group.append(s("text", { x: width - right + 3, y: y(pct) + 3 }, `${pct}%`));
    }
    group.append(s("text", { x: 0, y: y0 + 12, class: "lane-label",
      style: `fill:${colorOf(node)};font-weight:600;font-size:11px` }, node));
    group.append(s("text", { x: 0, y: y0 + 25 }, `${bands.name || "relief"} tiers`));
    const points = (hull.series || []).map((p) => [x(Date.parse(p.at)), y(p.percent), p]);
    const ends = new Map((hull.generations || []).filter((g) => g.to)
      .map((g) => [g.generation, x(Date.parse(g.to))]));
    // A reading holds until the next one, or until its generation ended: a step line.
    const until = (point, next) => Math.min(next, ends.get(point[2].generation) ?? Infinity);
    if (points.length) {
      let d = `M${points[0][0].toFixed(1)},${points[0][1].toFixed(1)}`;
      for (let i = 1; i < points.length; i += 1) {
        const [px, py, p] = points[i];
        if (p.generation !== points[i - 1][2].generation) {
          d += ` H${until(points[i - 1], px).toFixed(1)} M${px.toFixed(1)},${py.toFixed(1)}`;
        } else d += ` H${px.toFixed(1)} L${px.toFixed(1)},${py.toFixed(1)}`;
      }
      d += ` H${until(points[points.length - 1], x(hi)).toFixed(1)}`;
      group.append(s("path", { class: "series", d, stroke: colorOf(node) }));
      for (const [px, py, p] of points) {
        group.append(s("circle", { cx: px, cy: py, r: 2.5, fill: colorOf(node) },
          s("title", {}, `${when(p.at)} g${p.generation}: ${p.percent.toFixed(1)} % ${p.tier}`)));
      }
    }
    for (const relief of hull.reliefs || []) {
      const rx = x(Date.parse(relief.started_at));
      const mark = s("g", { class: "relief-marker", "data-testid": `plot-relief-${relief.relief_id}`,
        style: "cursor:pointer" });
      mark.append(s("line", { class: "relief-mark", x1: rx, x2: rx, y1: y0, y2: y0 + plotH }),
        s("text", { x: rx + 3, y: y0 + 10, style: "fill:#1d2330" },
          `relief #${relief.relief_id} ${relief.verdict || relief.state}`),
        s("title", {}, `relief #${relief.relief_id}: g${relief.from_generation} → ` +
          `g${relief.to_generation ?? "?"} ${relief.verdict || ""} ${relief.state}`));
      mark.addEventListener("click", () => void showRelief(relief.relief_id));
      group.append(mark);
    }
    svg.append(group);
  });
  for (let i = 0; i <= 4; i += 1) {
    const t = lo + ((hi - lo) * i) / 4;
    svg.append(s("text", { x: x(t), y: height - 3, "text-anchor": i === 0 ? "start"
      : i === 4 ? "end" : "middle" }, when(new Date(t).toISOString()) + (i === 4 ? " UTC" : "")));
  }
  $("plot").replaceChildren(svg);
  $("legend").replaceChildren(...["green", "amber", "red", "critical"].map((tier) =>
    h("span", { style: `--c: var(--${tier}-band)` }, tier[0].toUpperCase() + tier.slice(1))));
}

function renderTimeline() {
  const width = 760, left = 92, right = 10, lane = 22;
  const [lo, hi] = timeDomain();
  const x = (t) => left + ((t - lo) / (hi - lo)) * (width - left - right);
  const nodes = state.team.map((row) => row.node);
  const height = nodes.length * lane + 6;
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, style: `height:${height}px` });
  nodes.forEach((node, index) => {
    const y = 3 + index * lane;
    svg.append(s("text", { x: 2, y: y + 14, class: "lane-label" }, node));
    const gens = (state.hull[node] && state.hull[node].generations) || [];
    for (const gen of gens) {
      const x1 = x(Date.parse(gen.from));
      const x2 = gen.to ? x(Date.parse(gen.to)) : x(hi);
      svg.append(s("g", { "data-testid": `timeline-${node}-g${gen.generation}` },
        s("rect", { x: x1, y, width: Math.max(2, x2 - x1 - 1), height: lane - 6, rx: 3,
          fill: colorOf(node), opacity: gen.to ? 0.45 : 0.9 }),
        s("text", { x: x1 + 4, y: y + 12, style: "fill:#fff;font-weight:600" },
          `g${gen.generation}`),
        s("title", {}, `${node} g${gen.generation}: ${when(gen.from)} – ${gen.to ? when(gen.to) : "now"}`)));
    }
  });
  $("timeline").replaceChildren(svg);
}

// -- the queue and the halt gate --------------------------------------------------------------

function unobservedWhy(effect) {
  const uncertain = effect.result && effect.result.uncertain;
  const unobserved = uncertain && uncertain.unobserved;
  return (unobserved && unobserved.why) || (uncertain && uncertain.why) || null;
}

function renderQueue() {
  const queue = state.queue || { ambiguous_effects: [], reliefs: [], breakers: [], halts: [] };
  const items = [];
  for (const effect of queue.ambiguous_effects || []) {
    const why = unobservedWhy(effect);
    items.push(h("div", { class: "queue-item q-effect", testid: `queue-effect-${effect.effect_id}`,
      dataset: { effect: effect.effect_id } },
      h("div", {}, h("strong", {}, "AMBIGUOUS effect "), h("code", {}, effect.effect_id)),
      h("div", { title: effect.destination }, `${effect.node} g${effect.generation}: ` +
        `${effect.operation} → ${shortPlace(effect.destination)}`),
      why ? h("div", { class: "muted" }, why) : null,
      h("div", { class: "actions" }, h("button", { type: "button", class: "primary",
        testid: `resolve-${effect.effect_id}`, onclick: () => confirmResolve(effect) },
      "Resolve…"))));
  }
  for (const relief of queue.reliefs || []) {
    items.push(h("div", { class: "queue-item", testid: `queue-relief-${relief.relief_id}` },
      h("div", {}, h("strong", {}, `${relief.verdict || relief.state} relief #${relief.relief_id}`)),
      h("div", {}, `${relief.node} g${relief.from_generation}: ${relief.cause}`),
      h("div", { class: "actions" }, h("button", { type: "button",
        onclick: () => void showRelief(relief.relief_id) }, "Open"))));
  }
  for (const node of queue.breakers || []) {
    items.push(h("div", { class: "queue-item q-breaker", testid: `queue-breaker-${node.node}` },
      h("div", {}, h("strong", {}, "breaker open "), node.node),
      h("div", { class: "muted" }, node.breaker_reason || ""),
      h("button", { type: "button", testid: `close-breaker-${node.node}`,
        onclick: () => confirmCloseBreaker(node.node) }, "Close breaker…")));
  }
  for (const halt of queue.halts || []) {
    items.push(h("div", { class: "queue-item q-halt", testid: `queue-halt-${halt.halt_id}` },
      h("div", {}, h("strong", {}, halt.node ? `halt on ${halt.node}` : "global halt")),
      h("div", { class: "muted" }, `${halt.why} — ${halt.by}, ${when(halt.at)}`)));
  }
  $("queue").replaceChildren(...(items.length ? items
    : [h("div", { class: "empty", testid: "queue-empty" }, "nothing waits for a human")]));
  const count = $("queue-count");
  count.textContent = String(items.length);
  count.classList.toggle("hidden", items.length === 0);
}

function renderHalts() {
  const halts = state.halts.filter((halt) => !halt.lifted_at);
  const rows = halts.map((halt) => h("div", { class: "queue-item q-halt",
    testid: `halt-row-${halt.node || "global"}`, dataset: { halt: halt.halt_id } },
  h("strong", {}, halt.node ? `identity ${halt.node}` : "every identity (global)"),
  h("div", { class: "muted" }, `${halt.why} — ${halt.by}, ${when(halt.at)}`),
  h("div", { class: "actions" }, h("button", { type: "button", class: "danger",
    testid: `lift-${halt.node || "global"}`, onclick: () => confirmLift(halt.node) },
  "Lift…"))));
  $("halts").replaceChildren(...(rows.length ? rows
    : [h("div", { class: "empty", testid: "halts-none" },
      "open: new bodies and new effects are admitted")]));
}

// -- reliefs ----------------------------------------------------------------------------------

function verdictClass(verdict) {
  if (!verdict) return "verdict";
  return `verdict ${BAD_VERDICTS.has(verdict) ? "bad" : "good"}`;
}

function renderReliefs() {
  const rows = [...state.reliefs].reverse().map((relief) => h("tr", { class: "clickable",
    testid: `relief-row-${relief.relief_id}`,
    dataset: { node: relief.node, state: relief.state, verdict: relief.verdict || "" },
    onclick: () => void showRelief(relief.relief_id) },
  h("td", {}, `#${relief.relief_id}`), h("td", {}, relief.node),
  h("td", { class: "nowrap" }, `g${relief.from_generation} → ` +
    (relief.to_generation ? `g${relief.to_generation}` : "—")),
  h("td", {}, relief.cause),
  h("td", {}, h("div", { class: verdictClass(relief.verdict) }, relief.verdict || "…"),
    h("div", { class: "muted" }, relief.state)),
  h("td", { class: "nowrap" }, when(relief.started_at))));
  $("relief-rows").replaceChildren(...(rows.length ? rows
    : [h("tr", {}, h("td", { colspan: 6, class: "empty" }, "no relief yet"))]));
}

async function showRelief(reliefId, quiet) {
  // Only the newest request may draw the panel: a live refresh's answer that arrives after the
  // operator closed the panel (or opened another relief) must not bring the old one back over
  // the queue.
  const shown = ++state.reliefShown;
  let detail;
  try {
    detail = await api("GET", `/reliefs/${reliefId}`);
  } catch (err) {
    if (!quiet && shown === state.reliefShown) toast(`relief #${reliefId}: ${err.message}`, true);
    return;
  }
  if (shown !== state.reliefShown) return;
  if (quiet && state.openRelief !== reliefId) return;
  // A live refresh that finds the relief as drawn leaves the panel alone: drawing it again
  // would close the report the operator opened and lose the panel's scroll position.
  const drawn = JSON.stringify(detail);
  if (quiet && drawn === state.reliefDrawn) return;
  state.reliefDrawn = drawn;
  state.openRelief = reliefId;
  const relief = detail.relief;
  const panel = $("relief-panel");
  const steps = (detail.steps || []).map((step) => h("li", {
    class: BAD_VERDICTS.has(step.verdict) ? "fail" : "" },
  `${when(step.at)} ${step.step}`, step.verdict ? ` — ${step.verdict}` : "",
  step.actor ? h("span", { class: "muted" }, ` (${step.actor})`) : ""));
  const brief = detail.brief;
  const capsule = detail.capsule;
  const report = detail.report;
  panel.replaceChildren(
    h("div", { class: "panel-head" }, h("h2", { testid: "relief-title" },
      `Relief #${relief.relief_id} — ${relief.node}`), h("span", { class: "spacer" }),
    h("button", { type: "button", testid: "relief-close", onclick: closeRelief }, "Close")),
    h("div", {}, `g${relief.from_generation} → ${relief.to_generation ? `g${relief.to_generation}` : "—"}`,
      ` · ${relief.cause} · ${relief.state} · `,
      h("span", { class: verdictClass(relief.verdict), testid: "relief-verdict" },
        relief.verdict || "no verdict yet")),
    h("h3", {}, "Steps"),
    steps.length ? h("ol", { testid: "relief-steps" }, steps)
      : h("div", { class: "empty", testid: "relief-steps" }, "no step recorded"),
    h("h3", {}, "Brief"),
    brief ? h("div", { testid: "relief-brief" },
      h("div", { class: "muted" }, `${brief.kind} of g${brief.generation} — ${brief.path || ""}`),
      (brief.missing || []).length
        ? h("div", {}, "missing: ", h("code", {}, brief.missing.join(", "))) : null,
      h("pre", {}, brief.markdown || ""))
      : h("div", { class: "empty", testid: "relief-brief" }, "no brief"),
    h("h3", {}, "Capsule"),
    capsule ? capsuleView(capsule)
      : h("div", { class: "empty", testid: "relief-capsule" }, "no capsule sealed"),
    h("h3", {}, "Report"),
    report ? reportView(report)
      : h("div", { class: "empty", testid: "relief-report" }, "no report yet"));
  panel.classList.remove("hidden");
}

function capsuleView(capsule) {
  const summary = capsule.summary || {};
  return h("div", { testid: "relief-capsule" },
    h("div", { class: "mono" }, `digest ${capsule.digest || "—"}`),
    h("div", {}, `${count(capsule.artifacts)} artifacts, ${capsule.receipts ?? 0} signature ` +
      `receipt(s), sealed ${when(capsule.created_at)}`),
    capsule.objective ? h("div", {}, h("strong", {}, "objective: "), capsule.objective) : null,
    h("dl", { class: "summary" }, Object.entries(summary).flatMap(([key, value]) => [
      h("dt", {}, key),
      h("dd", {}, typeof value === "object" ? JSON.stringify(value) : String(value))])));
}

function count(value) {
  if (Array.isArray(value)) return value.length;
  return value ?? 0;
}

function reportView(report) {
  const losses = report.losses || [];
  return h("div", { testid: "relief-report" },
    report.outcome ? h("div", {}, h("strong", {}, "outcome: "), String(report.outcome)) : null,
    h("div", {}, h("strong", {}, `${losses.length} loss(es)`)),
    h("ul", { class: "losses", testid: "relief-losses" }, losses.map((loss) => h("li", {},
      h("code", {}, loss.kind), `: ${loss.text}`))),
    h("details", {}, h("summary", {}, report.path || "the report"), h("pre", {}, report.markdown || "")));
}

function closeRelief() {
  state.reliefShown++;
  state.reliefDrawn = null;
  state.openRelief = null;
  $("relief-panel").classList.add("hidden");
}

// -- confirmations ----------------------------------------------------------------------------

// One dialog for every action: it says what will happen and as whom, asks for what the ledger
// records (a reason), and only then sends the request. window.confirm is not used: a test
// drives this dialog as a person would.
function confirmAction({ title, body, fields, okLabel, run }) {
  const dialog = $("confirm");
  $("confirm-title").textContent = title;
  $("confirm-body").replaceChildren(...body,
    h("div", { class: "muted", testid: "confirm-as" },
      `recorded as ${state.me ? state.me.name : "?"}`));
  $("confirm-fields").replaceChildren(...fields);
  $("confirm-error").textContent = "";
  $("confirm-ok").textContent = okLabel;
  $("confirm-ok").disabled = false;
  const form = $("confirm-form");
  form.onsubmit = async (event) => {
    event.preventDefault();
    if (!form.reportValidity()) return;
    $("confirm-ok").disabled = true;
    try {
      await run(new FormData(form));
      dialog.close();
      await refresh();
    } catch (err) {
      $("confirm-error").textContent = err.message;
      $("confirm-ok").disabled = false;
    }
  };
  $("confirm-cancel").onclick = () => dialog.close();
  dialog.showModal();
  const first = form.querySelector("select, textarea, input");
  if (first) first.focus();
}

function reasonField(label) {
  return h("label", {}, label,
    h("textarea", { name: "why", rows: 3, required: true, testid: "confirm-why" }));
}

function confirmResolve(effect) {
  const why = unobservedWhy(effect);
  confirmAction({
    title: `Resolve AMBIGUOUS effect ${effect.effect_id}`,
    body: [h("p", {}, `${effect.node} g${effect.generation}: ${effect.operation} → ` +
      `${effect.destination}`), why ? h("p", { class: "muted" }, why) : null].filter(Boolean),
    fields: [
      h("label", {}, "What you found",
        h("select", { name: "outcome", required: true, testid: "confirm-outcome" },
          h("option", { value: "" }, "choose…"),
          h("option", { value: "observed" }, "observed — it happened"),
          h("option", { value: "compensated" }, "compensated — a compensating action undid it"))),
      reasonField("Evidence (recorded)")],
    okLabel: "Resolve",
    run: async (form) => {
      await api("POST", `/effects/${encodeURIComponent(effect.effect_id)}/resolve`,
        { outcome: form.get("outcome"), why: form.get("why") });
      toast(`${effect.effect_id} resolved as ${form.get("outcome")}`);
    },
  });
}

function confirmHalt(node) {
  confirmAction({
    title: node ? `Halt ${node}` : "Halt every identity",
    body: [h("p", {}, node
      ? `No new body and no new effect for ${node} until the halt is lifted.`
      : "No new body and no new effect for any identity until the halt is lifted.")],
    fields: [reasonField("Why (recorded)")],
    okLabel: "Halt",
    run: async (form) => {
      await api("POST", "/halts", { node, why: form.get("why") });
      toast(node ? `${node} halted` : "every identity halted");
    },
  });
}

function confirmCloseBreaker(node) {
  confirmAction({
    title: `Close the breaker of ${node}`,
    body: [h("p", {}, `Respawns of ${node} are admitted again, within the respawn limit.`)],
    fields: [reasonField("Why (recorded)")],
    okLabel: "Close breaker",
    run: async (form) => {
      await api("POST", `/nodes/${encodeURIComponent(node)}/breaker/close`,
        { why: form.get("why") });
      toast(`breaker of ${node} closed`);
    },
  });
}

function confirmLift(node) {
  confirmAction({
    title: node ? `Lift the halt on ${node}` : "Lift the global halt",
    body: [h("p", {}, "New bodies and effects will be admitted again.")],
    fields: [],
    okLabel: "Lift",
    run: async () => {
      await api("POST", "/halts/lift", { node });
      toast(node ? `halt on ${node} lifted` : "global halt lifted");
    },
  });
}

// -- start ------------------------------------------------------------------------------------

async function boot() {
  $("login-form").addEventListener("submit", login);
  $("logout").addEventListener("click", () => void logout());
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !$("confirm").open) closeRelief();
  });
  try {
    const answer = await api("GET", "/session");
    await start(answer.token);
  } catch (_) {
    showLogin();
  }
}

// Heartbeat ages move on between two events: the cells count on from the last load.
function tick() {
  if (!state.teamAt) return;
  const since = (Date.now() - state.teamAt) / 1000;
  for (const cell of document.querySelectorAll("[data-testid^='heartbeat-']")) {
    if (cell.dataset.age !== "") cell.textContent = age(Number(cell.dataset.age) + since);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  setInterval(tick, 5000);
  void boot();
});
