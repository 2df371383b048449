// The inline script of report.html (viz/charts.cc), plain JavaScript with no
// network: pan and zoom on the memory map and the timeline, hover that
// links one buffer across charts and the table of buffers at the peak, and a
// self-test of those interactions that tests/browser_report_test.sh runs.
//
//   figure.zoomable svg   wheel zooms about the pointer, drag pans, double
//                         click resets (the SVG's viewBox, clamped to the
//                         chart); "+", "−" and "reset" buttons do the same
//   [data-b="N"]          buffer N's rectangle, bar or table row: hovering one
//                         outlines every element of N (class "hl") and shows
//                         its tooltip in #hover-info
//   #selftest (URL hash)  dispatches those events and writes the verdict into
//                         #interaction-check: "interaction-check: ok, ..." or
//                         "interaction-check: FAILED: ..."
#ifndef GPUSIM_VIZ_REPORT_SCRIPT_H_
#define GPUSIM_VIZ_REPORT_SCRIPT_H_

namespace gpusim {
namespace viz_internal {

inline constexpr char kReportStyle[] = R"(
.hl { stroke: #000 !important; stroke-width: 2px !important; fill-opacity: 1 !important; }
tr.hl td { background: #fff3b0; }
#hover-info { position: sticky; top: 0; background: #fffbe6; border: 1px solid #e0d080; padding: 4px 8px;
  font-size: 13px; min-height: 1.2em; z-index: 1; }
figure.zoomable svg { cursor: grab; }
.zoom-buttons button { font-size: 12px; margin-right: 4px; }
.warn { color: #b36b00; font-weight: bold; }
)";

inline constexpr char kReportScript[] = R"(
(function () {
  var info = document.getElementById('hover-info');
  var lit = [];
  function unlight() {
    lit.forEach(function (e) { e.classList.remove('hl'); });
    lit = [];
  }
  function light(id) {
    unlight();
    lit = Array.prototype.slice.call(document.querySelectorAll('[data-b="' + id + '"]'));
    lit.forEach(function (e) { e.classList.add('hl'); });
  }
  function describe(el) {
    var t = el.querySelector('title');
    if (t) return t.textContent;
    return el.getAttribute('data-info') || el.textContent;
  }
  document.addEventListener('mouseover', function (ev) {
    var el = ev.target.closest ? ev.target.closest('[data-b]') : null;
    if (!el) return;
    light(el.getAttribute('data-b'));
    info.textContent = describe(el);
  });
  document.addEventListener('mouseout', function (ev) {
    var el = ev.target.closest ? ev.target.closest('[data-b]') : null;
    if (!el) return;
    unlight();
    info.textContent = 'hover a buffer to find it in every chart';
  });

  function zoomable(fig) {
    var svg = fig.querySelector('svg');
    var b = svg.viewBox.baseVal;
    var home = [b.x, b.y, b.width, b.height];
    var vb = home.slice();
    function apply() {
      vb[2] = Math.min(vb[2], home[2]); vb[3] = Math.min(vb[3], home[3]);
      vb[0] = Math.max(home[0], Math.min(vb[0], home[0] + home[2] - vb[2]));
      vb[1] = Math.max(home[1], Math.min(vb[1], home[1] + home[3] - vb[3]));
      svg.setAttribute('viewBox', vb.map(function (v) { return v.toFixed(1); }).join(' '));
    }
    function zoom(k, fx, fy) {
      var w = vb[2] * k, h = vb[3] * k;
      vb[0] += (vb[2] - w) * fx; vb[1] += (vb[3] - h) * fy; vb[2] = w; vb[3] = h;
      apply();
    }
    svg.addEventListener('wheel', function (ev) {
      ev.preventDefault();
      var r = svg.getBoundingClientRect();
      zoom(ev.deltaY < 0 ? 0.8 : 1.25, (ev.clientX - r.left) / r.width, (ev.clientY - r.top) / r.height);
    }, {passive: false});
    var drag = null;
    svg.addEventListener('mousedown', function (ev) { drag = [ev.clientX, ev.clientY]; ev.preventDefault(); });
    window.addEventListener('mousemove', function (ev) {
      if (!drag) return;
      var r = svg.getBoundingClientRect();
      vb[0] -= (ev.clientX - drag[0]) * vb[2] / r.width; vb[1] -= (ev.clientY - drag[1]) * vb[3] / r.height;
      drag = [ev.clientX, ev.clientY];
      apply();
    });
    window.addEventListener('mouseup', function () { drag = null; });
    function reset() { vb = home.slice(); apply(); }
    svg.addEventListener('dblclick', reset);
    var bar = document.createElement('div');
    bar.className = 'zoom-buttons';
    [['+', function () { zoom(0.8, 0.5, 0.5); }], ['\u2212', function () { zoom(1.25, 0.5, 0.5); }],
     ['reset', reset]].forEach(function (p) {
      var btn = document.createElement('button');
      btn.textContent = p[0];
      btn.addEventListener('click', p[1]);
      bar.appendChild(btn);
    });
    fig.parentNode.insertBefore(bar, fig);
    apply();  // the viewBox in the one spelling apply() writes
    return svg;
  }
  var zoomed = Array.prototype.map.call(document.querySelectorAll('figure.zoomable'), zoomable);

  if (location.hash !== '#selftest') return;
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
)";

}  // namespace viz_internal
}  // namespace gpusim

#endif  // GPUSIM_VIZ_REPORT_SCRIPT_H_
