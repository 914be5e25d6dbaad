// The dashboard in a real browser: opens <base>/dashboard in Debian's
// Chromium, fails on any console error, page error or failed request, checks
// that every panel drew, that the numbers shown equal /admin/stats, that a
// phone-sized viewport does not scroll sideways, and that the window buttons
// work; then the request log's page against /admin/requests (rows, the status
// filter, a picked request's calls); saves a full-page laptop screenshot (and
// a phone one and the request log's beside it).
//   usage: node check.mjs BASE_URL ADMIN_KEY_OR_EMPTY SCREENSHOT.png
// Run it through run.sh, which installs playwright-core. The gateway must be
// quiet while it runs: the page and this script each fetch the stats once
// and compare them.
import { chromium } from "playwright-core";

const [base, key, shot] = process.argv.slice(2);
if (!base || key === undefined || !shot) {
  console.error("usage: node check.mjs BASE_URL ADMIN_KEY_OR_EMPTY SCREENSHOT.png");
  process.exit(2);
}
const url = path => new URL(path, base).href;

// Mirrors fmtUsd and fmtInt in gateway/assets/dashboard/dashboard.js.
const group = s => s.replace(/^\d+/, d => d.replace(/\B(?=(\d{3})+$)/g, ","));
function fmtUsd(v) {
  if (v == null) return "—";
  const sign = v < 0 ? "-" : "", a = Math.abs(v);
  if (a === 0) return "$0.00";
  if (a >= 1) return sign + "$" + group(a.toFixed(2));
  if (a >= 1e-6) return sign + "$" + a.toPrecision(4);
  return sign + "<$0.000001";
}
const fmtInt = v => (v == null ? "—" : group(String(Math.round(v))));

