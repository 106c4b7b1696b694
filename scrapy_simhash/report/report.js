(function(){
const data = JSON.parse(document.getElementById('report-data').textContent);
const PAGE = 20; let page = 0;
const list = document.getElementById('clusters'), info = document.getElementById('cluster-page');
function esc(s){return String(s == null ? '' : s).replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));}
function show(){
  const start = page * PAGE, shown = data.clusters.slice(start, start + PAGE);
  list.innerHTML = shown.map(c => {
    const rows = c.members.map(m => '<tr class="' + (m[5] ? 'orig' : '') + '"><td>' + esc(m[0]) + '</td><td>' +
      esc(m[1]) + '</td><td>' + esc(m[2]) + '</td><td class="num">' + esc(m[3]) + '</td><td class="num">' +
      esc(m[4]) + '</td></tr>').join('');
    const more = c.size > c.members.length ? '<p class="muted">and ' + (c.size - c.members.length) +
      ' more</p>' : '';
    const cmp = c.diff != null ? ' <button data-diff="' + c.diff + '">compare original and farthest</button>' : '';
    return '<div class="cluster" data-size="' + c.size + '"><b>cluster ' + (c.rank + 1) + '</b> (' + c.size +
      ' pages)' + cmp + '<table><tr><th>URI</th><th>date</th><th>record or key</th><th>distance</th>' +
      '<th>similarity</th></tr>' + rows + '</table>' + more + '</div>';
  }).join('');
  const pages = Math.max(1, Math.ceil(data.clusters.length / PAGE));
  info.textContent = 'page ' + (page + 1) + ' of ' + pages;
}
document.getElementById('prev').onclick = () => { if (page > 0) { page--; show(); } };
document.getElementById('next').onclick = () => {
  if ((page + 1) * PAGE < data.clusters.length) { page++; show(); } };
const select = document.getElementById('pair');
function showPair(i){
  const d = data.diffs[i]; if (!d) return; select.value = String(i);
  document.getElementById('pair-head').innerHTML = esc(d.a) + ' &nbsp;vs&nbsp; ' + esc(d.b) +
    (d.ratio != null ? ' <span class="muted">(words in common: ' + (100 * d.ratio).toFixed(1) + '%)</span>' : '');
  document.getElementById('pair-body').innerHTML = d.reason ? '<p class="note">texts not shown: ' +
    esc(d.reason) + '</p>' : '<div class="diff"><pre id="left">' + d.left + '</pre><pre id="right">' +
    d.right + '</pre></div>';
}
select.onchange = () => showPair(+select.value);
list.addEventListener('click', e => { const b = e.target.closest('button[data-diff]');
  if (b) { showPair(+b.dataset.diff); document.getElementById('pairs').scrollIntoView(); } });
show(); if (data.diffs.length) showPair(0);
})();
