// Lanes grouped by GPU, worker and thread: an unticked group's lanes leave the chart, the
// others close up, and the flow arrows follow their lanes.
const st = wb.state(name);
st.hidden = new Set();
const shown = new Set(cb_obj.active.map(k => cb_obj.labels[k]));
lanes.forEach((lane, k) => { if (!shown.has(labels[groups[k]])) st.hidden.add(lane); });
const at = wb.positions(lanes, st.hidden), n = Math.max(at.size, 1);
wb.redraw(drawn);
// The figure keeps the height its legend needs (at most the height it was made with, where a
// long legend scrolls): with fewer lanes than that the lanes keep their size and leave room
// below the last, and the legend is laid out again for the height, as gantt.py lays it out.
figures.forEach((fig, k) => {
  const axis = axes[k], lay = legends[k];
  axis.ticker.ticks = [...at.values()];
  axis.major_label_overrides = new Map([...at].map(([lane, y]) => [y, lane]));
  const entries = Math.max(lay.legend.items.filter(item => item.visible).length, 1);
  const rows = Math.ceil(entries / lay.columns);
  const px = Math.max(70 + wb.LANE_PX * n, Math.min(lay.height, lay.margin + (rows + 1) * lay.row));
  const room = Math.max(px - lay.margin, 3 * lay.row);
  lay.legend.nrows = Math.max(Math.floor(room / lay.row) - 1, 1, rows);
  lay.sheet.css = `:host { max-height: ${room}px; overflow-y: auto; }`;
  fig.y_range.setv({start: Math.max(n, (px - 70) / wb.LANE_PX) - 0.5, end: -0.5});
  fig.height = px;
});
