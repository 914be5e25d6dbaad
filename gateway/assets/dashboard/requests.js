// Switchyard request log: GET /admin/requests with the form's filters, a
// page at a time, and GET /admin/requests/{id} for the request picked. The
// filters live in the page's query string, so a reload or a shared link
// repeats the search. Every value from the server is inserted as text,
// never parsed as HTML.
"use strict";
(() => {
  const PAGE = 50;
  const FILTERS = ["since", "status", "key", "team", "route", "backend", "outcome", "session", "min_ms", "sensitive"];
  const $ = sel => document.querySelector(sel);
  const { el } = window.switchyardDom;
  const pad = n => String(n).padStart(2, "0");
  const when = ms => {
    const d = new Date(ms);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  };
  // Dollars as the CLI prints them (six decimals), so the two can be compared.
  const usd = v => (v == null ? "—" : "$" + Math.abs(v).toFixed(6));
  const ms = v => (v == null ? "—" : Math.round(v).toLocaleString("en-US") + " ms");
  const count = v => (v == null ? "—" : Number(v).toLocaleString("en-US"));

  const form = $("#filters");
  let offset = 0;
  let seq = 0; // an answer that arrives after a newer search was sent is dropped

  function banner(text) {
    const b = $("#banner");
    b.textContent = text || "";
    b.hidden = !text;
  }

  // The form from the page's query string, and back.
  function readUrl() {
    const q = new URLSearchParams(location.search);
    for (const name of FILTERS) {
      const field = form.elements[name];
      if (q.has(name)) field.value = q.get(name);
    }
    offset = Math.max(0, parseInt(q.get("offset") || "0", 10) || 0);
  }
  function query() {
    const q = new URLSearchParams();
    for (const name of FILTERS) {
      const v = form.elements[name].value.trim();
      if (v) q.set(name, v);
    }
    q.set("limit", String(PAGE));
    if (offset) q.set("offset", String(offset));
    return q;
  }

  async function fetchJson(path) {
    const res = await fetch(path, { headers: { accept: "application/json" } });
    const body = await res.json().catch(() => null);
    if (!res.ok) throw new Error((body && body.error && body.error.message) || `HTTP ${res.status}`);
    return body;
  }

  async function search() {
    const mine = ++seq;
    const q = query();
    history.replaceState(null, "", "?" + q.toString());
    document.body.dataset.ready = "0";
    try {
      const log = await fetchJson("/admin/requests?" + q.toString());
      if (mine !== seq) return;
      banner("");
      draw(log);
      $("#updated").textContent = "updated " + when(Date.now()).slice(11);
    } catch (e) {
      if (mine === seq) banner("could not read the request log: " + e.message);
    } finally {
      if (mine === seq) document.body.dataset.ready = "1";
    }
  }

  function statusCell(r) {
    return el("td", { class: "status-" + r.status, "data-status": r.status, text: r.status });
  }

  function draw(log) {
    const body = $("#log");
    body.replaceChildren();
    if (!log.requests.length) {
      body.append(el("p", { class: "empty", text: "no requests match" }));
    } else {
      const head = ["time", "key", "route", "backend", "status", "outcome", "sensitive", "calls", "duration", "tokens in / out", "cost", "why"];
      const num = new Set(["calls", "duration", "tokens in / out", "cost"]);
      const rows = log.requests.map(r => {
        const tr = el("tr", { "data-id": r.request_id, tabindex: "0" },
          el("td", { text: when(r.ts_ms) }),
          el("td", { text: r.key || "—" }),
          el("td", { text: r.route || "—" }),
          el("td", { text: r.backend || "—" }),
          statusCell(r),
          el("td", { text: r.outcome }),
          el("td", { class: "sensitive", text: r.sensitive ? `${r.sensitive} (${r.sensitive_action})` : "" }),
          el("td", { class: "num", text: count(r.calls) }),
          el("td", { class: "num", text: ms(r.duration_ms) }),
          el("td", { class: "num", text: `${count(r.input_tokens)} / ${count(r.output_tokens)}` }),
          el("td", { class: "num", text: usd(r.cost_usd) }),
          el("td", { class: "why", text: r.error || r.refusal || "" }));
        tr.addEventListener("click", () => open(r.request_id, tr));
        tr.addEventListener("keydown", e => { if (e.key === "Enter") open(r.request_id, tr); });
        return tr;
      });
      body.append(el("div", { class: "scroll" }, el("table", null,
        el("thead", null, el("tr", null, ...head.map(h => el("th", { scope: "col", class: num.has(h) ? "num" : null, text: h })))),
        el("tbody", null, ...rows))));
    }
    const shown = log.requests.length;
    $("#page").textContent = shown ? `${offset + 1}–${offset + shown}` : "";
    $("#newer").disabled = offset === 0;
    $("#older").disabled = log.next_offset == null;
    $("#older").dataset.next = log.next_offset == null ? "" : String(log.next_offset);
  }

  // One request: its line, then every call made for it.
  async function open(id, row) {
    for (const r of document.querySelectorAll("#log tbody tr")) r.setAttribute("aria-selected", String(r === row));
    const panel = $("#detail");
    const since = form.elements.since.value;
    try {
      const rec = await fetchJson(`/admin/requests/${encodeURIComponent(id)}?since=${encodeURIComponent(since)}`);
      $("#detail-id").textContent = rec.request_id;
      const facts = [
        ["started", when(rec.ts_ms)], ["key", rec.key], ["team", rec.team], ["route", rec.route],
        ["session", rec.session], ["endpoint", rec.endpoint], ["served by", rec.backend], ["reason", rec.reason],
        ["status", rec.status], ["outcome", rec.outcome], ["duration", ms(rec.duration_ms)],
        ["first token", ms(rec.ttft_ms)], ["tokens in", count(rec.input_tokens)],
        ["of them cached", count(rec.cached_tokens)], ["tokens out", count(rec.output_tokens)],
        ["cost", usd(rec.cost_usd)], ["refused", rec.refusal], ["error", rec.error],
        ["sensitive data", rec.sensitive], ["policy did", rec.sensitive_action],
        ["caller's id", rec.client_request_id],
      ].filter(([, v]) => v != null && v !== "");
      const dl = el("dl", null, ...facts.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { "data-fact": k, text: String(v) })]));
      const cols = ["backend", "tier", "reason", "status", "ttft_ms", "duration_ms", "queued_ms", "input_tokens", "cached_tokens", "output_tokens", "cost_usd", "error"];
      const calls = el("table", { "data-calls": String(rec.calls.length) },
        el("thead", null, el("tr", null, ...cols.map(c => el("th", { scope: "col", text: c })))),
        el("tbody", null, ...rec.calls.map(c => el("tr", { "data-role": c.shadow ? "shadow" : "call" },
          ...cols.map(k => el("td", { text: c[k] == null ? "—" : k === "cost_usd" ? usd(c[k]) : String(c[k]) }))))));
      panel.querySelector(".body").replaceChildren(dl, el("h3", { text: "Calls" }), el("div", { class: "scroll" }, calls));
      panel.hidden = false;
      panel.scrollIntoView({ block: "nearest" });
    } catch (e) {
      banner("could not read request " + id + ": " + e.message);
    }
  }

  form.addEventListener("submit", e => { e.preventDefault(); offset = 0; search(); });
  $("#newer").addEventListener("click", () => { offset = Math.max(0, offset - PAGE); search(); });
  $("#older").addEventListener("click", e => { offset = parseInt(e.target.dataset.next, 10) || 0; search(); });
  readUrl();
  search();
})();
