// A bar's opacity under the search: as it was where it matches, dimmed where it does not.
const match = wb.matcher(wb.state(name).query);
if (!match) return xs;
const d = source.data, out = new Float64Array(xs.length);
for (let i = 0; i < xs.length; i++)
  out[i] = xs[i] * (match(wb.words(d.phase[i], d.lane[i], d.partition[i], d.worker[i], d.detail[i], pipeline)) ? 1 : 0.12);
return out;
