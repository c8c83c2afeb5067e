// rlserver status page: polls /api/status and draws the rates as SVG.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const POLL_MS = 2000;

function el(name, attrs, text) {
  const e = document.createElementNS(SVG, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmt(n) {
  if (n >= 1e6) return (n / 1e6).toFixed(2) + "M";
  if (n >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return Math.round(n).toString();
}

function niceMax(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// drawChart renders the series as two polylines with a grid and labels.
function drawChart(series, stepSeconds) {
  const box = document.getElementById("chart");
  const W = 1000, H = 260, L = 56, R = 12, T = 12, B = 28;
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img" });
  const n = series.length;
  let peak = 0;
  for (const p of series) peak = Math.max(peak, p.allowed, p.denied);
  const top = niceMax(peak);
  for (let i = 0; i <= 4; i++) {
    const y = T + (H - T - B) * (1 - i / 4);
    svg.appendChild(el("line", { class: "grid", x1: L, x2: W - R, y1: y, y2: y }));
    svg.appendChild(el("text", { x: L - 6, y: y + 4, "text-anchor": "end" }, fmt(top * i / 4)));
  }
  const span = Math.max(n - 1, 1);
  const x = (i) => L + (W - L - R) * (n <= 1 ? 1 : i / span);
  const y = (v) => T + (H - T - B) * (1 - v / top);
  if (n > 0) {
    const secs = Math.round((n - 1) * stepSeconds);
    svg.appendChild(el("text", { x: L, y: H - 8 }, secs >= 60 ? `-${Math.round(secs / 60)} min` : `-${secs} s`));
    svg.appendChild(el("text", { x: W - R, y: H - 8, "text-anchor": "end" }, "now"));
  }
  for (const kind of ["allowed", "denied"]) {
    const pts = series.map((p, i) => `${x(i).toFixed(1)},${y(p[kind]).toFixed(1)}`).join(" ");
    const line = el("polyline", { class: "line " + kind, id: "line-" + kind, points: pts });
    line.setAttribute("data-count", String(n));
    line.setAttribute("data-last", n ? String(Math.round(series[n - 1][kind])) : "");
    line.setAttribute("data-max", String(Math.round(series.reduce((m, p) => Math.max(m, p[kind]), 0))));
    svg.appendChild(line);
  }
  box.replaceChildren(svg);
  const mins = Math.round(n * stepSeconds / 60);
  document.getElementById("window").textContent = mins >= 1 ? `${mins} min` : `${Math.round(n * stepSeconds)} s`;
}

function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
}

function drawTop(top) {
  const body = document.querySelector("#top tbody");
  body.replaceChildren();
  for (const k of top) {
    const tr = document.createElement("tr");
    tr.className = "top-row";
    cell(tr, k.key, "key");
    cell(tr, Math.round(k.denied).toString(), "num");
    body.appendChild(tr);
  }
  document.getElementById("top-empty").hidden = top.length > 0;
}

function drawCluster(c) {
  const sec = document.getElementById("cluster-section");
  if (!c) { sec.hidden = true; return; }
  sec.hidden = false;
  document.getElementById("cluster-summary").textContent =
    `this node: ${c.node_id} (${c.role}) · leader: ${c.leader_id || "none"} · term ${c.term} · commit ${c.commit_index} · applied ${c.applied_index} · leader changes ${c.leader_changes}`;
  const body = document.querySelector("#members tbody");
  body.replaceChildren();
  for (const m of c.members) {
    const tr = document.createElement("tr");
    tr.className = "member" + (m.leader ? " leader" : "");
    tr.dataset.id = m.id;
    cell(tr, m.id + (m.self ? " (this node)" : ""));
    cell(tr, m.leader ? "leader" : (m.role || "unreachable"));
    cell(tr, m.applied_index === null ? "?" : String(m.applied_index), "num applied");
    cell(tr, m.raft_addr);
    cell(tr, m.resp_addr || "-");
    body.appendChild(tr);
  }
}

// drawGroups shows a sharded node's data groups and the cluster's nodes
// (s.sharded is null on other nodes: the section stays hidden).
function drawGroups(g, nowMs) {
  const sec = document.getElementById("groups-section");
  if (!g) { sec.hidden = true; return; }
  sec.hidden = false;
  let leading = 0, leaderless = 0;
  for (const gr of g.groups) {
    if (gr.role === "leader") leading++;
    if (!gr.leader) leaderless++;
  }
  document.getElementById("groups-summary").textContent =
    `${g.groups.length} groups · ${g.slots_assigned} of 16384 slots assigned · this node leads ${leading}` +
    (leaderless ? ` · ${leaderless} without a leader` : "") + ` · directory epoch ${g.epoch}`;
  const body = document.querySelector("#groups tbody");
  body.replaceChildren();
  for (const gr of g.groups) {
    const tr = document.createElement("tr");
    tr.className = "group" + (gr.role === "leader" ? " leader" : "") + (gr.leader ? "" : " no-leader");
    tr.dataset.id = String(gr.id);
    const hosted = gr.role !== "";
    cell(tr, String(gr.id), "num");
    cell(tr, gr.leader || "none", "group-leader");
    cell(tr, hosted ? gr.role : "not hosted", "group-role");
    cell(tr, String(gr.slots), "num slots");
    cell(tr, gr.ranges.length ? gr.ranges.join(", ") : "-", "ranges");
    cell(tr, hosted ? String(gr.keys) : "-", "num keys");
    cell(tr, hosted ? String(gr.applied_index) : "-", "num applied");
    cell(tr, hosted ? String(gr.commit_index) : "-", "num commit");
    cell(tr, hosted ? String(gr.lag) : "-", "num lag");
    cell(tr, gr.replicas.length ? gr.replicas.join(", ") + (gr.learner ? " + " + gr.learner + " (learner)" : "") : "every node", "replicas");
    body.appendChild(tr);
  }
  drawMoves(g.moves, g.rebalancing, nowMs);
  const nodes = document.querySelector("#nodes tbody");
  nodes.replaceChildren();
  for (const n of g.nodes) {
    const tr = document.createElement("tr");
    tr.className = "node";
    tr.dataset.name = n.name;
    cell(tr, n.name + (n.self ? " (this node)" : ""));
    cell(tr, n.addr || "-", "addr");
    cell(tr, n.raft_addr);
    cell(tr, n.leads.length ? n.leads.join(", ") : "-", "leads");
    cell(tr, n.state ? String(n.replicas) : "all", "num replicas");
    cell(tr, n.state || "-", "state");
    cell(tr, n.id, "id");
    nodes.appendChild(tr);
  }
}

// secs writes a duration in ms for people: "250 ms", "4.2 s", "93 s".
function secs(ms) {
  if (ms < 1000) return Math.round(ms) + " ms";
  return ms >= 10000 ? Math.round(ms / 1000) + " s" : (ms / 1000).toFixed(1) + " s";
}

// drawMoves lists the slot moves the directory keeps, newest first: the
// one in progress (its duration so far, from this node's clock) and the
// finished ones; "rebalancing" while a rebalance started on this node runs.
function drawMoves(moves, rebalancing, nowMs) {
  const running = moves.find((m) => m.state !== "released");
  const finished = moves.length - (running ? 1 : 0);
  let summary = running
    ? `move ${running.id} in progress: slots ${running.slots}, group ${running.from} → ${running.to}, ${running.state}, ${running.keys} keys imported`
    : "no move in progress";
  summary += ` · ${finished} finished listed`;
  if (rebalancing) summary += " · rebalancing";
  const p = document.getElementById("moves-summary");
  p.textContent = summary;
  p.className = rebalancing ? "rebalancing" : "";
  document.getElementById("moves").hidden = moves.length === 0;
  const body = document.querySelector("#moves tbody");
  body.replaceChildren();
  for (const m of moves) {
    const tr = document.createElement("tr");
    const done = m.state === "released";
    tr.className = "move" + (done ? "" : " in-progress");
    tr.dataset.id = String(m.id);
    cell(tr, String(m.id), "num");
    cell(tr, m.slots, "ranges");
    cell(tr, String(m.from), "num move-from");
    cell(tr, String(m.to), "num move-to");
    cell(tr, m.state, "move-state");
    cell(tr, String(m.keys), "num keys");
    cell(tr, m.duration_ms !== null ? secs(m.duration_ms) : `${secs(Math.max(nowMs - m.began_ms, 0))} so far`, "num duration");
    body.appendChild(tr);
  }
}

async function refresh() {
  const state = document.getElementById("state");
  try {
    const r = await fetch("api/status", { cache: "no-store" });
    if (!r.ok) throw new Error("HTTP " + r.status);
    const s = await r.json();
    document.getElementById("version").textContent = "version " + s.version;
    document.getElementById("uptime").textContent = "up " + s.uptime_seconds + " s";
    const last = s.series.length ? s.series[s.series.length - 1] : { allowed: 0, denied: 0 };
    document.getElementById("rate-allowed").textContent = fmt(last.allowed);
    document.getElementById("rate-denied").textContent = fmt(last.denied);
    document.getElementById("total-allowed").textContent = String(s.totals.allowed);
    document.getElementById("total-denied").textContent = String(s.totals.denied);
    document.getElementById("clients").textContent = String(s.totals.clients);
    drawChart(s.series, s.step_seconds);
    drawTop(s.top);
    drawCluster(s.cluster);
    drawGroups(s.sharded, s.now_ms);
    state.textContent = "live";
    state.className = "state ok";
    document.body.dataset.loaded = "1";
  } catch (e) {
    state.textContent = "unreachable: " + e.message;
    state.className = "state err";
  }
}

refresh();
setInterval(refresh, POLL_MS);
