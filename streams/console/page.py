"""The ops console: one HTML page with a little vanilla JavaScript (no build, no CDN).

It only calls the JSON API of `streams.console.api`.  The access token the
operator types is kept in the tab's sessionStorage and sent as a Bearer
header with every request (reads need it too when the worker has one); the
operator's name is asked once, kept in localStorage, and sent with every
command so the trace says who acted.

The page runs under a Content-Security-Policy that allows exactly its own
inline script and style (by hash, `PAGE_CSP`) and the files its own worker
serves (the vendored bpmn-js viewer and its stylesheets, `'self'`), nothing
loaded from elsewhere, no framing: data shown is always inserted as text,
never as HTML (the diagram's count badges are built as elements too).
"""

from __future__ import annotations

import base64
import hashlib

from streams.console.diagram import STATIC_PREFIX

STYLE = r"""
  :root { --fg:#1d2430; --muted:#5b6675; --line:#d8dde4; --accent:#1f5fbf; --bad:#a4161a;
          --ok:#1b7f3b; --bg:#f7f8fa; font-family: system-ui, sans-serif; color: var(--fg); }
  body { margin: 0; background: var(--bg); }
  header { background: #1d2430; color: #fff; padding: .6rem 1rem; display: flex;
           align-items: center; gap: .6rem 1rem; flex-wrap: wrap; }
  header h1 { font-size: 1.1rem; margin: 0 1rem 0 0; }
  header label { font-size: .85rem; }
  main { display: grid; grid-template-columns: minmax(0, 1.2fr) minmax(0, 1fr);
         gap: 1rem; padding: 1rem; }
  @media (max-width: 1000px) { main { grid-template-columns: minmax(0, 1fr); padding: .5rem; } }
  section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: .8rem;
            min-width: 0; }
  section.wide { grid-column: 1 / -1; }
  .scroll { overflow-x: auto; }
  h2 { font-size: 1rem; margin: 0 0 .6rem; }
  h3 { font-size: .95rem; margin: .8rem 0 .4rem; }
  table { border-collapse: collapse; width: 100%; font-size: .85rem; }
  th, td { text-align: left; padding: .3rem .4rem; border-bottom: 1px solid var(--line);
           vertical-align: top; }
  th { color: var(--muted); font-weight: 600; }
  tr.open td { background: #eef3fb; }
  code, .mono { font-family: ui-monospace, monospace; font-size: .8rem; word-break: break-all; }
  pre { white-space: pre-wrap; word-break: break-all; margin: 0; font-size: .8rem;
        background: #f3f5f8; padding: .3rem .4rem; border-radius: 3px; max-height: 12rem;
        overflow: auto; }
  button { font: inherit; font-size: .85rem; padding: .25rem .6rem; border-radius: 4px;
           border: 1px solid var(--accent); background: #fff; color: var(--accent);
           cursor: pointer; }
  button.primary { background: var(--accent); color: #fff; }
  button.danger { border-color: var(--bad); color: var(--bad); }
  button.danger.primary { background: var(--bad); color: #fff; }
  button:disabled, button:disabled:hover { background: #eceef1; color: #8a939f;
           border-color: #c9ced6; cursor: not-allowed; opacity: .75; }
  button:focus-visible, input:focus-visible, select:focus-visible, textarea:focus-visible {
    outline: 2px solid var(--accent); outline-offset: 1px; }
  button.link { border: none; padding: 0; text-decoration: underline; background: none;
                text-align: left; }
  input, select, textarea { font: inherit; font-size: .85rem; padding: .2rem .3rem;
                            max-width: 100%; box-sizing: border-box; }
  textarea { width: 100%; min-height: 2.5rem; }
  .row { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; margin: .4rem 0; }
  .state { display: inline-block; padding: 0 .4rem; border-radius: 3px; background: #e8edf5; }
  .state-suspended { background: #fff1c2; } .state-in_review { background: #fde2e1; }
  .state-done { background: #dff3e4; }
  #error { color: #fff; background: var(--bad); padding: .5rem 1rem; margin: 0; }
  #message { color: #fff; background: var(--ok); padding: .5rem 1rem; margin: 0; }
  #error:empty, #message:empty { display: none; }
  dl { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: .2rem .8rem;
       margin: 0; font-size: .85rem; }
  dt { color: var(--muted); }
  dd { margin: 0; min-width: 0; }
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
  fieldset { border: 1px solid var(--line); border-radius: 4px; margin: .6rem 0; min-width: 0; }
  dialog { border: 1px solid var(--line); border-radius: 6px; max-width: 28rem; }
  dialog::backdrop { background: rgba(20, 26, 36, .45); }
  #diagram { height: 440px; border: 1px solid var(--line); border-radius: 4px;
             background: #fff; position: relative; overflow: hidden; }
  .badges { display: flex; flex-direction: column; gap: 2px; align-items: flex-start; }
  .badge { font-size: .72rem; line-height: 1.1; padding: 1px 5px; border-radius: 9px;
           border: 1px solid var(--accent); background: var(--accent); color: #fff;
           white-space: nowrap; }
  .badge.zero { background: #fff; color: var(--muted); border-color: var(--line); }
  .badge.outcome { background: var(--ok); border-color: var(--ok); }
  .badge.outcome.zero { background: #fff; }
"""

