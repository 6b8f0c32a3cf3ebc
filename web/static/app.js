// Progressive enhancement for the trace page. Every link works without this
// script; with it, expanding a subtree fetches only that subtree's rows and
// selecting a span loads its panel in place.
(function () {
  "use strict";
  function onTrace() {
    var wf = document.getElementById("waterfall");
    if (!wf) return;
    var trace = wf.getAttribute("data-trace");
    wf.addEventListener("click", function (ev) {
      var a = ev.target.closest("a");
      if (!a || ev.metaKey || ev.ctrlKey || ev.shiftKey) return;
      if (a.classList.contains("toggle") && a.hasAttribute("data-rows")) {
        ev.preventDefault();
        var row = a.closest(".wf-row");
        fetch(a.getAttribute("data-rows"), { credentials: "same-origin" })
          .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
          .then(function (html) {
            var tpl = document.createElement("template");
            tpl.innerHTML = html;
            row.after(tpl.content);
            markSelected(wf);
            a.removeAttribute("data-rows");
            a.textContent = "▾";
            a.title = "collapse";
          })
          .catch(function () { window.location = a.href; });
        return;
      }
      if (a.classList.contains("more") && a.hasAttribute("data-more")) {
        ev.preventDefault();
        var holder = a.closest(".wf-more");
        fetch(a.getAttribute("data-more"), { credentials: "same-origin" })
          .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
          .then(function (html) {
            var tpl = document.createElement("template");
            tpl.innerHTML = html;
            holder.replaceWith(tpl.content);
            markSelected(wf);
          })
          .catch(function () { window.location = a.href; });
        return;
      }
      if (a.classList.contains("span-link")) {
        ev.preventDefault();
        selectSpan(trace, a.getAttribute("data-span"), a.href);
      }
    });
    var panel = document.getElementById("span-panel");
    if (panel) panel.addEventListener("click", function (ev) {
      var a = ev.target.closest("a.span-link");
      if (!a) return;
      ev.preventDefault();
      selectSpan(trace, a.getAttribute("data-span"), a.href);
    });
  }
  function selectSpan(trace, span, href) {
    var panel = document.getElementById("span-panel");
    fetch("/traces/" + encodeURIComponent(trace) + "/spans/" + encodeURIComponent(span) + "?fragment=1", { credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        panel.innerHTML = html;
        var wf = document.getElementById("waterfall");
        wf.setAttribute("data-selected", span);
        markSelected(wf);
        history.replaceState(null, "", href);
      })
      .catch(function () { window.location = href; });
  }
  // markSelected highlights the selected span's row (data-selected on the
  // waterfall), also in rows fetched after the selection was made.
  function markSelected(wf) {
    var span = wf.getAttribute("data-selected") || "";
    wf.querySelectorAll(".wf-row.selected").forEach(function (r) {
      if (r.getAttribute("data-span") !== span) r.classList.remove("selected");
    });
    if (!span) return;
    var row = wf.querySelector('.wf-row[data-span="' + CSS.escape(span) + '"]');
    if (row) row.classList.add("selected");
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", onTrace); else onTrace();
})();
