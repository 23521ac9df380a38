(function () {
  // Copy buttons: the command text to the clipboard (a selection + execCommand where the Clipboard API is refused).
  document.querySelectorAll('button[data-copy]').forEach(function (b) {
    b.addEventListener('click', function () {
      var text = document.getElementById(b.dataset.copy).textContent, done = b.dataset.done, label = b.textContent;
      function ok() { b.textContent = done; setTimeout(function () { b.textContent = label; }, 1500); }
      function fallback() {
        var r = document.createRange(); r.selectNodeContents(document.getElementById(b.dataset.copy));
        var s = window.getSelection(); s.removeAllRanges(); s.addRange(r);
        try { if (document.execCommand('copy')) ok(); } catch (e) { /* selected: the reader copies by hand */ }
      }
      if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(ok, fallback);
      else fallback();
    });
  });
  // Printing shows every collapsed section.
  window.addEventListener('beforeprint', function () {
    document.querySelectorAll('details').forEach(function (d) { d.open = true; });
  });
  // The speed simulator: fitprobe/simulate.py's Playback — the wait for the first token, then token i at
  // (ttft + (i+1)/tps) / speedup seconds after the start (speedup > 1 only when the run would pass 30 s).
  var sim = document.getElementById('sim');
  if (!sim) return;
  var d = sim.dataset, ttft = parseFloat(d.ttft), tps = parseFloat(d.tps), n = parseInt(d.tokens, 10);
  var speedup = parseFloat(d.speedup), words = d.words.split(' '), between = d.between, lang = document.documentElement.lang;
  var out = document.getElementById('sim-out'), bar = document.getElementById('sim-bar'), timer = null;
  var two = new Intl.NumberFormat(lang, {minimumFractionDigits: 2, maximumFractionDigits: 2});
  var one = new Intl.NumberFormat(lang, {minimumFractionDigits: 1, maximumFractionDigits: 1});
  function say(template, args) { return template.replace(/\{(\w+)\}/g, function (_, k) { return args[k]; }); }
  function play() {
    if (timer) clearInterval(timer);
    var t0 = performance.now(), shown = 0, total = ttft + n / tps;
    out.textContent = '';
    var wait = document.createElement('span'); wait.className = 'wait'; out.appendChild(wait);
    var text = document.createTextNode(''); out.appendChild(text);
    timer = setInterval(function () {
      var el = (performance.now() - t0) / 1000 * speedup;  // seconds of the estimated run
      bar.style.width = Math.min(100, 100 * el / total) + '%';
      if (el < ttft) { wait.textContent = say(d.reading, {s: two.format(el)}); return; }
      wait.textContent = say(d.first, {s: two.format(ttft)}) + '\n';
      var due = Math.min(n, Math.floor((el - ttft) * tps + 1e-9));
      while (shown < due) { text.data += (shown ? between : '') + words[shown % words.length]; shown++; }
      if (shown >= n) {
        clearInterval(timer); timer = null;
        text.data += '\n' + say(d.done, {n: n, s: two.format(total), tps: one.format(tps)})
          + (speedup > 1 ? ' ' + say(d.faster, {k: one.format(speedup)}) : '');
      }
    }, 16);
  }
  document.getElementById('sim-play').addEventListener('click', play);
  var still = window.matchMedia && window.matchMedia('(prefers-reduced-motion: reduce)').matches;
  if (!still && 'IntersectionObserver' in window) {
    var seen = new IntersectionObserver(function (entries) {
      if (entries.some(function (e) { return e.isIntersecting; })) { seen.disconnect(); play(); }
    });
    seen.observe(sim);
  }
})();
