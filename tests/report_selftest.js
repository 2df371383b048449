// report.html's self-test, run by tests/browser_report_test.sh in headless
// Chromium: the test adds this script, and the two verdict lines it writes,
// to a copy of the page (report.html itself ships neither).
//
//   #render-check       every figure drew a chart (an inline SVG with a
//                       non-empty bounding box, or a decoded image), as many
//                       as the page has (data-expected, counted by the test)
//   #interaction-check  hovering a memory-map block lights the same buffer in
//                       the other charts and fills #hover-info; on each
//                       zoomable chart the wheel zooms, a drag pans and a
//                       double click resets (viz/report_script.h)
(function () {
  var out = document.getElementById('render-check');
  var bad = [];
  var figs = document.querySelectorAll('figure');
  var want = Number(out.getAttribute('data-expected'));
  if (figs.length !== want) bad.push(figs.length + ' figures, expected ' + want);
  figs.forEach(function (f, i) {
    var svg = f.querySelector('svg'), img = f.querySelector('img');
    if (svg) {
      var b = svg.getBBox();
      if (!(b.width > 0 && b.height > 0)) bad.push('figure ' + i + ': SVG drew nothing');
    } else if (img) {
      if (!img.complete || img.naturalWidth === 0) bad.push('figure ' + i + ': image not decoded');
    } else {
      bad.push('figure ' + i + ': no chart');
    }
  });
  out.textContent = bad.length ? 'render-check: FAILED: ' + bad.join('; ') : 'render-check: ok, ' + figs.length + ' charts';
})();

(function () {
  var info = document.getElementById('hover-info');
  var zoomed = Array.prototype.map.call(document.querySelectorAll('figure.zoomable svg'), function (s) { return s; });
  var out = document.getElementById('interaction-check');
  var bad = [], done = [];
  // Hover: a memory-map block lights the same buffer in the other charts.
  var blocks = document.querySelectorAll('#memory-map [data-b]');
  var linked = null;
  for (var i = 0; i < blocks.length && !linked; ++i) {
    var id = blocks[i].getAttribute('data-b');
    if (document.querySelectorAll('[data-b="' + id + '"]').length > 1) linked = blocks[i];
  }
  if (!linked) {
    bad.push('no buffer drawn in two charts');
  } else {
    var id = linked.getAttribute('data-b');
    linked.dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));
    var others = document.querySelectorAll('[data-b="' + id + '"]');
    var n = 0;
    others.forEach(function (e) { if (e.classList.contains('hl')) ++n; });
    if (n !== others.length) bad.push('hover lit ' + n + ' of ' + others.length + ' elements of buffer ' + id);
    if (info.textContent.indexOf('hover a buffer') === 0 || info.textContent.length === 0) bad.push('hover info empty');
    linked.dispatchEvent(new MouseEvent('mouseout', {bubbles: true}));
    if (document.querySelectorAll('.hl').length !== 0) bad.push('highlight not cleared');
    done.push('hover links ' + others.length + ' elements');
  }
  // Zoom, pan, reset on every zoomable chart.
  zoomed.forEach(function (svg, k) {
    var home = svg.getAttribute('viewBox');
    var r = svg.getBoundingClientRect();
    svg.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: r.left + r.width / 2,
                                               clientY: r.top + r.height / 2, bubbles: true, cancelable: true}));
    var zoomedIn = svg.getAttribute('viewBox');
    if (zoomedIn === home) bad.push('chart ' + k + ': wheel did not zoom');
    svg.dispatchEvent(new MouseEvent('mousedown', {clientX: r.left + 50, clientY: r.top + 50, bubbles: true}));
    window.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + 90, clientY: r.top + 70}));
    window.dispatchEvent(new MouseEvent('mouseup', {}));
    if (svg.getAttribute('viewBox') === zoomedIn) bad.push('chart ' + k + ': drag did not pan');
    svg.dispatchEvent(new MouseEvent('dblclick', {bubbles: true}));
    if (svg.getAttribute('viewBox') !== home) bad.push('chart ' + k + ': double click did not reset');
  });
  done.push(zoomed.length + ' charts zoom, pan and reset');
  out.textContent = bad.length ? 'interaction-check: FAILED: ' + bad.join('; ')
                               : 'interaction-check: ok, ' + done.join(', ');
})();
