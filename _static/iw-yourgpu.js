// The Inference Wall: "What would my GPU do?" in the reader's browser, no network.
//
// Reads the payload that inference_wall.pages.yourgpu writes into div#iw-yourgpu, and computes for the chosen GPU
// and model exactly what yourgpu.py's step / admission / summary compute (tests/test_yourgpu.py checks both agree on
// every datasheet GPU): the refit's step (each part of each kernel family scaled by its resource, the fit GPU's wait
// on its host carried as measured), the frozen model's KV page arithmetic, the decode ceiling at the running batch a
// flood at the series' cap reaches, and the batch where an added sequence stops paying. Draws the predicted step
// against the batch beside the measured rigs' steps with the page's own Vega-Embed.
(function () {
  "use strict";

  function interp(xs, ys, x) {
    if (xs.length === 1) { return ys[0]; }
    var n = xs.length;
    if (x <= xs[n - 1]) {
      for (var i = 1; i < n; i++) {
        if (x <= xs[i]) {
          var a = xs[i - 1], b = xs[i];
          return ys[i - 1] + (ys[i] - ys[i - 1]) * (Math.max(x, a) - a) / (b - a);
        }
      }
      return ys[n - 1];
    }
    return ys[n - 1] + (ys[n - 1] - ys[n - 2]) / (xs[n - 1] - xs[n - 2]) * (x - xs[n - 1]);
  }

  function nearestFit(model, bw) {
    var best = null, dist = Infinity;
    model.fits.forEach(function (f) {
      var d = Math.abs(Math.log(f.bandwidth_gb_s / bw));
      if (d < dist) { dist = d; best = f; }
    });
    return best;
  }

  function step(model, bw, tflops, batch) {
    var f = nearestFit(model, bw), xs = f.batches, kFit = 0, kT = 0;
    Object.keys(f.parts).forEach(function (name) {
      var ys = f.parts[name];
      var ms = /growth past batch 1$/.test(name) ? interp(xs, ys, batch) : ys[0];
      var rule = f.rules[name];
      var scale = rule === "bandwidth" ? f.bandwidth_gb_s / bw : rule === "tensor" ? f.tflops / tflops : 1;
      kFit += ms;
      kT += ms * scale;
    });
    var idle = interp(xs, f.idle, batch);
    var gaps = Math.min.apply(null, f.idle.map(function (i) { return Math.max(0, i); }));
    var hostBound = idle > f.host_bound_share * (kFit + idle);
    var wait = hostBound ? Math.max(gaps, idle - (kT - kFit)) : idle;
    return kT + wait;
  }

  function admission(model, memoryGb, ratio, util) {
    var free = (memoryGb * ratio * util - model.weights_gib - model.overhead_gib) * Math.pow(2, 30);
    var blocks = free > 0 ? Math.floor(free / model.block_bytes) : 0;
    if (blocks <= 1) { return 0; }
    return Math.floor((blocks - model.null_blocks) / model.pages_per_request);
  }

  // words.sig: at most 3 significant figures, thousands separated
  function sig(x) {
    if (x === null || !isFinite(x)) { return "–"; }
    if (x === 0) { return "0"; }
    var places = 2 - Math.floor(Math.log10(Math.abs(x)));
    var rounded = Math.round(x * Math.pow(10, places)) / Math.pow(10, places);
    if (rounded !== 0) { places = 2 - Math.floor(Math.log10(Math.abs(rounded))); }
    var p = Math.max(0, places);
    return rounded.toLocaleString("en-US", {minimumFractionDigits: p, maximumFractionDigits: p});
  }
  function whole(n) { return Math.round(n).toLocaleString("en-US"); }

  function summary(data, label, bw, tflops, memoryGb) {
    var m = data.models[label];
    var adm = admission(m, memoryGb, data.memory_ratio, data.utilization);
    var run = Math.min(data.max_num_seqs, adm);
    var one = step(m, bw, tflops, 1), stop = null, prev = one;
    for (var b = 2; b <= 1024; b++) {
      var cur = step(m, bw, tflops, b);
      if (cur - prev >= data.stop_paying_x * cur / b) { stop = b; break; }
      prev = cur;
    }
    return {single: one, admission: adm, batch: run,
            ceiling: run ? run / step(m, bw, tflops, run) * 1000 : 0, stop: stop, fit: nearestFit(m, bw).rig};
  }

  function target(root, data) {
    var form = root.querySelector("form");
    var key = form.gpu.value;
    if (key === "custom") {
      return {name: "your GPU", bw: Number(form.bandwidth.value) * data.copy_fraction,
              tflops: Number(form.tflops.value), memory: Number(form.memory.value), custom: true};
    }
    var g = data.gpus.filter(function (x) { return x.key === key; })[0];
    return {name: g.name, bw: g.bandwidth_gb_s, tflops: g.tflops, memory: g.memory_gb, source: g.bandwidth_source,
            tflopsSource: g.tflops_source, custom: false};
  }

  function draw(root, data, label, t) {
    var m = data.models[label], rows = [], band = [];
    var fitRig = nearestFit(m, t.bw).rig, spread = (data.bands || {})[fitRig];
    data.grid.forEach(function (b) {
      var s = step(m, t.bw, t.tflops, b);
      rows.push({batch: b, step_ms: s, series: "predicted: " + t.name});
      // a prediction divided by (1 + error) is what the measurement would have been at the fit's tested errors
      if (spread) { band.push({batch: b, lo: s / (1 + spread[1] / 100), hi: s / (1 + spread[0] / 100)}); }
    });
    var measured = data.measured[label] || {};
    Object.keys(measured).forEach(function (rig) {
      measured[rig].forEach(function (p) { rows.push({batch: p[0], step_ms: p[1], series: "measured: " + rig}); });
    });
    var domain = ["predicted: " + t.name], range = ["#333333"];
    Object.keys(measured).forEach(function (rig) {
      domain.push("measured: " + rig);
      range.push((data.colours || {})[rig] || "#888888");
    });
    var xScale = {type: "log", domain: [1, data.grid[data.grid.length - 1]], nice: false};
    var layers = [];
    if (band.length) {
      layers.push({data: {values: band}, mark: {type: "area", opacity: 0.15, color: "#333333"},
                   encoding: {x: {field: "batch", type: "quantitative", scale: xScale},
                              y: {field: "lo", type: "quantitative", scale: {type: "log"}},
                              y2: {field: "hi"},
                              tooltip: [{field: "batch", title: "Batch", format: ","},
                                        {field: "lo", title: "Band low (ms)", format: ".3~r"},
                                        {field: "hi", title: "Band high (ms)", format: ".3~r"}]}});
    }
    var spec = {
      $schema: "https://vega.github.io/schema/vega-lite/v6.json",
      width: "container", height: 240, layer: layers, resolve: {scale: {color: "independent"}}
    };
    layers.push({
      data: {values: rows},
      mark: {type: "line", point: true},
      encoding: {
        x: {field: "batch", type: "quantitative", title: "Running batch (sequences)",
            scale: {type: "log", domain: [1, data.grid[data.grid.length - 1]], nice: false},
            axis: {values: [1, 4, 16, 64, 256, 1024], format: ","}},
        y: {field: "step_ms", type: "quantitative", scale: {type: "log"}, title: "Decode step (ms)"},
        color: {field: "series", type: "nominal", title: null, scale: {domain: domain, range: range},
                legend: {orient: "bottom", columns: 1}},
        strokeDash: {condition: {test: "indexof(datum.series, 'predicted') === 0", value: [1, 0]}, value: [4, 3]},
        tooltip: [{field: "series", title: "Series"}, {field: "batch", title: "Batch", format: ","},
                  {field: "step_ms", title: "Step (ms)", format: ".3~r"}]
      }
    });
    var holder = root.querySelector(".iw-yourgpu-chart");
    if (window.vegaEmbed) {
      window.vegaEmbed(holder, spec, {actions: false, renderer: "svg"}).then(function (res) {
        holder.iwView = res.view;
      }).catch(function () {});
    }
  }

  function update(root, data) {
    var form = root.querySelector("form");
    root.querySelector(".iw-yourgpu-custom").hidden = form.gpu.value !== "custom";
    var label = form.model.value, t = target(root, data);
    var s = summary(data, label, t.bw, t.tflops, t.memory);
    var out = function (name) { return root.querySelector('[data-out="' + name + '"]'); };
    out("single").textContent = sig(s.single);
    out("admission").textContent = whole(s.admission);
    out("ceiling").textContent = s.batch ? sig(s.ceiling) : "–";
    out("batch").textContent = whole(s.batch);
    out("stop").textContent = s.stop ? whole(s.stop) : "past 1,024";
    var errors = (data.errors[s.fit] || []).join(" · ");
    var spread = (data.bands || {})[s.fit];
    out("note").textContent = "Predicted, not measured: carried from the " + s.fit + "'s measured step (the measured " +
      "GPU nearest in bandwidth), at " + whole(t.bw) + " GB/s" + (t.custom ? " (your figure x the measured GPUs' " +
      "copy fraction)" : " (" + t.source + ")") + " and " + sig(t.tflops) + " TFLOP/s" +
      (t.custom ? " (your figure)" : " (" + t.tflopsSource + ")") + ". Where this model was tested, " +
      (errors || "no other measured GPU yet") + "." +
      (spread ? " The shaded band is the prediction at the " + s.fit + "'s tested step errors (" +
                sig(spread[0]) + "% to " + sig(spread[1]) + "%), not a confidence interval." : "");
    root.setAttribute("data-iw-ready", form.gpu.value + "|" + label);
    draw(root, data, label, t);
  }

  function init() {
    var root = document.getElementById("iw-yourgpu");
    if (!root) { return; }
    var data = JSON.parse(root.getAttribute("data-payload"));
    var form = root.querySelector("form");
    form.addEventListener("change", function () { update(root, data); });
    form.addEventListener("input", function () { update(root, data); });
    update(root, data);
  }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", init); } else { init(); }
  window.iwYourGpu = {step: step, admission: admission, summary: summary, sig: sig};
})();
