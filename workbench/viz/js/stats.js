// A box drawn over a time range: what is in it. Spans overlapping [x0, x1] count; times are
// clipped to the range; a lane is busy where any of its spans is (their union); bytes are
// those of the copies that overlap the range.
const g = cb_obj.geometry;
if (!g || g.type !== "rect" || !cb_obj.final) return;
const x0 = Math.min(g.x0, g.x1), x1 = Math.max(g.x0, g.x1), width = x1 - x0;
if (!(width > 0)) return;
const all = wb.spans(store, sources), hidden = wb.state(name).hidden;
const perLane = new Map(), waits = new Map(), kinds = new Map();
let spans = 0, copies = 0, bytes = 0, copyTime = 0;
for (let j = 0; j < all.left.length; j++) {
  const a = Math.max(all.left[j], x0), b = Math.min(all.right[j], x1);
  if (!(all.right[j] >= x0 && all.left[j] <= x1) || hidden.has(all.lane[j])) continue;
  spans += 1;
  const lane = all.lane[j];
  if (!perLane.has(lane)) perLane.set(lane, {spans: 0, intervals: []});
  const entry = perLane.get(lane);
  entry.spans += 1;
  entry.intervals.push([a, b]);
  const k = kinds.get(all.kind[j]) || {count: 0, time: 0};
  k.count += 1; k.time += b - a; kinds.set(all.kind[j], k);
  if (all.family[j] === "wait") waits.set(all.phase[j], (waits.get(all.phase[j]) || 0) + (b - a));
  if (all.family[j] === "copy") { copies += 1; bytes += Number(all.bytes[j]); copyTime += all.right[j] - all.left[j]; }
}
const busy = {};
for (const [lane, entry] of perLane) {
  const iv = entry.intervals.sort((p, q) => p[0] - q[0]);
  let covered = 0, s = -Infinity, e = -Infinity;
  for (const [a, b] of iv) {
    if (a > e) { if (e > s) covered += e - s; s = a; e = b; } else if (b > e) e = b;
  }
  if (e > s) covered += e - s;
  busy[lane] = covered / width;
}
const result = {x0, x1, spans, copies, bytes, busy, waits: Object.fromEntries(waits),
                lanes: Object.fromEntries([...perLane].map(([l, v]) => [l, v.spans]))};
(wb.stats = wb.stats || {})[name] = result;
const order = lanes.filter(l => perLane.has(l));
let html = `<div class="wb-details-head"><b>${wb.ms(width * 1000)} selected</b>, ${x0.toFixed(6)} s to ${x1.toFixed(6)} s: ` +
  `${spans.toLocaleString()} spans; ${copies.toLocaleString()} copies, ${wb.bytes(bytes)}` +
  (copyTime > 0 ? ` (${(bytes / copyTime / 1e9).toFixed(2)} GB/s while copying)` : "") + "</div>";
html += `<table class="wb-detail"><tr><th>lane</th><th>busy</th><th>spans</th></tr>`;
for (const l of order)
  html += `<tr><td>${wb.esc(l)}</td><td>${(busy[l] * 100).toFixed(1)}%</td><td>${perLane.get(l).spans}</td></tr>`;
html += "</table>";
const w = [...waits].sort((p, q) => q[1] - p[1]);
if (w.length) html += `<div><b>waits</b>: ${w.map(([k, t]) => `${wb.esc(k)} ${wb.ms(t * 1000)}`).join(", ")}</div>`;
const top = [...kinds].sort((p, q) => q[1].time - p[1].time).slice(0, 8);
html += `<div><b>by kind</b>: ${top.map(([k, v]) => `${wb.esc(k)} ${v.count}× ${wb.ms(v.time * 1000)}`).join(", ")}</div>`;
div.text = html;