const failures = [];
const expect = (ok, what) => { if (!ok) failures.push(what); };
const same = (shown, want, what) => expect(shown === want, `${what}: page shows ${JSON.stringify(shown)}, want ${JSON.stringify(want)}`);

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
try {
  const context = await browser.newContext({
    viewport: { width: 1366, height: 900 },
    httpCredentials: key ? { username: "admin", password: key } : undefined,
  });
  const page = await context.newPage();
  page.on("console", m => { if (m.type() === "error") failures.push(`console error: ${m.text()}`); });
  page.on("pageerror", e => failures.push(`page error: ${e.message}`));
  page.on("requestfailed", r => failures.push(`request failed: ${r.url()} (${r.failure()?.errorText})`));
  page.on("response", r => { if (r.status() >= 400) failures.push(`HTTP ${r.status()} for ${r.url()}`); });

  const res = await page.goto(url("/dashboard"));
  if (!res || !res.ok()) throw new Error(`GET /dashboard answered ${res && res.status()}`);
  await page.waitForFunction(() => document.body.dataset.ready === "1" || !document.getElementById("banner").hidden,
    null, { timeout: 20000 });
  const banner = await page.$eval("#banner", b => (b.hidden ? "" : b.textContent));
  if (banner) throw new Error(`the page shows an error banner: ${banner}`);

  // The same JSON the page drew, fetched independently.
  const auth = key ? { authorization: "Basic " + Buffer.from(`admin:${key}`).toString("base64") } : {};
  const stats = await fetch(url("/admin/stats?window=1h"), { headers: auth });
  if (!stats.ok) throw new Error(`GET /admin/stats?window=1h answered ${stats.status}`);
  const d = await stats.json();

  // Every panel drew: a painted, non-empty canvas per chart, a row per JSON row, or the empty state.
  const panels = await page.$$eval("[data-panel]", ps => ps.map(p => ({
    name: p.dataset.panel, kind: p.dataset.kind,
    empty: p.querySelector(".empty")?.textContent ?? null,
    rows: p.querySelectorAll("tbody tr").length,
    canvases: [...p.querySelectorAll(".uplot canvas")].map(c => {
      const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let painted = false;
      for (let i = 3; i < px.length && !painted; i += 4) painted = px[i] !== 0;
      return { w: c.width, h: c.height, painted };
    }),
  })));
  const nonZero = a => a.some(v => v);
  const wantCharts = {
    split: new Set(d.split.filter(s => nonZero(s.calls)).map(s => s.route)).size,
    spend: Object.values(d.spend).some(nonZero) ? 1 : 0,
    ttft: d.ttft.filter(p => p.p50_ms.some(v => v != null) || p.p90_ms.some(v => v != null)).length,
  };
  for (const p of panels) {
    if (p.kind === "chart") {
      const want = wantCharts[p.name];
      if (want === 0) { expect(p.empty, `panel ${p.name}: no data, so it should say so`); continue; }
      same(p.canvases.length, want, `panel ${p.name}: charts`);
      p.canvases.forEach((c, i) => expect(c.w > 0 && c.h > 0 && c.painted, `panel ${p.name}: chart ${i} is blank (${c.w}x${c.h})`));
    } else {
      const want = d[p.name].length;
      if (want === 0) expect(p.empty, `panel ${p.name}: no rows, so it should say so`);
      else same(p.rows, want, `panel ${p.name}: table rows`);
    }
  }
  same(panels.map(p => p.name).sort().join(), "attainment,backends,batches,sessions,shadows,spend,split,top_keys,top_teams,ttft", "panels");

  // The totals tiles: the raw number exactly, and its text formatted as the page formats it.
  const tiles = Object.fromEntries(await page.$$eval("[data-tile]", ts => ts.map(t => [t.dataset.tile, [t.textContent, t.dataset.value]])));
  for (const [field, f] of [["requests", fmtInt], ["errors", fmtInt], ["cost_usd", fmtUsd], ["counterfactual_usd", fmtUsd], ["savings_usd", fmtUsd]]) {
    const [text, value] = tiles[field] || [];
    same(Number(value), d.totals[field], `tile ${field} data-value`);
    same(text, f(d.totals[field]), `tile ${field} text`);
  }

  // The top keys and teams tables, row by row.
  const rows = name => page.$$eval(`[data-panel="${name}"] tbody tr`, trs => trs.map(tr =>
    [...tr.children].map(c => c.textContent).concat(tr.querySelector("[data-value]")?.dataset.value)));
  (await rows("top_keys")).forEach((r, i) => {
    const k = d.top_keys[i];
    same(JSON.stringify(r), JSON.stringify([k.name, k.team ?? "—", fmtInt(k.requests), fmtUsd(k.cost_usd), String(k.cost_usd)]), `top_keys row ${i}`);
  });
  (await rows("top_teams")).forEach((r, i) => {
    const t = d.top_teams[i];
    same(JSON.stringify(r), JSON.stringify([t.name, fmtInt(t.requests), fmtUsd(t.cost_usd), String(t.cost_usd)]), `top_teams row ${i}`);
  });

  // The shadow candidates (gateway.yaml shadows every code request on small).
  expect(d.shadows.length > 0, "shadows: the code route's copies are in the stats");
  (await rows("shadows")).forEach((r, i) => {
    const s = d.shadows[i];
    same(JSON.stringify(r.slice(0, 4)), JSON.stringify([s.route, `${s.candidate} / ${s.served_by}`, fmtInt(s.requests), fmtInt(s.candidate_failed)]), `shadows row ${i}`);
  });

  const fmtMs = v => (v == null ? "—" : fmtInt(v) + " ms");
  // The batches panel (e2e.sh runs a batch of three lines).
  same(d.batches.length, 2, "batches: rows while batch lines ran and otherwise");
  (await rows("batches")).forEach((r, i) => {
    const b = d.batches[i];
    same(JSON.stringify(r.slice(0, 4)), JSON.stringify([b.traffic, fmtInt(b.requests), fmtMs(b.p50_ms), fmtMs(b.p90_ms)]), `batches row ${i}`);
  });

  // The agent sessions (e2e.sh sends its requests under four session ids).
  expect(d.sessions.length > 0, "sessions: the requests' x-session-id made sessions");
  (await rows("sessions")).forEach((r, i) => {
    const s = d.sessions[i];
    same(JSON.stringify(r.slice(0, 6)), JSON.stringify([s.session, s.key, fmtInt(s.calls), fmtMs(s.model_ms), fmtInt(s.tool_calls), fmtMs(s.tool_ms)]), `sessions row ${i}`);
  });

  // Two animation frames let the resize observers redraw the charts at the new width.
  const settle = () => page.evaluate(() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))));
  await page.setViewportSize({ width: 390, height: 844 });
  await settle();
  const phone = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth,
    widest: Math.max(0, ...[...document.querySelectorAll(".uplot, .tile, .panel")].map(e => e.getBoundingClientRect().right)),
  }));
  expect(phone.scroll <= 390, `phone: the page is ${phone.scroll}px wide, more than 390`);
  expect(phone.widest <= 390, `phone: a panel or chart reaches ${phone.widest}px, past 390`);
  await page.screenshot({ path: shot.replace(/(\.png)?$/, ".phone.png"), fullPage: true });

  await page.setViewportSize({ width: 1366, height: 900 });
  await settle();
  await page.screenshot({ path: shot, fullPage: true });

  // The window buttons: 24 h draws the 24 h stats.
  await page.click('.windows [data-window="24h"]');
  await page.waitForFunction(() => document.body.dataset.drawnWindow === "24h" || !document.getElementById("banner").hidden,
    null, { timeout: 20000 });
  same(await page.$eval('.windows [data-window="24h"]', b => b.getAttribute("aria-pressed")), "true", "24 h button pressed");
  same(await page.$eval("#banner", b => b.hidden), true, "no error banner after choosing 24 h");

  // The request log's page: the dashboard links to it; its rows are
  // GET /admin/requests's, the status filter narrows them as the API does,
  // and a picked request shows its calls.
  await page.click('a[href="/dashboard/requests"]');
  await page.waitForFunction(() => document.body.dataset.ready === "1", null, { timeout: 20000 });
  same(await page.$eval("#banner", b => b.hidden), true, "request log: no error banner");
  const logRows = () => page.$$eval("#log tbody tr", trs => trs.map(tr => ({
    id: tr.dataset.id, status: tr.querySelector("[data-status]").dataset.status,
    cells: [...tr.children].map(c => c.textContent),
  })));
  const api = async q => {
    const r = await fetch(url("/admin/requests?" + q), { headers: auth });
    if (!r.ok) throw new Error(`GET /admin/requests?${q} answered ${r.status}`);
    return r.json();
  };
  const all = await api("since=1h&limit=50");
  const shown = await logRows();
  same(JSON.stringify(shown.map(r => r.id)), JSON.stringify(all.requests.map(r => r.request_id)), "request log: rows, newest first");
  same(shown[0]?.cells[3], all.requests[0]?.backend || "—", "request log: first row's backend");
  same(await page.$eval("#older", b => b.disabled), all.next_offset == null, "request log: older page button");
  await page.selectOption('#filters select[name="status"]', "error");
  await page.click('#filters button[type="submit"]');
  await page.waitForFunction(() => document.body.dataset.ready === "1" && new URLSearchParams(location.search).get("status") === "error", null, { timeout: 20000 });
  const errors = await api("since=1h&limit=50&status=error");
  const errorRows = await logRows();
  expect(errors.requests.length > 0, "request log: the refused request is an error");
  same(JSON.stringify(errorRows.map(r => r.id)), JSON.stringify(errors.requests.map(r => r.request_id)), "request log: status=error rows");
  expect(errorRows.every(r => r.status === "error"), "request log: every filtered row is an error");
  same(errorRows[0]?.cells[11], errors.requests[0]?.error || errors.requests[0]?.refusal || "", "request log: why it failed");
  await page.click("#log tbody tr");
  await page.waitForSelector("#detail:not([hidden]) [data-calls]", { timeout: 20000 });
  const record = await (await fetch(url(`/admin/requests/${errors.requests[0].request_id}`), { headers: auth })).json();
  same(await page.$eval("#detail [data-calls]", t => Number(t.dataset.calls)), record.calls.length, "request log: the picked request's calls");
  same(await page.$eval('#detail [data-fact="outcome"]', d => d.textContent), record.outcome, "request log: the picked request's outcome");
  await page.screenshot({ path: shot.replace(/(\.png)?$/, ".requests.png"), fullPage: true });
} catch (e) {
  failures.push(e.message);
} finally {
  await browser.close();
}
if (failures.length) {
  console.error("dashboard check FAILED:\n  " + failures.join("\n  "));
  process.exit(1);
}
console.log(`dashboard check: ok (screenshot ${shot})`);