BODY = r"""
<header>
  <h1>xwait console</h1>
  <label for="token">Access token</label>
  <input id="token" type="password" autocomplete="off" size="18"
         aria-describedby="token-help">
  <button id="save-token" type="button">Use token</button>
  <label for="operator">Operator</label>
  <input id="operator" autocomplete="name" size="12" placeholder="your name">
  <label><input id="auto" type="checkbox"> Auto-refresh</label>
  <span id="token-help">Reads and commands need the worker's token; kept in this tab only.</span>
</header>
<p id="error" role="alert" aria-live="assertive"></p>
<p id="message" role="status" aria-live="polite"></p>
<main>
  <section class="wide" aria-labelledby="shape-h">
    <h2 id="shape-h">Definitions</h2>
    <div class="row">
      <label for="def-select">Definition</label> <select id="def-select"></select>
      <button id="diagram-refresh" type="button">Refresh counts</button>
      <span class="muted">Counts now (parked, in review, suspended) and over the last hour
        (actions, outcomes). Click a node or a count to list its waits.</span>
    </div>
    <div id="diagram" role="img" aria-label="BPMN diagram of the definition"></div>
    <p id="diagram-info" class="muted"></p>
  </section>
  <section aria-labelledby="waits-h">
    <h2 id="waits-h">Waits</h2>
    <form id="filters">
      <div class="row">
        <label>Key starts with <input id="f-key" size="14"></label>
        <label>State <select id="f-state">
          <option value="">not done</option><option>parked</option><option>in_review</option>
          <option>suspended</option><option>done</option><option value="all">any</option>
        </select></label>
        <label>Outcome <select id="f-outcome">
          <option value="">any</option><option>RECEIVED</option><option>ESCALATED</option>
          <option>CANCELLED</option></select></label>
      </div>
      <div class="row">
        <label>Definition <input id="f-definition" size="12"></label>
        <label>Tenant <input id="f-tenant" size="10"></label>
      </div>
      <div class="row">
        <label>Parked from <input id="f-from" type="datetime-local"></label>
        <label>to <input id="f-to" type="datetime-local"></label>
        <label>Per page <select id="f-limit"><option>10</option><option>25</option>
          <option selected>100</option></select></label>
        <button id="refresh" class="primary" type="submit">Search</button>
        <button id="clear-filters" type="button">Clear</button>
      </div>
    </form>
    <p id="list-info" class="muted"></p>
    <div class="scroll">
    <table>
      <thead><tr><th scope="col">Key</th><th scope="col">State</th>
        <th scope="col">Definition</th><th scope="col">Tenant</th>
        <th scope="col">Stage</th><th scope="col">Next due / ended</th></tr></thead>
      <tbody id="waits"></tbody>
    </table>
    </div>
    <div class="row">
      <button id="page-first" type="button">First page</button>
      <button id="page-next" type="button">Next page</button>
      <span id="page-info" class="muted"></span>
    </div>
  </section>
  <section id="detail" aria-labelledby="detail-h">
    <h2 id="detail-h">Wait</h2>
    <p id="detail-empty" class="muted">Open a wait from the list, or by key:</p>
    <form id="open-form" class="row">
      <label for="open-key">Key</label><input id="open-key" size="30">
      <button type="submit">Open</button>
    </form>
    <div id="detail-body" hidden>
      <dl id="facts"></dl>
      <fieldset id="commands">
        <legend>Commands</legend>
        <div class="row">
          <label for="cmd-reason">Reason</label>
          <input id="cmd-reason" size="26" value="operator request">
        </div>
        <div class="row">
          <button id="btn-suspend" type="button">Suspend</button>
          <button id="btn-resume" type="button">Resume</button>
          <button id="btn-cancel" class="danger" type="button">Cancel…</button>
          <button id="btn-reload" type="button">Reload</button>
        </div>
        <div class="row">
          <label for="resched-mode">Deadline</label>
          <select id="resched-mode">
            <option value="deadline">set to, from now</option>
            <option value="moveBy">move by</option></select>
          <input id="resched-value" size="9" value="PT2H" aria-label="ISO 8601 duration">
          <button id="btn-reschedule" type="button">Reschedule</button>
          <span class="muted">PT2H, P1D; move by -PT30M to bring it forward</span>
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
    <div class="scroll">
    <table>
      <thead><tr><th scope="col">Key</th><th scope="col">Definition</th>
        <th scope="col">Issue</th><th scope="col">Decision</th></tr></thead>
      <tbody id="in-review"></tbody>
    </table>
    </div>
    <h3>Rejected records</h3>
    <p id="rejected-info" class="muted"></p>
    <div class="scroll">
    <table>
      <thead><tr><th scope="col">When</th><th scope="col">Reason</th><th scope="col">Key</th>
        <th scope="col">From</th><th scope="col">Detail</th></tr></thead>
      <tbody id="rejected"></tbody>
    </table>
    </div>
  </section>
</main>
<dialog id="confirm" aria-labelledby="confirm-h">
  <form method="dialog">
    <h2 id="confirm-h">Cancel this wait?</h2>
    <p id="confirm-text"></p>
    <div class="row">
      <button id="confirm-yes" class="danger primary" value="yes">Cancel the wait</button>
      <button id="confirm-no" value="no" autofocus>Keep it</button>
    </div>
  </form>
</dialog>
<dialog id="who" aria-labelledby="who-h">
  <form method="dialog">
    <h2 id="who-h">Who are you?</h2>
    <p>Your name goes with every command into the wait's trace and outcome.</p>
    <div class="row"><label for="who-name">Name</label><input id="who-name" size="20"></div>
    <div class="row"><button id="who-ok" class="primary" value="ok">Continue</button>
      <button value="no">Not now</button></div>
  </form>
</dialog>
"""

