// The live page of a running run: server-sent events from /runs/ID/live
// (iorig/serve/app.py) drawn as they come; the stored run's page replaces
// it when the run ends. No library: plain DOM and SVG.
"use strict";
(function () {
  var root = document.getElementById("live");
  if (!root) { return; }
  var runId = root.dataset.run;
  var SVG = "http://www.w3.org/2000/svg";
  var LEGEND_W = 180;  // a legend entry's width: 24 characters of 11 px
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  var ALL = "all hosts";
  var phaseIndex = null;
  var metric = "bytes_per_s";  // the phase's headline: what its report leads with
  var seconds = {};  // host -> second -> {direction -> live second}
  var count = 0;

  function text(id, value) { document.getElementById(id).textContent = value; }

  function si(value, unit) {
    if (value === null || value === undefined) { return "–"; }
    var steps = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (var i = 0; i < steps.length; i++) {
      if (Math.abs(value) >= steps[i][0]) { return (value / steps[i][0]).toFixed(2) + " " + steps[i][1] + unit; }
    }
    return value.toFixed(value < 10 ? 2 : 0) + " " + unit;
  }

  function latency(ns) {
    if (ns === null || ns === undefined) { return "–"; }
    if (ns >= 1e9) { return (ns / 1e9).toFixed(2) + " s"; }
    if (ns >= 1e6) { return (ns / 1e6).toFixed(2) + " ms"; }
    return (ns / 1e3).toFixed(1) + " µs";
  }

  // "12 s of 60 s, 48 s left", or "12 s" where the phase runs through its data
  function clock(elapsed, duration) {
    var shown = elapsed.toFixed(0) + " s";
    if (duration === null || duration === undefined) { return shown; }
    var left = Math.max(0, duration - elapsed);
    return shown + " of " + duration.toFixed(0) + " s, " + left.toFixed(0) + " s left";
  }

  // "next: fill, random-read and 3 more", "the last phase", or nothing for a
  // search, which decides its phases as it goes
  function coming(names, total) {
    if (names.length === 0) { return total === null ? "" : "the last phase"; }
    var shown = names.slice(0, 4).join(", ");
    return "next: " + shown + (names.length > 4 ? " and " + (names.length - 4) + " more" : "");
  }

  function onPhase(p) {
    if (phaseIndex !== p.phase_index) { seconds = {}; phaseIndex = p.phase_index; }
    text("phase", p.phase + " (" + p.index + "/" + (p.total === null ? "?" : p.total) + ")");
    text("coming", coming(p.coming || [], p.total));
    document.getElementById("fraction").value = p.fraction === null ? 0 : p.fraction;
    metric = p.metric || "bytes_per_s";
    text("throughput-title", metric === "iops" ? "IOPS per second" : "throughput per second");
    text("elapsed", clock(p.elapsed_s, p.duration_s));
    text("rule", p.rule || "");
    text("source", p.source ? "figures from " + p.source : "");
    var list = document.getElementById("events");
    while (list.firstChild) { list.removeChild(list.firstChild); }
    (p.events.length ? p.events : [null]).forEach(function (e) {
      var item = document.createElement("li");
      item.textContent = e === null ? "none yet" :  // event details are data, never markup
        "at " + e.at_s + " s: " + e.label + " — " + e.status + (e.detail ? " (" + e.detail + ")" : "");
      if (e === null) { item.className = "note"; }
      list.appendChild(item);
    });
    root.dataset.events = String(p.events.length);
  }

  function onSeconds(list) {
    list.forEach(function (s) {
      if (phaseIndex !== null && s.phase_index !== phaseIndex) {
        if (s.phase_index < phaseIndex) { return; }
        seconds = {}; phaseIndex = s.phase_index;
      }
      var host = seconds[s.host] = seconds[s.host] || {};
      var second = host[s.second] = host[s.second] || {};
      second[s.direction] = s;
      count += 1;
      // how long after iorig read the second this page drew it (one clock)
      root.dataset.lagS = (Date.now() / 1000 - s.t_s).toFixed(2);
    });
    draw();
    root.dataset.seconds = String(count);
  }

  // a figure per second of each host, and of all hosts for the seconds
  // every host told (pick.combine: how the hosts' seconds make one)
  function series(pick) {
    var hosts = Object.keys(seconds).sort();
    var out = {};
    hosts.forEach(function (h) {
      out[h] = Object.keys(seconds[h]).map(Number).sort(function (a, b) { return a - b; })
        .map(function (sec) { return [sec, pick(seconds[h][sec])]; })
        .filter(function (p) { return p[1] !== null; });
    });
    if (hosts.length > 1 && pick.combine) {
      var each = {};
      hosts.forEach(function (h) {
        Object.keys(seconds[h]).forEach(function (sec) {
          each[sec] = each[sec] || [];
          each[sec].push(seconds[h][sec]);
        });
      });
      out[ALL] = Object.keys(each).map(Number).sort(function (a, b) { return a - b; })
        .filter(function (sec) { return each[sec].length === hosts.length; })
        .map(function (sec) { return [sec, pick.combine(each[sec])]; })
        .filter(function (p) { return p[1] !== null; });
    }
    return out;
  }

  function bytesOf(second) {
    var sum = 0;
    Object.keys(second).forEach(function (d) { sum += second[d].bytes_per_s; });
    return sum;
  }
  bytesOf.combine = function (list) {
    return list.reduce(function (sum, second) { return sum + bytesOf(second); }, 0);
  };

  function iopsOf(second) {
    var sum = 0, known = false;
    Object.keys(second).forEach(function (d) {
      if (second[d].ios_per_s !== null) { sum += second[d].ios_per_s; known = true; }
    });
    return known ? sum : null;
  }
  iopsOf.combine = function (list) {
    var each = list.map(iopsOf);
    return each.indexOf(null) >= 0 ? null : each.reduce(function (a, b) { return a + b; }, 0);
  };

  // a second's p99: of its one direction, or the slowest direction's (a
  // percentile of several directions or hosts cannot be made from theirs)
  function p99Of(second) {
    var worst = null;
    Object.keys(second).forEach(function (d) {
      var v = second[d].lat_p99_ns;
      if (v !== null && v !== undefined && (worst === null || v > worst)) { worst = v; }
    });
    return worst;
  }

  function latencyOf(second) {
    var weighted = 0, ios = 0;
    Object.keys(second).forEach(function (d) {
      var s = second[d];
      if (s.lat_mean_ns !== null && s.ios_per_s !== null) { weighted += s.lat_mean_ns * s.ios_per_s; ios += s.ios_per_s; }
    });
    return ios > 0 ? weighted / ios : null;
  }
  // every host's I/Os together: the mean weighted by each host's I/Os
  latencyOf.combine = function (list) {
    var merged = {};
    list.forEach(function (second, i) {
      Object.keys(second).forEach(function (d) { merged[d + i] = second[d]; });
    });
    return latencyOf(merged);
  };

  function chart(id, data, format) {
    var svg = document.getElementById(id);
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    var names = Object.keys(data);
    var xs = [], ys = [0];
    names.forEach(function (n) { data[n].forEach(function (p) { xs.push(p[0]); ys.push(p[1]); }); });
    if (!xs.length) { return; }
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs) + 1e-9;
    var y1 = Math.max.apply(null, ys) * 1.1 || 1;
    var L = 70, R = 790, T = 10, B = 210;
    function el(name, attrs, content) {
      var e = document.createElementNS(SVG, name);
      Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
      if (content !== undefined) { e.textContent = content; }
      svg.appendChild(e);
      return e;
    }
    el("line", {x1: L, y1: B, x2: R, y2: B, "class": "axis"});
    el("line", {x1: L, y1: T, x2: L, y2: B, "class": "axis"});
    for (var k = 0; k <= 4; k++) {  // the value axis in quarters, each labelled
      var yk = B - (B - T) * k / 4;
      if (k > 0) { el("line", {x1: L, y1: yk, x2: R, y2: yk, "class": "grid"}); }
      el("text", {x: 4, y: yk + 4}, format(y1 * k / 4));
    }
    var span = Math.max(1, Math.round(x1 - x0));
    var step = Math.max(1, Math.ceil(span / 8));
    for (var sec = x0; sec <= x1; sec += step) {  // seconds, at most about 8 labels
      var xs_ = L + (R - L) * (x1 === x0 ? 0.5 : (sec - x0) / (x1 - x0));
      el("text", {x: xs_ - 8, y: B + 16}, String(sec));
    }
    el("text", {x: R - 40, y: B + 16}, "second");
    // the legend in rows of perRow names under the chart (16 hosts and their p99
    // are 32 names); a host past the palette's 10 colours draws dotted
    var bases = names.filter(function (m) { return !/ p99$/.test(m); });
    var perRow = Math.max(1, Math.floor((R - L) / LEGEND_W));
    svg.setAttribute("viewBox", "0 0 800 " + (246 + 14 * (Math.ceil(names.length / perRow) - 1)));
    names.forEach(function (n, i) {
      var base = n.replace(/ p99$/, "");
      var index = bases.indexOf(base);
      var color = base === ALL ? "#000" : COLORS[index % COLORS.length];
      var points = data[n].map(function (p) {
        var x = L + (R - L) * (x1 === x0 ? 0.5 : (p[0] - x0) / (x1 - x0));
        var y = B - (B - T) * p[1] / y1;
        return x.toFixed(1) + "," + y.toFixed(1);
      }).join(" ");
      var attrs = {points: points, "class": "line", stroke: color};
      var late = base !== ALL && index >= COLORS.length;
      if (n !== base) { attrs["stroke-dasharray"] = late ? "8 3 2 3" : "6 4"; }
      else if (late) { attrs["stroke-dasharray"] = "2 3"; }
      el("polyline", attrs);
      // a long name keeps its end: the port and " p99" tell hosts apart
      var shown = n.length > 24 ? "…" + n.slice(n.length - 23) : n;
      el("text", {x: L + 10 + LEGEND_W * (i % perRow), y: B + 30 + 14 * Math.floor(i / perRow),
                  fill: color, "class": "legend"}, shown);
    });
  }

  function draw() {
    if (metric === "iops") {
      chart("throughput", series(iopsOf), function (v) { return si(v, "IOPS"); });
    } else {
      chart("throughput", series(bytesOf), function (v) { return si(v, "B/s"); });
    }
    var lat = series(latencyOf), tails = series(p99Of);
    Object.keys(tails).forEach(function (h) { lat[h + " p99"] = tails[h]; });
    chart("latency", lat, latency);
    var body = document.getElementById("last");
    while (body.firstChild) { body.removeChild(body.firstChild); }
    Object.keys(seconds).sort().forEach(function (h) {
      var secs = Object.keys(seconds[h]).map(Number);
      var last = Math.max.apply(null, secs);
      Object.keys(seconds[h][last]).sort().forEach(function (d) {
        var s = seconds[h][last][d];
        var row = document.createElement("tr");
        [h, d, String(last), s.ios_per_s === null ? "–" : si(s.ios_per_s, "").trim(),
         (s.bytes_per_s / 1e6).toFixed(1), latency(s.lat_mean_ns), latency(s.lat_p50_ns),
         latency(s.lat_p99_ns)].forEach(function (v) {
          var cell = document.createElement("td");
          cell.textContent = v;  // host names are data, never markup
          row.appendChild(cell);
        });
        body.appendChild(row);
      });
    });
  }

  var stream = new EventSource("/runs/" + encodeURIComponent(runId) + "/live");
  stream.addEventListener("phase", function (e) { onPhase(JSON.parse(e.data)); });
  stream.addEventListener("seconds", function (e) { onSeconds(JSON.parse(e.data)); });
  stream.addEventListener("problem", function (e) { text("source", JSON.parse(e.data).error); });
  stream.addEventListener("end", function () {
    stream.close();
    root.dataset.ended = "1";
    window.location.replace(window.location.href);  // the stored run's page, same URL
  });
})();
