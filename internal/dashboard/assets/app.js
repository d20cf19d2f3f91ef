// gpufleet dashboard. Plain JavaScript, no dependencies. Every figure on
// the page is a field of an API response, shown as the server sent it:
// decimals are kept as their JSON source text (JSON.parse source access),
// so "21.957642" is shown as 21.957642, never as a float's rounding.
"use strict";

const TOKEN_KEY = "gpufleet.token";
const POLL_KEY = "gpufleet.poll_ms"; // sessionStorage override for tests
const state = { token: "", overview: null, timer: 0, page: "", seq: 0 };

// ---- helpers ----------------------------------------------------------

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const kid of kids.flat()) {
    if (kid === undefined || kid === null || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

function svg(tag, attrs, ...kids) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const kid of kids) el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  return el;
}

// parse keeps every non-integer number as its source text.
function parse(text) {
  return JSON.parse(text, (k, v, ctx) => {
    if (typeof v === "number" && ctx && typeof ctx.source === "string" && /[.eE]/.test(ctx.source)) return ctx.source;
    return v;
  });
}

// num renders a number as the API sent it.
function num(v) {
  return h("data", { value: String(v) }, String(v));
}

function money(v) {
  const cur = state.overview ? state.overview.currency : "";
  return [num(v), " ", h("abbr", { class: "unit", title: "currency" }, cur)];
}

function when(t) {
  if (!t || t.startsWith("0001-01-01")) return "—";
  return h("time", { datetime: t }, t.replace("T", " ").replace(/(\.\d+)?Z$/, " UTC"));
}

// span formats a number of seconds the API gave as h m s.
function span(sec) {
  sec = Number(sec);
  if (!Number.isFinite(sec)) return "—";
  const neg = sec < 0;
  let s = Math.abs(Math.trunc(sec));
  const d = Math.floor(s / 86400); s -= d * 86400;
  const hr = Math.floor(s / 3600); s -= hr * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  const parts = [];
  if (d) parts.push(d + "d");
  if (d || hr) parts.push(hr + "h");
  if (d || hr || m) parts.push(m + "m");
  parts.push(s + "s");
  return (neg ? "-" : "") + parts.join(" ");
}

function table(caption, cols, rows, empty) {
  if (!rows.length) return h("p", { class: "empty" }, empty || "None.");
  return h("table", {},
    h("caption", { class: "note" }, caption),
    h("thead", {}, h("tr", {}, cols.map(c => h("th", { scope: "col", class: c.num ? "num" : null }, c.title)))),
    h("tbody", {}, rows.map(r => h("tr", r.attrs || {}, cols.map(c => h("td", { class: c.num ? "num" : null }, c.cell(r)))))));
}

function setStatus(msg, error) {
  const el = document.getElementById("status");
  el.textContent = msg;
  el.className = error ? "error" : "";
}

async function api(path, opts) {
  opts = opts || {};
  const headers = Object.assign({ "Authorization": "Bearer " + state.token }, opts.headers || {});
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method: opts.method || "GET", headers, body: opts.body });
  const text = await resp.text();
  let body = text;
  if ((resp.headers.get("Content-Type") || "").includes("json")) {
    try { body = parse(text); } catch (e) { body = text; }
  }
  if (resp.status === 401 && !opts.login) { logout("Your token was refused (401): log in again."); }
  return { status: resp.status, body, text, type: resp.headers.get("Content-Type") || "" };
}

// noRoute tells a route the server lacks from a missing resource.
function noRoute(r) {
  return r.status === 404 && r.body && r.body.error && /^no route/.test(r.body.error.message || "");
}

function errText(r) {
  if (r.body && r.body.error) return r.status + " " + r.body.error.code + ": " + r.body.error.message;
  return "HTTP " + r.status;
}

// ---- login ------------------------------------------------------------

