// The spans around the hovered one: the bars of shallower depths on its lane that enclose it.
const s = sources[value].data, i = special_vars.index;
const lane = s.lane[i], left = s.left[i], right = s.right[i];
const found = [];
for (let d = value - 1; d >= 0; d--) {
  const p = sources[d].data;
  for (let j = 0; j < p.left.length; j++) {
    if (p.lane[j] === lane && p.left[j] <= left && p.right[j] >= right) {
      found.push(p.phase[j] + " (" + Number(p.duration_ms[j]).toFixed(3) + " ms)");
      break;
    }
  }
}
return found.length ? found.reverse().join(" › ") : "nothing (outermost)";
