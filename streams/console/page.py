"""The ops console: one HTML page with a little vanilla JavaScript (no build, no CDN).

It only calls the JSON API of `streams.console.api`; commands carry the token
the operator typed (kept in the tab's sessionStorage, sent as a Bearer header).
"""

from __future__ import annotations

PAGE = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>xwait console</title>
<style>
  :root { --fg:#1d2430; --muted:#5b6675; --line:#d8dde4; --accent:#1f5fbf; --bad:#a4161a;
          --ok:#1b7f3b; --bg:#f7f8fa; font-family: system-ui, sans-serif; color: var(--fg); }
  body { margin: 0; background: var(--bg); }
  header { background: #1d2430; color: #fff; padding: .6rem 1rem; display: flex;
           align-items: center; gap: 1rem; flex-wrap: wrap; }
  header h1 { font-size: 1.1rem; margin: 0 1rem 0 0; }
  header label { font-size: .85rem; }
  main { display: grid; grid-template-columns: minmax(28rem, 1fr) minmax(24rem, 1fr);
         gap: 1rem; padding: 1rem; }
  section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: .8rem; }
  section.wide { grid-column: 1 / -1; }
  h2 { font-size: 1rem; margin: 0 0 .6rem; }
  table { border-collapse: collapse; width: 100%; font-size: .85rem; }
  th, td { text-align: left; padding: .3rem .4rem; border-bottom: 1px solid var(--line);
           vertical-align: top; }
  th { color: var(--muted); font-weight: 600; }
  code, .mono { font-family: ui-monospace, monospace; font-size: .8rem; word-break: break-all; }
  button { font: inherit; font-size: .85rem; padding: .25rem .6rem; border-radius: 4px;
           border: 1px solid var(--accent); background: #fff; color: var(--accent);
           cursor: pointer; }
  button.primary { background: var(--accent); color: #fff; }
  button:focus-visible, input:focus-visible, select:focus-visible, textarea:focus-visible {
    outline: 2px solid var(--accent); outline-offset: 1px; }
  button.link { border: none; padding: 0; text-decoration: underline; background: none; }
  input, select, textarea { font: inherit; font-size: .85rem; padding: .2rem .3rem; }
  textarea { width: 100%; box-sizing: border-box; min-height: 2.5rem; }
  .row { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; margin: .4rem 0; }
  .state { display: inline-block; padding: 0 .4rem; border-radius: 3px; background: #e8edf5; }
  .state-suspended { background: #fff1c2; } .state-in_review { background: #fde2e1; }
  .state-done { background: #dff3e4; }
  #error { color: #fff; background: var(--bad); padding: .5rem 1rem; margin: 0; }
  #message { color: #fff; background: var(--ok); padding: .5rem 1rem; margin: 0; }
  #error:empty, #message:empty { display: none; }
  dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem .8rem; margin: 0;
       font-size: .85rem; }
  dt { color: var(--muted); }
  ol.timeline { list-style: none; margin: .4rem 0; padding: 0 0 0 1rem;
                border-left: 2px solid var(--line); font-size: .85rem; }
  ol.timeline li { position: relative; margin: 0 0 .5rem; }
  ol.timeline li::before { content: ""; position: absolute; left: -1.38rem; top: .35rem;
                           width: .6rem; height: .6rem; border-radius: 50%;
                           background: var(--accent); }
  ol.timeline li.future::before { background: #fff; border: 2px solid var(--muted);
                                  width: .4rem; height: .4rem; }
  ol.timeline time { color: var(--muted); margin-right: .5rem; }
  .muted { color: var(--muted); }
  fieldset { border: 1px solid var(--line); border-radius: 4px; margin: .6rem 0; }
</style>
</head>
<body>
<header>
  <h1>xwait console</h1>
  <label for="token">Operator token</label>
  <input id="token" type="password" autocomplete="off" size="24"
         aria-describedby="token-help">
  <button id="save-token" type="button">Use token</button>
  <span id="token-help">Commands need the worker's XWAIT_CONSOLE_TOKEN;
    kept in this tab only.</span>
</header>
<p id="error" role="alert" aria-live="assertive"></p>
<p id="message" role="status" aria-live="polite"></p>
<main>
  <section aria-labelledby="waits-h">
    <h2 id="waits-h">Parked waits, by next due time</h2>
    <form id="filters" class="row">
      <label>State <select id="f-state">
        <option value="">not done</option><option>parked</option><option>in_review</option>
        <option>suspended</option><option>done</option></select></label>
      <label>Definition <input id="f-definition" size="12"></label>
      <label>Tenant <input id="f-tenant" size="10"></label>
      <button id="refresh" class="primary" type="submit">Refresh</button>
    </form>
    <p id="list-info" class="muted"></p>
    <table>
      <thead><tr><th scope="col">Key</th><th scope="col">State</th>
        <th scope="col">Definition</th><th scope="col">Tenant</th>
        <th scope="col">Next due</th></tr></thead>
      <tbody id="waits"></tbody>
    </table>
  </section>
  <section id="detail" aria-labelledby="detail-h">
    <h2 id="detail-h">Wait</h2>
    <p id="detail-empty" class="muted">Open a wait from the list, or by key:</p>
    <form id="open-form" class="row">
      <label for="open-key">Key</label><input id="open-key" size="34">
      <button type="submit">Open</button>
    </form>
    <div id="detail-body" hidden>
      <dl id="facts"></dl>
      <fieldset>
        <legend>Commands</legend>
        <div class="row">
          <label for="cmd-reason">Reason</label>
          <input id="cmd-reason" size="28" value="operator request">
        </div>
        <div class="row">
          <button id="btn-suspend" type="button">Suspend</button>
          <button id="btn-resume" type="button">Resume</button>
          <button id="btn-cancel" type="button">Cancel</button>
          <button id="btn-reload" type="button">Reload</button>
        </div>
        <label for="deliver-data">Deliver a reply (JSON)</label>
        <textarea id="deliver-data">{"decision": "approved"}</textarea>
        <div class="row"><button id="btn-deliver" type="button">Deliver</button></div>
      </fieldset>
      <h3>Trace</h3>
      <ol id="timeline" class="timeline"></ol>
    </div>
  </section>
  <section class="wide" aria-labelledby="review-h">
    <h2 id="review-h">Review queue</h2>
    <div class="row"><button id="review-refresh" type="button">Refresh review queue</button></div>
    <h3>Waits in review</h3>
    <table>
      <thead><tr><th scope="col">Key</th><th scope="col">Definition</th>
        <th scope="col">Issue</th><th scope="col">Decision</th></tr></thead>
      <tbody id="in-review"></tbody>
    </table>
    <h3>Rejected records</h3>
    <p id="rejected-info" class="muted"></p>
    <table>
      <thead><tr><th scope="col">When</th><th scope="col">Reason</th><th scope="col">Key</th>
        <th scope="col">From</th><th scope="col">Detail</th></tr></thead>
      <tbody id="rejected"></tbody>
    </table>
  </section>
</main>
<script>
"use strict";
const API = "/xwait/api";
const $ = (id) => document.getElementById(id);
let current = null;
const reviewDrafts = new Map();

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e[k] = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c ?? ""));
  return e;
}
const fmt = (ms) => ms == null ? "" : new Date(ms).toISOString().replace("T", " ").replace("Z", "");
function span(s) {
  // The two largest units: "3 d 4 h", "12 min 5 s", "40 s".
  const units = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]];
  const parts = [];
  for (const [name, size] of units) {
    if (s >= size || (name === "s" && parts.length === 0)) {
      parts.push(`${Math.floor(s / size)} ${name}`);
      s %= size;
    }
    if (parts.length === 2) break;
  }
  return parts.join(" ");
}
function after(ms) {
  // Time since the wait parked: tenths of a second while short, units after.
  return ms < 60000 ? `+${(ms / 1000).toFixed(1)} s` : `+${span(Math.round(ms / 1000))}`;
}
function rel(ms) {
  if (ms == null) return "-";
  const s = Math.round((ms - Date.now()) / 1000);
  return s >= 0 ? `in ${span(s)}` : `${span(-s)} ago`;
}
function say(text) { $("error").textContent = ""; $("message").textContent = text; }
function fail(text) { $("message").textContent = ""; $("error").textContent = text; }

