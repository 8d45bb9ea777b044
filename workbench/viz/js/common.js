// Shared by the Gantt's callbacks (each CustomJS starts with this file): the state of one
// Gantt (hidden lanes, the search), where each lane sits, and the spans a range or a search
// looks at, whether they are the bars drawn or a report's store of every span.
const wb = (window.wb = window.wb || {states: {}});
wb.state = (name) => (wb.states[name] = wb.states[name] || {hidden: new Set(), query: "", timer: null});
// Keys typed into the Gantt's inputs (the search) are theirs: a notebook interface sees them
// come from the chart's shadow host, not from an input, and took them for its shortcuts (Enter
// in JupyterLab left the search unsubmitted). Installed at the first draw (js/place.js).
wb.typing = (e) => {
  const t = e.composedPath()[0];
  return Boolean(t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName)));
};
if (!wb.inputsKept) {
  wb.inputsKept = true;
  for (const type of ["keydown", "keypress", "keyup"])
    window.addEventListener(type, (e) => {
      if (e.target !== e.composedPath()[0] && wb.typing(e)) e.stopPropagation();
    }, true);
}
wb.HALF = [0.42, 0.3, 0.18];
wb.LANE_PX = 24;
wb.positions = (lanes, hidden) => {
  const at = new Map();
  for (const lane of lanes) if (!hidden.has(lane)) at.set(lane, at.size);
  return at;
};
// A search matches a span when its words hold the query; numbers match whole ("partition 3"
// is not partition 31).
wb.matcher = (query) => {
  const q = (query || "").trim().toLowerCase();
  if (!q) return null;
  let pattern = q.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/\s+/g, "\\s+");
  if (/^\d/.test(q)) pattern = "(?<!\\d)" + pattern;
  if (/\d$/.test(q)) pattern += "(?!\\d)";
  const re = new RegExp(pattern);
  return (words) => re.test(words);
};
wb.words = (phase, lane, partition, worker, detail, pipeline) => {
  let w = phase + " | " + lane;
  if (partition >= 0) w += pipeline ? " | partition " + partition + " | p" + partition : " | unit " + partition;
  if (worker >= 0) w += " | worker " + worker;
  return (w + " | " + (detail || "")).toLowerCase();
};
// Every span as columns: the report's store (coded, see levels.py) or the drawn bars.
wb.spans = (store, sources) => {
  if (store) {
    if (store.__decoded !== store.data.left) {
      const names = store.tags[0], d = store.data, out = {left: d.left, right: d.right, depth: d.depth,
        partition: d.partition, worker: d.worker, bytes: d.bytes};
      for (const c of ["lane", "phase", "kind", "role", "family", "detail", "color"])
        out[c] = Array.from(d[c], k => names[c][k]);
      store.__spans = out;
      store.__decoded = d.left;
    }
    return store.__spans;
  }
  const out = {};
  const columns = ["left", "right", "depth", "partition", "worker", "bytes", "lane", "phase", "kind", "role",
                   "family", "detail", "color"];
  for (const c of columns) out[c] = [];
  for (const s of sources) for (const c of columns) for (const v of (s.data[c] ?? [])) out[c].push(v);
  return out;
};
// Sources whose bars are placed and shaded by transforms (js/place.js, js/dim.js) draw again.
wb.redraw = (sources) => { for (const s of sources) s.change.emit(); };
wb.esc = (t) => String(t).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
wb.ms = (ms) => ms >= 1000 ? (ms / 1000).toFixed(3) + " s" : ms >= 1 ? ms.toFixed(2) + " ms" : (ms * 1000).toFixed(1) + " µs";
wb.bytes = (n) => n >= 1e9 ? (n / 1e9).toFixed(2) + " GB" : n >= 1e6 ? (n / 1e6).toFixed(2) + " MB" :
  n >= 1e3 ? (n / 1e3).toFixed(2) + " kB" : n.toFixed(0) + " B";
