// opsched's web view: one Server-Sent Events stream (/api/events) — a snapshot, then one message per change —
// rendered into queues, ops, an op's timeline, cost and errors. Read-only; every text goes in as textContent.
"use strict";

const state = { ops: new Map(), why: {}, queues: null, cost: null, health: null, errors: [], unavailable: {} };
let selected = null;      // the op whose timeline is open
let timeline = [];        // its events
let history = null;       // its history, as `why` answered it when the op was opened (or last changed)
let historyAsked = false; // a fetch of it is on its way
let drawPending = false;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key === "style") node.style.cssText = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child === null || child === undefined ? "" : child);
  return node;
}

function fmt(n, digits = 2) { return Number(n || 0).toFixed(digits).replace(/\.?0+$/, "") || "0"; }
// An op's accelerators as `opsched ops` shows them (opsched/view.py gpus_text): "2", "1xamd.com", "8GiB-mem", "-".
function gpusText(accelerators) {
  const parts = [];
  let memory = 0;
  for (const [resource, n] of Object.entries(accelerators || {})) {
    if (resource === "aliyun.com/gpu-mem") memory += n;
    else if (n) parts.push(resource === "nvidia.com/gpu" ? String(n) : `${n}x${resource.split("/")[0]}`);
  }
  if (memory) parts.push(`${memory}GiB-mem`);
  return parts.join(",") || "-";
}
function moneyText(money) { return money ? `${Number(money.amount).toFixed(2)} ${money.currency}` : "-"; }

function applySnapshot(snap) {
  state.ops = new Map(snap.ops.map((row) => [row.opId, row]));
  state.why = snap.why || {};
  state.queues = snap.queues;
  state.cost = snap.cost;
  state.health = snap.health;
  state.errors = snap.errors || [];
  state.unavailable = snap.unavailable || {};
  if (selected) openDetail(selected);
}

function applyOp(msg) {
  state.ops.set(msg.row.opId, msg.row);
  if (msg.why === null) delete state.why[msg.row.opId];
  if (selected === msg.row.opId && msg.event) { timeline.push(msg.event); refreshHistory(selected); }
}

const handlers = {
  snapshot: applySnapshot,
  op: applyOp,
  why: (msg) => { state.why[msg.op_id] = msg.why; },
  queues: (msg) => { state.queues = msg.queues; delete state.unavailable.queues; },
  cost: (msg) => { state.cost = msg.cost; delete state.unavailable.cost; },
  health: (msg) => { state.health = msg.health; },
  unavailable: (msg) => { state.unavailable[msg.query] = msg.why; },
  error: (msg) => { state.errors.push(msg.error); state.errors = state.errors.slice(-20); },
};

function connect() {
  const conn = document.getElementById("conn");
  const source = new EventSource("/api/events");
  for (const [kind, handle] of Object.entries(handlers)) {
    source.addEventListener(kind, (e) => { handle(JSON.parse(e.data)); scheduleDraw(); });
  }
  source.onopen = () => { conn.dataset.state = "live"; conn.textContent = "live"; };
  source.onerror = () => { conn.dataset.state = "reconnecting"; conn.textContent = "reconnecting…"; };
}

function scheduleDraw() {
  if (drawPending) return;
  drawPending = true;
  requestAnimationFrame(() => { drawPending = false; draw(); });
}

function draw() {
  drawTally();
  drawServices();
  drawQueues();
  drawFragmentation();
  drawOps();
  drawDetail();
  drawCost();
  drawErrors();
}

function drawTally() {
  const counts = {};
  for (const row of state.ops.values()) counts[row.status] = (counts[row.status] || 0) + 1;
  const parts = Object.entries(counts).sort((a, b) => b[1] - a[1]).map(([s, n]) => `${n} ${s}`);
  document.getElementById("tally").textContent = `${state.ops.size} ops` + (parts.length ? `: ${parts.join(", ")}` : "");
}

function unavailable(query) {
  const note = document.getElementById(`${query}-unavailable`);
  note.hidden = !state.unavailable[query];
  note.textContent = state.unavailable[query] || "";
}

