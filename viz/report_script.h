// The inline script of report.html (viz/charts.cc), plain JavaScript with no
// network: pan and zoom on the memory map and the timeline, hover that
// links one buffer across charts and the table of buffers at the peak. The
// self-test of those interactions is the test's own
// (tests/report_selftest.js, which tests/browser_report_test.sh adds to a
// copy of the page): nothing of it ships in report.html.
//
//   figure.zoomable svg   wheel zooms about the pointer, drag pans, double
//                         click resets (the SVG's viewBox, clamped to the
//                         chart); "+", "−" and "reset" buttons do the same
//   [data-b="N"]          buffer N's rectangle, bar or table row: hovering one
//                         outlines every element of N (class "hl") and shows
//                         its tooltip in #hover-info
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
  Array.prototype.forEach.call(document.querySelectorAll('figure.zoomable'), zoomable);
})();
)";

}  // namespace viz_internal
}  // namespace gpusim

#endif  // GPUSIM_VIZ_REPORT_SCRIPT_H_