async function login(token) {
  state.token = token;
  const r = await api("/api/v1/overview", { login: true });
  if (r.status !== 200) {
    state.token = "";
    return errText(r);
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  state.overview = r.body;
  document.getElementById("login").hidden = true;
  document.getElementById("page").hidden = false;
  document.getElementById("nav").hidden = false;
  document.getElementById("who").hidden = false;
  document.getElementById("who-text").textContent = r.body.team ? "team " + r.body.team : "whole fleet (admin)";
  return "";
}

function logout(msg) {
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = ""; state.overview = null;
  clearTimeout(state.timer);
  document.getElementById("login").hidden = false;
  document.getElementById("page").hidden = true;
  document.getElementById("nav").hidden = true;
  document.getElementById("who").hidden = true;
  document.getElementById("page").replaceChildren();
  document.getElementById("login-error").textContent = msg || "";
  setStatus(msg ? "" : "Logged out.");
}

// ---- pages ------------------------------------------------------------

const pages = {
  overview: { title: "Overview", render: renderOverview },
  heatmap: { title: "GPU heatmap", render: renderHeatmap },
  queue: { title: "Queue", render: renderQueue },
  jobs: { title: "Jobs", render: renderJobs, keep: true },
  leases: { title: "Leases", render: renderLeases },
  alerts: { title: "Alerts", render: renderAlerts },
  audit: { title: "Audit reports", render: renderAudit, once: true },
  sim: { title: "Simulator reports", render: renderSim, once: true },
};

async function loadOverview() {
  const r = await api("/api/v1/overview");
  if (r.status !== 200) throw new Error("overview: " + errText(r));
  state.overview = r.body;
  return r.body;
}

function section(id, title, ...kids) {
  return h("section", { id, "aria-labelledby": id + "-h" }, h("h3", { id: id + "-h" }, title), kids);
}

function card(label, field, value) {
  return h("div", {}, h("dt", {}, label), h("dd", { "data-field": field }, value));
}

async function renderOverview(root) {
  const o = await loadOverview();
  const u = o.utilization;
  root.append(
    h("p", { class: "note" }, "As of ", when(o.as_of), o.team ? " · team " + o.team + " (queue, budgets and alerts are your team's)" : " · whole fleet"),
    section("ov-spend", "Spend",
      h("dl", { class: "cards" },
        card("Spend today", "spend_today", money(o.spend_today)),
        card("Spend this month", "spend_month", money(o.spend_month)),
        card("Idle spend today", "idle_spend_today", money(o.idle_spend_today)),
        card("Idle spend this month", "idle_spend_month", money(o.idle_spend_month))),
      h("p", { class: "note" }, "Charges incurred since ", when(o.day_start), " and ", when(o.month_start),
        ", as ", h("code", {}, "gpufleet report usage"), " computes them (a started billing period is incurred when it starts); idle spend is the part for paid GPU time no job held.")),
    section("ov-util", "Utilization",
      h("h4", {}, "Now"),
      h("dl", { class: "cards" },
        card("GPUs paid for (live leases)", "utilization.paid_gpus", num(u.paid_gpus)),
        card("GPUs ready for work", "utilization.ready_gpus", num(u.ready_gpus)),
        card("Allocated to running jobs (milli-GPUs)", "utilization.allocated_milli", num(u.allocated_milli)),
        card("Allocated share of paid GPUs", "utilization.allocated_pct", [num(u.allocated_pct), " %"])),
      h("h4", {}, "Latest readings (last ", span(u.sample_window_seconds), ")"),
      h("dl", { class: "cards" },
        card("GPUs reporting", "utilization.reporting_gpus", num(u.reporting_gpus)),
        card("Allocated GPUs reporting", "utilization.sampled_allocated_gpus", num(u.sampled_allocated_gpus)),
        card("Measured utilization of allocated GPUs", "utilization.allocated_util_pct",
          u.allocated_util_pct !== undefined ? [num(u.allocated_util_pct), " %"] : Number(u.allocated_milli) > 0 ? "no recent readings" : "nothing allocated"),
        card("Busy (allocated × utilization, milli-GPUs)", "utilization.busy_milli", num(u.busy_milli))),
      h("h4", {}, "Today so far"),
      h("dl", { class: "cards" },
        card("Paid GPU-hours", "utilization.paid_gpu_hours_today", num(u.paid_gpu_hours_today)),
        card("Allocated GPU-hours", "utilization.allocated_gpu_hours_today", num(u.allocated_gpu_hours_today)),
        card("Idle GPU-hours", "utilization.idle_gpu_hours_today", num(u.idle_gpu_hours_today)),
        card("Allocated share of paid", "utilization.allocated_pct_today", [num(u.allocated_pct_today), " %"]))),
    section("ov-fleet", "Fleet by billing mode",
      table("Live leases by billing mode", [
        { title: "Mode", cell: r => r.mode },
        { title: "Leases", num: true, cell: r => num(r.leases) },
        { title: "GPUs", num: true, cell: r => num(r.gpus) },
        { title: "Ready", num: true, cell: r => num(r.ready) },
        { title: "Starting", num: true, cell: r => num(r.starting) },
      ], o.fleet.map(r => Object.assign({ attrs: { "data-mode": r.mode } }, r)), "No live leases.")),
    section("ov-queue", "Queue depth per tier",
      h("dl", { class: "cards" }, Object.keys(o.queue_by_tier).map(t => card(t, "queue_by_tier." + t, [num(o.queue_by_tier[t]), " units"])))),
    section("ov-budgets", "Budget burn per team", budgetTable(o.budgets)),
    section("ov-alerts", "Alerts",
      h("p", {}, h("a", { href: "#/alerts" }, h("span", { "data-field": "alerts.length" }, String(o.alerts.length)), " open alerts"), ", ",
        h("span", { "data-field": "idle_gpus.length" }, String(o.idle_gpus.length)), " idle GPUs (the loop's idle alerts)")),
    section("ov-jobs", "Jobs by state",
      h("dl", { class: "cards" }, Object.keys(o.jobs).filter(s => o.jobs[s] > 0).map(s => card(s, "jobs." + s, num(o.jobs[s]))))),
  );
}

function budgetTable(budgets) {
  return table("Monthly budgets: spent is the team's cost this month, as gpufleet report usage computes it", [
    { title: "Team", cell: r => r.team },
    { title: "Budget", num: true, cell: r => Number(r.budget) > 0 ? money(r.budget) : "none" },
    { title: "Spent", num: true, cell: r => money(r.spent) },
    { title: "Spent %", num: true, cell: r => Number(r.budget) > 0 ? [h("meter", { min: 0, max: 100, low: 80, high: 99, optimum: 0, value: Math.min(Number(r.spent_pct), 100), "aria-label": "share of budget spent" }), " ", num(r.spent_pct), " %"] : "—" },
    { title: "Burn per hour", num: true, cell: r => money(r.burn_per_hour) },
    { title: "Projected month end", num: true, cell: r => money(r.projected) },
    { title: "Runs out", cell: r => r.exhausts_at ? when(r.exhausts_at) : "—" },
    { title: "State", cell: r => r.exhausted ? "exhausted" : r.alert ? "over 80%" : "ok" },
  ], budgets.map(b => Object.assign({ attrs: { "data-team": b.team } }, b)), "No teams.");
}

function heatColor(v) {
  // 0% red → 50% amber → 100% green, in HSL; colour is not the only cue:
  // every cell has a title with its number.
  const hue = Math.round(Number(v) * 1.2);
  return "hsl(" + hue + ", 70%, " + (45 + (100 - Number(v)) * 0.1) + "%)";
}

async function renderHeatmap(root) {
  const hours = sessionStorage.getItem("gpufleet.heat_hours") || "6";
  const r = await api("/api/v1/overview/heatmap?hours=" + encodeURIComponent(hours));
  if (r.status !== 200) throw new Error("heatmap: " + errText(r));
  const hm = r.body;
  const sel = h("select", { id: "heat-hours", onchange: e => { sessionStorage.setItem("gpufleet.heat_hours", e.target.value); show(state.page); } },
    ["1", "6", "24", "72", "168"].map(v => h("option", { value: v, selected: v === hours }, v + " h")));
  root.append(h("p", {}, h("label", { for: "heat-hours" }, "Window "), sel, " · ", hm.buckets, " buckets of ", span(hm.bucket_seconds), " from ", when(hm.from), " to ", when(hm.as_of)));
  if (!hm.gpus.length) {
    root.append(h("p", { class: "empty" }, "No GPU samples in this window (agents send them)."));
    return;
  }
  const cw = 14, ch = 18, left = 230, top = 4;
  const w = left + hm.buckets * cw + 4, ht = top + hm.gpus.length * ch + 24;
  const s = svg("svg", { width: w, height: ht, viewBox: "0 0 " + w + " " + ht, role: "img", "aria-labelledby": "heat-title", id: "heatmap-svg" });
  s.append(svg("title", { id: "heat-title" }, "Utilization per GPU over time; rows are GPUs, columns time buckets"));
  hm.gpus.forEach((g, i) => {
    const y = top + i * ch;
    s.append(svg("text", { x: 0, y: y + 13 }, g.lease + " GPU " + g.gpu));
    g.cells.forEach((v, j) => {
      const rect = svg("rect", { x: left + j * cw, y, width: cw - 1, height: ch - 2, fill: v === null ? "#eef1f4" : heatColor(v), "data-lease": g.lease, "data-gpu": g.gpu, "data-bucket": j });
      rect.append(svg("title", {}, g.lease + " GPU " + g.gpu + ", bucket " + j + ": " + (v === null ? "no samples" : v + "%")));
      s.append(rect);
    });
  });
  s.append(svg("text", { x: left, y: ht - 6 }, "← " + hours + " h ago"));
  s.append(svg("text", { x: w - 40, y: ht - 6 }, "now"));
  root.append(h("div", { class: "heat" }, s),
    h("p", { class: "legend" }, "Utilization: ", [0, 20, 50, 80, 100].map(v => {
      const box = svg("svg", { width: 14, height: 14, "aria-hidden": "true" }, svg("rect", { width: 14, height: 14, fill: heatColor(v) }));
      return h("span", {}, box, " " + v + "% ");
    }), " grey: no samples"));
}

async function renderQueue(root) {
  const o = await loadOverview();
  root.append(
    h("p", { class: "note" }, "Units waiting (pending, admitted or preempted) as of ", when(o.as_of), o.team ? ", team " + o.team : ""),
    table("Queue depth per tier", [
      { title: "Tier", cell: r => r.tier },
      { title: "Units", num: true, cell: r => num(r.units) },
    ], Object.keys(o.queue_by_tier).map(t => ({ tier: t, units: o.queue_by_tier[t], attrs: { "data-tier": t } }))),
    table("Queue per tier and team", [
      { title: "Tier", cell: r => r.tier },
      { title: "Team", cell: r => r.team },
      { title: "Units", num: true, cell: r => num(r.units) },
      { title: "GPUs asked (milli)", num: true, cell: r => num(r.gpu_milli) },
    ], o.queue, "Nothing is waiting."));
}

function newKey() {
  const b = new Uint8Array(12);
  crypto.getRandomValues(b);
  return "ui-" + Array.from(b, x => x.toString(16).padStart(2, "0")).join("");
}

async function renderJobs(root) {
  const o = state.overview;
  const isAdmin = !o.team;
  const msg = h("p", { id: "submit-msg", role: "status" });
  const form = h("form", { id: "submit-form", class: "inline", "aria-labelledby": "submit-h" },
    h("label", {}, "Job id (admin tokens only; else the server names it)", h("input", { name: "id", id: "job-id", maxlength: 128, spellcheck: "false" })),
    isAdmin ? h("label", {}, "Team", h("input", { name: "team", id: "job-team", required: true })) : null,
    h("label", {}, "Tier", h("select", { name: "tier", id: "job-tier" }, ["regular", "core", "offline"].map(t => h("option", { value: t }, t)))),
    h("label", {}, "GPUs", h("input", { name: "gpus", id: "job-gpus", type: "number", min: 1, value: 1, required: true })),
    h("label", {}, "Milli-GPUs per GPU", h("input", { name: "gpu_milli", id: "job-milli", type: "number", min: 1, max: 1000, value: 1000 })),
    h("label", {}, "Estimated seconds", h("input", { name: "est", id: "job-est", type: "number", min: 0, value: 1800 })),
    h("label", { class: "check" }, h("input", { name: "interruptible", type: "checkbox" }), "interruptible"),
    h("label", { class: "check" }, h("input", { name: "deferrable", type: "checkbox" }), "deferrable"),
    h("button", { type: "submit", id: "job-submit" }, "Submit job"));
  form.addEventListener("submit", async e => {
    e.preventDefault();
    const f = new FormData(form);
    const body = { tier: f.get("tier"), gpus: Number(f.get("gpus")), gpu_milli: Number(f.get("gpu_milli")), est_duration_seconds: Number(f.get("est")),
      interruptible: f.get("interruptible") === "on", deferrable: f.get("deferrable") === "on" };
    if (f.get("id")) body.id = String(f.get("id"));
    if (isAdmin) body.team = String(f.get("team"));
    const r = await api("/api/v1/jobs", { method: "POST", body: JSON.stringify(body), headers: { "Idempotency-Key": newKey() } });
    if (r.status === 201 || r.status === 200) {
      msg.className = ""; msg.textContent = "Submitted job " + r.body.id + " (" + r.body.state + ").";
      await refreshJobs();
    } else {
      msg.className = "error"; msg.textContent = "Not submitted: " + errText(r);
    }
  });
  const filter = h("select", { id: "jobs-state", onchange: () => refreshJobs() },
    h("option", { value: "" }, "all states"), ["pending", "admitted", "running", "checkpointing", "preempted", "succeeded", "failed", "cancelled"].map(s => h("option", { value: s }, s)));
  root.append(
    h("h3", { id: "submit-h" }, "Submit a job"), form, msg,
    h("h3", {}, "Jobs", o.team ? " of team " + o.team : ""),
    h("p", {}, h("label", { for: "jobs-state" }, "State "), filter),
    h("div", { id: "jobs-list" }),
    h("section", { id: "logs", "aria-labelledby": "logs-h", hidden: true }, h("h3", { id: "logs-h" }, "Logs"), h("pre", { class: "logs", id: "logs-text" })));
  // root is not in the document yet (show swaps it in when render
  // returns): the first listing fills root's own list.
  await refreshJobs(root);
}

// refreshJobs fills the jobs list found in scope: the page being built on
// first view, the document on later refreshes.
async function refreshJobs(scope) {
  scope = scope || document;
  const list = scope.querySelector("#jobs-list");
  if (!list) return;
  const st = scope.querySelector("#jobs-state").value;
  const r = await api("/api/v1/jobs?limit=200" + (st ? "&state=" + encodeURIComponent(st) : ""));
  if (r.status !== 200) throw new Error("jobs: " + errText(r));
  list.replaceChildren(table("Jobs, newest first", [
    { title: "Job", cell: j => h("code", {}, j.id) },
    { title: "Team", cell: j => j.team },
    { title: "Tier", cell: j => j.tier },
    { title: "State", cell: j => h("span", { class: "state-" + j.state, "data-job-state": j.id }, j.state) },
    { title: "GPUs", num: true, cell: j => num(j.gpus) },
    { title: "Milli/GPU", num: true, cell: j => num(j.gpu_milli) },
    { title: "Est.", cell: j => span(j.est_duration_seconds) },
    { title: "Submitted", cell: j => when(j.submit) },
    { title: "In state since", cell: j => when(j.state_at) },
    { title: "Actions", cell: j => [
      ["succeeded", "failed", "cancelled"].includes(j.state) ? null :
        h("button", { type: "button", "data-cancel": j.id, "aria-label": "Cancel job " + j.id, onclick: () => cancelJob(j.id) }, "Cancel"),
      " ",
      h("button", { type: "button", "data-logs": j.id, "aria-label": "Logs of job " + j.id, onclick: () => showLogs(j.id) }, "Logs")] },
  ], r.body.jobs.map(j => Object.assign({ attrs: { "data-job": j.id } }, j)), "No jobs."));
}

async function cancelJob(id) {
  const r = await api("/api/v1/jobs/" + encodeURIComponent(id) + "/cancel", { method: "POST" });
  setStatus(r.status === 200 ? "Cancelled " + id + "." : "Cancel " + id + ": " + errText(r), r.status !== 200);
  await refreshJobs();
}

async function showLogs(id) {
  const sec = document.getElementById("logs");
  const pre = document.getElementById("logs-text");
  sec.hidden = false;
  document.getElementById("logs-h").textContent = "Logs of " + id;
  const r = await api("/api/v1/jobs/" + encodeURIComponent(id) + "/logs?tail=65536");
  if (noRoute(r)) pre.textContent = "This server has no job logs yet (GET /api/v1/jobs/{id}/logs is not there).";
  else if (r.status !== 200) pre.textContent = errText(r);
  else if (typeof r.body === "string") pre.textContent = r.body || "(empty)";
  else if (r.body && typeof r.body.text === "string") pre.textContent = r.body.text ? "bytes " + r.body.start + "–" + r.body.end + "\n" + r.body.text : "(no output yet)";
  else if (r.body && Array.isArray(r.body.lines)) pre.textContent = r.body.lines.map(l => typeof l === "string" ? l : (l.text !== undefined ? l.text : JSON.stringify(l))).join("\n") || "(empty)";
  else pre.textContent = JSON.stringify(r.body, null, 2);
}

async function renderLeases(root) {
  const r = await api("/api/v1/overview/leases");
  if (r.status !== 200) throw new Error("leases: " + errText(r));
  root.append(h("p", { class: "note" }, "Live leases as of ", when(r.body.as_of), ". Time left is to the next billing boundary (the end of the time already paid): an idle machine is released just before it; a committed term is never released inside its term."),
    table("Live leases", [
      { title: "Lease", cell: b => h("code", {}, b.lease.id) },
      { title: "Offer", cell: b => b.lease.offer },
      { title: "GPU", cell: b => b.gpus + " × " + b.gpu_model },
      { title: "Mode", cell: b => b.lease.mode + (b.committed ? " (committed)" : "") },
      { title: "State", cell: b => h("span", { class: "state-" + b.lease.state }, b.lease.state) },
      { title: "Busy", cell: b => b.busy ? "yes" : "idle" },
      { title: "Launched", cell: b => when(b.lease.start) },
      { title: "Next billing boundary", cell: b => when(b.next_boundary) },
      { title: "Time left", num: true, cell: b => h("span", { "data-seconds-left": b.lease.id, "data-value": b.seconds_left }, span(b.seconds_left)) },
    ], r.body.leases.map(b => Object.assign({ attrs: { "data-lease": b.lease.id } }, b)), "No live leases."));
  const all = await api("/api/v1/leases?limit=50");
  if (all.status === 200) {
    root.append(h("h3", {}, "Recent leases"), table("The 50 newest leases, any state", [
      { title: "Lease", cell: l => h("code", {}, l.id) },
      { title: "Offer", cell: l => l.offer },
      { title: "Mode", cell: l => l.mode },
      { title: "State", cell: l => h("span", { class: "state-" + l.state }, l.state) },
      { title: "Launched", cell: l => when(l.start) },
      { title: "Ended", cell: l => when(l.end) },
    ], all.body.leases, "No leases."));
  }
}

function alertRows(list) {
  return table("Alerts", [
    { title: "Kind", cell: a => a.kind },
    { title: "Lease", cell: a => a.lease || a.lease_id || "" },
    { title: "GPU", num: true, cell: a => a.gpu === undefined ? "" : num(a.gpu) },
    { title: "Team", cell: a => a.team || "" },
    { title: "Action", cell: a => a.action || "" },
    { title: "Raised", cell: a => when(a.raised || a.at) },
    { title: "Reason", cell: a => a.reason || "" },
    { title: "Acknowledged", cell: a => a.acked && !a.acked.startsWith("0001-01-01") ? [when(a.acked), a.acked_by ? " by " + a.acked_by : ""] :
        (a.id && state.canAck ? h("button", { type: "button", "data-ack": a.id, "aria-label": "Acknowledge alert " + a.id, onclick: () => ackAlert(a.id) }, "Acknowledge") : "") },
  ], list.map(a => Object.assign({ attrs: { "data-alert": a.kind + ":" + (a.lease || a.lease_id || "") + ":" + (a.gpu === undefined ? "" : a.gpu) } }, a)), "No open alerts.");
}

async function ackAlert(id) {
  const r = await api("/api/v1/alerts/" + encodeURIComponent(id) + "/ack", { method: "POST" });
  setStatus(r.status === 200 ? "Acknowledged alert " + id + "." : "Acknowledge " + id + ": " + errText(r), r.status !== 200);
  const p = state.page; state.page = ""; show(p);
}

async function renderAlerts(root) {
  const o = await loadOverview();
  const r = await api("/api/v1/alerts?open=true&limit=500");
  let list, source;
  state.canAck = false;
  if (r.status === 200 && r.body && typeof r.body === "object") {
    list = Array.isArray(r.body) ? r.body : (r.body.alerts || []);
    source = "GET /api/v1/alerts?open=true";
    state.canAck = true;
  } else {
    list = o.alerts;
    source = "the overview (GET /api/v1/overview alerts" + (noRoute(r) ? "; this server has no /api/v1/alerts yet" : "; /api/v1/alerts answered " + r.status) + ")";
  }
  root.append(
    section("alerts-open", "Open alerts", h("p", { class: "note", id: "alerts-source" }, "From " + source + "."), alertRows(list)),
    section("alerts-idle", "Idle GPUs (from samples)",
      h("p", { class: "note" }, "GPUs whose readings have stayed under the idle threshold for at least the idle ladder's alert time."),
      table("Idle GPUs", [
        { title: "Lease", cell: g => h("code", {}, g.lease) },
        { title: "GPU", num: true, cell: g => num(g.gpu) },
        { title: "Unit", cell: g => g.unit || "nobody" },
        { title: "Team", cell: g => g.team || "" },
        { title: "Highest reading", num: true, cell: g => [num(g.max_util_pct), " %"] },
        { title: "Low since", cell: g => when(g.low_since) },
        { title: "Reason", cell: g => g.reason },
      ], o.idle_gpus.map(g => Object.assign({ attrs: { "data-idle-gpu": g.lease + "/" + g.gpu } }, g)), "No idle GPUs.")));
}

function reportFrame(html, title) {
  // A sandbox without allow-scripts: the report's markup and styles show,
  // nothing in it runs.
  // allow-same-origin only so that the page (and its test) can read the
  // frame's document; without allow-scripts nothing in it can use that.
  return h("iframe", { class: "report", sandbox: "allow-same-origin", title, srcdoc: html });
}

async function renderAudit(root) {
  // The period is [from, to), by the server's clock: this month so far,
  // to tomorrow (UTC) so that today is in.
  const now = new Date(state.overview.as_of);
  const monthStart = state.overview.month_start.slice(0, 10);
  const tomorrow = new Date(now.getTime() + 86400000).toISOString().slice(0, 10);
  const out = h("div", { id: "audit-out" });
  const form = h("form", { class: "inline", id: "audit-form" },
    h("label", {}, "From", h("input", { type: "date", name: "from", value: monthStart, required: true })),
    h("label", {}, "To (exclusive)", h("input", { type: "date", name: "to", value: tomorrow, required: true })),
    state.overview.team ? null : h("label", {}, "Team (optional)", h("input", { name: "team" })),
    h("button", { type: "submit" }, "Show report"));
  form.addEventListener("submit", async e => {
    e.preventDefault();
    const f = new FormData(form);
    const q = new URLSearchParams({ format: "html", from: String(f.get("from")), to: String(f.get("to")) });
    if (f.get("team")) q.set("team", String(f.get("team")));
    const r = await api("/api/v1/reports/audit?" + q.toString());
    if (noRoute(r)) out.replaceChildren(h("p", { class: "empty" }, "This server has no audit reports yet (GET /api/v1/reports/audit is not there). `gpufleet report audit --format html` writes one that the simulator page below can show."));
    else if (r.status !== 200) out.replaceChildren(h("p", { class: "error" }, errText(r)));
    else {
      const blob = new Blob([r.text], { type: "text/html" });
      out.replaceChildren(h("p", {}, h("a", { href: URL.createObjectURL(blob), download: "audit-" + q.get("from") + "-" + q.get("to") + ".html" }, "Download this report")),
        reportFrame(r.text, "Audit report"));
    }
  });
  root.append(h("p", { class: "note" }, "The audit report (GET /api/v1/reports/audit?format=html): paid, allocated and busy GPU-hours, idle cost and recommendations."), form, out);
}

async function renderSim(root) {
  const out = h("div", { id: "sim-out" });
  const input = h("input", { type: "file", id: "sim-file", accept: ".json,.html,.htm,application/json,text/html" });
  input.addEventListener("change", async () => {
    const file = input.files && input.files[0];
    if (!file) return;
    const text = await file.text();
    if (/\.json$/i.test(file.name) || /^\s*[{[]/.test(text)) {
      try { out.replaceChildren(simJSON(parse(text), file.name)); } catch (e) { out.replaceChildren(h("p", { class: "error" }, "Not a gpufleet sim JSON report: " + e.message)); }
    } else {
      out.replaceChildren(h("h3", {}, file.name), reportFrame(text, "Simulator report " + file.name));
    }
  });
  root.append(h("p", { class: "note" }, "Open a report written by ", h("code", {}, "gpufleet sim --json FILE"), " or ", h("code", {}, "--html FILE"), ". It is read in the browser and sent nowhere."),
    h("p", {}, h("label", { for: "sim-file" }, "Report file "), input), out);
}

function simJSON(rep, name) {
  if (!rep || !Array.isArray(rep.policies)) throw new Error("no policies array");
  const cols = [
    ["policy", "Policy"], ["cost", "Cost"], ["idle_cost", "Idle cost"], ["idle_share", "Idle share"], ["paid_gpu_hours", "Paid GPU-h"],
    ["allocated_gpu_hours", "Allocated GPU-h"], ["wait_p50_s", "Wait p50 (s)"], ["wait_p95_s", "Wait p95 (s)"], ["deadline_misses", "Deadline misses"],
    ["preemptions", "Preemptions"], ["reclaims", "Reclaims"], ["unfinished", "Unfinished"], ["vs_lower_bound", "vs lower bound"]];
  return h("div", { id: "sim-report" },
    h("h3", {}, name),
    h("dl", { class: "cards" },
      h("div", {}, h("dt", {}, "Trace"), h("dd", {}, String(rep.trace || ""))),
      h("div", {}, h("dt", {}, "Seed"), h("dd", {}, String(rep.seed === undefined ? "" : rep.seed))),
      h("div", {}, h("dt", {}, "Lower bound"), h("dd", {}, rep.lower_bound ? [num(rep.lower_bound.cost), " ", rep.currency || ""] : "—"))),
    table("Policies (" + (rep.currency || "") + ")", cols.map(([k, t]) => ({ title: t, num: k !== "policy", cell: p => p[k] === undefined ? "" : (k === "policy" ? p[k] : num(p[k])) })),
      rep.policies.map(p => Object.assign({ attrs: { "data-policy": p.policy } }, p))));
}

// ---- router -----------------------------------------------------------

function pollMs() {
  const v = Number(sessionStorage.getItem(POLL_KEY));
  return v > 0 ? v : 5000;
}

async function show(name) {
  if (!pages[name]) name = "overview";
  const p = pages[name];
  const again = state.page === name;
  state.page = name;
  clearTimeout(state.timer);
  for (const a of document.querySelectorAll("nav a")) {
    if (a.getAttribute("href") === "#/" + name) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  document.title = p.title + " · gpufleet";
  const seq = ++state.seq;
  const root = document.getElementById("page");
  try {
    if (again && p.keep) {
      await refreshJobs();
    } else if (!(again && p.once)) {
      const fresh = h("div", {}, h("h2", { id: "page-h" }, p.title));
      await p.render(fresh);
      if (seq !== state.seq) return; // the user moved on meanwhile
      fresh.setAttribute("data-page", name);
      root.replaceChildren(...fresh.childNodes);
      root.setAttribute("data-page", name);
    }
    if (seq === state.seq) setStatus("Updated " + new Date().toLocaleTimeString() + ".");
  } catch (e) {
    if (seq === state.seq) setStatus(String(e.message || e), true);
  }
  if (seq === state.seq && state.token && !p.once) state.timer = setTimeout(() => show(name), pollMs());
}

function route() {
  const name = (location.hash.match(/^#\/(\w+)/) || [])[1] || "overview";
  state.page = "";
  if (state.token) show(name);
}

window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("login-form").addEventListener("submit", async e => {
    e.preventDefault();
    const input = document.getElementById("token");
    const err = await login(input.value.trim());
    document.getElementById("login-error").textContent = err ? "Login failed: " + err : "";
    if (!err) { input.value = ""; route(); }
  });
  document.getElementById("logout").addEventListener("click", () => logout(""));
  document.getElementById("refresh").addEventListener("click", () => { const p = state.page; state.page = ""; show(p); });
  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved) {
    const err = await login(saved);
    if (err) logout("Saved token refused: " + err); else route();
  }
});
