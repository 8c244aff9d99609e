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

// The worker words the stage (streams/console/waits.py, stage_text): one text for the
// page and `xwait status`.
function stageText(w) {
  return (w.stage && w.stage.text) || "";
}

function query() {
  const q = new URLSearchParams();
  for (const [id, name] of [["f-state", "state"], ["f-definition", "definition"],
                            ["f-tenant", "tenant"], ["f-key", "key"],
                            ["f-outcome", "outcome"], ["f-reason", "reason"]]) {
    if ($(id).value.trim()) q.set(name, $(id).value.trim());
  }
  for (const [id, name] of [["f-from", "parkedFrom"], ["f-to", "parkedTo"],
                            ["f-ended-from", "endedFrom"], ["f-ended-to", "endedTo"]]) {
    if ($(id).value) q.set(name, String(new Date($(id).value).getTime()));
  }
  // Only finished waits have an outcome, a reason or an end.
  const ended = ["outcome", "reason", "endedFrom", "endedTo"].some((n) => q.has(n));
  if (ended && !$("f-state").value) q.set("state", "done");
  return q;
}

// Epoch ms as a datetime-local box's value, to the millisecond, in the browser's time
// zone (the box reads it back as the same instant: the list gets exactly the window).
function localInput(ms) {
  const d = new Date(Number(ms));
  const pad = (n, w) => String(n).padStart(w || 2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.` +
    `${pad(d.getMilliseconds(), 3)}`;
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

// Makes `key` the open wait.  A reason typed for one wait is never sent for
// another.  The Key box shows the open wait's key, but a refresh of the same
// wait leaves it alone: it may hold a key being typed.
function select(key) {
  if (key !== current) { $("cmd-reason").value = ""; $("open-key").value = key; }
  current = key;
}

async function openWait(key, quiet) {
  select(key);
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

// The Reason box belongs to the next command only: it is read when a command is
// sent and emptied once the worker took it, so that the trace of a later
// command (a reschedule after a suspend) never repeats an earlier reason.
function reason() {
  const text = $("cmd-reason").value.trim();
  return text || undefined;           // left out of the request when empty
}

async function command(action, body, key) {
  key = key || current;
  if (!key) return;
  if ((action === "suspend" || action === "cancel") && !body.reason) {
    fail(`${action} not sent: it needs a reason, which goes into the wait's trace`);
    $("cmd-reason").focus();
    return;
  }
  const operator = await askOperator();
  if (!operator) { fail(`${action} not sent: commands need your name`); return; }
  const before = await snapshot(key);
  try {
    await call("POST", `/waits/${encodeURIComponent(key)}/${action}`, {...body, operator});
    if ("reason" in body) $("cmd-reason").value = "";
    say(`${action} accepted for ${key}; it takes effect when the worker processes it`);
  } catch (e) { fail(`${action} refused: ${e.message}`); return; }
  await applied(key, before);
  refreshCounted(key);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// What a command changes in a wait: its state, or the last entry of its trace (the trace
// is bounded, so its length alone may not move).
async function snapshot(key) {
  try {
    const w = await call("GET", "/waits/" + encodeURIComponent(key));
    const last = w.trace.length ? w.trace[w.trace.length - 1] : null;
    return JSON.stringify([w.state, w.trace.length, w.traceDropped, last]);
  } catch (e) { return null; }
}

// A command is a record on Kafka: the worker applies it when it reads it, a moment
// after the 202.  Wait (up to 15 s) until the wait shows it, so that the refresh that
// follows counts it.
async function applied(key, before) {
  const until = Date.now() + 15000;
  while (Date.now() < until) {
    await sleep(300);
    const now = await snapshot(key);
    if (now !== null && now !== before) return;
  }
}

// Every view that counts waits, after a command: the list, the open wait, the review
// queue and the diagram's counts (no Refresh to press).
function refreshCounted(key) {
  if (current === key) openWait(key, true);
  loadList(); loadReview();
  if (diagramName) loadDiagram(diagramName);
}

// A bulk action: the filters of the list as the filter of `xwait cancel --where`
// (streams/client/where.py), so that the worker selects the waits the list shows.
function bulkWhere() {
  if (["f-outcome", "f-reason", "f-ended-from", "f-ended-to"].some((id) => $(id).value) ||
      $("f-state").value === "done") {
    throw new Error("it acts on waits not done: clear the done state and the outcome, " +
                    "reason and end filters");
  }
  const parts = [];
  for (const [id, name] of [["f-definition", "definition"], ["f-tenant", "tenant"],
                            ["f-key", "key"], ["f-state", "state"]]) {
    const value = $(id).value.trim();
    if (value.includes(",")) throw new Error(`a ${name} with a comma cannot be selected`);
    if (value) parts.push(`${name}=${value}`);
  }
  // The list's park times include their end; the filter's "before" does not.
  if ($("f-from").value) parts.push(`parkedAfter=${new Date($("f-from").value).getTime()}`);
  if ($("f-to").value) parts.push(`parkedBefore=${new Date($("f-to").value).getTime() + 1}`);
  if (!parts.length) throw new Error("choose at least one filter (a definition, a tenant...)");
  return parts.join(",");
}

function confirmBulk(command, dry, reason) {
  return new Promise((resolve) => {
    const dlg = $("bulk-confirm");
    const n = `${dry.count} wait${dry.count === 1 ? "" : "s"}`;
    $("bulk-h").textContent = `${command[0].toUpperCase()}${command.slice(1)} ${n}?`;
    const done = {cancel: "ends CANCELLED", suspend: "is suspended", resume: "is resumed"};
    $("bulk-text").textContent = `Every wait matching ${dry.where} (${n} now) ` +
      `${done[command] || "gets " + command}` + (reason ? `, with the reason "${reason}"` : "") +
      ". Each one's trace names you and the operation." +
      (dry.count > dry.sample.length ? ` The first ${dry.sample.length}:` : "");
    $("bulk-sample").replaceChildren(...dry.sample.map((w) => el("li", {}, w.key)));
    $("bulk-yes").textContent = `${command[0].toUpperCase()}${command.slice(1)} ${n}`;
    dlg.onclose = () => resolve(dlg.returnValue === "yes");
    dlg.showModal();
  });
}

function bulkSummary(job) {
  const s = job.summary || {};
  return `${job.command} ${job.operation}: ${job.done} of ${job.total} done; applied ` +
    `${s.applied || 0}, skipped ${s.skipped || 0}, refused ${s.refused || 0}` +
    ((s.unconfirmed || []).length ? `, unconfirmed ${s.unconfirmed.length}` : "");
}

async function bulkAction() {
  let where;
  try { where = bulkWhere(); } catch (e) { fail("Bulk action not sent: " + e.message); return; }
  const command = $("bulk-command").value;
  const reason = $("bulk-reason").value.trim() || undefined;
  if (command !== "resume" && !reason) {
    fail(`Bulk ${command} not sent: it needs a reason, which goes into every wait's trace`);
    $("bulk-reason").focus();
    return;
  }
  const operator = await askOperator();
  if (!operator) { fail("Bulk action not sent: commands need your name"); return; }
  const body = {command, where, reason, operator};
  say(`Counting the waits matching ${where}…`);
  let dry;
  try { dry = await call("POST", "/bulk", {...body, dryRun: true}); }
  catch (e) { fail("Bulk action: " + e.message); return; }
  if (!dry.count) { say(`No wait matches ${where}: nothing to ${command}`); return; }
  if (!await confirmBulk(command, dry, reason)) { say("Bulk action: nothing sent"); return; }
  let job;
  try { job = await call("POST", "/bulk", body); }
  catch (e) { fail("Bulk action refused: " + e.message); return; }
  $("bulk-go").disabled = true;
  try {
    while (!job.finished) {
      $("bulk-info").textContent = bulkSummary(job);
      await sleep(500);
      job = await call("GET", "/bulk/" + encodeURIComponent(job.operation));
    }
  } catch (e) { fail("Bulk action: " + e.message); return; }
  finally { $("bulk-go").disabled = false; }
  $("bulk-info").textContent = bulkSummary(job);
  const s = job.summary || {};
  if (job.error || !s.complete) {
    fail(bulkSummary(job) + (job.error ? ` (${job.error})` : "") +
         ((s.refusals || []).length ? `; refused: ${s.refusals.map(
           (r) => `${r.key} (${r.reason})`).join(", ")}` : ""));
  } else say(bulkSummary(job));
  $("bulk-reason").value = "";
  loadList(); loadReview();
  if (diagramName) loadDiagram(diagramName);
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
    select(w.key);
    await command("review", payload, w.key);
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
let loadingDiagram = null;

// External labels (events, gateways, flows) are drawn 11 px high at scale 1, task
// names 12 px: the diagram is never fitted below scale 1, so every label stays
// legible; a diagram larger than the view is panned or zoomed instead.  Small ones
// grow a little, up to MAX_FIT.
const MIN_FIT = 1, MAX_FIT = 1.2, ZOOM_STEP = 1.25, PAN_STEP = 60;
const PAD = 20;  // around the diagram and its count badges
const MARK = 36;  // below them: the bpmn.io watermark's band, which must stay clear
const LEGEND_PX = 44;  // the legend's row under the box
const END_TONES = {end_received: "received", end_escalated: "escalated"};

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

function newViewer() {
  const v = new BpmnJS({container: $("diagram")});
  v.get("eventBus").on("element.click", (e) => {
    if (diagramName && nodeLists[e.element.id]) listFor(diagramName, nodeLists[e.element.id]);
  });
  v.get("eventBus").on("canvas.viewbox.changed", showZoom);
  return v;
}

async function loadDiagram(name) {
  if (typeof BpmnJS === "undefined") {
    $("diagram-info").textContent = "The diagram viewer (bpmn-js) did not load.";
    return;
  }
  // One load at a time: a refresh arriving while a definition is drawn waits for it.
  while (loadingDiagram) await loadingDiagram;
  let done;
  loadingDiagram = new Promise((resolve) => { done = resolve; });
  try {
    const data = await call("GET", "/definitions/" + encodeURIComponent(name));
    if (!viewer) viewer = newViewer();
    if (diagramName !== name) {
      await viewer.importXML(data.bpmn);
      const canvas = viewer.get("canvas");
      for (const [id, tone] of Object.entries(END_TONES)) {
        if (viewer.get("elementRegistry").get(id)) canvas.addMarker(id, "xw-" + tone);
      }
      diagramName = name;
      showCounts(data);
      sizeDiagram();
      fitLegible();
    } else showCounts(data);
  } catch (e) { fail(`Diagram of ${name} failed: ` + e.message); }
  finally { loadingDiagram = null; done(); }
}

// The diagram's box with its count badges (which hang above and right of their
// nodes), in diagram units, with a margin.
function contentBox() {
  const canvas = viewer.get("canvas");
  const vb = canvas.viewbox(), inner = vb.inner;
  let [x0, y0] = [inner.x, inner.y];
  let [x1, y1] = [inner.x + inner.width, inner.y + inner.height];
  const origin = $("diagram").getBoundingClientRect();
  for (const b of document.querySelectorAll("#diagram .badges")) {
    const r = b.getBoundingClientRect();
    const bx = vb.x + (r.left - origin.left) / vb.scale;
    const by = vb.y + (r.top - origin.top) / vb.scale;
    x0 = Math.min(x0, bx); y0 = Math.min(y0, by);
    x1 = Math.max(x1, bx + r.width / vb.scale); y1 = Math.max(y1, by + r.height / vb.scale);
  }
  return {x: x0 - PAD, y: y0 - PAD, width: x1 - x0 + 2 * PAD, height: y1 - y0 + 2 * PAD + MARK};
}

// As tall as the diagram at scale 1 needs, within what the window has below the
// box's top (with the legend under it): a short diagram leaves no empty band, a tall
// one pans inside the box, and box and legend fit the screen (at least 320 px).
function sizeDiagram() {
  const box = contentBox();
  const top = $("diagram").getBoundingClientRect().top + window.scrollY;
  const room = Math.max(320, Math.round(window.innerHeight - top - LEGEND_PX));
  $("diagram").style.height = `${Math.min(Math.ceil(box.height * MIN_FIT) + 2, room)}px`;
  viewer.get("canvas").resized();
}

// The largest scale at which the whole diagram fits, kept within [MIN_FIT, MAX_FIT]:
// centred when it fits, else from its top left (where a wait starts), to be panned.
function fitLegible() {
  const canvas = viewer.get("canvas");
  const outer = canvas.viewbox().outer;
  const box = contentBox();
  const fit = Math.min(outer.width / box.width, outer.height / box.height);
  const scale = Math.min(MAX_FIT, Math.max(MIN_FIT, fit));
  const w = outer.width / scale, h = outer.height / scale;
  const x = w >= box.width ? box.x - (w - box.width) / 2 : box.x;
  const y = h >= box.height ? box.y - (h - box.height) / 2 : box.y;
  canvas.viewbox({x, y, width: w, height: h});
}

function zoomBy(factor) {
  if (!viewer || !diagramName) return;
  const canvas = viewer.get("canvas");
  canvas.zoom(Math.min(4, Math.max(0.2, canvas.zoom() * factor)), "auto");
}

function zoomWhole() {
  if (!viewer || !diagramName) return;
  const canvas = viewer.get("canvas");
  const outer = canvas.viewbox().outer, box = contentBox();
  const scale = Math.min(outer.width / box.width, outer.height / box.height);
  const w = outer.width / scale, h = outer.height / scale;
  canvas.viewbox({x: box.x - (w - box.width) / 2, y: box.y - (h - box.height) / 2,
                  width: w, height: h});
}

function showZoom() {
  if (!viewer) return;
  const scale = viewer.get("canvas").zoom();
  $("zoom-level").textContent = `${Math.round(scale * 100)} %` +
    (scale < MIN_FIT - 0.01 ? " (labels below 11 px: Fit to read them)" : "");
}

function panBy(dx, dy) {
  if (viewer && diagramName) viewer.get("canvas").scroll({dx, dy});
}

// A count of the hour is a lower bound when a worker had more finished waits to read
// than its budget: "≥ 20000".
function badgeButton(name, b, atLeast) {
  const tone = " tone-" + (b.tone || "now");
  const n = (atLeast && b.list.endedFrom ? "≥ " : "") + b.count;
  return el("button", {type: "button", "class": "badge" + tone + (b.count ? "" : " zero"),
                       "data-label": b.label, "data-tone": b.tone || "now",
                       title: `${n} ${b.label}: click to list them`,
                       onclick: () => listFor(name, b.list)},
            `${n} ${b.label}`);
}

function showCounts(data) {
  const overlays = viewer.get("overlays");
  overlays.clear();
  nodeLists = {};
  for (const [id, badges] of Object.entries(data.nodes)) {
    const box = el("div", {"class": "badges", "data-node": id});
    for (const b of badges) box.append(badgeButton(data.name, b, !data.countedAll));
    // A click on the node lists what its first badge lists; on an end event, all
    // its waits of the hour (whatever the reason).
    const listed = badges.find((b) => Object.keys(b.list).length);
    nodeLists[id] = listed ? {...listed.list} : {};
    if (END_TONES[id]) delete nodeLists[id].reason;
    overlays.add(id, "counts", {position: {top: -6 - 19 * badges.length, left: 0}, html: box});
  }
  $("exits").replaceChildren(...(data.exits || []).map(
    (b) => badgeButton(data.name, b, !data.countedAll)));
  const c = data.census;
  $("diagram-info").textContent = `${data.name}: ${c.parked} parked, ${c.in_review} in review, ` +
    `${c.suspended} suspended, ${c.done} finished and kept; ${data.cancelled} cancelled ` +
    `between ${when(data.window.from)} and ${when(data.window.to)}; from ` +
    `${data.workers.length} worker(s)` +
    (data.complete ? "" : `; not answering: ${data.unavailable.join(", ")}`) +
    (data.countedAll ? "" : "; more waits ended in the hour than a worker reads for a " +
     "diagram: the counts marked ≥ are lower bounds (a click lists them all)");
}

function listFor(name, q) {
  $("filters").reset();
  $("f-definition").value = name;
  if (q.state) $("f-state").value = q.state;
  if (q.outcome) $("f-outcome").value = q.outcome;
  if (q.reason) $("f-reason").value = q.reason;
  if (q.endedFrom) $("f-ended-from").value = localInput(q.endedFrom);
  if (q.endedTo) $("f-ended-to").value = localInput(q.endedTo);
  pages = [null]; loadList(0);
  say(`Waits of ${name}` + (q.state ? `, ${q.state}` : "") + (q.outcome ? `, ${q.outcome}` : "") +
      (q.reason ? ` (${q.reason})` : "") +
      (q.endedFrom ? `, ended ${when(Number(q.endedFrom))} to ${when(Number(q.endedTo))}` : ""));
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
$("btn-suspend").onclick = () => command("suspend", {reason: reason()});
$("btn-resume").onclick = () => command("resume", {reason: reason()});
$("btn-cancel").onclick = async () => {
  if (!current) return;
  if (!reason()) { command("cancel", {reason: undefined}); return; }  // says what is missing
  if (await confirmCancel(current)) command("cancel", {reason: reason()});
};
$("btn-reload").onclick = () => openWait(current);
$("btn-reschedule").onclick = () => command("reschedule", {
  [$("resched-mode").value]: $("resched-value").value.trim(), reason: reason()});
$("btn-deliver").onclick = () => command("deliver", {responseData: $("deliver-data").value,
                                                    reason: reason()});
$("review-refresh").onclick = loadReview;
$("bulk-go").onclick = bulkAction;
$("def-select").onchange = () => loadDiagram($("def-select").value);
$("zoom-in").onclick = () => zoomBy(ZOOM_STEP);
$("zoom-out").onclick = () => zoomBy(1 / ZOOM_STEP);
$("zoom-fit").onclick = () => { if (viewer && diagramName) fitLegible(); };
$("zoom-whole").onclick = zoomWhole;
window.addEventListener("resize", () => { if (viewer && diagramName) sizeDiagram(); });
$("diagram").addEventListener("keydown", (e) => {
  if (e.ctrlKey || e.metaKey || e.altKey) return;  // the viewer's own keys, the browser's
  const step = e.shiftKey ? PAN_STEP * 4 : PAN_STEP;
  const keys = {"+": () => zoomBy(ZOOM_STEP), "=": () => zoomBy(ZOOM_STEP),
                "-": () => zoomBy(1 / ZOOM_STEP), "0": () => fitLegible(), "w": zoomWhole,
                "ArrowLeft": () => panBy(step, 0), "ArrowRight": () => panBy(-step, 0),
                "ArrowUp": () => panBy(0, step), "ArrowDown": () => panBy(0, -step)};
  const act = keys[e.key];
  if (act && viewer && diagramName) { e.preventDefault(); act(); }
});
$("diagram-refresh").onclick = () => { if (diagramName) loadDiagram(diagramName); };
$("page-next").disabled = true; $("page-first").disabled = true;
loadList(0); loadReview(); loadDefinitions();
