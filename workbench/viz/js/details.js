// A click on a bar: its details, and for a pipeline its partition's whole story (story.py);
// a foreign trace's span gets its thread and unit context instead (no pipeline words).
// A click selects every bar under the pointer, one per depth: the innermost is the one meant.
// A notebook's page holds only the spans in view and no stories, so it asks its kernel
// (span_details.py, `remote`), whose answer is drawn by the same code (wb.detailsHtml). Where
// no kernel can answer (a notebook reopened without one shows its static copy, which marks its
// document: fallback.py), or none has answered after a while, the page says so plainly and
// shows what it holds itself, rather than waiting.
const source = [...sources].reverse().find(s => s.selected.indices.length === 1);
if (!source || !sources.some(s => s.selected === cb_obj)) return;
const d = source.data, i = source.selected.indices[0];
if (d.partition[i] === undefined) return;
const left = d.left[i], right = d.right[i], lane = d.lane[i], depth = d.depth[i], mid = (left + right) / 2;
const p = Number(d.partition[i]);
const r = {phase: d.phase[i], lane, left, right, role: d.role ? d.role[i] : "", detail: d.detail[i] || "",
           partition: p, worker: Number(d.worker[i]), pipeline};
const st = wb.state(name);
clearTimeout(st.unanswered);
// What the page holds about the span: what it lies within, and its partition's story (a
// report's page holds every story) or its thread's context, over the page's spans.
const told = () => {
  const all = wb.spans(store, sources);
  const within = [];  // spans around it on its lane, outermost first
  for (let j = 0; j < all.left.length; j++)
    if (all.lane[j] === lane && all.depth[j] < depth && all.left[j] <= left && all.right[j] >= right)
      within.push([all.depth[j], [all.phase[j], (all.right[j] - all.left[j]) * 1000]]);
  within.sort((a, b) => a[0] - b[0]);
  r.within = within.map(w => w[1]);
  r.around = []; r.units = []; r.launched = [];
  if (pipeline && p >= 0) {
    if (remote) return r;  // its story is the kernel's to tell
    const s = stories.data, n = notes.data;
    r.steps = Object.fromEntries(["step", "lane", "start", "duration_ms", "depth", "note"].map(c => [c, []]));
    for (let k = 0; k < s.partition.length; k++)
      if (Number(s.partition[k]) === p) for (const c in r.steps) r.steps[c].push(s[c][k]);
    r.notes = [];
    for (let k = 0; k < n.partition.length; k++) if (Number(n.partition[k]) === p) r.notes.push(n.text[k]);
    return r;
  }
  // Its thread's context: what else ran on the lanes of its group at that moment, the unit of
  // work it fell in, and the call that launched it (a launch flow ending at it).
  const group = groups[lanes.indexOf(lane)];
  for (let j = 0; j < all.left.length; j++) {
    if (all.left[j] > mid || all.right[j] < mid || (all.lane[j] === lane && all.depth[j] === depth)) continue;
    const said = [all.phase[j], all.lane[j], (all.right[j] - all.left[j]) * 1000];
    if (all.role[j] === "unit") r.units.push(said);
    else if (all.lane[j] !== lane && groups[lanes.indexOf(all.lane[j])] === group) r.around.push(said);
  }
  r.units = r.units.slice(0, 4); r.around = r.around.slice(0, 6);
  const f = flows.data;
  for (let k = 0; k < f.x1.length; k++)
    if (f.lane1[k] === lane && Math.abs(f.x1[k] - left) < 1e-9) r.launched.push([f.kind[k], f.lane0[k], f.x0[k]]);
  return r;
};
const needs = pipeline && p >= 0 ? "its partition's whole story" : "its context over every span of the trace";
if (remote && !wb.noKernel(div)) {
  st.asked = (st.asked || 0) + 1;
  const asking = `<i>asking the kernel for the details of ${wb.esc(r.phase)} on ${wb.esc(lane)}…</i>`;
  div.text = asking;
  ask.tags = [{...r, depth, seq: `${Date.now()}:${st.asked}`}];  // unique past a reload of the page
  st.unanswered = setTimeout(() => {
    if (div.text !== asking) return;  // answered (js/answered.js)
    told().missing = `No answer from the notebook's kernel after ${wb.KERNEL_WAIT_S} s for ${needs}: it may ` +
      "be busy (its answer still shows here when it comes) or gone (re-run the cell to ask again). Shown: " +
      "what this page holds.";
    div.text = wb.detailsHtml(r);
  }, wb.KERNEL_WAIT_S * 1000);
  return;
}
told();
if (remote) r.missing = `A static copy: the kernel that drew this Gantt is gone, and ${needs} comes from ` +
  "a kernel. Re-run the cell to ask one. Shown: what this page holds.";
div.text = wb.detailsHtml(r);
