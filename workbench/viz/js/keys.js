// Keyboard zoom and pan over the Gantt under the pointer: w/s zoom in/out, a/d pan left and
// right (shift: further). While the pointer is over it the keys are the chart's, not the
// page's (a notebook's shortcuts wait).
if (!wb.keysInstalled) {
  wb.keysInstalled = true;
  window.addEventListener("keydown", (e) => {
    const r = wb.keyRange;
    if (!r || wb.typing(e) || e.ctrlKey || e.metaKey || e.altKey) return;
    const key = e.key.toLowerCase(), step = e.shiftKey ? 0.5 : 0.2;
    const width = r.end - r.start, centre = (r.start + r.end) / 2;
    let start, end;
    if (key === "w") { start = centre - width * (1 - step) / 2; end = centre + width * (1 - step) / 2; }
    else if (key === "s") { start = centre - width / (1 - step) / 2; end = centre + width / (1 - step) / 2; }
    else if (key === "a") { start = r.start - width * step; end = r.end - width * step; }
    else if (key === "d") { start = r.start + width * step; end = r.end + width * step; }
    else return;
    e.preventDefault();
    e.stopImmediatePropagation();
    r.setv({start, end});
  }, true);
}
wb.keyRange = entering ? x_range : (wb.keyRange === x_range ? null : wb.keyRange);
