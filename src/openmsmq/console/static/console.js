// openmsmq console: theme switch, rate charts and live updates over server-sent events.
"use strict";
(function () {
  var root = document.documentElement;
  var saved = null;
  try { saved = localStorage.getItem("openmsmq-theme"); } catch (e) { /* storage off */ }
  if (saved === "light" || saved === "dark") root.dataset.theme = saved;

  function dark() {
    if (root.dataset.theme) return root.dataset.theme === "dark";
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  }

  var series = [];
  var MAX_POINTS = 120;

  function draw(id, column, label) {
    var svg = document.getElementById(id);
    if (!svg) return;
    var values = series.map(function (p) { return p[column]; });
    var top = Math.max.apply(null, values.concat([1]));
    var n = Math.max(values.length - 1, 1);
    var points = values.map(function (v, i) {
      return (i * 300 / n).toFixed(1) + "," + (78 - v / top * 74).toFixed(1);
    }).join(" ");
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
    line.setAttribute("points", points);
    svg.appendChild(line);
    var now = document.getElementById(label);
    if (now && values.length) now.textContent = values[values.length - 1].toFixed(1) + "/s";
  }

  function drawAll() {
    draw("chart-in", 1, "rate-in");
    draw("chart-out", 2, "rate-out");
    draw("chart-commits", 3, "rate-commits");
  }

  var browse = null;
  var refreshing = false;

  function refreshBrowse() {
    if (!browse || refreshing) return;
    refreshing = true;
    fetch(browse.dataset.fragment, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html !== null) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          var fresh = doc.body;
          browse.replaceChildren.apply(browse, Array.prototype.slice.call(fresh.childNodes));
        }
      })
      .finally(function () { refreshing = false; });
  }

  function setAll(attr, key, value) {
    var changed = false;
    document.querySelectorAll("[" + attr + "]").forEach(function (el) {
      if (el.getAttribute(attr).toLowerCase() !== key.toLowerCase()) return;
      if (el.textContent !== String(value)) {
        el.textContent = String(value);
        changed = true;
        if (attr === "data-state") el.className = "state state-" + String(value).replace(/ /g, "-");
      }
    });
    return changed;
  }

  function stamp(seconds) {
    if (!seconds) return "-";
    var d = new Date(seconds * 1000);
    function two(n) { return (n < 10 ? "0" : "") + n; }
    return d.getFullYear() + "-" + two(d.getMonth() + 1) + "-" + two(d.getDate()) + " " +
      two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
  }

  // As the server words an age (pages.py, _duration).
  function duration(seconds) {
    var s = Math.max(0, Math.floor(seconds));
    if (s < 120) return s + " s";
    if (s < 7200) return Math.floor(s / 60) + " min";
    if (s < 172800) return Math.floor(s / 3600) + " h " + Math.floor(s % 3600 / 60) + " min";
    return Math.floor(s / 86400) + " d";
  }

  function showRole(role) {
    setAll("data-role", "role", role.role);
    setAll("data-role", "epoch", role.epoch === null || role.epoch === undefined ? "-" : role.epoch);
    setAll("data-role", "since", stamp(role.since));
    var badge = document.getElementById("role");
    if (badge) badge.className = "role role-" + role.role;
  }

  function apply(doc) {
    if (doc.rates) {
      series.push(doc.rates);
      if (series.length > MAX_POINTS) series.shift();
      drawAll();
    }
    var queueChanged = false;
    Object.keys(doc.queues || {}).forEach(function (name) {
      var v = doc.queues[name];
      var c = setAll("data-count", name, v[0]);
      setAll("data-bytes", name, v[1]);
      document.querySelectorAll("[data-oldest]").forEach(function (el) {
        if (el.getAttribute("data-oldest").toLowerCase() === name.toLowerCase()) {
          el.setAttribute("data-arrived", v[2] === null ? "" : String(v[2]));
        }
      });
      if (c && browse && document.getElementById("messages") &&
          document.getElementById("messages").dataset.queue.toLowerCase() === name.toLowerCase()) {
        queueChanged = true;
      }
    });
    Object.keys(doc.flows || {}).forEach(function (name) {
      setAll("data-in", name, doc.flows[name][0].toFixed(1));
      setAll("data-out", name, doc.flows[name][1].toFixed(1));
    });
    if (doc.role) showRole(doc.role);
    if (doc.now) {
      document.querySelectorAll("[data-oldest]").forEach(function (el) {
        var arrived = el.getAttribute("data-arrived");
        var text = arrived ? duration(doc.now - Number(arrived)) : "-";
        if (el.textContent !== text) el.textContent = text;
      });
    }
    Object.keys(doc.subqueues || {}).forEach(function (sub) { setAll("data-subqueues", sub, doc.subqueues[sub]); });
    Object.keys(doc.outgoing || {}).forEach(function (name) { setAll("data-state", name, doc.outgoing[name]); });
    if (queueChanged) refreshBrowse();
  }

  document.addEventListener("DOMContentLoaded", function () {
    var button = document.getElementById("theme");
    if (button) {
      button.addEventListener("click", function () {
        var next = dark() ? "light" : "dark";
        root.dataset.theme = next;
        try { localStorage.setItem("openmsmq-theme", next); } catch (e) { /* storage off */ }
      });
    }
    var charts = document.getElementById("charts");
    if (charts) {
      try { series = JSON.parse(charts.dataset.series || "[]"); } catch (e) { series = []; }
      drawAll();
    }
    browse = document.getElementById("browse");
    if (document.querySelector("[data-count],[data-state],[data-subqueues],[data-role],#charts") &&
        window.EventSource) {
      var source = new EventSource("/events");
      source.onmessage = function (e) {
        document.body.classList.remove("offline");
        try { apply(JSON.parse(e.data)); } catch (err) { /* a bad event is skipped */ }
      };
      source.onerror = function () {
        // The browser reconnects by itself; until then the values shown are not live.
        if (source.readyState !== EventSource.OPEN) document.body.classList.add("offline");
      };
    }
  });
}());
