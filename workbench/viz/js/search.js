// Search by partition, phase, worker, lane or kernel name: matching bars stay, others dim;
// "n matches" counts every span (a report's store included, not only the bars drawn). Enter
// brings the next match into the view. A notebook's page holds only the spans in view, so its
// kernel counts and moves the view (answers.py, `remote`); here the drawn bars only dim. A
// static copy with no kernel counts the spans it holds, and says so.
const st = wb.state(name);
st.query = cb_obj.value_input ?? cb_obj.value;
wb.redraw(drawn);
const match = wb.matcher(st.query);
if (!match) { div.text = ""; return; }
const alone = remote && wb.noKernel(div);
if (remote && !alone) return;
const all = wb.spans(store, sources);
const hits = [];
for (let j = 0; j < all.left.length; j++)
  if (match(wb.words(all.phase[j], all.lane[j], all.partition[j], all.worker[j], all.detail[j], pipeline))) hits.push(j);
hits.sort((a, b) => all.left[a] - all.left[b]);
const r = {count: hits.length, first: hits.length ? all.left[hits[0]] : 0};
if (jump && hits.length) {
  const width = x_range.end - x_range.start, centre = (x_range.start + x_range.end) / 2;
  let next = hits.find(j => all.left[j] > centre + width * 1e-6);
  if (next === undefined) next = hits[0];
  const span = all.right[next] - all.left[next];
  const w = Math.max(Math.min(width, span * 40), span * 1.5, 1e-6);
  const c = (all.left[next] + all.right[next]) / 2;
  x_range.setv({start: c - w / 2, end: c + w / 2});
  r.showing = all.phase[next]; r.at = all.left[next];
}
if (alone) r.missing = wb.PAGE_ONLY;
div.text = wb.matchesText(r);
