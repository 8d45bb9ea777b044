// Where a bar (or an arrow's end) is drawn: its lane's row among the lanes shown, a nested bar
// thinner (`side` -1 for its top, +1 for its bottom, 0 for an arrow); a hidden lane's are not drawn.
const st = wb.state(name), at = wb.positions(lanes, st.hidden), depth = source.data.depth;
const out = new Float64Array(xs.length);
for (let i = 0; i < xs.length; i++) {
  const y = at.get(xs[i]);
  out[i] = y === undefined ? NaN : y + (side === 0 ? 0 : side * wb.HALF[Math.min(Number(depth[i]), 2)]);
}
return out;
