"use strict";
// A client of buddy's HTTP API (docs/SERVE.md) and nothing more. Everything
// that came from a model or a tool is set as text (textContent), with control
// characters made visible as on the terminal. The one exception is an
// answer's HTML, which the server made from its Markdown with every raw HTML
// tag escaped (POST /api/render, GET /api/sessions/{id}/view); the page's
// Content-Security-Policy would stop a script even then.
const token = new URLSearchParams(location.search).get("token");
const auth = token ? { "Authorization": "Bearer " + token } : {};
const $ = (id) => document.getElementById(id);
const log = $("log");

let current = null;     // the open session's id, also in the URL (#s=ID)
let running = false;
let streaming = null;   // the answer being streamed
// Each call's block, by call id (ids come from the model: map keys, never
// put into a selector or markup).
let calls = new Map();
let sessions = [];
// Whether the person opened the group of exec runs.
let runsOpen = false;
// Bumped whenever another session opens: streams of the old one stop drawing.
let generation = 0;
let following = null;   // AbortController of a followed event stream

function api(path, opts = {}) {
  opts.headers = Object.assign({ "Content-Type": "application/json" }, auth, opts.headers || {});
  return fetch(path, opts);
}

async function errorOf(r) {
  try { return (await r.json()).error || r.statusText; } catch (_) { return r.status + " " + r.statusText; }
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// Control characters as visible stand-ins (␛, ␍, <U+202E>), as the terminal
// shows them (src/text.rs): a tool's escape codes are seen, not obeyed.
const UNSAFE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g;
const HAS_UNSAFE = new RegExp(UNSAFE.source);
function visible(s) {
  return String(s ?? "").replace(/\r\n/g, "\n").replace(UNSAFE, (c) => {
    const n = c.charCodeAt(0);
    if (n < 0x20) return String.fromCharCode(0x2400 + n);
    if (n === 0x7f) return "\u2421";
    return "<U+" + n.toString(16).toUpperCase().padStart(4, "0") + ">";
  });
}

// The view follows the bottom only while the reader is there.
function atBottom() { return log.scrollHeight - log.scrollTop - log.clientHeight < 60; }
function stickIf(was) { if (was) log.scrollTop = log.scrollHeight; }
function append(node) {
  const was = atBottom();
  log.querySelector(".empty")?.remove();
  log.appendChild(node);
  stickIf(was);
  return node;
}

function note(text, cls = "", parent = null) {
  const n = el("div", "note" + (cls ? " " + cls : ""), visible(text));
  if (parent) { const was = atBottom(); parent.appendChild(n); stickIf(was); return n; }
  return append(n);
}

function addUser(text) { return append(el("div", "msg user", visible(text))); }

function showEmpty() {
  const d = el("div", "empty");
  d.appendChild(el("h1", "", "What shall we work on?"));
  d.appendChild(el("div", "", "buddy runs tools in this directory; commands that change things ask first."));
  log.appendChild(d);
}

// ---- answers ----------------------------------------------------------
// While an answer streams it shows as plain text; every so often, and once
// when it is complete, the server renders what there is as Markdown and the
// HTML replaces the text it covers. Rendering never runs per text delta.
const RENDER_EVERY = 700; // ms between renders of an answer still streaming

function onDelta(text) {
  if (!streaming) {
    const d = append(el("div", "msg answer"));
    const md = el("div", "md"), tail = el("span", "tail");
    d.append(md, tail);
    streaming = { d, md, tail, text: "", done: 0, asked: 0, applied: 0, busy: false, last: performance.now() };
  }
  const s = streaming;
  const was = atBottom();
  s.text += text;
  s.tail.append(text);
  stickIf(was);
  if (!s.busy && performance.now() - s.last > RENDER_EVERY) renderAnswer(s);
}

function endAnswer() {
  const s = streaming;
  streaming = null;
  if (!s) return;
  if (s.text.trim()) renderAnswer(s); else s.d.remove();
}

async function renderAnswer(s) {
  const upto = s.text.length, n = ++s.asked;
  s.busy = true;
  s.last = performance.now();
  let item = null;
  try {
    const r = await api("/api/render", { method: "POST", body: JSON.stringify({ markdown: s.text.slice(0, upto) }) });
    if (r.ok) item = await r.json();
  } catch (_) { /* the plain text stays */ }
  s.busy = false;
  // A later render may have come back first; an older one never undoes it.
  if (!item || n < s.applied) return;
  s.applied = n;
  const was = atBottom();
  s.md.innerHTML = item.html; // made by the server, raw HTML escaped
  s.tail.textContent = s.text.slice(upto);
  stickIf(was);
}

function showAnswer(item) {
  const d = el("div", "msg answer"), md = el("div", "md");
  md.innerHTML = item.html; // made by the server, raw HTML escaped
  d.appendChild(md);
  append(d);
}

// ---- tool calls --------------------------------------------------------
// A call's block, made on first sight: in the conversation, or in `into`
// (a sub-agent's box).
function callBlock(id, name, into) {
  let b = calls.get(id);
  if (b) return b;
  b = { d: el("div", "tool"), head: el("div", "call"), out: el("div", "out"), progress: null, child: null };
  b.head.append(el("span", "mark", "▶ "), el("span", "cmd", visible(name)));
  b.d.append(b.head, b.out);
  if (into) into.appendChild(b.d); else append(b.d);
  calls.set(id, b);
  return b;
}

// ---- sub-agents ----------------------------------------------------------
// A child's tool calls fold under the `agent` call that runs it: a box in
// that call's block, open while the child works, its calls blocks of their
// own under the ids its questions use (PARENT/CHILD). A grandchild's box
// sits in its parent's `agent` call the same way.
function childBox(prefix, description) {
  const b = callBlock(prefix, "agent");
  if (!b.child) {
    b.child = el("details", "subagent");
    b.child.open = true;
    b.child.appendChild(el("summary", null, "sub-agent \u201c" + visible(description) + "\u201d"));
    b.d.insertBefore(b.child, b.out);
  }
  return b.child;
}

function onSubagent(ev, gen) {
  let prefix = ev.call_id, description = ev.description, inner = ev.event || {};
  while (inner.type === "subagent") {
    prefix += "/" + inner.call_id;
    description = inner.description;
    inner = inner.event || {};
  }
  const was = atBottom();
  const child = { ...inner, call_id: prefix + "/" + inner.call_id };
  switch (inner.type) {
    case "tool_call": callBlock(child.call_id, inner.name, childBox(prefix, description)); onToolCall(child, gen); break;
    case "tool_progress": showProgress(child); break;
    case "tool_result": onToolResult(child, gen); break;
    // Done: folded, its calls a click away.
    case "run_finished": { const b = calls.get(prefix); if (b && b.child) b.child.open = false; break; }
  }
  stickIf(was);
}

function showCall(item) {
  const b = callBlock(item.call_id, item.name);
  const was = atBottom();
  b.head.textContent = "";
  b.head.append(el("span", "mark", "▶ "), el("span", "cmd", item.lines[0] ?? item.name));
  for (const line of item.lines.slice(1)) b.head.appendChild(el("div", "cont", line));
  stickIf(was);
}

// A result as its first lines, the rest a click away, as the terminal's
// "… +N more lines".
function showResult(item) {
  const b = callBlock(item.call_id, item.name);
  const was = atBottom();
  if (b.progress) { b.progress.remove(); b.progress = null; }
  b.d.classList.toggle("err", !!item.failure);
  b.out.textContent = "";
  const line = (text, i) => b.out.appendChild(el("div", "line", (i === 0 ? "← " : "  ") + text));
  item.lines.slice(0, item.shown).forEach(line);
  const hidden = item.lines.length - item.shown + item.more;
  if (hidden > 0) {
    const more = el("button", "more", "… +" + hidden + " more line" + (hidden === 1 ? "" : "s"));
    more.type = "button";
    more.onclick = () => {
      const rest = item.lines.slice(item.shown);
      const at = more.nextSibling;
      more.remove();
      rest.forEach((t, i) => b.out.insertBefore(el("div", "line", "  " + t), at));
      if (item.more > 0) b.out.insertBefore(el("div", "line", "  … +" + item.more + " more lines not kept"), at);
    };
    b.out.appendChild(more);
  }
  if (item.failure) b.out.appendChild(el("div", "fail", "✗ " + item.name + ": " + item.failure));
  else if (item.lines.length === 0) b.out.appendChild(el("div", "line", "← (no output)"));
  stickIf(was);
}

// A running call's latest lines under it, each event replacing the last.
function showProgress(ev) {
  const b = calls.get(ev.call_id);
  if (!b) return;
  const was = atBottom();
  if (!b.progress) { b.progress = el("pre", "progress"); b.d.appendChild(b.progress); }
  b.progress.textContent = visible(ev.tail);
  stickIf(was);
}

async function render(body) {
  try {
    const r = await api("/api/render", { method: "POST", body: JSON.stringify(body) });
    if (r.ok) return await r.json();
  } catch (_) { /* shown plainly below */ }
  return null;
}

async function onToolCall(ev, gen) {
  callBlock(ev.call_id, ev.name);
  const item = await render({ call: { call_id: ev.call_id, name: ev.name, arguments: ev.arguments } });
  if (item && gen === generation) showCall(item);
}

async function onToolResult(ev, gen) {
  const item = await render({ result: { call_id: ev.call_id, name: ev.name, text: ev.text, is_error: ev.is_error } })
    || { call_id: ev.call_id, name: ev.name, lines: visible(ev.text).split("\n").slice(0, 400), shown: 4, more: 0, failure: ev.is_error ? "error" : null };
  if (gen === generation) showResult(item);
}

// ---- approvals ---------------------------------------------------------
// Tools whose approval is a change to files, and the word for it.
const FILE_TOOLS = { write_file: "write", edit_file: "edit", apply_patch: "patch" };

function showApproval(ev) {
  if ([...$("approvals").children].some((d) => d.dataset.call === ev.call_id)) return;
  const d = el("div", "approval");
  d.dataset.call = ev.call_id;
  // A file change reads as one, as the terminal asks it: not as a command
  // line someone would type at a prompt.
  const verb = FILE_TOOLS[ev.tool];
  const code = el("code");
  // A sub-agent's question names the child that asks.
  const who = ev.subagent ? "sub-agent \u201c" + visible(ev.subagent) + "\u201d" : "buddy";
  if (verb) {
    d.classList.add("file");
    d.appendChild(el("div", "ask", who + " wants to " + verb));
    const what = String(ev.command ?? "");
    code.append(el("span", "actor", verb + " "), visible(what.replace(new RegExp("^" + ev.tool + ":? "), "")));
  } else {
    d.appendChild(el("div", "ask", who + " wants to run"));
    code.append(el("span", "actor", visible(ev.actor) + "$ "), visible(ev.command));
  }
  d.appendChild(code);
  if (HAS_UNSAFE.test(ev.command)) {
    d.appendChild(el("div", "warn", "The command contains control characters (shown as ␛, ␍…); they are part of what would run."));
  }
  if (ev.detail) {
    const diff = el("pre", "diff");
    for (const l of visible(ev.detail).split("\n")) {
      const cls = /^(\+\+\+|---|diff |index )/.test(l) ? "file" : l.startsWith("+") ? "add"
        : l.startsWith("-") ? "del" : l.startsWith("@@") ? "hunk" : "";
      diff.appendChild(el("span", cls, l || " "));
    }
    d.appendChild(diff);
  }
  const choices = [["Approve", { approve: true }, "approve"], ["Deny", { approve: false }, "deny"]];
  // "Always" allows exactly the prefix the agent offered, for this session
  // while the server runs.
  if (ev.always) choices.splice(1, 0, ["Always " + visible(ev.always), { approve: true, always: true }, "always"]);
  const row = el("div", "choices");
  const id = current;
  for (const [label, body, cls] of choices) {
    const b = el("button", cls, label);
    b.type = "button";
    b.onclick = async () => {
      row.querySelectorAll("button").forEach((x) => { x.disabled = true; });
      const r = await api("/api/sessions/" + encodeURIComponent(id) + "/approvals/" + encodeURIComponent(ev.call_id),
        { method: "POST", body: JSON.stringify(body) });
      if (!r.ok && r.status !== 404) {
        row.querySelectorAll("button").forEach((x) => { x.disabled = false; });
        note("error: " + await errorOf(r), "err");
      }
    };
    row.appendChild(b);
  }
  d.appendChild(row);
  $("approvals").appendChild(d);
}

// The session's plan (todo_write), whole each time; hidden when empty.
function drawPlan(entries) {
  const p = $("plan");
  p.textContent = "";
  for (const e of entries || []) p.appendChild(el("li", e.status, e.content));
  p.hidden = !p.children.length;
}

function dropApproval(callId) {
  for (const d of [...$("approvals").children]) if (d.dataset.call === callId) d.remove();
}

// ---- the event stream ----------------------------------------------------
function onEvent(name, ev, gen) {
  if (gen !== generation) return;
  switch (name) {
    case "user_message": endAnswer(); addUser(ev.text); break;
    case "content_delta": onDelta(ev.text); break;
    case "model_request": endAnswer(); break;
    case "tool_call_start": endAnswer(); onToolCall(ev, gen); break;
    case "tool_progress": showProgress(ev); break;
    case "tool_call_result": onToolResult(ev, gen); break;
    case "subagent": onSubagent(ev, gen); break;
    case "approval_request": showApproval(ev); break;
    case "plan": drawPlan(ev.entries); break;
    case "plan_mode": note(ev.on ? "plan mode: only reading tools and read-only commands run" : "plan mode off"); break;
    case "plan_ready": endAnswer(); note("the plan:\n" + ev.plan); break;
    case "approval_decided": {
      dropApproval(ev.call_id);
      const by = ev.by && ev.by !== "user" ? " (" + ev.by.replace(/_/g, " ") + ")" : "";
      const text = (ev.approved ? "approved: " : "denied: ") + ev.command + by + (ev.reason ? " — " + ev.reason : "");
      note(text, ev.approved ? "" : "warn", calls.get(ev.call_id)?.d);
      break;
    }
    case "hook_blocked": {
      const what = ev.hook_event + " hook blocked " + (ev.tool || "it") + (ev.reason ? ": " + ev.reason : "");
      note(what, "warn", ev.call_id ? calls.get(ev.call_id)?.d : null);
      break;
    }
    case "retrying": note("the model server failed (" + ev.error + "); retrying, attempt " + ev.attempt + " of " + ev.max_retries); break;
    case "warning": note("warning: " + ev.message, "warn"); break;
    case "error": endAnswer(); note("error: " + ev.message, "err"); break;
    case "done": {
      endAnswer();
      setRunning(false);
      const o = ev.outcome || {};
      if (o.status && o.status !== "answered") note(o.status.replace(/_/g, " ") + (o.message ? ": " + o.message : ""), o.status === "failed" ? "err" : "warn");
      $("approvals").textContent = "";
      loadSessions();
      break;
    }
  }
}

// Reads an SSE response, handing each event to `on`, until the body ends or
// `on` returns true. Returns the id of the last event read.
async function readEvents(resp, on, after = 0) {
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "", last = after;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return last;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        let name = "message", data = "", id = 0;
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trim();
          else if (line.startsWith("id:")) id = Number(line.slice(3).trim());
        }
        if (!data) continue;
        if (id) last = id;
        if (on(name, JSON.parse(data), id)) { reader.cancel().catch(() => {}); return last; }
      }
    }
  } catch (_) {
    return last;
  }
}

