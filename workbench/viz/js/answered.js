// A notebook kernel's answer (answers.py, span_details.py) arrived in a panel's tags: draw it
// as a report's page draws its own (js/stats.js, js/search.js, js/details.js).
const r = cb_obj.tags[0];
if (!r) return;
if (what === "range") wb.showRange(name, cb_obj, lanes, r);
else if (what === "details") cb_obj.text = r.error ? wb.esc(r.error) : wb.detailsHtml(r);
else cb_obj.text = wb.matchesText(r);
