// The Inference Wall: two small fixes to the rendered book, no network.
//
// 1. Charts that fit their column. Loaded after vega-bundle.js, this wraps window.vegaEmbed (which every
//    Altair chart's inline script calls): a chart is drawn as written; if it is wider than its column, it is
//    drawn again with its side-by-side panels wrapped into rows (a facet's columns, an hconcat as a concat),
//    then compacted (legends one entry per line, long titles and labels broken into lines), then with narrower
//    panels (a wrapped panel's height shrinks with its width, down to MIN_HEIGHT); a chart still too wide is scaled
//    down by CSS (inference-wall.css), which makes its text smaller than it was written. Each chart's div gets
//    data-iw-fit ("as-is", "fitted" or "scaled") when done, its Vega view as the property iwView (what the site's
//    tests read a chart's scales and signals from), and is fitted again from its original spec when its column's
//    width changes (a phone turned, a window resized).
// 2. The sidebar toggles. pydata-sphinx-theme and sphinx-book-theme bind their sidebar handlers to the first
//    .primary-toggle / .secondary-toggle in the page, which in this build sits in the hidden header bar; the
//    visible buttons in the article header then do nothing. Each other toggle forwards its click to the bound one.
(function () {
  "use strict";

  var MIN_PANEL = 110; // px: narrower panels are not made; the chart is scaled down instead
  var MIN_STEP = 10;   // px per band of a {step} width
  var MIN_HEIGHT = 150; // px: a wrapped panel narrowed below its width keeps at least this height (or its own, if less)
  var CHAR_PX = 7;     // about the width of one character of a 12-13 px label, for breaking long text into lines

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

  // Text of at most `n` characters a line, broken at spaces (a word longer than `n` keeps its line): an array of
  // lines (Vega-Lite draws an array title as lines), or the text itself when it is short enough.
  function lines(text, n) {
    if (typeof text !== "string" || text.length <= n) return text;
    var out = [], line = "";
    text.split(" ").forEach(function (word) {
      if (line && line.length + 1 + word.length > n) { out.push(line); line = word; }
      else line = line ? line + " " + word : word;
    });
    if (line) out.push(line);
    return out.length > 1 ? out : text;
  }

  // The same for labels drawn from the data (axis ticks of a band, facet headers): a Vega expression.
  function labelLines(n) {
    return "length(datum.label) > " + n + " ? split(trim(replace(datum.label, regexp('(.{1," + n +
      "})( +|$)', 'g'), '$1\\n')), '\\n') : datum.label";
  }

  var LEGENDS = { color: 1, fill: 1, stroke: 1, shape: 1, size: 1, opacity: 1, strokeDash: 1, strokeWidth: 1 };

  // Every channel definition under an "encoding" of the spec (layers, facets and concats included) and every
  // facet definition: fn(definition, channel).
  function eachChannel(node, fn) {
    if (Array.isArray(node)) { node.forEach(function (c) { eachChannel(c, fn); }); return; }
    if (!node || typeof node !== "object") return;
    Object.keys(node).forEach(function (key) {
      var value = node[key];
      if (key === "datasets" || key === "data" || key === "config" || key === "transform") return;
      if ((key === "encoding" || key === "facet") && value && typeof value === "object" && !Array.isArray(value)) {
        if (key === "facet" && value.field) { fn(value, "facet"); return; }
        Object.keys(value).forEach(function (ch) {
          (Array.isArray(value[ch]) ? value[ch] : [value[ch]]).forEach(function (d) {
            if (d && typeof d === "object") fn(d, ch);
          });
          if (value[ch] && typeof value[ch] === "object") eachChannel(value[ch], fn);
        });
      } else {
        eachChannel(value, fn);
      }
    });
  }

  // A band of a {step} height is made tall enough for its y label's lines (labelLines(n) of the longest value).
  function tallerBands(spec, n) {
    var longest = {};
    Object.keys(spec.datasets || {}).forEach(function (name) {
      (spec.datasets[name] || []).forEach(function (row) {
        Object.keys(row || {}).forEach(function (k) {
          if (typeof row[k] === "string") longest[k] = Math.max(longest[k] || 0, row[k].length);
        });
      });
    });
    (function walk(node) {
      if (Array.isArray(node)) { node.forEach(walk); return; }
      if (!node || typeof node !== "object") return;
      if (node.height && typeof node.height.step === "number") {
        var ys = [node].concat(node.layer || []).map(function (u) { return u.encoding && u.encoding.y; });
        var field = ys.filter(function (y) { return y && y.field && (y.type === "nominal" || y.type === "ordinal"); })[0];
        var chars = field ? longest[field.field] || 0 : 0;
        if (chars > n) node.height.step = Math.max(node.height.step, Math.ceil(chars / (0.8 * n)) * 13 + 8);
      }
      CHILDREN.forEach(function (key) { walk(node[key]); });
    })(spec);
  }

  // For a narrow column: legends one entry per line and under each other (an encoding's own `columns` too), long
  // titles and legend labels as lines that fit `avail`, long band labels and facet headers broken into lines.
  function compact(spec, avail) {
    spec.config = spec.config || {};
    var layout = { direction: "vertical", anchor: "start" };
    var wide = Math.max(16, Math.floor((avail - 40) / CHAR_PX));     // a header's line, the chart's title
    var band = Math.max(14, Math.floor(0.45 * avail / CHAR_PX));      // a band axis label beside its panel
    // a legend's label or an x axis's title: the legend starts at the plot, right of the y axis and its labels
    var entry = Math.max(14, Math.floor((avail - 140) / CHAR_PX));
    spec.config.legend = Object.assign({}, spec.config.legend, {
      direction: "vertical", columns: 1, layout: { bottom: layout, top: layout }, labelLimit: avail - 40
    });
    spec.config.axisBand = Object.assign({}, spec.config.axisBand, { labelExpr: labelLines(band), labelBaseline: "middle" });
    tallerBands(spec, band);
    spec.config.header = Object.assign({}, spec.config.header, { labelExpr: labelLines(wide) });
    // a field whose legend one channel turns off keeps it off (Vega-Lite merges the legends of one field)
    var hidden = {};
    eachChannel(spec, function (d, ch) { if (LEGENDS[ch] && d.legend === null && d.field) hidden[d.field] = true; });
    eachChannel(spec, function (d, ch) {
      if (LEGENDS[ch] && d.legend !== null && !hidden[d.field]) {
        d.legend = d.legend && typeof d.legend === "object" ? d.legend : {};
        delete d.legend.columns;
        d.legend.direction = "vertical";
        d.legend.labelLimit = avail - 40;
        if (!d.legend.labelExpr) d.legend.labelExpr = labelLines(entry);
        if (d.legend.title !== undefined) d.legend.title = lines(d.legend.title, entry);
      }
      if (LEGENDS[ch]) d.title = lines(d.title, entry);
      else if (ch === "x" || ch === "x2") d.title = lines(d.title, entry);
      else if (ch === "facet" || ch === "row" || ch === "column") d.title = lines(d.title, wide);
      if (d.axis && typeof d.axis === "object" && ch.charAt(0) === "x") d.axis.title = lines(d.axis.title, entry);
      if (d.axis && typeof d.axis === "object" && d.axis.labelLimit > avail / 2) d.axis.labelLimit = Math.floor(avail / 2);
    });
    if (typeof spec.title === "string") spec.title = lines(spec.title, wide);
  }

  // Every panel's width (and {step} width) times `factor`, not below the floors. A panel of a facet or a
  // concat with no width of its own takes the width it inherits (the top level's), so that it can be narrowed:
  // a facet of a discrete axis otherwise keeps a band per value however wide that makes it.
  var CHILDREN = ["spec", "layer", "hconcat", "vconcat", "concat"];
  function narrow(node, factor, inherited, floor, config) {
    if (!node || typeof node !== "object") return;
    floor = floor || MIN_PANEL;
    config = config || node.config || {};
    var w = node.width, before = null;
    if (typeof w === "number") {
      node.width = Math.max(floor, Math.floor(w * factor));
      before = w;
    } else if (w && typeof w.step === "number") {
      w.step = Math.max(MIN_STEP, Math.floor(w.step * factor));
    } else if (w === undefined && inherited && (node.mark || node.layer)) {
      node.width = Math.max(floor, Math.floor(inherited * factor));
      before = inherited;
    }
    // a panel of a facet or a concat (one of several, stacked once wrapped) keeps its shape down to MIN_HEIGHT;
    // a single chart keeps its height
    var panel = inherited || node.facet || node.spec || node.hconcat || node.vconcat || node.concat;
    if (before && panel && typeof node.height === "number" && node.height > MIN_HEIGHT) {
      node.height = Math.max(MIN_HEIGHT, Math.floor(node.height * node.width / before));
    } else if (before && panel && node.height === undefined && inherited) {
      var h = (config.view && config.view.continuousHeight) || 200;
      if (h > MIN_HEIGHT) node.height = Math.max(MIN_HEIGHT, Math.floor(h * node.width / before));
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

  // Panels stacked in one column on a phone: none taller than `most` (a facet's cell, a concat's member), so that
  // a chart of four panels is not four screens tall.
  function shorten(spec, most) {
    [spec, spec.spec].concat(spec.concat || [], spec.vconcat || []).forEach(function (node) {
      if (node && typeof node.height === "number" && node.height > most) node.height = most;
    });
  }

  // ------------------------------------------------------------------------------------- fitting
  function drawnBox(el) {
    var g = el.querySelector("svg.marks, canvas.marks, svg, canvas");
    return g ? g.getBoundingClientRect() : { width: 0, height: 0 };
  }
  function drawnWidth(el) { return drawnBox(el).width; }
  function drawnHeight(el) { return drawnBox(el).height; }

  function room(el) {
    var parent = el.parentElement || el;
    return Math.max(120, parent.clientWidth - 4);
  }

  // Draw `spec`; while it is wider than its column, try, in order: its panels wrapped into rows of as many
  // columns as could fit, narrowed if need be but not below WIDE_PANEL; then fewer columns; then one column
  // compacted (compact: legends stacked, long text in lines) and its panels narrowed down to MIN_PANEL. The
  // narrowest drawing that fits wins; if none fits, the narrowest is kept and scaled down by CSS. On a phone, a
  // drawing that fits but stands taller than TALL_SCREENS screens (five panels of a rig each, stacked) is tried
  // again in two columns of panels narrowed down to TWO_PANEL, and that drawing wins if it fits and is shorter.
  var WIDE_PANEL = 220;
  var PHONE = 600;     // px: a column narrower than this is a phone's
  var TALL_SCREENS = 1.3;
  var TWO_PANEL = 90;  // px: the narrowest panel of a phone's two columns

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

    var triedTwo = false;

    // one column too tall on a phone: two columns, compacted, narrowed to fit; kept if it fits and is shorter
    function twoColumns() {
      triedTwo = true;
      var one = best, oneHigh = drawnHeight(el);
      var s = clone(spec);
      if (!wrap(s, 2)) return finish();
      compact(s, avail / 2);
      shorten(s, Math.max(MIN_HEIGHT, Math.round(avail / 2)));
      return tryDraw(s).then(function (w) {
        return narrowing(s, w, 3, TWO_PANEL);
      }).then(function (w) {
        var two = lastDrawn;
        if (w <= avail && drawnHeight(el) < oneHigh) best = { spec: two, width: w };
        else best = one;
        return finish();
      });
    }

    function finish() {
      var fits = best.width <= avail;
      var redraw = lastDrawn === best.spec ? Promise.resolve() : draw(best.spec);
      return redraw.then(function () {
        var screen = window.innerHeight || 0;
        if (fits && !triedTwo && avail < PHONE && screen && drawnHeight(el) > TALL_SCREENS * screen) return twoColumns();
        if (!fits) el.classList.add("iw-scaled");
        el.dataset.iwFit = fits ? (best.spec === spec ? "as-is" : "fitted") : "scaled";
        return current;
      });
    }

    return tryDraw(spec).then(function (w) {
      if (w <= avail) return finish();
      var guess = avail < PHONE ? 1 : 3; // a phone: one column
      var cols = [];
      for (var c = guess; c >= 1; c--) cols.push(c);

      function byColumns(i) {
        if (best.width <= avail) return finish();
        if (i >= cols.length) return last();
        var s = clone(spec);
        if (!wrap(s, cols[i])) return last();
        if (cols[i] === 1 && avail < PHONE) shorten(s, Math.max(MIN_HEIGHT, Math.round(avail / 2)));
        return tryDraw(s).then(function (cw) {
          return narrowing(s, cw, 2, cols[i] > 1 ? WIDE_PANEL : MIN_PANEL);
        }).then(function () { return byColumns(i + 1); });
      }

      function last() {
        if (best.width <= avail) return finish();
        var s = clone(best.spec);
        compact(s, avail);
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