// Follows a session's events from `after` until its run is done: for a page
// opened while a run goes on. Events up to `seen` are in the history shown
// already; of those only approvals still open are drawn. When the run ends
// the history is read again, whole.
async function follow(id, after, seen, gen) {
  following?.abort();
  const ctl = new AbortController();
  following = ctl;
  try {
    const r = await api("/api/sessions/" + encodeURIComponent(id) + "/events?after=" + after, { signal: ctl.signal });
    if (!r.ok) return;
    await readEvents(r, (name, ev, eid) => {
      if (eid > seen) { onEvent(name, ev, gen); return name === "done"; }
      // The log may hold earlier runs too: their `done` is not this one's.
      if (gen !== generation) return true;
      if (name === "approval_request") showApproval(ev);
      else if (name === "approval_decided") dropApproval(ev.call_id);
      return false;
    }, after);
  } catch (_) {
    return;
  }
  if (gen === generation && following === ctl) openSession(id, false);
}

// ---- sessions ------------------------------------------------------------
function setRunning(on) {
  running = on;
  $("stop").disabled = !on;
  $("state").textContent = on ? "working" : "";
  $("state").classList.toggle("on", on);
  $("text").placeholder = on ? "Steer the running task…" : "Ask buddy…";
}

function sessionFromUrl() {
  const m = /(?:^#|&)s=([^&]+)/.exec(location.hash);
  return m ? decodeURIComponent(m[1]) : null;
}

function setUrl(id, push) {
  const url = location.pathname + location.search + (id ? "#s=" + encodeURIComponent(id) : "");
  if (url === location.pathname + location.search + location.hash) return;
  if (push) history.pushState(null, "", url); else history.replaceState(null, "", url);
}

function ago(secs) {
  const d = Math.max(0, Date.now() / 1000 - secs);
  if (d < 45) return "just now";
  if (d < 3600) return Math.round(d / 60) + " min ago";
  if (d < 86400) { const h = Math.round(d / 3600); return h + (h === 1 ? " hour ago" : " hours ago"); }
  if (d < 2 * 86400) return "yesterday";
  if (d < 7 * 86400) return Math.round(d / 86400) + " days ago";
  return new Date(secs * 1000).toLocaleDateString();
}

function showTitle() {
  const s = sessions.find((x) => x.id === current);
  $("title").textContent = current ? visible((s && s.title) || "New chat") : "New chat";
}

// Whether a session matches what is typed in the find box: every word, in
// its title, id or model, case aside.
function matches(s, words) {
  const hay = [s.title, s.id, s.model].join(" ").toLowerCase();
  return words.every((w) => hay.includes(w));
}

function drawSessions() {
  const box = $("sessions");
  box.textContent = "";
  const words = $("find").value.toLowerCase().split(/\s+/).filter(Boolean);
  const shown = sessions.filter((s) => matches(s, words));
  // Runs of `buddy exec` (scripts, pipes, CI) are kept together under the
  // conversations, folded unless a search is on or one of them is open, so
  // a busy script does not bury the person's own conversations.
  const runs = shown.filter((s) => s.origin === "exec");
  for (const s of shown.filter((s) => s.origin !== "exec")) box.appendChild(sessionRow(s));
  if (runs.length) {
    const group = el("details", "runs");
    group.open = runsOpen || words.length > 0 || runs.some((s) => s.id === current);
    group.appendChild(el("summary", "", "exec runs (" + runs.length + ")"));
    for (const s of runs) group.appendChild(sessionRow(s));
    group.ontoggle = () => { runsOpen = group.open; };
    box.appendChild(group);
  }
  if (words.length && !shown.length) box.appendChild(el("div", "none", "No session matches"));
  showTitle();
}

// One session in the list.
function sessionRow(s) {
  const row = el("div", "row");
  const a = el("a", "sess" + (s.id === current ? " on" : ""));
  a.href = "#s=" + encodeURIComponent(s.id);
  a.title = s.id;
  a.appendChild(el("span", "t", visible(s.title) || "New chat"));
  const meta = el("small", "", ago(s.used));
  if (s.running) meta.appendChild(el("span", "live", " · running"));
  a.appendChild(meta);
  a.onclick = (e) => {
    e.preventDefault();
    document.body.classList.remove("menu");
    if (s.id !== current) openSession(s.id, true);
  };
  row.appendChild(a);
  if (!s.running) row.appendChild(deleteButton(s));
  return row;
}

// Deleting takes two clicks: the first asks, the second deletes.
function deleteButton(s) {
  const b = el("button", "del", "×");
  b.type = "button";
  b.title = "Delete this session";
  b.setAttribute("aria-label", "Delete session " + visible(s.title || s.id));
  b.onclick = async () => {
    if (!b.classList.contains("sure")) {
      b.classList.add("sure");
      b.textContent = "Delete?";
      return;
    }
    b.disabled = true;
    let r;
    try { r = await api("/api/sessions/" + encodeURIComponent(s.id), { method: "DELETE" }); } catch (e) { note("error: " + e.message, "err"); return; }
    if (!r.ok && r.status !== 404) { note("error: " + await errorOf(r), "err"); b.disabled = false; return; }
    sessions = sessions.filter((x) => x.id !== s.id);
    if (s.id === current) newChat(); else drawSessions();
  };
  return b;
}

// The model and the directory this server works in, in the header.
async function loadAbout() {
  try {
    const r = await api("/api/about");
    if (!r.ok) return;
    const a = await r.json();
    $("model").textContent = visible(a.model);
    $("cwd").textContent = visible(a.cwd);
    $("cwd").title = visible(a.cwd);
  } catch (_) { /* the header stays as it is */ }
}

async function loadSessions() {
  try {
    const r = await api("/api/sessions");
    if (!r.ok) return;
    sessions = (await r.json()).sessions;
  } catch (_) { return; }
  drawSessions();
}

function reset() {
  generation++;
  following?.abort();
  following = null;
  streaming = null;
  calls = new Map();
  log.textContent = "";
  $("approvals").textContent = "";
  drawPlan([]);
  setRunning(false);
}

function newChat() {
  reset();
  current = null;
  setUrl(null, true);
  showEmpty();
  drawSessions();
  document.body.classList.remove("menu");
  $("text").focus();
}

function showItem(it) {
  switch (it.kind) {
    case "user": addUser(it.text); break;
    case "answer": showAnswer(it); break;
    case "call": showCall(it); break;
    case "result": showResult(it); break;
    case "subagent": showSubagent(it); break;
  }
}

// A saved sub-agent: its calls and results in the box of the call that ran
// it, folded, as the live view leaves a child that is done.
function showSubagent(item) {
  const box = childBox(item.call_id, item.description);
  box.open = false;
  for (const it of item.items) {
    if (it.kind === "call" || it.kind === "result") callBlock(it.call_id, it.name, box);
    if (it.kind === "call") showCall(it);
    else if (it.kind === "result") showResult(it);
    else if (it.kind === "subagent") showSubagent(it);
  }
}

// Opens a session: its whole saved history, then, while a run goes on, its
// live events.
async function openSession(id, push) {
  reset();
  const gen = generation;
  current = id;
  setUrl(id, push);
  drawSessions();
  let r;
  try { r = await api("/api/sessions/" + encodeURIComponent(id) + "/view"); } catch (e) { note("error: " + e.message, "err"); return; }
  if (gen !== generation) return;
  if (!r.ok) {
    note("error: " + await errorOf(r), "err");
    if (r.status === 404) { current = null; setUrl(null, false); drawSessions(); }
    return;
  }
  const v = await r.json();
  if (gen !== generation) return;
  log.textContent = "";
  if (v.omitted) note(v.omitted + " earlier message" + (v.omitted === 1 ? "" : "s") + " not shown");
  for (const it of v.items) showItem(it);
  drawPlan(v.plan);
  if (!v.items.length) showEmpty();
  log.scrollTop = log.scrollHeight;
  if (v.running) {
    setRunning(true);
    follow(id, 0, v.last_event, gen);
  }
}

async function send() {
  const box = $("text");
  const text = box.value;
  if (!text.trim()) return;
  box.value = "";
  grow();
  // Nothing typed is lost: on any failure the text goes back in the box.
  const giveBack = (why) => {
    note("error: " + why, "err");
    if (!box.value) { box.value = text; grow(); }
  };
  if (!current) {
    let r;
    try { r = await api("/api/sessions", { method: "POST", body: "{}" }); } catch (e) { return giveBack(e.message); }
    if (!r.ok) return giveBack(await errorOf(r));
    const { id } = await r.json();
    reset();
    current = id;
    setUrl(id, true);
  }
  const gen = generation;
  const id = current;
  const mode = running ? "steer" : "prompt";
  let r;
  try {
    r = await api("/api/sessions/" + encodeURIComponent(id) + "/messages", { method: "POST", body: JSON.stringify({ text, mode }) });
  } catch (e) { return giveBack(e.message); }
  if (r.status === 202) { note("sent to the running task: " + text); return; }
  if (!r.ok) return giveBack(await errorOf(r));
  setRunning(true);
  loadSessions();
  const last = await readEvents(r, (name, ev) => { onEvent(name, ev, gen); return name === "done"; });
  // The stream broke before the run ended: take it up from the last event.
  if (gen === generation && running) follow(id, last, last, gen);
}

// ---- input ---------------------------------------------------------------
function grow() {
  const t = $("text");
  t.style.height = "auto";
  t.style.height = Math.min(t.scrollHeight + 2, window.innerHeight * 0.4) + "px";
}

$("text").addEventListener("input", grow);
$("text").addEventListener("keydown", (e) => {
  // Enter sends; Shift+Enter (and Enter while an input method composes)
  // goes into the text.
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  }
});
$("bar").onsubmit = (e) => { e.preventDefault(); send(); };
$("stop").onclick = () => {
  if (current) api("/api/sessions/" + encodeURIComponent(current) + "/interrupt", { method: "POST" });
};
$("new").onclick = newChat;
$("find").addEventListener("input", drawSessions);
$("menu").onclick = () => document.body.classList.toggle("menu");
$("scrim").onclick = () => document.body.classList.remove("menu");
window.addEventListener("popstate", () => {
  const id = sessionFromUrl();
  if (id && id !== current) openSession(id, false);
  else if (!id && current) newChat();
});
// Relative dates move on.
setInterval(drawSessions, 30000);

loadSessions();
loadAbout();
const first = sessionFromUrl();
if (first) openSession(first, false); else showEmpty();
$("text").focus();
