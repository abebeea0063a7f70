"use strict";
// The shared page: every text of a session goes on the page through textContent, never as
// HTML. Rows are drawn only where they are in view; bodies and states are parsed per chunk,
// on first need. See tui/share/data.py for the data's shape.
(() => {
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  };
  const INDEX = JSON.parse($("aj-index").textContent);
  const RUNS = INDEX.runs;
  const DIFF = INDEX.diff;
  const ROW = 22;
  const chunks = new Map();
  /** A chunk the parser has not reached yet: asked again once the document is read. */
  class Pending extends Error {}
  const copy = (value) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));
  const json = (value) => (value === undefined ? "(absent)" : JSON.stringify(value));
  const pretty = (value) => JSON.stringify(value, null, 2);

  function chunk(run, number) {
    const key = run + "-" + number;
    let found = chunks.get(key);
    if (!found) {
      const node = $("aj-" + key);
      if (!node) throw new Pending();
      found = JSON.parse(node.textContent);
      chunks.set(key, found);
    }
    return found;
  }

  function patch(state, ops) {
    for (const op of ops) {
      if (op[0] === "-") {
        delete state[op[1]][op[2]];
      } else if (op.length === 3) {
        state[op[1]] = copy(op[2]);
      } else {
        if (state[op[1]] === null || typeof state[op[1]] !== "object") state[op[1]] = {};
        state[op[1]][op[2]] = copy(op[3]);
      }
    }
    return state;
  }

  /** The state after event seq of run (seq -1: before any event). */
  function stateAt(run, seq) {
    if (seq < 0) return copy(INDEX.initial);
    const size = RUNS[run].chunk;
    const part = chunk(run, Math.floor(seq / size));
    const state = copy(part.state);
    const last = seq % size;
    for (let i = 0; i <= last; i++) patch(state, part.events[i][1]);
    return state;
  }

  function eventAt(run, seq) {
    const size = RUNS[run].chunk;
    const found = chunk(run, Math.floor(seq / size)).events[seq % size];
    return { body: JSON.parse(found[0]), ops: found[1] };
  }

  // -- views ------------------------------------------------------------------------------
  const views = RUNS.map((run, index) => ({ key: "run" + index, run: index, label: run.id }));
  if (DIFF) views.push({ key: "diff", label: "diff" });
  const selected = {};
  let view = DIFF ? views[views.length - 1] : views[0];

  function count() {
    return view.key === "diff" ? DIFF.rows.length : RUNS[view.run].rows.length;
  }

  function rowText(index) {
    if (view.key !== "diff") {
      const row = RUNS[view.run].rows[index];
      return (row[2] + " " + row[3]).toLowerCase();
    }
    const [, a, b] = DIFF.rows[index];
    const parts = [];
    if (a !== null) parts.push(RUNS[0].rows[a][2], RUNS[0].rows[a][3]);
    if (b !== null) parts.push(RUNS[1].rows[b][2], RUNS[1].rows[b][3]);
    return parts.join(" ").toLowerCase();
  }

  function runRow(index) {
    const [seq, ts, type, summary, mark, sign] = RUNS[view.run].rows[index];
    const node = el("div", "row" + (mark ? " " + mark : ""));
    node.append(el("span", "sign", sign || " "), el("span", "seq", seq));
    node.append(el("span", "ts", ts.slice(11, 23)), el("span", "type", type), el("span", "sum", summary));
    return node;
  }

  const KIND_SIGN = { equal: "=", changed: "~", inserted: "+", removed: "-" };

  function side(run, seq) {
    const node = el("span", "side");
    if (seq === null || seq === undefined) {
      node.textContent = "";
      return node;
    }
    const row = RUNS[run].rows[seq];
    node.append(el("span", "seq", seq), el("span", "type m-" + (row[4] || "none"), row[2]), el("span", "sum", row[3]));
    return node;
  }

  function diffRow(index) {
    const [kind, a, b] = DIFF.rows[index];
    const node = el("div", "row " + kind);
    node.append(el("span", "sign", KIND_SIGN[kind] || "?"), side(0, a), side(1, b));
    return node;
  }

  const list = $("list");
  const spacer = $("spacer");

  function draw() {
    const total = count();
    spacer.style.height = total * ROW + "px";
    const first = Math.max(0, Math.floor(list.scrollTop / ROW) - 2);
    const last = Math.min(total, first + Math.ceil(list.clientHeight / ROW) + 5);
    const current = selected[view.key];
    const fresh = document.createDocumentFragment();
    for (let i = first; i < last; i++) {
      const node = view.key === "diff" ? diffRow(i) : runRow(i);
      node.style.top = i * ROW + "px";
      node.dataset.index = String(i);
      if (i === current) node.classList.add("sel");
      fresh.append(node);
    }
    spacer.replaceChildren(fresh);
  }

  let queued = false;
  function redraw() {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      draw();
    });
  }

  function reveal(index) {
    const top = index * ROW;
    if (top < list.scrollTop) list.scrollTop = top;
    else if (top + ROW > list.scrollTop + list.clientHeight) list.scrollTop = top + ROW - list.clientHeight;
  }

  function select(index, { center = false } = {}) {
    const total = count();
    if (!total) return;
    index = Math.max(0, Math.min(total - 1, index));
    selected[view.key] = index;
    if (center) list.scrollTop = Math.max(0, index * ROW - list.clientHeight / 3);
    else reveal(index);
    draw();
    detail();
  }

  // -- the detail pane --------------------------------------------------------------------
  const pane = $("detail");

  function table(head, rows) {
    const node = el("table");
    const top = el("tr");
    for (const name of head) top.append(el("th", "", name));
    node.append(top);
    for (const cells of rows) {
      const line = el("tr");
      cells.forEach(([cls, text]) => line.append(el("td", cls, text)));
      node.append(line);
    }
    return node;
  }

  function block(title, text, open = true) {
    const box = el("details");
    box.open = open;
    box.append(el("summary", "", title), el("pre", "", text));
    return box;
  }

  function lookup(state, path) {
    return path.length === 1 ? state[path[0]] : (state[path[0]] || {})[path[1]];
  }

  function runDetail(run, seq, into) {
    const row = RUNS[run].rows[seq];
    const { body, ops } = eventAt(run, seq);
    const before = stateAt(run, seq - 1);
    const after = stateAt(run, seq);
    into.append(el("h2", "m-" + (row[4] || "none"), `${RUNS[run].id} · seq ${seq} · ${row[2]} · ${row[1]}`));
    if (row[2] === "agent_halted") {
      into.append(el("div", "banner", `halted by ${body.rule}: ${body.reason ?? ""}`));
    }
    const changed = ops.map((op) => {
      const path = op[0] === "-" || op.length === 4 ? [op[1], op[2]] : [op[1]];
      return [["path", path.join(".")], ["before", json(lookup(before, path))], ["after", json(lookup(after, path))]];
    });
    into.append(el("h2", "", "What it changed in the state"));
    into.append(changed.length ? table(["field", "before", "after"], changed) : el("p", "note", "nothing"));
    into.append(el("h2", "", "Event"), el("pre", "event", pretty(body)));
    into.append(block("State before", pretty(before), false), block("State after", pretty(after), true));
  }

  function diffDetail(index) {
    const [kind, a, b, changes] = DIFF.rows[index];
    pane.append(el("h2", "", `row ${index}: ${kind} (A seq ${a ?? "-"}, B seq ${b ?? "-"})`));
    if (changes.length) {
      pane.append(
        table(
          ["field", "A", "B"],
          changes.map((c) => [
            ["path", c.path],
            ["old", json(c.kind === "added" ? undefined : c.expected)],
            ["new", json(c.kind === "removed" ? undefined : c.actual)],
          ]),
        ),
      );
    }
    if (a !== null) pane.append(el("h2", "", "A: " + RUNS[0].id), el("pre", "event", pretty(eventAt(0, a).body)));
    if (b !== null) pane.append(el("h2", "", "B: " + RUNS[1].id), el("pre", "event", pretty(eventAt(1, b).body)));
  }

  function detail() {
    pane.replaceChildren();
    const index = selected[view.key];
    if (index === undefined) return;
    try {
      if (view.key === "diff") diffDetail(index);
      else runDetail(view.run, RUNS[view.run].rows[index][0], pane);
    } catch (error) {
      if (!(error instanceof Pending)) throw error;
      pane.replaceChildren(el("p", "note", "loading…"));
      document.addEventListener("DOMContentLoaded", detail, { once: true });
    }
  }

  // -- the header and the tabs ------------------------------------------------------------
  function fact(label, value) {
    const node = el("span");
    node.append(el("b", "", label + " "), document.createTextNode(String(value)));
    return node;
  }

  function header() {
    const head = $("head");
    const s = RUNS[0].state;
    const title = el("h1");
    title.append(el("span", "badge " + s.status, s.status), document.createTextNode(" " + RUNS[0].id));
    const facts = el("div", "facts");
    facts.append(
      fact("agent", s.agent ?? "-"),
      fact("model", s.model ?? "-"),
      fact("events", s.events),
      fact("turns", s.turns),
      fact("steps", s.steps),
      fact("failures", s.failures),
      fact("rejections", s.rejections),
      fact("model calls", s.model_calls + (s.model_failures ? ` (${s.model_failures} failed)` : "")),
      fact("tokens", `${s.tokens_in} in, ${s.tokens_out} out, ${s.tokens_cached} cached`),
      fact("cost", "$" + Number(s.cost).toFixed(4)),
      fact("model latency", Math.round(s.latency_ms) + " ms"),
      fact("started", s.started ?? "-"),
      fact("ended", s.ended ?? "-"),
    );
    head.replaceChildren(title, facts);
    if (s.halt_rule) {
      const halt = el("div", "banner", `halted by ${s.halt_rule}: ${s.halt_reason ?? ""}`);
      halt.id = "halt";
      halt.title = "go to the halt";
      halt.addEventListener("click", () => {
        show(views[0]);
        const rows = RUNS[0].rows;
        let at = rows.length - 1;
        while (at > 0 && rows[at][2] !== "agent_halted") at--;
        select(at, { center: true });
      });
      head.append(halt);
    } else if (s.last_error && s.status === "failed") {
      head.append(el("div", "banner", "failed: " + s.last_error));
    }
    if (INDEX.replay) {
      const r = INDEX.replay;
      const text = `replay with the current code: ${r.summary}`;
      const box = el("div", "verdict " + r.verdict, text);
      box.id = "verdict";
      head.append(box);
    } else if (DIFF) {
      const text = DIFF.identical
        ? `diff with ${RUNS[1].name}: identical`
        : `diff with ${RUNS[1].name}: ${DIFF.differences} rows differ` +
          (DIFF.config_changes.length ? `, configuration: ${DIFF.config_changes.map((c) => c.path).join(", ")}` : "");
      const box = el("div", "verdict " + (DIFF.identical ? "identical" : "diverged"), text);
      box.id = "verdict";
      head.append(box);
    }
    head.append(
      el(
        "div",
        "note",
        INDEX.redacted
          ? "Redacted: secrets and personal data are replaced by placeholders."
          : "NOT redacted: this page holds the session as it was recorded.",
      ),
    );
  }

  function tabs() {
    const nav = $("tabs");
    nav.replaceChildren();
    views.forEach((v, i) => {
      const name = v.key === "diff" ? "diff (d)" : `${i === 0 ? "timeline (t)" : "other run (o)"}: ${v.label}`;
      const button = el("button", v === view ? "on" : "", name);
      button.type = "button";
      button.dataset.view = v.key;
      button.addEventListener("click", () => show(v));
      nav.append(button);
    });
  }

  function show(next) {
    if (!next) return;
    view = next;
    tabs();
    list.scrollTop = 0;
    const at = selected[view.key];
    if (at === undefined) {
      const first = view.key === "diff" && DIFF.first !== null ? DIFF.first : 0;
      select(first, { center: true });
    } else {
      select(at, { center: true });
    }
  }

  // -- keys, mouse and search -------------------------------------------------------------
  const search = $("search");
  const info = $("search-info");

  function find(step) {
    const needle = search.value.trim().toLowerCase();
    if (!needle) return;
    const total = count();
    const from = selected[view.key] ?? -1;
    for (let k = 1; k <= total; k++) {
      const i = (((from + step * k) % total) + total) % total;
      if (rowText(i).includes(needle)) {
        info.textContent = "";
        select(i, { center: true });
        return;
      }
    }
    info.textContent = "no match";
  }

  function seek(step, test) {
    const total = count();
    for (let i = (selected[view.key] ?? -1) + step; i >= 0 && i < total; i += step) {
      if (test(i)) return select(i, { center: true });
    }
  }

  const failing = (i) => view.key !== "diff" && ["fail", "halt"].includes(RUNS[view.run].rows[i][4]);
  const differing = (i) => view.key === "diff" && DIFF.rows[i][0] !== "equal";

  function open() {
    if (view.key !== "diff") return;
    const [, a, b] = DIFF.rows[selected.diff];
    const run = a !== null ? 0 : 1;
    show(views[run]);
    select(run === 0 ? a : b, { center: true });
  }

  const help = el("div", "", $("keys").textContent.split(" · ").join("\n"));
  help.id = "help";
  help.hidden = true;
  document.body.append(help);

  document.addEventListener("keydown", (event) => {
    if (event.target === search) {
      if (event.key === "Enter") {
        find(event.shiftKey ? -1 : 1);
        list.focus();
      } else if (event.key === "Escape") list.focus();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const page = Math.max(1, Math.floor(list.clientHeight / ROW) - 1);
    const at = selected[view.key] ?? 0;
    const keys = {
      j: () => select(at + 1),
      ArrowDown: () => select(at + 1),
      k: () => select(at - 1),
      ArrowUp: () => select(at - 1),
      g: () => select(0),
      Home: () => select(0),
      G: () => select(count() - 1),
      End: () => select(count() - 1),
      PageDown: () => select(at + page),
      PageUp: () => select(at - page),
      e: () => seek(1, failing),
      E: () => seek(-1, failing),
      "]": () => seek(1, differing),
      "[": () => seek(-1, differing),
      n: () => find(1),
      N: () => find(-1),
      t: () => show(views[0]),
      o: () => RUNS.length > 1 && show(views[1]),
      d: () => DIFF && show(views[views.length - 1]),
      Enter: open,
      "/": () => search.focus(),
      "?": () => (help.hidden = !help.hidden),
      Escape: () => (help.hidden = true),
    };
    const action = keys[event.key];
    if (action) {
      event.preventDefault();
      action();
    }
  });

  list.addEventListener("scroll", redraw);
  window.addEventListener("resize", redraw);
  list.addEventListener("click", (event) => {
    const row = event.target.closest(".row");
    if (row) select(Number(row.dataset.index));
    list.focus();
  });
  list.addEventListener("dblclick", open);

  header();
  show(view);
  list.focus();
  window.agentJournal = {
    stateAt,
    eventAt,
    select,
    show: (key) => show(views.find((v) => v.key === key)),
    view: () => view.key,
    selected: () => selected[view.key],
  };
  document.documentElement.dataset.ready = "1";
  window.agentJournalReady = performance.now();
})();
