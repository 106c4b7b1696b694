(function(){
const data = JSON.parse(document.getElementById('judge-data').textContent);
const KEY = 'scrapy-simhash-judge:' + data.id;
const LABEL = {duplicate: 'duplicate', not: 'not a duplicate', skip: 'skipped'};
let judged = {};
try { judged = JSON.parse(localStorage.getItem(KEY) || '{}'); } catch (e) { judged = {}; }
let at = 0;
function esc(s){ return String(s == null ? '' : s).replace(/[&<>"]/g,
  c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c])); }
function lines(){
  return data.pairs.filter(p => judged[p.number]).map(p => JSON.stringify({
    pair: p.number, judgement: judged[p.number].judgement, distance: p.distance, similarity: p.similarity,
    band: p.band, weight: p.weight, a: p.a.uri, a_record: p.a.locator, b: p.b.uri, b_record: p.b.locator,
    extractor: data.extractor, judged_at: judged[p.number].at})).join('\n') + (Object.keys(judged).length ? '\n' : '');
}
function refreshExport(){
  const link = document.getElementById('export');
  if (link.href.startsWith('blob:')) URL.revokeObjectURL(link.href);
  link.href = URL.createObjectURL(new Blob([lines()], {type: 'application/x-ndjson'}));
  const count = Object.keys(judged).length;
  document.getElementById('judged-count').textContent = count;
  document.getElementById('judged-count').dataset.value = count;
}
function show(){
  const p = data.pairs[at]; if (!p) return;
  const j = judged[p.number];
  document.getElementById('position').textContent = (at + 1) + ' of ' + data.pairs.length;
  document.getElementById('verdict').textContent = j ? 'judged: ' + LABEL[j.judgement] : 'not judged yet';
  document.getElementById('verdict').className = j ? 'v-' + j.judgement : 'muted';
  document.getElementById('numbers').textContent = 'distance ' + p.distance + ' (band ' + p.band + ')' +
    (p.similarity != null ? ', estimated Jaccard similarity ' + p.similarity.toFixed(3) : '');
  document.getElementById('heads').innerHTML = '<div>' + esc(p.a.uri) + '<br><span class="muted">' +
    esc(p.a.date) + ' ' + esc(p.a.locator) + '</span></div><div>' + esc(p.b.uri) + '<br><span class="muted">' +
    esc(p.b.date) + ' ' + esc(p.b.locator) + '</span></div>';
  document.getElementById('texts').innerHTML = p.reason ? '<p class="note">texts not shown: ' + esc(p.reason) +
    ' (press s to skip)</p>' : '<div class="diff"><pre id="left">' + p.left + '</pre><pre id="right">' +
    p.right + '</pre></div>';
}
function judge(value){
  const p = data.pairs[at];
  judged[p.number] = {judgement: value, at: new Date().toISOString()};
  try { localStorage.setItem(KEY, JSON.stringify(judged)); } catch (e) { /* export link still has it */ }
  refreshExport();
  if (at < data.pairs.length - 1) at++;
  show();
}
function move(step){ at = Math.min(data.pairs.length - 1, Math.max(0, at + step)); show(); }
document.addEventListener('keydown', e => {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const act = {d: () => judge('duplicate'), n: () => judge('not'), s: () => judge('skip'),
    ArrowRight: () => move(1), ArrowLeft: () => move(-1)}[e.key];
  if (act) { e.preventDefault(); act(); }
});
document.getElementById('b-dup').onclick = () => judge('duplicate');
document.getElementById('b-not').onclick = () => judge('not');
document.getElementById('b-skip').onclick = () => judge('skip');
document.getElementById('b-prev').onclick = () => move(-1);
document.getElementById('b-next').onclick = () => move(1);
document.getElementById('b-clear').onclick = () => {
  if (!confirm('Forget every judgement of this page?')) return;
  judged = {}; try { localStorage.removeItem(KEY); } catch (e) {} refreshExport(); show(); };
const first = data.pairs.findIndex(p => !judged[p.number]);
at = first < 0 ? 0 : first;
refreshExport(); show();
window.judgementLines = lines;
})();
