// One tooltip, not one per depth: a bar's tooltip gives way to a deeper bar under the pointer.
const d = sources.indexOf(cb_data.data_source);
const lane = cb_data.row.lane, x = cb_data.vars.x;
for (let k = d + 1; k >= 1 && k < sources.length; k++) {
  const p = sources[k].data;
  for (let j = 0; j < p.left.length; j++) {
    if (p.lane[j] === lane && p.left[j] <= x && x <= p.right[j]) return false;
  }
}
return true;