function drawServices() {
  // Each service's own account (proto/schemas/query.health_answer.json): fine, its problems, or no answer.
  const health = state.health || {};
  document.getElementById("services").replaceChildren(...Object.entries(health).map(([service, answer]) => {
    if (!answer) return el("li", { "data-service": service, "data-state": "silent" }, `${service}: no answer`);
    const problems = answer.problems || [];
    if (!problems.length) return el("li", { "data-service": service, "data-state": "ok" }, `${service}: ok`);
    return el("li", { "data-service": service, "data-state": problems[0].kind },
      `${service}: ` + problems.map((p) => `${p.kind.replace("_", " ")}: ${p.what}` + (p.count ? ` (${p.count}×)` : "") +
        (p.detail ? ` — ${p.detail}` : "")).join("; "));
  }));
}

function bar(used, nominal, borrowed, kind) {
  const whole = Math.max(nominal, used, 1e-9);
  const own = Math.min(used - borrowed, nominal);
  return el("div", { class: `bar ${kind || ""}`, title: `${fmt(used)} used of ${fmt(nominal)}` },
    el("span", { class: "used", style: `width:${(100 * Math.max(own, 0)) / whole}%` }),
    el("span", { class: "borrowed", style: `left:${(100 * Math.max(own, 0)) / whole}%;width:${(100 * borrowed) / whole}%` }));
}

function drawQueues() {
  unavailable("queues");
  const box = document.getElementById("queues");
  const answer = state.queues;
  if (!answer) { box.replaceChildren(el("p", { class: "empty" }, "waiting for admission's answer…")); return; }
  // The answer as admission sent it (proto/schemas/query.queues_answer.json): camelCase, defaults left out.
  box.replaceChildren(...(answer.queues || []).map((q) => {
    let running = `${q.running || 0}/${q.concurrency === undefined ? "∞" : q.concurrency}`;
    if (q.services || q.maxServices !== undefined) {  // a queue that runs services, or caps them (as `opsched queues`)
      running += ` (${q.services || 0}/${q.maxServices === undefined ? "∞" : q.maxServices} services)`;
    }
    const card = el("div", { class: "queue", "data-queue": q.name },
      el("h3", {}, q.name + (q.name === answer.defaultQueue ? " (default)" : "")),
      el("div", { class: "meta" }, `running ${running} · pending ${q.pending || 0}` + (q.cohort ? ` · cohort ${(q.cohortPath || [q.cohort]).join(" → ")}` : "")));
    if (q.stopPolicy && q.stopPolicy !== "None") {  // an admin held or drained it (`opsched queues hold|drain`)
      const what = q.stopPolicy === "Hold" ? "held" : (q.draining ? `draining ${q.draining}` : "drained");
      card.append(el("div", { class: "meta stopped" }, `${what} by ${q.stoppedBy || "?"}` + (q.stopComment ? `: ${q.stopComment}` : "")));
    }
    for (const u of q.usage || []) {
      const borrowed = u.borrowed ? `, ${fmt(u.borrowed)} borrowed` : "";
      card.append(el("div", { class: "usage" }, `${u.resource} [${u.flavor}] ${fmt(u.used)}/${fmt(u.nominal)}${borrowed}`,
        bar(u.used || 0, u.nominal || 0, u.borrowed || 0)));
    }
    if (q.costQuota !== undefined) {
      card.append(el("div", { class: "usage" }, `cost ${fmt(q.costUsed)}/${fmt(q.costQuota)}`,
        bar(q.costUsed || 0, q.costQuota, 0, "money")));
    }
    return card;
  }));
}

function drawFragmentation() {
  // Free accelerators per flavor; "stranded": on nodes with less free than the largest waiting pod asks.
  const figures = (state.queues && state.queues.fragmentation) || [];
  document.getElementById("fragmentation").replaceChildren(...figures.map((f) => el("li", { "data-flavor": f.flavor || "" },
    `${f.agent ? f.agent + ": " : ""}${f.resource} [${f.flavor || "any node"}]: ${fmt(f.free)} free on ${f.nodes || 0} nodes, ${fmt(f.stranded)} stranded` +
    (f.largestWaiting ? ` (largest waiting pod asks ${fmt(f.largestWaiting)})` : ""))));
}

