// Shared by the Gantt's callbacks (each CustomJS starts with this file): the state of one
// Gantt (hidden lanes, the search), where each lane sits, and the spans a range or a search
// looks at, whether they are the bars drawn or a report's store of every span.
const wb = (window.wb = window.wb || {states: {}});
wb.state = (name) => (wb.states[name] = wb.states[name] || {hidden: new Set(), query: "", timer: null});
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
