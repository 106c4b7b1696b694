(function(){
const payload = JSON.parse(document.getElementById('timeline-data').textContent);
const data = payload.timelines, files = payload.files;
const list = document.getElementById('timelines'), info = document.getElementById('timeline-page');
const kindSel = document.getElementById('timeline-kind'), sortSel = document.getElementById('timeline-sort');
const openAll = list.dataset.open === '1', PAGE = 25; let page = 0;
data.forEach((t, i) => { t.rank = i; t.total = t.captures.length + t.earlier; });
function esc(s){return String(s == null ? '' : s).replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));}
function cls(kind){return 'k-' + String(kind).replace(/ /g, '-');}
function runs(diff){
  return diff.map(r => r[0] === '=' ? esc(r[1]) : r[0] === '-' ? '<del>' + esc(r[1]) + '</del>' :
    r[0] === '+' ? '<ins>' + esc(r[1]) + '</ins>' :
    r[0] === '\u2026' ? '<span class="fold"> \u2026 ' + r[1] + ' unchanged words \u2026 </span>' :
    '<span class="note">the rest of the changes is left out (after ' + r[1] + ' characters)</span>').join('');
}
function stepCell(s){
  const head = (s.sim != null ? 'similarity ' + s.sim.toFixed(2) : '') +
    (s.ratio != null ? (s.sim != null ? ', ' : '') + 'words in common ' + (100 * s.ratio).toFixed(1) + '%' : '');
  const note = s.note ? '<div class="muted">' + esc(s.note) + '</div>' : '';
  const body = s.diff ? '<div class="tdiff">' + runs(s.diff) + '</div>' : '<div class="muted why">' + esc(s.why) + '</div>';
  return '<tr class="step"><td></td><td colspan="5">' + (head ? '<span class="muted">' +
    head + '</span>' : '') + note + body + '</td></tr>';
}
function detail(t){
  const rows = t.captures.map((c, i) => {
    const s = t.steps[i];
    // c: [date, file number, offset, record type, recorded kind, previous capture's date, record id]
    const where = c[1] != null ? files[c[1]] + '@' + c[2] : (c[6] || 'record not named by the input');
    let kind = s ? s.kind : (c[4] ? c[4] + ' (against ' + (c[5] || 'a capture') + ', not listed)' :
      (t.earlier ? 'earlier captures not listed' : 'first capture in the inputs'));
    return (s ? stepCell(s) : '') + '<tr class="capture" data-kind="' +
      esc(s ? s.kind : '') + '"><td class="num">' + (t.earlier + i + 1) + '</td><td>' + esc(c[0] || 'date unknown') +
      '</td><td class="loc" title="' + esc(c[6]) + '">' + esc(where) + '</td><td>' + esc(c[3]) +
      '</td><td class="kind ' +
      cls(s ? s.kind : 'first') + '">' + esc(kind) +
      '</td><td class="num">' + esc(s && s.sim != null ? s.sim.toFixed(4) : '') + '</td></tr>';
  }).join('');
  return '<table class="captures"><tr><th>#</th><th>date</th><th>record</th><th>type</th>' +
    '<th>main text since the capture before</th><th>similarity</th></tr>' + rows + '</table>';
}
function shownList(){
  const kind = kindSel.value;
  const found = data.filter(t => !kind || (t.counts[kind] || 0) > 0);
  const by = sortSel.value;
  if (by === 'captures') found.sort((a, b) => b.total - a.total || a.rank - b.rank);
  else if (by === 'uri') found.sort((a, b) => a.uri < b.uri ? -1 : a.uri > b.uri ? 1 : 0);
  else found.sort((a, b) => a.rank - b.rank);
  return found;
}
function show(){
  const found = shownList(), pages = Math.max(1, Math.ceil(found.length / PAGE));
  if (page >= pages) page = pages - 1;
  list.innerHTML = found.slice(page * PAGE, page * PAGE + PAGE).map(t => {
    const counts = Object.keys(t.counts).map(k => '<span class="' + cls(k) + '">' + t.counts[k] + ' ' + esc(k) +
      '</span>').join(', ');
    return '<details class="timeline" data-uri="' + esc(t.uri) + '" data-changes="' + t.changes + '"' +
      (openAll ? ' open' : '') + '><summary><b>' + esc(t.uri) + '</b> <span class="muted">' + t.total +
      ' captures:</span> ' + counts + '</summary>' + detail(t) + '</details>';
  }).join('') || '<p class="muted">no URL with a step of that kind</p>';
  info.textContent = ' page ' + (page + 1) + ' of ' + pages + ' (' + found.length + ' URLs) ';
}
kindSel.onchange = () => { page = 0; show(); };
sortSel.onchange = () => { page = 0; show(); };
document.getElementById('timeline-prev').onclick = () => { if (page > 0) { page--; show(); } };
document.getElementById('timeline-next').onclick = () => { page++; show(); };
show();
})();