async function call(method, path, body) {
  const headers = {"Accept": "application/json"};
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    const token = sessionStorage.getItem("xwait.token") || "";
    if (token) headers["Authorization"] = "Bearer " + token;
  }
  let resp;
  try {
    resp = await fetch(API + path, {method, headers,
                                    body: body === undefined ? undefined : JSON.stringify(body)});
  } catch (e) { throw new Error("the worker did not answer: " + e.message); }
  let data = null;
  try { data = await resp.json(); } catch (e) { data = null; }
  if (!resp.ok) {
    const msg = (data && data.error) || resp.statusText;
    const err = new Error(`${resp.status}: ${msg}`); err.status = resp.status; throw err;
  }
  return data;
}

async function loadList() {
  const q = new URLSearchParams();
  for (const [id, name] of [["f-state", "state"], ["f-definition", "definition"],
                            ["f-tenant", "tenant"]]) {
    if ($(id).value) q.set(name, $(id).value);
  }
  try {
    const data = await call("GET", "/waits?" + q.toString());
    const body = $("waits"); body.replaceChildren();
    for (const w of data.waits) {
      body.append(el("tr", {"data-key": w.key},
        el("td", {}, el("button", {"class": "link mono open-wait", type: "button",
                                   onclick: () => openWait(w.key)}, w.key)),
        el("td", {}, el("span", {"class": "state state-" + w.state}, w.state)),
        el("td", {}, w.definition), el("td", {}, w.tenant || ""),
        el("td", {title: fmt(w.nextDueAt)}, rel(w.nextDueAt))));
    }
    $("list-info").textContent = `${data.count} wait(s) from ${data.workers.length} worker(s)` +
      (data.complete ? "" : `; not answering: ${data.unavailable.join(", ")}`);
  } catch (e) { fail("List failed: " + e.message); }
}

