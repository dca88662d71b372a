// The Inference Wall: two small fixes to the rendered book, no network.
//
// 1. Charts that fit their column. Loaded after vega-bundle.js, this wraps window.vegaEmbed (which every
//    Altair chart's inline script calls): a chart is drawn as written; if it is wider than its column, it is
//    drawn again with its side-by-side panels wrapped into rows (a facet's columns, an hconcat as a concat),
//    then with its legends stacked, then with narrower panels; a chart still too wide is scaled down by CSS
//    (inference-wall.css). Each chart's div gets data-iw-fit ("as-is", "fitted" or "scaled") when done, its Vega
//    view as the property iwView (what the site's tests read a chart's scales and signals from), and is fitted
//    again from its original spec when its column's width changes (a phone turned, a window resized).
// 2. The sidebar toggles. pydata-sphinx-theme and sphinx-book-theme bind their sidebar handlers to the first
//    .primary-toggle / .secondary-toggle in the page, which in this build sits in the hidden header bar; the
//    visible buttons in the article header then do nothing. Each other toggle forwards its click to the bound one.
(function () {
  "use strict";

  var MIN_PANEL = 110; // px: narrower panels are not made; the chart is scaled down instead
  var MIN_STEP = 10;   // px per band of a {step} width

  function clone(x) { return JSON.parse(JSON.stringify(x)); }

  // ----------------------------------------------------------------------------------- spec changes
  // Side-by-side panels into rows of at most `cols`. Returns true if the spec has something to wrap.
  function wrap(spec, cols) {
    var changed = false;
    if (spec.facet && spec.facet.column && !spec.facet.row) {
      spec.facet = spec.facet.column;
      spec.columns = cols;
      changed = true;
    } else if (spec.facet && !spec.facet.row && !spec.facet.column && spec.facet.field) {
      spec.columns = Math.min(spec.columns || cols, cols);
      changed = true;
    } else if (spec.encoding && spec.encoding.column && !spec.encoding.row) {
      spec.encoding.facet = spec.encoding.column;
      delete spec.encoding.column;
      spec.columns = cols;
      changed = true;
    } else if (spec.encoding && spec.encoding.facet) {
      spec.columns = Math.min(spec.columns || cols, cols);
      changed = true;
    } else if (spec.hconcat) {
      spec.concat = spec.hconcat;
      delete spec.hconcat;
      spec.columns = cols;
      changed = true;
    } else if (spec.concat) {
      spec.columns = Math.min(spec.columns || cols, cols);
      changed = true;
    }
    return changed;
  }

  // Legends one entry per line, and several legends under each other rather than side by side.
  function stackLegends(spec) {
    spec.config = spec.config || {};
    var layout = { direction: "vertical", anchor: "start" };
    spec.config.legend = Object.assign({}, spec.config.legend, {
      direction: "vertical", columns: 1, layout: { bottom: layout, top: layout }
    });
  }

  // Every panel's width (and {step} width) times `factor`, not below the floors. A panel of a facet or a
  // concat with no width of its own takes the width it inherits (the top level's), so that it can be narrowed:
  // a facet of a discrete axis otherwise keeps a band per value however wide that makes it.
  var CHILDREN = ["spec", "layer", "hconcat", "vconcat", "concat"];
  function narrow(node, factor, inherited, floor, config) {
    if (!node || typeof node !== "object") return;
    floor = floor || MIN_PANEL;
    config = config || node.config || {};
    var w = node.width;
    if (typeof w === "number") {
      node.width = Math.max(floor, Math.floor(w * factor));
    } else if (w && typeof w.step === "number") {
      w.step = Math.max(MIN_STEP, Math.floor(w.step * factor));
    } else if (w === undefined && inherited && (node.mark || node.layer)) {
      node.width = Math.max(floor, Math.floor(inherited * factor));
    }
    // a facet's or a concat's panel without a width of its own is Vega-Lite's default view width, not the top's
    var base = (config.view && config.view.continuousWidth) || 200;
    CHILDREN.forEach(function (key) {
      var child = node[key];
      if (Array.isArray(child)) {
        if (key === "layer") return; // a layer's members share their parent's width
        child.forEach(function (c) { narrow(c, factor, base, floor, config); });
      } else if (child && typeof child === "object") {
        narrow(child, factor, base, floor, config);
      }
    });
  }

  // ------------------------------------------------------------------------------------- fitting
  function drawnWidth(el) {
    var g = el.querySelector("svg.marks, canvas.marks, svg, canvas");
    return g ? g.getBoundingClientRect().width : 0;
  }

  function room(el) {
    var parent = el.parentElement || el;
    return Math.max(120, parent.clientWidth - 4);
  }

  // Draw `spec`; while it is wider than its column, try, in order: its panels wrapped into rows of as many
  // columns as could fit, narrowed if need be but not below WIDE_PANEL; then fewer columns; then one column with
  // its legends stacked and its panels narrowed down to MIN_PANEL. The narrowest drawing that fits wins; if none
  // fits, the narrowest is kept and scaled down by CSS.
  var WIDE_PANEL = 220;

  function fit(embed, el, spec, opt) {
    var avail = room(el);
    var current = null;
    el.dataset.iwFit = "pending";
    el.dataset.iwTrail = "";
    el.dataset.iwRoom = String(Math.round(avail));

    function draw(s) {
      if (current && current.finalize) current.finalize();
      return embed(el, s, opt).then(function (res) {
        current = res;
        el.iwView = res.view;
        var w = drawnWidth(el);
        el.dataset.iwTrail = (el.dataset.iwTrail ? el.dataset.iwTrail + " " : "") + Math.round(w);
        return w;
      });
    }

    var best = { spec: spec, width: Infinity }, lastDrawn = null;

    function tryDraw(s) {
      return draw(s).then(function (w) {
        lastDrawn = s;
        if (w < best.width - 1) best = { spec: s, width: w };
        return w;
      });
    }

    // narrow `s` (drawn `w` wide) until it fits, at most `times` times, panels not below `floor`
    function narrowing(s, w, times, floor) {
      if (w <= avail || times === 0) return Promise.resolve(w);
      var t = clone(s);
      var before = JSON.stringify(t);
      narrow(t, Math.max(0.3, (avail / w) * 0.97), null, floor);
      if (JSON.stringify(t) === before) return Promise.resolve(w);
      return tryDraw(t).then(function (nw) { return narrowing(t, nw, times - 1, floor); });
    }

    function finish() {
      var fits = best.width <= avail;
      var redraw = lastDrawn === best.spec ? Promise.resolve() : draw(best.spec);
      return redraw.then(function () {
        if (!fits) el.classList.add("iw-scaled");
        el.dataset.iwFit = fits ? (best.spec === spec ? "as-is" : "fitted") : "scaled";
        return current;
      });
    }

    return tryDraw(spec).then(function (w) {
      if (w <= avail) return finish();
      var guess = avail < 600 ? 1 : 3; // a phone: one column
      var cols = [];
      for (var c = guess; c >= 1; c--) cols.push(c);

      function byColumns(i) {
        if (best.width <= avail) return finish();
        if (i >= cols.length) return last();
        var s = clone(spec);
        if (!wrap(s, cols[i])) return last();
        return tryDraw(s).then(function (cw) {
          return narrowing(s, cw, 2, cols[i] > 1 ? WIDE_PANEL : MIN_PANEL);
        }).then(function () { return byColumns(i + 1); });
      }

      function last() {
        if (best.width <= avail) return finish();
        var s = clone(best.spec);
        stackLegends(s);
        return tryDraw(s).then(function (lw) {
          var from = lw < best.width + 1 ? s : best.spec;
          return narrowing(from, Math.min(lw, best.width), 3, MIN_PANEL);
        }).then(finish);
      }

      return byColumns(0);
    });
  }

  function install() {
    var embed = window.vegaEmbed;
    if (typeof embed !== "function" || embed.__iwFit) return;
    var fitted = function (el, spec, opt) {
      var target = typeof el === "string" ? document.querySelector(el) : el;
      if (!target || typeof spec !== "object") return embed(el, spec, opt);
      var original = clone(spec);
      var lastRoom = room(target);
      var busy = fit(embed, target, original, opt);
      var timer = null;
      window.addEventListener("resize", function () {
        clearTimeout(timer);
        timer = setTimeout(function () {
          var r = room(target);
          if (Math.abs(r - lastRoom) < 40) return;
          lastRoom = r;
          target.classList.remove("iw-scaled");
          busy = busy.then(function () { return fit(embed, target, original, opt); });
        }, 250);
      });
      return busy;
    };
    Object.keys(embed).forEach(function (k) { fitted[k] = embed[k]; });
    fitted.__iwFit = true;
    window.vegaEmbed = fitted;
  }

  // ---------------------------------------------------------------------------------- navigation
  function forwardToggles() {
    ["primary-toggle", "secondary-toggle"].forEach(function (cls) {
      var all = Array.prototype.slice.call(document.querySelectorAll("." + cls));
      var bound = all[0];
      all.slice(1).forEach(function (btn) {
        btn.addEventListener("click", function (event) {
          event.preventDefault();
          event.stopPropagation();
          bound.click();
        });
      });
    });
  }

  install();
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", forwardToggles);
  else forwardToggles();
})();
