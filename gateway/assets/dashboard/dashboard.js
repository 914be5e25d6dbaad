// Switchyard dashboard: fetches /admin/stats for the chosen window, draws it,
// and refreshes every 10 s. Plain browser JS with no build step; the vendored
// uPlot draws the time series. Every name that comes from the server (keys,
// teams, backends, routes) is inserted as text, never parsed as HTML.
"use strict";
(() => {
  const REFRESH_MS = 10000;
  const WINDOWS = ["1h", "24h", "7d"];
  const EMPTY = "no requests in this window";
  // Okabe-Ito colours: told apart with the common colour-vision deficiencies.
  const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#999999"];

  // The window lives in the URL fragment, so a reload or a shared link keeps it.
  let win = WINDOWS.includes(location.hash.slice(1)) ? location.hash.slice(1) : "1h";
  let seq = 0;               // fetch counter: an answer that arrives after a newer request was sent is dropped
  const charts = new Map();  // "panel:name" -> {plot, sig, box, fig}: reused across refreshes so zoom and legend toggles survive
  const colours = new Map(); // backend -> colour, stable for the page's life

  // ---- formatting. tests/dashboard/check.mjs mirrors fmtUsd, fmtInt and fmtMs: keep them in step.
  const group = s => s.replace(/^\d+/, d => d.replace(/\B(?=(\d{3})+$)/g, ","));
  // USD: "$0.00" for zero; from $1 up, two decimals with thousands separators
  // ("$1,234.50"); below $1, four significant digits ("$0.4744", "$0.008710"),
  // because a cheap local route costs fractions of a cent; below a millionth,
  // "<$0.000001". Negative amounts (savings when local cost more) lead with "-".
  function fmtUsd(v) {
    if (v == null) return "—";
    const sign = v < 0 ? "-" : "", a = Math.abs(v);
    if (a === 0) return "$0.00";
    if (a >= 1) return sign + "$" + group(a.toFixed(2));
    if (a >= 1e-6) return sign + "$" + a.toPrecision(4);
    return sign + "<$0.000001";
  }
  const fmtInt = v => (v == null ? "—" : group(String(Math.round(v))));
  const fmtPct = v => (v == null ? "—" : (v * 100).toFixed(1) + "%");
  const fmtMs = v => (v == null ? "—" : fmtInt(v) + " ms");
  const fmt1 = v => (v == null ? "—" : v.toFixed(1));
  const pad = n => String(n).padStart(2, "0");
  const clock = ms => { const d = new Date(ms); return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`; };
  // The cursor's time: the date matters once the window spans days.
  const stamp = ms => (win === "1h" ? "" : new Date(ms).toLocaleDateString([], { month: "short", day: "numeric" }) + " ") + clock(ms).slice(0, 5);

  // ---- DOM helpers
  const $ = (sel, root = document) => root.querySelector(sel);
  const { el } = window.switchyardDom;
  // A number shown formatted, with the raw value alongside for tests and tools.
  const num = (text, value) => el("span", { "data-value": String(value), text });
  const bodyOf = name => $(`[data-panel="${name}"] .body`);

  function destroy(key) {
    const c = charts.get(key);
    ro.unobserve(c.box);
    c.plot.destroy();
    charts.delete(key);
  }
  const dropCharts = (prefix, keep = new Set()) =>
    [...charts.keys()].filter(k => k.startsWith(prefix) && !keep.has(k)).forEach(destroy);
  function showEmpty(name, text = EMPTY) {
    dropCharts(name + ":");
    bodyOf(name).replaceChildren(el("p", { class: "empty", text }));
  }

  // ---- charts
  // uPlot sizes in pixels, so each chart follows its box through a ResizeObserver.
  const ro = new ResizeObserver(entries => {
    for (const e of entries) {
      const c = [...charts.values()].find(c => c.box === e.target);
      const w = Math.floor(e.contentRect.width);
      if (c && w > 0 && w !== c.plot.width) c.plot.setSize({ width: w, height: c.plot.height });
    }
  });
  const css = name => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  // Counts tick at whole numbers only; milliseconds turn to seconds past 1000
  // so the labels fit the axis.
  const COUNT_INCRS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6];
  const axisMs = v => (v >= 1000 ? `${+(v / 1000).toFixed(2)} s` : `${v} ms`);
  // Dollar ticks carry as many decimals as the tick step needs, at least two
  // ("$0.005", "$0.015", "$1,250.00"): shorter than fmtUsd's four significant digits.
  const places = x => { let d = 0; while (d < 10 && Math.abs(x * 10 ** d - Math.round(x * 10 ** d)) > 1e-6) d++; return d; };
  const axisUsd = (v, incr) => (incr == null ? fmtUsd(v) : (v < 0 ? "-$" : "$") + group(Math.abs(v).toFixed(Math.max(2, places(incr)))));
  // The y axis is as wide as its widest label, so none is cut off at the chart's left edge.
  const measure = document.createElement("canvas").getContext("2d");
  function axisSize(u, values, i, cycle) {
    const a = u.axes[i];
    if (cycle > 1) return a._size; // uPlot lays out again when a size changes: settle after one pass
    measure.font = a.font[0]; // scaled by the device pixel ratio, as font[1] is against font[2]
    const text = Math.max(0, ...(values || []).map(v => measure.measureText(String(v ?? "")).width)) * a.font[2] / a.font[1];
    return Math.ceil(a.ticks.size + a.gap + text + 4);
  }
  function axes(y) {
    const base = { stroke: css("--muted"), grid: { stroke: css("--grid"), width: 1 }, ticks: { stroke: css("--grid"), width: 1 } };
    return [base, { ...base, size: axisSize, values: (u, vals, i, space, incr) => vals.map(v => y.fmt(v, incr)), incrs: y.incrs }];
  }
  const Y_COUNT = { fmt: fmtInt, incrs: COUNT_INCRS }, Y_USD = { fmt: axisUsd }, Y_MS = { fmt: axisMs };
  const colourOf = name => {
    if (!colours.has(name)) colours.set(name, PALETTE[colours.size % PALETTE.length]);
    return colours.get(name);
  };
  // Gaps (buckets without data) stay gaps, so a value with a gap on both sides
  // has no segment to draw and would vanish: it gets a marker, and so does every
  // value of a series that has only a few.
  const FEW = 3;
  function markers(u, i) {
    const ys = u.data[i], at = [];
    for (let j = 0; j < ys.length; j++) if (ys[j] != null) at.push(j);
    const lone = at.length <= FEW ? at : at.filter(j => ys[j - 1] == null && ys[j + 1] == null);
    return lone.length ? lone : null;
  }
  const line = (label, stroke, fmt, extra) => ({
    label, stroke, width: 2, spanGaps: false, value: (u, v) => fmt(v),
    points: { show: false, filter: markers, size: 7, width: 1, fill: stroke, stroke }, ...extra,
  });

  // Draws a panel's charts. specs: [{key, caption, series, data, y}], y one of the Y_ axes. A chart
  // whose series are unchanged only gets new data; anything else is rebuilt.
  function drawCharts(name, specs) {
    const body = bodyOf(name), figs = [], keep = new Set();
    for (const s of specs) {
      const key = `${name}:${s.key}`, sig = s.series.map(x => x.label).join("\u0000");
      keep.add(key);
      if (charts.has(key) && charts.get(key).sig !== sig) destroy(key);
      let c = charts.get(key);
      if (c) {
        c.plot.setData(s.data);
        c.fig.firstChild.textContent = s.caption;
      } else {
        const box = el("div", { class: "plot" }), fig = el("figure", { class: "chart" }, el("figcaption", { text: s.caption }), box);
        body.append(fig); // in the page, so its width can be read
        const plot = new uPlot({
          width: Math.max(box.clientWidth, 200), height: 200,
          series: [{ value: (u, v) => (v == null ? "—" : stamp(v * 1000)) }, ...s.series],
          axes: axes(s.y), legend: { live: true }, cursor: { drag: { x: true, y: false } },
        }, s.data, box);
        charts.set(key, c = { plot, sig, box, fig });
        ro.observe(box);
      }
      figs.push(c.fig);
    }
    dropCharts(name + ":", keep);
    body.replaceChildren(...figs);
  }

  function drawSplit(d, xs) {
    const routes = new Map();
    for (const s of d.split) {
      if (!routes.has(s.route)) routes.set(s.route, []);
      routes.get(s.route).push(s);
    }
    const specs = [];
    for (const [route, rows] of routes) {
      const total = rows.reduce((n, r) => n + r.calls.reduce((a, b) => a + b, 0), 0);
      if (total === 0) continue;
      specs.push({
        key: route ?? "\u0000direct", y: Y_COUNT, // a route may be called "direct" too
        caption: `${route == null ? "direct (no route)" : "route " + route} · ${fmtInt(total)} calls`,
        series: rows.map(r => line(`${r.backend} (${r.tier})`, colourOf(r.backend), fmtInt, { fill: colourOf(r.backend) + "14" })),
        data: [xs, ...rows.map(r => r.calls)],
      });
    }
    specs.length ? drawCharts("split", specs) : showEmpty("split");
  }

  function drawSpend(d, xs) {
    const cumulate = a => { let t = 0; return a.map(v => (t += v || 0)); };
    const s = d.spend, cf = cumulate(s.counterfactual_usd), cloud = cumulate(s.cloud_usd), local = cumulate(s.local_usd);
    if (!cf.at(-1) && !cloud.at(-1) && !local.at(-1)) return showEmpty("spend");
    drawCharts("spend", [{
      key: "usd", y: Y_USD, caption: `spent ${fmtUsd(d.totals.cost_usd)} of an all-cloud ${fmtUsd(d.totals.counterfactual_usd)}`,
      series: [
        line("cloud", PALETTE[5], fmtUsd), line("local", PALETTE[2], fmtUsd),
        line("all-cloud counterfactual", css("--muted"), fmtUsd, { dash: [6, 4] }),
      ],
      data: [xs, cloud, local, cf],
    }]);
  }

  function drawTtft(d, xs) {
    const has = a => a.some(v => v != null);
    const specs = d.ttft.filter(p => has(p.p50_ms) || has(p.p90_ms)).map(p => {
      const series = [line("p50", PALETTE[0], fmtMs), line("p90", PALETTE[1], fmtMs)], data = [xs, p.p50_ms, p.p90_ms];
      if (p.budget_ms != null) {
        series.push(line("budget", PALETTE[5], fmtMs, { dash: [6, 4], width: 1.5 }));
        data.push(xs.map(() => p.budget_ms));
      }
      return { key: p.profile, y: Y_MS, series, data,
        caption: `profile ${p.profile} · ${p.budget_ms == null ? "no budget" : "budget " + fmtMs(p.budget_ms)}` };
    });
    specs.length ? drawCharts("ttft", specs) : showEmpty("ttft");
  }

  // ---- tables. cols: [[header, row -> text or node, numeric?]]; the first column heads its row.
  function drawTable(name, cols, rows, emptyText) {
    if (!rows.length) return showEmpty(name, emptyText);
    const head = el("tr", {}, ...cols.map(([h, , n]) => el("th", { scope: "col", class: n ? "num" : null, text: h })));
    const body = rows.map(r => el("tr", {}, ...cols.map(([, f, n], i) =>
      el(i ? "td" : "th", { scope: i ? null : "row", class: n ? "num" : null }, f(r)))));
    const id = $(`[data-panel="${name}"] h2`).id;
    bodyOf(name).replaceChildren(el("div", { class: "scroll" },
      el("table", { "aria-labelledby": id }, el("thead", {}, head), el("tbody", {}, ...body))));
  }
  const usdCell = r => num(fmtUsd(r.cost_usd), r.cost_usd);
  const bar = share => {
    const fill = el("span");
    fill.style.width = `${Math.round((share || 0) * 100)}%`; // through CSSOM: a strict CSP forbids style attributes
    return el("span", { class: "bar", "aria-hidden": "true" }, fill);
  };
  const badge = state => el("span", { class: `badge ${["closed", "open", "half-open"].includes(state) ? state : "unknown"}`, text: state });
  const pair = (a, b, f) => `${f(a)} / ${f(b)}`;

  function drawTables(d) {
    drawTable("attainment", [
      ["Profile", r => r.profile], ["Budget", r => fmtMs(r.budget_ms), 1], ["Requests", r => fmtInt(r.requests), 1],
      ["Within", r => fmtInt(r.within), 1], ["Share", r => el("span", { class: "share" }, bar(r.share), fmtPct(r.share)), 1],
    ], d.attainment);
    // Keys exist only with auth on: say so rather than look broken.
    const none = what => `no ${what} in this window (none used, or auth is off)`;
    drawTable("top_keys", [["Key", r => r.name], ["Team", r => r.team ?? "—"], ["Requests", r => fmtInt(r.requests), 1], ["Spend", usdCell, 1]], d.top_keys, none("keys"));
    drawTable("top_teams", [["Team", r => r.name], ["Requests", r => fmtInt(r.requests), 1], ["Spend", usdCell, 1]], d.top_teams, none("teams"));
    drawTable("backends", [
      ["Backend", r => r.name], ["Tier", r => r.tier], ["Breaker", r => badge(r.breaker)],
      ["In flight", r => fmtInt(r.in_flight), 1], ["Queued", r => fmtInt(r.queued), 1],
      ["Calls", r => fmtInt(r.requests), 1], ["Errors", r => fmtInt(r.errors), 1],
      ["TTFT p50 / predicted", r => pair(r.ttft_p50_ms, r.predicted_ttft_ms, fmtMs), 1],
      ["Decode tok/s / predicted", r => pair(r.decode_tokens_per_s, r.predicted_decode_tokens_per_s, fmt1), 1],
      ["Draft acceptance", r => fmtPct(r.draft_acceptance), 1],
    ], d.backends, "no backends configured");
    // Candidate first, what served after, in each pair of figures.
    drawTable("shadows", [
      ["Route", r => r.route], ["Candidate / served by", r => `${r.candidate} / ${r.served_by}`],
      ["Requests", r => fmtInt(r.requests), 1], ["Failed", r => fmtInt(r.candidate_failed), 1],
      ["TTFT p50", r => pair(r.ttft_p50_ms, r.served.ttft_p50_ms, fmtMs), 1],
      ["TTFT p90", r => pair(r.ttft_p90_ms, r.served.ttft_p90_ms, fmtMs), 1],
      ["Decode tok/s", r => pair(r.decode_tokens_per_s, r.served.decode_tokens_per_s, fmt1), 1],
      ["Within budget", r => pair(r.within_budget, r.served.within_budget, fmtPct), 1],
      ["Per request", r => pair(r.cost_per_request_usd, r.served.cost_per_request_usd, fmtUsd), 1],
      ["Agreement", r => fmtPct(r.agreement), 1], ["Exact", r => fmtPct(r.agreement_exact), 1],
    ], d.shadows ?? [], "no route shadows a candidate (routes.NAME.shadow)");
    // Batch lines wait behind people: their first tokens with and without.
    drawTable("batches", [
      ["Interactive requests", r => r.traffic], ["Requests", r => fmtInt(r.requests), 1],
      ["First token p50", r => fmtMs(r.p50_ms), 1], ["p90", r => fmtMs(r.p90_ms), 1],
    ], d.batches ?? [], "no batch lines in this window (/v1/batches)");
    $('[data-sub="batches"]').textContent = d.batch_tokens_per_hour == null
      ? "interactive first tokens while batch lines ran"
      : `batch lines at ${fmtInt(d.batch_tokens_per_hour)} tokens per hour of their run; interactive first tokens beside them`;
    // Tool time is measured for calls made through /mcp; "Other" is the
    // rest of the wall time (tools the gateway did not see, a person).
    drawTable("sessions", [
      ["Session", r => r.session], ["Key", r => r.key], ["Model calls", r => fmtInt(r.calls), 1],
      ["Model time", r => fmtMs(r.model_ms), 1], ["Tool calls", r => fmtInt(r.tool_calls), 1],
      ["Tool time", r => fmtMs(r.tool_ms), 1], ["Back to back", r => fmtInt(r.back_to_back_tool_calls), 1],
      ["Other", r => fmtMs(r.gap_ms), 1], ["Wall", r => fmtMs(r.wall_ms), 1], ["Spend", usdCell, 1],
    ], d.sessions ?? [], "no sessions in this window (calls with x-session-id or an agent's session header)");
  }

  function drawTotals(t) {
    const set = (field, text, value) => {
      const e = $(`[data-tile="${field}"]`);
      e.textContent = text;
      e.dataset.value = String(value);
    };
    const sub = (field, text) => { $(`[data-sub="${field}"]`).textContent = text; };
    set("requests", fmtInt(t.requests), t.requests);
    set("errors", fmtInt(t.errors), t.errors);
    set("cost_usd", fmtUsd(t.cost_usd), t.cost_usd);
    set("counterfactual_usd", fmtUsd(t.counterfactual_usd), t.counterfactual_usd);
    set("savings_usd", fmtUsd(t.savings_usd), t.savings_usd);
    sub("errors", t.requests ? fmtPct(t.errors / t.requests) + " of requests" : "");
    $(`[data-tile="errors"]`).closest(".tile").classList.toggle("warn", t.errors > 0);
    sub("cost_usd", `cloud ${fmtUsd(t.cloud_usd)} · local ${fmtUsd(t.local_usd)}`);
    sub("counterfactual_usd", "had every request gone to the cloud");
    sub("savings_usd", t.counterfactual_usd ? fmtPct(t.savings_usd / t.counterfactual_usd) + " of the counterfactual" : "");
  }

  function draw(d) {
    const xs = d.buckets.map(ms => ms / 1000); // uPlot's time scale counts seconds
    drawTotals(d.totals);
    drawSplit(d, xs);
    drawSpend(d, xs);
    drawTtft(d, xs);
    drawTables(d);
  }

  // ---- loading
  const banner = $("#banner"), updated = $("#updated");
  function fail(text) {
    banner.textContent = text;
    banner.hidden = false;
    if (document.body.dataset.ready) updated.classList.add("stale"); // the last good draw stays up
    else updated.textContent = "no data yet";
  }
  async function load() {
    const mine = ++seq, w = win;
    let res;
    try {
      res = await fetch(`/admin/stats?window=${w}`, { cache: "no-store", credentials: "same-origin" });
    } catch (e) {
      if (mine === seq) fail(`Could not reach the gateway (${e.message}); retrying every ${REFRESH_MS / 1000} s.`);
      return;
    }
    if (mine !== seq) return;
    if (!res.ok) {
      const why = `/admin/stats answered HTTP ${res.status}${res.statusText ? " " + res.statusText : ""}`;
      return fail(res.status === 401 || res.status === 403
        ? `Not signed in: ${why}. Reload and sign in as user "admin" with the admin key.`
        : `Could not load stats: ${why}; retrying every ${REFRESH_MS / 1000} s.`);
    }
    try {
      const d = await res.json();
      if (mine !== seq) return;
      draw(d);
      banner.hidden = true;
      updated.classList.remove("stale");
      updated.textContent = `updated ${clock(d.now_ms)}`;
      document.body.dataset.drawnWindow = d.window; // tells tests which window is on screen
      document.body.dataset.ready = "1";
    } catch (e) {
      fail(`Could not draw the stats: ${e.message}`);
    }
  }

  function choose(w) {
    win = w;
    history.replaceState(null, "", "#" + w);
    for (const b of document.querySelectorAll(".windows [data-window]")) b.setAttribute("aria-pressed", String(b.dataset.window === w));
    load();
  }
  for (const b of document.querySelectorAll(".windows [data-window]")) b.addEventListener("click", () => choose(b.dataset.window));
  // A hidden tab does not poll; it catches up as soon as it is shown again.
  setInterval(() => { if (!document.hidden) load(); }, REFRESH_MS);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) load(); });
  choose(win);
})();