function position(opId) {
  const why = state.why[opId];
  if (!why || why.position === null || why.position === undefined) return "";
  return `${why.position} of ${why.queuedTotal || 0}`;
}

function reasonOf(row) {
  const why = state.why[row.opId];
  const top = why && why.reasons ? why.reasons[0].message : "";
  return [top || row.reason, row.ignored.length ? `ignored: ${row.ignored.join(", ")}` : ""].filter(Boolean).join("; ");
}

function drawOps() {
  const filter = document.getElementById("filter").value.trim().toLowerCase();
  const rows = [...state.ops.values()].reverse().filter((r) => !filter ||
    [r.opId, r.name, r.queue, r.status, r.node, r.batch].some((v) => String(v).toLowerCase().includes(filter)));
  const body = document.querySelector("#ops tbody");
  body.replaceChildren(...rows.map((r) => {
    const tr = el("tr", { "data-op-id": r.opId, "data-status": r.status, class: r.opId === selected ? "selected" : "" },
      el("td", { class: "id" }, r.opId), el("td", { class: "name" }, r.name || "?"), el("td", {}, r.queue || "?"),
      el("td", {}, el("span", { class: `status ${r.status}` }, r.status)), el("td", {}, String(r.attempt)),
      el("td", {}, gpusText(r.accelerators)), el("td", { class: "node" }, r.node || "-"), el("td", {}, moneyText(r.estimate)),
      el("td", { class: "position" }, position(r.opId)), el("td", { class: "reason" }, reasonOf(r)));
    if (!r.active && !r.terminal) tr.dataset.waiting = "";
    tr.addEventListener("click", () => openDetail(r.opId));
    return tr;
  }));
  document.getElementById("no-ops").hidden = state.ops.size > 0;
}

async function openDetail(opId) {
  selected = opId;
  timeline = [];
  history = null;
  const answer = await fetch(`/api/ops/${encodeURIComponent(opId)}`);
  if (selected !== opId) return;
  const body = answer.ok ? await answer.json() : {};
  const fetched = body.timeline || [];
  const key = (t) => `${t.at}|${t.event}|${t.attempt}`;
  const known = new Set(fetched.map(key));
  timeline = fetched.concat(timeline.filter((t) => !known.has(key(t))));  // events streamed while it loaded
  history = body.history ? { entries: body.history, dropped: body.historyDropped || 0 } : null;
  scheduleDraw();
  refreshLogs(opId);
}

async function refreshLogs(opId) {  // the last lines its main container printed (`opsched logs --tail`), as text
  const answer = await fetch(`/api/ops/${encodeURIComponent(opId)}/logs`);
  const body = answer.ok || answer.status === 404 ? await answer.json() : {};
  if (selected !== opId) return;
  const box = document.getElementById("detail-logs");
  box.textContent = body.lines ? body.lines.join("\n") : `(${body.error || "no answer"})`;
}

async function refreshHistory(opId) {  // the op moved while its page is open: ask again (one fetch at a time)
  if (historyAsked) return;
  historyAsked = true;
  try {
    const answer = await fetch(`/api/ops/${encodeURIComponent(opId)}`);
    const body = answer.ok ? await answer.json() : {};
    if (selected === opId && body.history) history = { entries: body.history, dropped: body.historyDropped || 0 };
    if (selected === opId) refreshLogs(opId);
  } finally {
    historyAsked = false;
    scheduleDraw();
  }
}

function drawHistory() {  // what happened to it, grouped by attempt (the authority: it survives restarts and purges)
  const box = document.getElementById("detail-history");
  if (!history || !history.entries.length) { box.replaceChildren(); return; }
  const groups = [];
  history.entries.forEach((h, i) => {
    if (!groups.length || groups[groups.length - 1].attempt !== h.attempt) groups.push({ attempt: h.attempt, items: [] });
    groups[groups.length - 1].items.push(el("li", { "data-event": h.event },
      el("span", { class: "at" }, new Date(h.at).toLocaleString()), el("span", {}, h.text)));
    if (i === 0 && history.dropped) {
      groups[groups.length - 1].items.push(el("li", { class: "dropped" }, `… ${history.dropped} entries dropped`));
    }
  });
  box.replaceChildren(el("h3", {}, "History"), ...groups.map((g) =>
    el("div", { class: "attempt" }, el("div", { class: "attempt-head" }, `attempt ${g.attempt}`), el("ol", {}, ...g.items))));
}