// A range's statistics (js/stats.js, or a notebook kernel's answers.py) into its panel; the
// last answer stays in wb.stats[name] for scripts and tests.
wb.showRange = (name, div, lanes, r) => {
  (wb.stats = wb.stats || {})[name] = r;
  const width = r.x1 - r.x0;
  let html = `<div class="wb-details-head"><b>${wb.ms(width * 1000)} selected</b>, ${r.x0.toFixed(6)} s to ` +
    `${r.x1.toFixed(6)} s: ${r.spans.toLocaleString()} spans; ${r.copies.toLocaleString()} copies, ${wb.bytes(r.bytes)}` +
    (r.copy_time > 0 ? ` (${(r.bytes / r.copy_time / 1e9).toFixed(2)} GB/s while copying)` : "") + "</div>";
  html += `<table class="wb-detail"><tr><th>lane</th><th>busy</th><th>spans</th></tr>`;
  for (const l of lanes.filter(l => l in r.lanes))
    html += `<tr><td>${wb.esc(l)}</td><td>${(r.busy[l] * 100).toFixed(1)}%</td><td>${r.lanes[l]}</td></tr>`;
  html += "</table>";
  const w = Object.entries(r.waits).sort((p, q) => q[1] - p[1]);
  if (w.length) html += `<div><b>waits</b>: ${w.map(([k, t]) => `${wb.esc(k)} ${wb.ms(t * 1000)}`).join(", ")}</div>`;
  const top = Object.entries(r.kinds).sort((p, q) => q[1][1] - p[1][1]).slice(0, 8);
  html += `<div><b>by kind</b>: ${top.map(([k, v]) => `${wb.esc(k)} ${v[0]}× ${wb.ms(v[1] * 1000)}`).join(", ")}</div>`;
  if (r.missing) html += `<div class="wb-said">${wb.esc(r.missing)}</div>`;
  div.text = html;
};
// A search's answer (js/search.js, or a notebook kernel's answers.py) into its panel.
wb.matchesText = (r) => {
  if (!r) return "";
  let text = `${r.count.toLocaleString()} match${r.count === 1 ? "" : "es"}`;
  if (r.count) text += `, first at ${r.first.toFixed(6)} s`;
  if (r.showing !== undefined) text += `; showing ${wb.esc(r.showing)} at ${r.at.toFixed(6)} s`;
  return r.missing ? `${text} (of the spans this page holds: ${wb.esc(r.missing)})` : text;
};
// A click's details (js/details.js from the page's own spans, or a notebook kernel's
// span_details.py) as the panel's HTML: the span, what it lies within, then its partition's
// story (`steps`, `notes`) or its thread's context (`units`, `around`, `launched`), and what
// is missing from it (`missing`: a notebook page with no kernel to ask).
wb.detailsHtml = (r) => {
  const row = (k, v) => `<tr><th>${wb.esc(k)}</th><td>${v}</td></tr>`;
  const at = (s) => s.toFixed(6) + " s";
  let html = `<div class="wb-details-head"><b>${wb.esc(r.phase)}</b> on ${wb.esc(r.lane)}</div><table class="wb-detail">`;
  html += row("start", at(r.left)) + row("duration", wb.ms(r.right * 1000 - r.left * 1000));
  if (r.role) html += row("role", wb.esc(r.role));
  if (r.detail) html += row("details", wb.esc(r.detail));
  if (r.within.length) html += row("within", r.within.map(([phase, ms]) => `${wb.esc(phase)} (${wb.ms(ms)})`).join(" › "));
  const p = r.partition;
  if (r.steps) {
    html += row("partition", String(p)) + row("worker", r.worker >= 0 ? String(r.worker) : "-") + "</table>";
    const s = r.steps, lines = r.notes;
    html += `<div class="wb-story"><b>${wb.esc(lines[0] || "partition " + p)}</b>`;
    html += `<table class="wb-detail wb-steps"><tr><th>step</th><th>lane</th><th>start</th><th>duration</th><th></th></tr>`;
    for (let k = 0; k < s.step.length; k++) {
      const here = s.lane[k] === r.lane && Math.abs(s.start[k] - r.left) < 1e-9 && s.step[k] === r.phase;
      const indent = "&nbsp;&nbsp;".repeat(Math.min(Number(s.depth[k]), 3));
      html += `<tr class="${here ? "wb-here" : ""}"><td>${indent}${wb.esc(s.step[k])}</td><td>${wb.esc(s.lane[k])}</td>` +
        `<td>${at(s.start[k])}</td><td>${wb.ms(s.duration_ms[k])}</td><td>${wb.esc(s.note[k] || "")}</td></tr>`;
    }
    html += "</table>";
    for (const line of lines.slice(1)) html += `<div class="wb-said">${wb.esc(line)}</div>`;
    return html + "</div>";
  }
  const said = ([phase, lane, ms]) => `${wb.esc(phase)} on ${wb.esc(lane)} (${wb.ms(ms)})`;
  if (r.units.length) html += row("unit of work", r.units.map(said).join("; "));
  if (r.around.length) html += row("same thread then", r.around.map(said).join("; "));
  for (const [kind, lane0, x0] of r.launched)
    html += row(kind === "ac2g" ? "launched from" : wb.esc(kind), `${wb.esc(lane0)} at ${at(x0)}`);
  if (p >= 0) html += row(r.pipeline ? "partition" : "unit", String(p));
  if (p >= 0 && r.pipeline) html += row("worker", r.worker >= 0 ? String(r.worker) : "-");
  html += "</table>";
  return r.missing ? html + `<div class="wb-said">${wb.esc(r.missing)}</div>` : html;
};
// A static copy's document (a notebook reopened without the kernel that drew it: fallback.py
// marks it) has no kernel to ask: its page answers from the spans it holds, and says so.
wb.noKernel = (model) => Boolean(model && model.document && model.document.wbNoKernel);
wb.PAGE_ONLY = "a static copy: the kernel that drew this Gantt is gone; re-run the cell to count every span";
// How long a click waits for a notebook kernel's answer before saying it has none.
wb.KERNEL_WAIT_S = wb.KERNEL_WAIT_S || 10;
