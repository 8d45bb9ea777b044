// Lanes grouped by GPU, worker and thread: an unticked group's lanes leave the chart, the
// others close up, and the flow arrows follow their lanes.
const st = wb.state(name);
st.hidden = new Set();
const shown = new Set(cb_obj.active.map(k => cb_obj.labels[k]));
lanes.forEach((lane, k) => { if (!shown.has(labels[groups[k]])) st.hidden.add(lane); });
const at = wb.positions(lanes, st.hidden), n = Math.max(at.size, 1);
wb.redraw(drawn);
figures.forEach((fig, k) => {
  const axis = axes[k];
  axis.ticker.ticks = [...at.values()];
  axis.major_label_overrides = new Map([...at].map(([lane, y]) => [y, lane]));
  fig.y_range.setv({start: n - 0.5, end: -0.5});
  fig.height = 70 + wb.LANE_PX * n;
});