function drawDetail() {
  const box = document.getElementById("detail");
  box.hidden = !selected;
  if (!selected) return;
  const row = state.ops.get(selected);
  document.getElementById("detail-id").textContent = row ? `${selected} (${row.name || "?"}): ${row.status}` : selected;
  const why = state.why[selected];
  const whyBox = document.getElementById("detail-why");
  whyBox.replaceChildren();
  if (why && why.reasons) {
    whyBox.append(el("div", {}, `waiting in ${why.queue}` + (why.position ? `, position ${why.position} of ${why.queuedTotal || 0}` : "")),
      el("ol", {}, ...why.reasons.map((r) => el("li", {}, `${r.message} [${r.code}]`))));
  }
  const outputs = row && row.outputs ? Object.entries(row.outputs) : [];
  document.getElementById("detail-outputs").replaceChildren(...(outputs.length ? [el("div", {}, "outputs: " +
    outputs.map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(" "))] : []));
  drawHistory();
  const items = timeline.map((t) => el("li", { "data-event": t.event },
    el("span", { class: "at" }, new Date(t.at).toLocaleTimeString()), el("span", { class: "ev" }, t.event),
    el("span", { class: "detail" }, `attempt ${t.attempt} ` + Object.entries(t.detail).map(([k, v]) => `${k}=${v}`).join(" "))));
  if (!items.length && row && !(history && history.entries.length)) {
    items.push(el("li", {}, "ended before this page opened: its events are purged; the row is its summary"));
  }
  document.getElementById("timeline").replaceChildren(...items);
}

function drawCost() {
  unavailable("cost");
  const box = document.getElementById("cost");
  const answer = state.cost;
  if (!answer) { box.replaceChildren(el("p", { class: "empty" }, "waiting for the cost service's answer…")); return; }
  // As the cost service sent it (proto/schemas/query.cost_answer.json): camelCase, defaults left out.
  const cur = answer.currency || "USD";
  const spend = answer.spend || [];
  const parts = [el("p", {}, `burn rate ${fmt(answer.burnRatePerHour)} ${cur}/h (last hour)`)];
  if (spend.length) {
    parts.push(el("table", { class: "spend" },
      el("thead", {}, el("tr", {}, ...["SCOPE", "NAME", `TODAY ${cur}`, `WEEK ${cur}`, `MONTH ${cur}`, "GPU-H TODAY"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...spend.map((s) => el("tr", {}, ...[s.scope, s.name, fmt(s.day), fmt(s.week), fmt(s.month),
        fmt(s.gpuHoursDay)].map((v) => el("td", {}, v)))))));
  } else parts.push(el("p", { class: "empty" }, "no spend recorded yet"));
  for (const b of answer.budgets || []) {
    const money = b.money !== undefined && b.money !== null;
    const [spent, limit, unit] = money ? [b.spentMoney || 0, b.money, cur] : [b.spentGpuHours || 0, b.gpuHours, "GPU-h"];
    parts.push(el("div", { class: "usage budget" }, `budget ${b.scope} ${b.name} (${b.window}): ${fmt(spent)}/${fmt(limit)} ${unit}`,
      bar(spent, limit, 0, "money")));
  }
  box.replaceChildren(...parts);
}

function drawErrors() {
  document.getElementById("errors-section").hidden = !state.errors.length;
  document.getElementById("errors").replaceChildren(...state.errors.slice().reverse().map((e) =>
    el("li", {}, `${new Date(e.at).toLocaleTimeString()} ${e.service}: ${e.detail.reason || ""} ${e.detail.message || ""}`)));
}

document.getElementById("filter").addEventListener("input", scheduleDraw);
document.getElementById("detail-close").addEventListener("click", () => { selected = null; scheduleDraw(); });
connect();