SCRIPT = r"""
"use strict";
const API = "/xwait/api";
const $ = (id) => document.getElementById(id);
let current = null;
let pages = [null];           // cursors of the pages seen: pages[i] is what page i starts after
let nextCursor = null;
let autoTimer = null;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e[k] = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c ?? ""));
  return e;
}
function span(s) {
  // The two largest units: "3 d 4 h", "12 min 5 s", "40 s".
  const units = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]];
  const parts = [];
  for (const [name, size] of units) {
    if (s >= size || (name === "s" && parts.length === 0)) {
      parts.push(`${Math.floor(s / size)} ${name}`);
      s %= size;
    } else if (parts.length) break;
    if (parts.length === 2) break;
  }
  return parts.join(" ");
}
const duration = (ms) => ms < 0 ? "-" + span(Math.round(-ms / 1000)) : span(Math.round(ms / 1000));
const dateFmt = new Intl.DateTimeFormat(undefined, {year: "numeric", month: "short",
  day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit"});
function when(ms) {
  if (ms == null) return "-";
  return dateFmt.format(new Date(ms));
}
function rel(ms) {
  if (ms == null) return "-";
  const d = ms - Date.now();
  return d >= 0 ? `in ${duration(d)}` : `${duration(-d)} ago`;
}
const whenRel = (ms) => ms == null ? "-" : `${when(ms)} (${rel(ms)})`;
function timeEl(ms, text) {
  return el("time", {datetime: new Date(ms).toISOString(), title: new Date(ms).toISOString()},
            text ?? when(ms));
}
function say(text) { $("error").textContent = ""; $("message").textContent = text; }
function fail(text) { $("message").textContent = ""; $("error").textContent = text; }

async function call(method, path, body) {
  const headers = {"Accept": "application/json"};
  const token = sessionStorage.getItem("xwait.token") || "";
  if (token) headers["Authorization"] = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let resp;
  try {
    resp = await fetch(API + path, {method, headers, cache: "no-store",
                                    body: body === undefined ? undefined : JSON.stringify(body)});
  } catch (e) { throw new Error("the worker did not answer: " + e.message); }
  let data = null;
  try { data = await resp.json(); } catch (e) { data = null; }
  if (!resp.ok) {
    let msg = (data && data.error) || resp.statusText;
    if (resp.status === 401) msg += " (enter the access token at the top)";
    const err = new Error(`${resp.status}: ${msg}`); err.status = resp.status; throw err;
  }
  return data;
}

function stageText(w) {
  const s = w.stage;
  if (!s) return "";
  let text = s.count > 1 ? `${s.index + 1} of ${s.count}: ${s.name}` : (s.party || "");
  if (s.count > 1 && s.party) text += ` (${s.party})`;
  if (s.escalatedTo) text += `, escalated to ${s.escalatedTo}`;
  return text;
}

function query() {
  const q = new URLSearchParams();
  for (const [id, name] of [["f-state", "state"], ["f-definition", "definition"],
                            ["f-tenant", "tenant"], ["f-key", "key"],
                            ["f-outcome", "outcome"]]) {
    if ($(id).value.trim()) q.set(name, $(id).value.trim());
  }
  if ($("f-outcome").value && !$("f-state").value) q.set("state", "done");
  for (const [id, name] of [["f-from", "parkedFrom"], ["f-to", "parkedTo"]]) {
    if ($(id).value) q.set(name, String(new Date($(id).value).getTime()));
  }
  return q;
}

async function loadList(page) {
  if (page === undefined) page = pages.length - 1;
  const q = query();
  q.set("limit", $("f-limit").value);
  if (pages[page]) q.set("after", pages[page]);
  try {
    const data = await call("GET", "/waits?" + q.toString());
    const body = $("waits"); body.replaceChildren();
    for (const w of data.waits) {
      const ended = w.state === "done";
      const due = ended ? el("span", {}, `${w.outcome} (${w.reason}) `, timeEl(w.endedAt))
                        : (w.nextDueAt == null ? el("span", {"class": "muted"}, "paused")
                           : el("span", {}, timeEl(w.nextDueAt, rel(w.nextDueAt))));
      body.append(el("tr", {"data-key": w.key, "class": w.key === current ? "open" : ""},
        el("td", {}, el("button", {"class": "link mono open-wait", type: "button",
                                   onclick: () => openWait(w.key)}, w.key)),
        el("td", {}, el("span", {"class": "state state-" + w.state}, w.state)),
        el("td", {}, w.definition), el("td", {}, w.tenant || ""),
        el("td", {"class": "stage"}, stageText(w)), el("td", {}, due)));
    }
    nextCursor = data.next;
    pages = pages.slice(0, page + 1);
    $("page-next").disabled = !nextCursor;
    $("page-first").disabled = page === 0;
    $("page-info").textContent = `page ${page + 1}`;
    $("list-info").textContent = `${data.count} wait(s) from ${data.workers.length} worker(s)` +
      (data.complete ? "" : `; not answering: ${data.unavailable.join(", ")}`);
  } catch (e) { fail("List failed: " + e.message); }
}

function fact(dl, name, value) {
  dl.append(el("dt", {}, name), el("dd", {"data-field": name}, value ?? "-"));
}

function render(w) {
  const dl = $("facts"); dl.replaceChildren();
  const done = w.state === "done";
  fact(dl, "Key", el("code", {}, w.key));
  fact(dl, "State", el("span", {id: "d-state", "class": "state state-" + w.state}, w.state));
  fact(dl, "Definition", w.definition); fact(dl, "Tenant", w.tenant);
  if (w.stage && stageText(w)) fact(dl, w.stage.count > 1 ? "Stage" : "Party", stageText(w));
  if (w.parties && w.parties.length) fact(dl, "Parties", w.parties.join(", "));
  fact(dl, "Parked", timeEl(w.parkedAt, whenRel(w.parkedAt)));
  if (done) {
    fact(dl, "Outcome", `${w.outcome} (${w.reason})`);
    fact(dl, "Ended", el("span", {}, timeEl(w.endedAt),
                         ` after ${duration(w.endedAt - w.parkedAt)}`));
    if (w.operator || w.operatorReason) {
      fact(dl, "By operator", `${w.operator || "-"}: ${w.operatorReason || "no reason given"}`);
    }
    fact(dl, "Kept until", timeEl(w.purgeAt, whenRel(w.purgeAt)));
  } else {
    fact(dl, "Timers", w.timers.length ? el("span", {}, ...w.timers.map((t, i) => el("span", {},
      i ? "; " : "", `${t.kind} due `, timeEl(t.dueAt), ` (${rel(t.dueAt)})`))) : "none armed");
  }
  if (w.suspension) {
    const s = w.suspension;
    fact(dl, "Suspended", el("span", {}, "since ", timeEl(s.at),
         ` by ${s.operator || "-"}, reason: ${s.reason || "-"}; back to ${s.resumeTo}` +
         (s.remaining.length ? "; left on resume: " + s.remaining.map(
           (r) => `${r.kind} ${duration(r.ms)}`).join(", ") : "")));
  }
  fact(dl, "Reminders sent", String(w.remindersSent));
  fact(dl, "Escalation level", String(w.escalationLevel));
  fact(dl, "Payload", w.payload ? el("pre", {"class": "payload"}, w.payload)
                      : (w.payloadDropped ? "not kept (over 64 KiB; it went out with the " +
                                            "SEND_REQUEST action)" : "none"));
  if (w.held.length) fact(dl, "Held replies", el("pre", {}, w.held.map(
    (h) => `${h.channel}: ${h.responseData}`).join("\n")));
  if (w.validationIssue) fact(dl, "Validation issue", w.validationIssue);
  if (w.responseData) {
    fact(dl, "Response", el("pre", {"class": "response"}, w.responseData));
    fact(dl, "Valid as it came", w.responseValid ? "yes" : "no");
  }
  if (w.reviewOutcome) fact(dl, "Review", `${w.reviewOutcome}: ${w.reviewNote || ""}`);
  fact(dl, "Worker", `${w.worker} (partition ${w.partition})`);
  const tl = $("timeline"); tl.replaceChildren();
  for (const t of w.trace) {
    tl.append(el("li", {"class": t.event === "trace_truncated" ? "muted" : ""},
      timeEl(t.at, `${when(t.at)} (+${duration(t.at - w.parkedAt)})`),
      el("strong", {}, t.event), " ", t.detail || ""));
  }
  for (const t of w.timers) {
    tl.append(el("li", {"class": "future"}, timeEl(t.dueAt, `${when(t.dueAt)} (${rel(t.dueAt)})`),
      el("em", {}, `${t.kind} due`)));
  }
  const deadline = (w.timers || []).some((t) => t.kind === "deadline") ||
    (w.suspension && w.suspension.remaining.some((r) => r.kind === "deadline"));
  $("btn-suspend").disabled = done || w.state === "suspended";
  $("btn-resume").disabled = w.state !== "suspended";
  $("btn-cancel").disabled = done; $("btn-deliver").disabled = done || w.state === "in_review";
  $("btn-reschedule").disabled = done || w.state === "in_review" || !deadline;
  for (const tr of document.querySelectorAll("#waits tr")) {
    tr.className = tr.dataset.key === w.key ? "open" : "";
  }
}

function clearDetail() {
  $("detail-body").hidden = true; $("detail-empty").hidden = false;
  $("facts").replaceChildren(); $("timeline").replaceChildren();
}

async function openWait(key, quiet) {
  current = key; $("open-key").value = key;
  try {
    const w = await call("GET", "/waits/" + encodeURIComponent(key));
    if (current !== key) return;
    $("detail-empty").hidden = true; $("detail-body").hidden = false;
    render(w);
  } catch (e) {
    if (e.status === 404) { current = null; clearDetail(); }
    if (!quiet || e.status === 404) fail(`Wait ${key}: ${e.message}`);
  }
}

function askOperator() {
  return new Promise((resolve) => {
    const name = (localStorage.getItem("xwait.operator") || "").trim();
    if (name) { resolve(name); return; }
    const dlg = $("who");
    $("who-name").value = "";
    dlg.onclose = () => {
      const given = $("who-name").value.trim();
      if (dlg.returnValue === "ok" && given) {
        localStorage.setItem("xwait.operator", given); $("operator").value = given;
        resolve(given);
      } else resolve(null);
    };
    dlg.showModal();
  });
}

function confirmCancel(key) {
  return new Promise((resolve) => {
    const dlg = $("confirm");
    $("confirm-text").textContent = `Wait ${key} ends CANCELLED, for good. ` +
      `Reason: ${$("cmd-reason").value || "-"}`;
    dlg.onclose = () => resolve(dlg.returnValue === "yes");
    dlg.showModal();
  });
}

async function command(action, body, key) {
  key = key || current;
  if (!key) return;
  const operator = await askOperator();
  if (!operator) { fail(`${action} not sent: commands need your name`); return; }
  try {
    await call("POST", `/waits/${encodeURIComponent(key)}/${action}`, {...body, operator});
    say(`${action} accepted for ${key}; it takes effect when the worker processes it`);
    for (const ms of [500, 1500, 3000]) setTimeout(() => {
      if (current === key) openWait(key, true);
      loadList();
    }, ms);
  } catch (e) { fail(`${action} refused: ${e.message}`); }
}

function reviewRow(w) {
  const note = el("input", {"aria-label": "Review note for " + w.key, size: "18",
                            "class": "review-note", placeholder: "note"});
  const fix = el("input", {"aria-label": "Corrected data for " + w.key, size: "22",
                           "class": "review-data", placeholder: '{"decision": "approved"}'});
  const decide = (outcome) => async () => {
    if (!note.value.trim()) { fail("A review needs a note"); return; }
    const payload = {outcome, note: note.value};
    if (outcome === "Submit Correction") payload.responseData = fix.value;
    current = w.key;
    await command("review", payload, w.key);
    setTimeout(loadReview, 1500);
  };
  return el("tr", {"data-key": w.key},
    el("td", {}, el("button", {"class": "link mono", type: "button",
                               onclick: () => openWait(w.key)}, w.key)),
    el("td", {}, w.definition), el("td", {"class": "issue"}, ""),
    el("td", {}, note, " ", el("button", {type: "button", "class": "review-accept",
                                          onclick: decide("Accept")}, "Accept"),
       " ", fix, " ", el("button", {type: "button", "class": "review-correct",
                                    onclick: decide("Submit Correction")},
                         "Submit Correction")));
}

async function loadReview() {
  try {
    const data = await call("GET", "/review");
    const body = $("in-review");
    // A row already shown is kept, not rebuilt: a refresh must not take the
    // focus or the half-typed note away from an operator who is answering it.
    // Kept rows are not even moved: a node taken out of the page loses the focus.
    const wanted = new Set(data.inReview.map((w) => w.key));
    for (const r of [...body.querySelectorAll("tr")]) {
      if (!wanted.has(r.dataset.key)) r.remove();
    }
    const shown = new Set([...body.querySelectorAll("tr")].map((r) => r.dataset.key));
    for (const w of data.inReview) if (!shown.has(w.key)) body.append(reviewRow(w));
    for (const w of data.inReview) {
      call("GET", "/waits/" + encodeURIComponent(w.key)).then((s) => {
        const row = [...body.querySelectorAll("tr")].find((r) => r.dataset.key === w.key);
        if (row) row.querySelector(".issue").textContent = s.validationIssue || "";
      }).catch(() => {});
    }
    const rej = $("rejected"); rej.replaceChildren();
    for (const r of data.rejected) {
      rej.append(el("tr", {},
        el("td", {}, r.rejectedAt == null ? "-" : timeEl(r.rejectedAt)), el("td", {}, r.reason),
        el("td", {"class": "mono"}, r.key || ""),
        el("td", {"class": "mono"}, `${r.topic || ""} ${r.partition ?? ""}@${r.offset ?? ""}`),
        el("td", {}, r.detail || "")));
    }
    $("rejected-info").textContent = data.rejectedError ||
      `${data.rejected.length} most recent rejected record(s)`;
  } catch (e) { fail("Review queue failed: " + e.message); }
}

let viewer = null;
let diagramName = null;
let nodeLists = {};

async function loadDefinitions() {
  try {
    const data = await call("GET", "/definitions");
    const sel = $("def-select");
    const keep = sel.value;
    sel.replaceChildren(...data.definitions.map(
      (d) => el("option", {value: d.name}, `${d.name} (${d.variant})`)));
    if (keep && data.definitions.some((d) => d.name === keep)) sel.value = keep;
    if (sel.value) await loadDiagram(sel.value);
  } catch (e) { fail("Definitions failed: " + e.message); }
}

async function loadDiagram(name) {
  if (typeof BpmnJS === "undefined") {
    $("diagram-info").textContent = "The diagram viewer (bpmn-js) did not load.";
    return;
  }
  try {
    const data = await call("GET", "/definitions/" + encodeURIComponent(name));
    if (!viewer) {
      viewer = new BpmnJS({container: $("diagram")});
      viewer.get("eventBus").on("element.click", (e) => {
        if (diagramName && nodeLists[e.element.id]) listFor(diagramName, nodeLists[e.element.id]);
      });
    }
    if (diagramName !== name) {
      await viewer.importXML(data.bpmn);
      // The whole diagram, with room above its top row for the counts.
      const inner = viewer.get("canvas").viewbox().inner;
      viewer.get("canvas").viewbox({x: inner.x - 30, y: inner.y - 80,
                                    width: inner.width + 190, height: inner.height + 110});
      diagramName = name;
    }
    showCounts(data);
  } catch (e) { fail(`Diagram of ${name} failed: ` + e.message); }
}

function showCounts(data) {
  const overlays = viewer.get("overlays");
  overlays.clear();
  nodeLists = {};
  for (const [id, badges] of Object.entries(data.nodes)) {
    const box = el("div", {"class": "badges", "data-node": id});
    for (const b of badges) {
      const kind = b.list.outcome ? " outcome" : "";
      box.append(el("button", {type: "button", "class": "badge" + kind + (b.count ? "" : " zero"),
                               "data-label": b.label, title: `${b.count} ${b.label}`,
                               onclick: () => listFor(data.name, b.list)},
                    `${b.count} ${b.label}`));
    }
    const listed = badges.find((b) => Object.keys(b.list).length);
    nodeLists[id] = listed ? listed.list : {};
    overlays.add(id, "counts", {position: {top: -6 - 17 * badges.length, left: 0}, html: box});
  }
  const c = data.census;
  $("diagram-info").textContent = `${data.name}: ${c.parked} parked, ${c.in_review} in review, ` +
    `${c.suspended} suspended, ${c.done} finished and kept; ${data.cancelled} cancelled in ` +
    `the last hour; from ${data.workers.length} worker(s)` +
    (data.complete ? "" : `; not answering: ${data.unavailable.join(", ")}`);
}

function listFor(name, q) {
  $("filters").reset();
  $("f-definition").value = name;
  if (q.state) $("f-state").value = q.state;
  if (q.outcome) $("f-outcome").value = q.outcome;
  pages = [null]; loadList(0);
  say(`Waits of ${name}` + (q.state ? `, ${q.state}` : "") + (q.outcome ? `, ${q.outcome}` : ""));
}

function setAuto(on) {
  if (autoTimer) { clearInterval(autoTimer); autoTimer = null; }
  if (on) autoTimer = setInterval(() => {
    loadList(); if (current) openWait(current, true);
    if (diagramName) loadDiagram(diagramName);
  }, 5000);
}

$("token").value = sessionStorage.getItem("xwait.token") || "";
$("operator").value = localStorage.getItem("xwait.operator") || "";
$("save-token").onclick = () => {
  sessionStorage.setItem("xwait.token", $("token").value.trim());
  say($("token").value.trim() ? "Token set for this tab" : "Token cleared");
  pages = [null]; loadList(0); loadReview(); loadDefinitions();
};
$("operator").onchange = () => localStorage.setItem("xwait.operator", $("operator").value.trim());
$("auto").onchange = () => setAuto($("auto").checked);
$("filters").onsubmit = (e) => { e.preventDefault(); pages = [null]; loadList(0); };
$("clear-filters").onclick = () => {
  $("filters").reset(); pages = [null]; loadList(0);
};
$("page-next").onclick = () => { if (nextCursor) { pages.push(nextCursor); loadList(); } };
$("page-first").onclick = () => { pages = [null]; loadList(0); };
$("open-form").onsubmit = (e) => {
  e.preventDefault(); if ($("open-key").value.trim()) openWait($("open-key").value.trim());
};
$("btn-suspend").onclick = () => command("suspend", {reason: $("cmd-reason").value});
$("btn-resume").onclick = () => command("resume", {reason: $("cmd-reason").value});
$("btn-cancel").onclick = async () => {
  if (current && await confirmCancel(current)) command("cancel", {reason: $("cmd-reason").value});
};
$("btn-reload").onclick = () => openWait(current);
$("btn-reschedule").onclick = () => command("reschedule", {
  [$("resched-mode").value]: $("resched-value").value.trim(), reason: $("cmd-reason").value});
$("btn-deliver").onclick = () => command("deliver", {responseData: $("deliver-data").value,
                                                    reason: $("cmd-reason").value});
$("review-refresh").onclick = loadReview;
$("def-select").onchange = () => loadDiagram($("def-select").value);
$("diagram-refresh").onclick = () => { if (diagramName) loadDiagram(diagramName); };
$("page-next").disabled = true; $("page-first").disabled = true;
loadList(0); loadReview(); loadDefinitions();
"""


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


PAGE = (f'<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>xwait console</title>\n"
        f'<link rel="stylesheet" href="{STATIC_PREFIX}/diagram-js.css">\n'
        f'<link rel="stylesheet" href="{STATIC_PREFIX}/bpmn-js.css">\n'
        f"<style>{STYLE}</style>\n</head>\n<body>{BODY}"
        f'<script src="{STATIC_PREFIX}/bpmn-viewer.production.min.js"></script>\n'
        f"<script>{SCRIPT}</script>\n</body>\n</html>\n")

# Exactly this page's script and style run; it connects only to its own origin.
# 'self': the vendored bpmn-js viewer and its stylesheets, served by the worker itself.
PAGE_CSP = (f"default-src 'none'; script-src {_sha256(SCRIPT)} 'self'; "
            f"style-src {_sha256(STYLE)} 'self'; "
            "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'")

__all__ = ["PAGE", "PAGE_CSP"]
