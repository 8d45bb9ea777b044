// A click on a bar: its details, and for a pipeline its partition's whole story (story.py);
// a foreign trace's span gets its thread and unit context instead (no pipeline words).
// A click selects every bar under the pointer, one per depth: the innermost is the one meant.
const source = [...sources].reverse().find(s => s.selected.indices.length === 1);
if (!source || !sources.some(s => s.selected === cb_obj)) return;
const d = source.data, i = source.selected.indices[0];
if (d.partition[i] === undefined) return;
const all = wb.spans(store, sources);
const left = d.left[i], right = d.right[i], lane = d.lane[i], depth = d.depth[i], mid = (left + right) / 2;
const row = (k, v) => `<tr><th>${wb.esc(k)}</th><td>${v}</td></tr>`;
const at = (s) => s.toFixed(6) + " s";
let html = `<div class="wb-details-head"><b>${wb.esc(d.phase[i])}</b> on ${wb.esc(lane)}</div><table class="wb-detail">`;
html += row("start", at(left)) + row("duration", wb.ms(right * 1000 - left * 1000));
if (d.role && d.role[i]) html += row("role", wb.esc(d.role[i]));
if (d.detail[i]) html += row("details", wb.esc(d.detail[i]));
// Spans around it on its lane, outermost first.
const within = [];
for (let j = 0; j < all.left.length; j++)
  if (all.lane[j] === lane && all.depth[j] < depth && all.left[j] <= left && all.right[j] >= right)
    within.push([all.depth[j], `${wb.esc(all.phase[j])} (${wb.ms((all.right[j] - all.left[j]) * 1000)})`]);
within.sort((a, b) => a[0] - b[0]);
if (within.length) html += row("within", within.map(w => w[1]).join(" › "));
const p = Number(d.partition[i]);
if (pipeline && p >= 0) {
  html += row("partition", String(p)) + row("worker", d.worker[i] >= 0 ? String(d.worker[i]) : "-") + "</table>";
  const s = stories.data, n = notes.data;
  const lines = [];
  for (let k = 0; k < n.partition.length; k++) if (Number(n.partition[k]) === p) lines.push(n.text[k]);
  html += `<div class="wb-story"><b>${wb.esc(lines[0] || "partition " + p)}</b>`;
  html += `<table class="wb-detail wb-steps"><tr><th>step</th><th>lane</th><th>start</th><th>duration</th><th></th></tr>`;
  for (let k = 0; k < s.partition.length; k++) {
    if (Number(s.partition[k]) !== p) continue;
    const here = s.lane[k] === lane && Math.abs(s.start[k] - left) < 1e-9 && s.step[k] === d.phase[i];
    const indent = "&nbsp;&nbsp;".repeat(Math.min(Number(s.depth[k]), 3));
    html += `<tr class="${here ? "wb-here" : ""}"><td>${indent}${wb.esc(s.step[k])}</td><td>${wb.esc(s.lane[k])}</td>` +
      `<td>${at(s.start[k])}</td><td>${wb.ms(s.duration_ms[k])}</td><td>${wb.esc(s.note[k] || "")}</td></tr>`;
  }
  html += "</table>";
  for (const line of lines.slice(1)) html += `<div class="wb-said">${wb.esc(line)}</div>`;
  html += "</div>";
} else {
  // Its thread's context: what else ran on the lanes of its group at that moment, the unit of
  // work it fell in, and the call that launched it (a launch flow ending at it).
  const group = groups[lanes.indexOf(lane)];
  const around = [], units = [];
  for (let j = 0; j < all.left.length; j++) {
    if (all.left[j] > mid || all.right[j] < mid || (all.lane[j] === lane && all.depth[j] === depth)) continue;
    const said = `${wb.esc(all.phase[j])} on ${wb.esc(all.lane[j])} (${wb.ms((all.right[j] - all.left[j]) * 1000)})`;
    if (all.role[j] === "unit") units.push(said);
    else if (all.lane[j] !== lane && groups[lanes.indexOf(all.lane[j])] === group) around.push(said);
  }
  if (units.length) html += row("unit of work", units.slice(0, 4).join("; "));
  if (around.length) html += row("same thread then", around.slice(0, 6).join("; "));
  const f = flows.data;
  for (let k = 0; k < f.x1.length; k++)
    if (f.lane1[k] === lane && Math.abs(f.x1[k] - left) < 1e-9)
      html += row(f.kind[k] === "ac2g" ? "launched from" : wb.esc(f.kind[k]), `${wb.esc(f.lane0[k])} at ${at(f.x0[k])}`);
  if (p >= 0) html += row("unit", String(p));
  html += "</table>";
}
div.text = html;
