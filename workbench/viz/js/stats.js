// A box drawn over a time range: what is in it. Spans overlapping [x0, x1] count; times are
// clipped to the range; a lane is busy where any of its spans is (their union); bytes are
// those of the copies that overlap the range. A notebook's page holds only the spans in view,
// so its kernel answers (answers.py) and the page draws that answer (`remote`); a static copy
// with no kernel counts the spans it holds, and says so.
const g = cb_obj.geometry;
if (!g || g.type !== "rect" || !cb_obj.final) return;
const x0 = Math.min(g.x0, g.x1), x1 = Math.max(g.x0, g.x1), width = x1 - x0;
if (!(width > 0)) return;
const alone = remote && wb.noKernel(div);
if (remote && !alone) {
  div.text = `<i>counting every span from ${x0.toFixed(6)} s to ${x1.toFixed(6)} s…</i>`;
  return;
}
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
  const k = kinds.get(all.kind[j]) || [0, 0];
  k[0] += 1; k[1] += b - a; kinds.set(all.kind[j], k);
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
wb.showRange(name, div, lanes, {x0, x1, spans, copies, bytes, copy_time: copyTime, busy,
  waits: Object.fromEntries(waits), kinds: Object.fromEntries(kinds),
  lanes: Object.fromEntries([...perLane].map(([l, v]) => [l, v.spans])),
  missing: alone ? `Counted over the ${all.left.length.toLocaleString()} spans this page holds (${wb.PAGE_ONLY}).` : ""});