function fact(dl, name, value) {
  dl.append(el("dt", {}, name), el("dd", {"data-field": name}, value ?? "-"));
}

function render(w) {
  const dl = $("facts"); dl.replaceChildren();
  fact(dl, "Key", el("code", {}, w.key));
  fact(dl, "State", el("span", {id: "d-state", "class": "state state-" + w.state}, w.state));
  fact(dl, "Definition", w.definition); fact(dl, "Tenant", w.tenant);
  fact(dl, "Parked at", fmt(w.parkedAt));
  fact(dl, "Timers", w.timers.length ? w.timers.map(
    (t) => `${t.kind} due ${fmt(t.dueAt)} (${rel(t.dueAt)})`).join("; ") : "none armed");
  if (w.suspension) {
    const s = w.suspension;
    fact(dl, "Suspended", `since ${fmt(s.at)}, reason: ${s.reason || "-"}, back to ` +
         `${s.resumeTo}` + (s.remaining.length ? "; left: " + s.remaining.map(
           (r) => `${r.kind} ${Math.round(r.ms / 1000)} s`).join(", ") : ""));
  }
  fact(dl, "Reminders sent", String(w.remindersSent));
  fact(dl, "Escalation level", String(w.escalationLevel));
  if (w.held.length) fact(dl, "Held replies", w.held.map((h) => h.responseData).join(" | "));
  if (w.validationIssue) fact(dl, "Validation issue", w.validationIssue);
  if (w.responseData) fact(dl, "Response", el("code", {}, w.responseData));
  if (w.outcome) {
    fact(dl, "Outcome", `${w.outcome} (${w.reason}) at ${fmt(w.endedAt)}`);
    fact(dl, "Note", "A finished wait keeps only what recognises late replies; its trace " +
         "and data went out with its Outcome record (outcomes topic).");
  }
  if (w.reviewOutcome) fact(dl, "Review", `${w.reviewOutcome}: ${w.reviewNote || ""}`);
  fact(dl, "Worker", w.worker);
  const tl = $("timeline"); tl.replaceChildren();
  w.trace.forEach((t, i) => {
    if (i === 4 && w.traceDropped) tl.append(el("li", {"class": "muted"},
                                                `… ${w.traceDropped} entries not kept …`));
    tl.append(el("li", {},
      el("time", {datetime: new Date(t.at).toISOString()},
         after(t.at - w.parkedAt)),
      el("strong", {}, t.event), " ", t.detail || ""));
  });
  for (const t of w.timers) {
    tl.append(el("li", {"class": "future"},
      el("time", {datetime: new Date(t.dueAt).toISOString()},
         after(t.dueAt - w.parkedAt)),
      el("em", {}, `${t.kind} due`)));
  }
  const done = w.state === "done";
  $("btn-suspend").disabled = done || w.state === "suspended";
  $("btn-resume").disabled = w.state !== "suspended";
  $("btn-cancel").disabled = done; $("btn-deliver").disabled = done;
}

