// The bars of the kinds whose legend entry is not hidden (all of them, null, while none is).
const hidden = new Set();
for (const item of legend.items)
  if (item.renderers.some(r => !r.visible))
    for (const label of item.get_labels_list_from_label_prop()) hidden.add(label);
if (hidden.size === 0) return null;
const kind = source.data.kind ?? [];
const shown = [];
for (let i = 0; i < kind.length; i++) if (!hidden.has(kind[i])) shown.push(i);
return shown;
