// A report's detail view follows its range: every span is in the file (levels.py's store),
// and those overlapping the view are drawn, all of them when they fit the budget, else the
// longest (the rest are narrower than what the view can show apart). Debounced: a drag or a
// wheel sends many range changes.
const st = wb.state(name);
clearTimeout(st.timer);
st.timer = setTimeout(() => {
  const d = store.data, names = store.tags[0], start = x_range.start, end = x_range.end;
  let picked = [];
  for (let j = 0; j < d.left.length && d.left[j] <= end; j++) if (d.right[j] >= start) picked.push(j);
  const inView = picked.length;
  if (picked.length > budget) {
    picked.sort((a, b) => (d.right[b] - d.left[b]) - (d.right[a] - d.left[a]));
    picked = picked.slice(0, budget).sort((a, b) => a - b);
  }
  const columns = ["left", "right", "top", "bottom", "color", "alpha", "phase", "kind", "lane", "partition",
                   "worker", "duration_ms", "detail", "depth", "role", "family", "bytes"];
  const out = sources.map(() => Object.fromEntries(columns.map(c => [c, []])));
  for (const j of picked) {
    const o = out[Math.min(d.depth[j], sources.length - 1)];
    o.left.push(d.left[j]); o.right.push(d.right[j]); o.top.push(0); o.bottom.push(0);
    o.color.push(names.color[d.color[j]]); o.alpha.push(1);
    for (const c of ["phase", "kind", "lane", "detail", "role", "family"]) o[c].push(names[c][d[c][j]]);
    o.partition.push(d.partition[j]); o.worker.push(d.worker[j]); o.depth.push(Math.min(d.depth[j], 2));
    o.duration_ms.push((d.right[j] - d.left[j]) * 1000); o.bytes.push(d.bytes[j]);
  }
  sources.forEach((s, k) => { s.data = out[k]; });
  title.text = inView > picked.length
    ? `detail: the ${picked.length.toLocaleString()} longest of the ${inView.toLocaleString()} spans in view (zoom in for every one)`
    : `detail: all ${inView.toLocaleString()} spans in view, ${start.toFixed(3)} s to ${end.toFixed(3)} s`;
}, 120);