async function openWait(key) {
  current = key; $("open-key").value = key;
  try {
    const w = await call("GET", "/waits/" + encodeURIComponent(key));
    $("detail-empty").hidden = true; $("detail-body").hidden = false;
    render(w);
  } catch (e) {
    fail(`Wait ${key}: ${e.message}`);
  }
}

async function command(action, body) {
  if (!current) return;
  try {
    await call("POST", `/waits/${encodeURIComponent(current)}/${action}`, body);
    say(`${action} accepted for ${current}; it takes effect when the worker processes it`);
    for (const ms of [500, 1500, 3000]) setTimeout(() => { openWait(current); loadList(); }, ms);
  } catch (e) { fail(`${action} refused: ${e.message}`); }
}

async function loadReview() {
  try {
    const data = await call("GET", "/review");
    const body = $("in-review"); body.replaceChildren();
    for (const w of data.inReview) {
      const note = el("input", {"aria-label": "Review note for " + w.key, size: "18",
                                "class": "review-note", placeholder: "note"});
      const fix = el("input", {"aria-label": "Corrected data for " + w.key, size: "22",
                               "class": "review-data", placeholder: '{"decision": "approved"}'});
      // What the operator typed survives a refresh of the queue.
      const drafts = reviewDrafts.get(w.key) || {note: "", fix: ""};
      reviewDrafts.set(w.key, drafts);
      note.value = drafts.note; fix.value = drafts.fix;
      note.oninput = () => { drafts.note = note.value; };
      fix.oninput = () => { drafts.fix = fix.value; };
      const decide = (outcome) => async () => {
        if (!note.value.trim()) { fail("A review needs a note"); return; }
        const payload = {outcome, note: note.value};
        if (outcome === "Submit Correction") payload.responseData = fix.value;
        current = w.key;
        await command("review", payload);
        setTimeout(loadReview, 1500);
      };
      body.append(el("tr", {"data-key": w.key},
        el("td", {}, el("button", {"class": "link mono", type: "button",
                                   onclick: () => openWait(w.key)}, w.key)),
        el("td", {}, w.definition), el("td", {"class": "issue"}, ""),
        el("td", {}, note, " ", el("button", {type: "button", "class": "review-accept",
                                              onclick: decide("Accept")}, "Accept"),
           " ", fix, " ", el("button", {type: "button", "class": "review-correct",
                                        onclick: decide("Submit Correction")},
                             "Submit Correction"))));
      call("GET", "/waits/" + encodeURIComponent(w.key)).then((s) => {
        body.querySelector(`tr[data-key="${w.key}"] .issue`).textContent =
          s.validationIssue || "";
      }).catch(() => {});
    }
    const rej = $("rejected"); rej.replaceChildren();
    for (const r of data.rejected) {
      rej.append(el("tr", {},
        el("td", {}, fmt(r.rejectedAt)), el("td", {}, r.reason),
        el("td", {"class": "mono"}, r.key || ""),
        el("td", {"class": "mono"}, `${r.topic || ""} ${r.partition ?? ""}@${r.offset ?? ""}`),
        el("td", {}, r.detail || "")));
    }
    $("rejected-info").textContent = data.rejectedError ||
      `${data.rejected.length} most recent rejected record(s)`;
  } catch (e) { fail("Review queue failed: " + e.message); }
}

$("token").value = sessionStorage.getItem("xwait.token") || "";
$("save-token").onclick = () => {
  sessionStorage.setItem("xwait.token", $("token").value.trim());
  say($("token").value.trim() ? "Token set for this tab" : "Token cleared");
};
$("filters").onsubmit = (e) => { e.preventDefault(); loadList(); };
$("open-form").onsubmit = (e) => {
  e.preventDefault(); if ($("open-key").value) openWait($("open-key").value.trim());
};
$("btn-suspend").onclick = () => command("suspend", {reason: $("cmd-reason").value});
$("btn-resume").onclick = () => command("resume", {reason: $("cmd-reason").value});
$("btn-cancel").onclick = () => command("cancel", {reason: $("cmd-reason").value});
$("btn-reload").onclick = () => openWait(current);
$("btn-deliver").onclick = () => command("deliver", {responseData: $("deliver-data").value,
                                                    reason: $("cmd-reason").value});
$("review-refresh").onclick = loadReview;
loadList(); loadReview();
</script>
</body>
</html>
"""
