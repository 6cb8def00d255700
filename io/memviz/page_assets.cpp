// The inline style sheet and script of the memviz page (page_assets.h). The script reads
// the JSON data element (Note [Page data in columns] in page.cpp), draws the timeline,
// wires the pointer and the slider, replays the events for the allocator state, fills
// the peak tables, and sets data-rendered="1" on <body> when all of it is drawn (the
// headless-browser check in tests/apps/memviz_chromium.sh waits for that).
#include "io/memviz/page_assets.h"

namespace fitgrad::io {

const std::string_view kPageStyle = R"css(
body { font: 14px/1.4 system-ui, sans-serif; margin: 16px 24px; color: #222; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 20px 0 6px; }
.warn { background: #fff3e0; border: 1px solid #f0a040; padding: 6px 10px; }
.info { color: #444; min-height: 1.4em; }
#timeline { width: 100%; max-width: 1400px; display: block; cursor: crosshair; }
.legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }
.controls input[type=range] { width: 60%; vertical-align: middle; }
#state { max-width: 1400px; }
.segment { display: flex; align-items: center; margin: 2px 0; font-size: 12px; }
.segment .name { width: 300px; flex: none; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.segment .bar { position: relative; height: 16px; background: #e4e4e4; border: 1px solid #aaa; }
.segment .block { position: absolute; top: 0; bottom: 0; min-width: 1px; box-shadow: inset -1px 0 #fff; }
table { border-collapse: collapse; margin: 6px 24px 6px 0; vertical-align: top; }
td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.tables { display: flex; flex-wrap: wrap; align-items: flex-start; }
#tooltip { position: fixed; pointer-events: none; background: #fffff0; border: 1px solid #888; padding: 4px 8px; font-size: 12px; white-space: pre; z-index: 10; }
)css";

const std::string_view kPageScript = R"js(
'use strict';
window.addEventListener('error', e => {
  const p = document.getElementById('error');
  p.hidden = false;
  p.textContent = 'The page failed to draw: ' + e.message;
  document.body.setAttribute('data-rendered', 'error');
});
(function () {
  const data = JSON.parse(document.getElementById('memviz-data').textContent);
  const svg = document.getElementById('timeline');
  const svgNS = svg.namespaceURI;  // the inline <svg> has the SVG namespace already
  const ev = data.events;  // null when the trace was summarised
  const summarised = ev === null;
  const n = data.window;
  const tl = data.timeline;
  const peak = data.peak;
  const W = 1200, H = 400, X = 80, Y = 30, PW = 1090, PH = 320;

  function bytes(b) {
    const units = ['KiB', 'MiB', 'GiB', 'TiB'];
    if (Math.abs(b) < 1024) return b + ' B';
    let v = b, u = -1;
    while (Math.abs(v) >= 1024 && u < units.length - 1) { v /= 1024; u++; }
    return v.toFixed(2) + ' ' + units[u];
  }
  function percent(p) { return p.toFixed(1) + '%'; }
  function kindOf(i) { return data.kinds[ev.kind[i]]; }
  function labelOf(i) { return ev.label[i] < 0 ? null : data.labels[ev.label[i]]; }
  function shown(label) { return label === '' ? '(no label)' : label; }
  function catOf(i) { return ev.category[i] < 0 ? null : data.categories[ev.category[i]]; }
  function isBlock(k) { return k === 'alloc' || k === 'free' || k === 'retag_from' || k === 'retag_to'; }

  function svgEl(tag, attrs, parent) {
    const e = document.createElementNS(svgNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function htmlEl(tag, attrs, text, parent) {
    const e = document.createElement(tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  const tooltip = document.getElementById('tooltip');
  function showTip(text, clientX, clientY) {
    tooltip.textContent = text;
    tooltip.hidden = false;
    const left = Math.min(clientX + 14, window.innerWidth - tooltip.offsetWidth - 4);
    tooltip.style.left = Math.max(0, left) + 'px';
    tooltip.style.top = (clientY + 14) + 'px';
  }
  function hideTip() { tooltip.hidden = true; }

  // What one event did, as lines of text.
  function eventText(i) {
    const k = kindOf(i);
    const lines = ['event #' + (data.first_seq + i) + ': ' + k];
    if (k === 'mark') lines.push('mark: ' + labelOf(i));
    if (isBlock(k) || k === 'oom') {
      lines.push('label: ' + shown(labelOf(i)));
      lines.push('size: ' + bytes(ev.size[i]) + ' (' + ev.size[i] + ' B)');
      lines.push('category: ' + catOf(i));
    }
    if (isBlock(k)) lines.push('segment #' + ev.segment[i] + ', offset ' + ev.offset[i]);
    if (k === 'segment_alloc' || k === 'segment_free')
      lines.push('segment #' + ev.segment[i] + ': ' + bytes(ev.size[i]));
    if (k === 'segment_map' || k === 'segment_unmap')
      lines.push('segment #' + ev.segment[i] + ': ' + bytes(ev.size[i]) + ' at offset ' + ev.offset[i]);
    lines.push('allocated after: ' + bytes(ev.allocated[i]) + ', reserved after: ' + bytes(ev.reserved[i]));
    lines.push('time: ' + (ev.time_ns[i] / 1e6).toFixed(3) + ' ms');
    return lines.join('\n');
  }

  // ---- header ----
  document.title = 'fitgrad memory: ' + data.device + ' (' + data.source + ')';
  document.getElementById('summary').textContent =
    data.source + ' (' + data.format + '), device ' + data.device + ': ' + n +
    ' events retained of ' + data.total_events + '; peak ' + bytes(peak.allocated) + ' allocated.';
  if (summarised) {
    const d = document.getElementById('summarised');
    d.hidden = false;
    d.textContent = 'The trace holds more events than a page keeps: the timeline draws each run of ' +
      'events at its highest state (the peak exactly), pointing shows a run, and the allocator state is ' +
      'shown at the peak only.';
  }
  if (data.dropped > 0) {
    const d = document.getElementById('dropped');
    d.hidden = false;
    d.textContent = 'The trace ring dropped the ' + data.dropped + ' oldest of ' + data.total_events +
      ' events: this page shows events #' + data.first_seq + ' on. Bytes whose category had no event yet ' +
      'in the window are drawn as "before the window"; the allocator state shows only the blocks ' +
      'allocated inside the window. The peak figures come from the ledger and are exact.';
  }

  // ---- timeline ----
  let ymax = Math.max(1, peak.allocated);
  for (let k = 0; k < tl.event.length; k++) ymax = Math.max(ymax, tl.allocated[k], tl.reserved[k]);
  const xOf = i => X + PW * i / Math.max(1, tl.events);
  const yOf = b => Y + PH - PH * b / ymax;
  const end = k => k + 1 < tl.first.length ? tl.first[k + 1] : tl.events;
  svgEl('rect', { x: X, y: Y, width: PW, height: PH, fill: '#fafafa', stroke: '#888' }, svg);
  let unit = 1;
  for (const u of [1024, 1048576, 1073741824, 1099511627776]) if (ymax >= u) unit = u;
  const raw = ymax / 5 / unit, p10 = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = Math.max(1, unit * ([1, 2, 5, 10].find(m => raw <= m * p10) * p10));
  for (let b = 0; b <= ymax; b += step) {
    svgEl('line', { x1: X, x2: X + PW, y1: yOf(b), y2: yOf(b), stroke: '#e4e4e4' }, svg);
    svgEl('text', { x: X - 6, y: yOf(b) + 4, 'text-anchor': 'end', 'font-size': 11 }, svg).textContent = bytes(b);
  }
  for (let q = 0; q <= 4 && n > 0; q++) {
    const i = Math.min(n - 1, Math.floor(n * q / 4));
    svgEl('text', { x: xOf(i), y: Y + PH + 16, 'text-anchor': 'middle', 'font-size': 11 }, svg)
      .textContent = '#' + (data.first_seq + i);
  }
  svgEl('text', { x: X + PW / 2, y: Y + PH + 34, 'text-anchor': 'middle', 'font-size': 11, fill: '#555' }, svg)
    .textContent = 'event number (seq)';
  const below = tl.event.map(() => 0);
  const legend = document.getElementById('legend');
  for (const layer of tl.layers) {
    let top = '', bottom = '';
    for (let k = 0; k < tl.event.length; k++) {
      const t = yOf(below[k] + layer.bytes[k]), b = yOf(below[k]);
      top += (k ? 'L' : 'M') + xOf(tl.first[k]).toFixed(2) + ' ' + t.toFixed(2) + 'L' + xOf(end(k)).toFixed(2) + ' ' + t.toFixed(2);
      bottom = 'L' + xOf(end(k)).toFixed(2) + ' ' + b.toFixed(2) + 'L' + xOf(tl.first[k]).toFixed(2) + ' ' + b.toFixed(2) + bottom;
      below[k] += layer.bytes[k];
    }
    svgEl('path', { class: 'layer', 'data-category': layer.name, fill: layer.colour, d: top + bottom + 'Z' }, svg);
    const item = htmlEl('span', {}, null, legend);
    htmlEl('i', { style: 'background:' + layer.colour }, null, item);
    item.appendChild(document.createTextNode(layer.name));
  }
  if (tl.event.length > 0) {
    let d = '';
    for (let k = 0; k < tl.event.length; k++)
      d += (k ? 'L' : 'M') + xOf(tl.first[k]).toFixed(2) + ' ' + yOf(tl.reserved[k]).toFixed(2) +
        'L' + xOf(end(k)).toFixed(2) + ' ' + yOf(tl.reserved[k]).toFixed(2);
    svgEl('path', { class: 'reserved', d: d, fill: 'none', stroke: '#333', 'stroke-dasharray': '5,3' }, svg);
    const item = htmlEl('span', {}, null, legend);
    htmlEl('i', { style: 'border-top:2px dashed #333;height:0' }, null, item);
    item.appendChild(document.createTextNode('reserved'));
  }
  let lastLabel = -1e9;
  for (const m of data.marks) {
    const x = xOf(m.event), oom = m.oom;
    svgEl('line', { class: oom ? 'oom' : 'mark', x1: x, x2: x, y1: Y, y2: Y + PH,
                    stroke: oom ? '#d00' : '#999', 'stroke-width': oom ? 2 : 0.6 }, svg);
    if (x - lastLabel < 14) continue;
    lastLabel = x;
    svgEl('text', { x: x + 2, y: Y + 4, transform: 'rotate(90 ' + (x + 2) + ' ' + (Y + 4) + ')',
                    'font-size': 10, fill: oom ? '#d00' : '#555' }, svg)
      .textContent = oom ? 'OOM: ' + shown(m.label) : m.label;
  }
  if (peak.sample !== null) {
    const x = xOf(peak.event + 0.5);
    const g = svgEl('g', { class: 'peak-marker', 'data-allocated': peak.allocated }, svg);
    svgEl('line', { x1: x, x2: x, y1: Y, y2: Y + PH, stroke: '#c00', 'stroke-width': 1.5 }, g);
    svgEl('circle', { cx: x, cy: yOf(peak.allocated), r: 4, fill: '#c00' }, g);
    svgEl('text', { x: Math.min(x + 6, X + PW - 200), y: Y - 8, fill: '#c00', 'font-weight': 'bold' }, g)
      .textContent = 'peak ' + bytes(peak.allocated) + (peak.mark ? ' (' + peak.mark + ')' : '');
  }
  const cursor = svgEl('line', { class: 'cursor', x1: X, x2: X, y1: Y, y2: Y + PH, stroke: '#000', visibility: 'hidden' }, svg);
  const selected = svgEl('line', { class: 'selected', x1: X, x2: X, y1: Y, y2: Y + PH, stroke: '#06c', 'stroke-width': 1.5 }, svg);
  const overlay = svgEl('rect', { x: X, y: Y, width: PW, height: PH, fill: 'transparent' }, svg);
  function eventAt(clientX) {
    const r = svg.getBoundingClientRect();
    const x = (clientX - r.left) * W / r.width;
    return Math.max(0, Math.min(n - 1, Math.floor((x - X) / PW * tl.events)));
  }
  // The sample that stands for event i, and what it shows.
  function sampleOf(i) {
    let lo = 0, hi = tl.first.length - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (tl.first[mid] <= i) lo = mid; else hi = mid - 1; }
    return lo;
  }
  function sampleText(k) {
    const lines = ['events #' + (data.first_seq + tl.first[k]) + '..#' + (data.first_seq + end(k) - 1) +
      ', highest after event #' + (data.first_seq + tl.event[k])];
    for (const layer of tl.layers) if (layer.bytes[k] !== 0) lines.push(layer.name + ': ' + bytes(layer.bytes[k]));
    lines.push('allocated: ' + bytes(tl.allocated[k]) + ', reserved: ' + bytes(tl.reserved[k]));
    return lines.join('\n');
  }
  const info = document.getElementById('event-info');
  overlay.addEventListener('mousemove', e => {
    if (n === 0) return;
    const i = eventAt(e.clientX);
    const x = xOf(i + 0.5);
    cursor.setAttribute('x1', x); cursor.setAttribute('x2', x);
    cursor.setAttribute('visibility', 'visible');
    const text = summarised ? sampleText(sampleOf(i)) : eventText(i);
    info.textContent = text.replace(/\n/g, '; ');
    showTip(text, e.clientX, e.clientY);
  });
  overlay.addEventListener('mouseleave', () => { cursor.setAttribute('visibility', 'hidden'); hideTip(); });
  overlay.addEventListener('click', e => { if (n > 0 && !summarised) select(eventAt(e.clientX)); });

  // ---- allocator state, replayed ----
  // The segments and live blocks after event `upto`. Free blocks are the gaps between
  // live ones: the allocator merges a freed block with its free neighbours.
  function replay(upto) {
    const segs = new Map();
    const segment = id => {
      if (!segs.has(id)) segs.set(id, { id: id, size: 0, known: false, blocks: new Map() });
      return segs.get(id);
    };
    for (let i = 0; i <= upto; i++) {
      const k = kindOf(i), id = ev.segment[i];
      if (k === 'segment_alloc') {
        segs.set(id, { id: id, size: ev.size[i], known: true, blocks: new Map() });
      } else if (k === 'segment_free') {
        segs.delete(id);
      } else if (k === 'segment_map' || k === 'segment_unmap') {
        // An expandable segment grows or shrinks at its end.
        if (segs.has(id) && segs.get(id).known) segs.get(id).size += (k === 'segment_map' ? 1 : -1) * ev.size[i];
      } else if (k === 'alloc' || k === 'retag_to') {
        segment(id).blocks.set(ev.offset[i], { size: ev.size[i], cat: catOf(i), label: labelOf(i), seq: data.first_seq + i });
      } else if (k === 'free') {
        segment(id).blocks.delete(ev.offset[i]);
      }
    }
    return [...segs.values()].sort((a, b) => a.id - b.id);
  }
  const slider = document.getElementById('event-slider');
  const sliderLabel = document.getElementById('slider-label');
  const state = document.getElementById('state');
  const stateSummary = document.getElementById('state-summary');
  // The segments and live blocks at the peak, as the reader kept them for a summarised trace.
  function peakSegments() {
    const segs = new Map();
    for (const s of data.peak_state.segments)
      segs.set(s.id, { id: s.id, size: s.size, known: s.known, addr: s.addr, blocks: new Map() });
    for (const b of data.peak_state.blocks)
      segs.get(b.segment).blocks.set(b.offset, { size: b.size, cat: b.category, label: b.label, seq: b.seq });
    return [...segs.values()];
  }
  function renderState(upto) {
    state.textContent = '';
    if (n === 0) { stateSummary.textContent = 'The trace holds no events.'; return; }
    if (summarised && (peak.event === null || data.peak_state === null)) {
      stateSummary.textContent = peak.event === null ? 'The peak is not in the retained window.' :
        'The allocator state at the peak is not in this page: the file gives its peak record after ' +
        'later events (fitgrad writes it right after the peak\'s event).';
      return;
    }
    // A segment made before the window is known only by its blocks: drawn while it has some.
    const segs = (summarised ? peakSegments() : replay(upto)).filter(s => s.known || s.blocks.size > 0);
    let live = 0, blocks = 0, largest = 1;
    for (const s of segs) {
      for (const [off, b] of s.blocks) { live += b.size; blocks++; if (!s.known) s.size = Math.max(s.size, off + b.size); }
      largest = Math.max(largest, s.size);
    }
    const allocated = summarised ? peak.allocated : ev.allocated[upto];
    const reserved = summarised ? peak.reserved : ev.reserved[upto];
    const what = summarised ? 'the peak' : kindOf(upto) + (labelOf(upto) !== null ? ' ' + shown(labelOf(upto)) : '');
    stateSummary.textContent = 'After event #' + (data.first_seq + upto) + ' (' + what + '): allocated ' + bytes(allocated) +
      ', reserved ' + bytes(reserved) + ', cached but free ' + bytes(reserved - allocated) + '; ' +
      segs.length + ' segments, ' + blocks + ' live blocks.' +
      (data.dropped === 0 && live !== allocated ? ' (The replay holds ' + bytes(live) + ': the trace is inconsistent.)' : '');
    for (const s of segs) {
      const row = htmlEl('div', { class: 'segment', 'data-segment': s.id }, null, state);
      htmlEl('span', { class: 'name' }, 'segment #' + s.id + ' ' + (s.known ? (summarised ? s.addr : data.segment_addr[s.id]) + ' ' + bytes(s.size) :
        '(made before the window) at least ' + bytes(s.size)), row);
      // Bars share one scale, the largest live segment's, so sizes compare at a glance.
      const bar = htmlEl('div', { class: 'bar', style: 'width:calc((100% - 300px) * ' +
        Math.max(0.02, s.size / largest).toFixed(4) + ')' }, null, row);
      const size = Math.max(1, s.size);
      const sorted = [...s.blocks.entries()].sort((a, b) => a[0] - b[0]);
      let next = 0;
      const gap = (from, to) => {
        if (to <= from) return;
        const g = htmlEl('div', { class: 'block free', style: 'left:' + (100 * from / size) + '%;width:' + (100 * (to - from) / size) +
          '%;background:' + data.colours.free }, null, bar);
        g.dataset.tip = 'free (cached): ' + bytes(to - from) + ' at offset ' + from;
      };
      for (const [off, b] of sorted) {
        gap(next, off);
        const e = htmlEl('div', { class: 'block live', style: 'left:' + (100 * off / size) + '%;width:' + (100 * b.size / size) +
          '%;background:' + data.colours[b.cat] }, null, bar);
        e.dataset.tip = shown(b.label) + '\n' + bytes(b.size) + ', ' + b.cat + '\noffset ' + off + ', allocated at event #' + b.seq;
        next = off + b.size;
      }
      if (s.known) gap(next, s.size);
    }
    slider.value = upto;
    sliderLabel.textContent = 'event #' + (data.first_seq + upto) + ' of #' + data.first_seq + '..#' + (data.first_seq + n - 1);
    const x = xOf(upto + 0.5);
    selected.setAttribute('x1', x); selected.setAttribute('x2', x);
  }
  state.addEventListener('mouseover', e => { if (e.target.dataset.tip) showTip(e.target.dataset.tip, e.clientX, e.clientY); });
  state.addEventListener('mousemove', e => { if (e.target.dataset.tip) showTip(e.target.dataset.tip, e.clientX, e.clientY); });
  state.addEventListener('mouseleave', hideTip);
  function select(i) { renderState(i); }
  slider.max = Math.max(0, n - 1);
  slider.disabled = summarised;
  slider.addEventListener('input', () => select(Number(slider.value)));
  const toPeak = document.getElementById('to-peak');
  toPeak.disabled = peak.event === null;
  toPeak.addEventListener('click', () => { if (peak.event !== null) select(peak.event); });

  // ---- the peak ----
  function row(table, cells, numeric) {
    const tr = htmlEl('tr', {}, null, table);
    cells.forEach((c, j) => htmlEl(j === 0 ? 'th' : 'td', numeric && j > 0 ? { class: 'num' } : {}, c, tr));
    return tr;
  }
  const summaryTable = document.getElementById('peak-summary');
  row(summaryTable, ['peak allocated', bytes(peak.allocated)], true);
  row(summaryTable, ['reserved at the peak', bytes(peak.reserved)], true);
  row(summaryTable, ['reserved but free (cached) at the peak', bytes(peak.cached_free)], true);
  row(summaryTable, ['mark in force', peak.mark === null ? '(none)' : peak.mark]);
  row(summaryTable, ['event', '#' + peak.seq + ', ' + (peak.time_ns / 1e6).toFixed(3) + ' ms after start' +
    (peak.event === null ? ' (not in the retained window)' : '')]);
  const cats = document.getElementById('peak-categories');
  htmlEl('caption', {}, 'By category', cats);
  row(cats, ['category', 'bytes', 'share']);
  for (const c of peak.by_category) {
    const tr = row(cats, [c.category, bytes(c.bytes), percent(c.percent)], true);
    tr.dataset.category = c.category;
    tr.dataset.bytes = c.bytes;
    tr.firstChild.prepend(htmlEl('i', { style: 'display:inline-block;width:10px;height:10px;margin-right:4px;background:' +
      data.colours[c.category] }));
  }
  const labs = document.getElementById('peak-labels');
  htmlEl('caption', {}, 'By module (label)', labs);
  row(labs, ['label', 'bytes', 'share']);
  for (const l of peak.top_labels) row(labs, [shown(l.label), bytes(l.bytes), percent(l.percent)], true).dataset.bytes = l.bytes;
  if (peak.other_labels.count > 0)
    row(labs, ['(' + peak.other_labels.count + ' more labels)', bytes(peak.other_labels.bytes), percent(peak.other_labels.percent)], true);

  select(peak.event !== null ? peak.event : Math.max(0, n - 1));
  document.body.setAttribute('data-rendered', '1');
})();
)js";

}  // namespace fitgrad::io
