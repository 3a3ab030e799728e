// The turnwise console's script (ours, no dependencies): live updates of the instance page,
// the controls of generated forms (array items, oneOf variants), their check against the
// schema's bounds before sending, confirmations, and payloads opened on demand.
"use strict";

(function () {
  // ---- live: poll the instance's status and Running line ----
  // The live part is replaced in place every second. When the head turn changes (another
  // turn, another status), the whole page is reloaded so that its forms fit the new turn
  // (a Respond form appears for a turn that waits for a signal), unless a form has been
  // edited.
  let edited = false;
  document.querySelectorAll("form.generated").forEach(function (form) {
    form.addEventListener("input", function () { edited = true; });
    form.addEventListener("change", function () { edited = true; });
  });
  const section = document.getElementById("live-section");
  if (section && section.dataset.live) {
    const url = section.dataset.live;
    const first = document.getElementById("live");
    const initial = first ? first.dataset.key : "";
    let busy = false;
    setInterval(async function () {
      if (busy || document.hidden) return;
      busy = true;
      try {
        const res = await fetch(url, { credentials: "same-origin", cache: "no-store" });
        if (res.ok) {
          section.innerHTML = await res.text();
          const now = document.getElementById("live");
          if (now && now.dataset.key !== initial && !edited) window.location.reload();
        }
      } catch (e) { /* the next poll tries again */ }
      busy = false;
    }, 1000);
  }

  // ---- confirmations ----
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (ev) {
      if (!window.confirm(form.dataset.confirm)) ev.preventDefault();
    });
  });

  // ---- payloads on demand ----
  document.querySelectorAll("details.payload[data-src]").forEach(function (d) {
    d.addEventListener("toggle", async function () {
      if (!d.open || d.dataset.loaded) return;
      d.dataset.loaded = "1";
      const res = await fetch(d.dataset.src, { credentials: "same-origin" });
      const box = document.createElement("div");
      box.innerHTML = await res.text();
      const pre = box.querySelector("pre");
      if (pre) d.appendChild(pre);
    });
  });

  // ---- the new-instance picker ----
  document.querySelectorAll("select[data-pick]").forEach(function (sel) {
    sel.addEventListener("change", function () {
      const [t, v] = sel.value.split("|");
      window.location = "/console/new?type=" + encodeURIComponent(t) + "&version=" + encodeURIComponent(v);
    });
  });

  // ---- generated forms ----
  function showVariant(select) {
    const box = select.closest(".oneof");
    box.querySelectorAll(":scope > .variant").forEach(function (v) {
      v.hidden = v.dataset.variant !== select.value;
    });
  }
  function wire(root) {
    root.querySelectorAll("select[data-kind=variant]").forEach(function (s) {
      if (s.dataset.wired) return;
      s.dataset.wired = "1";
      s.addEventListener("change", function () { showVariant(s); });
      showVariant(s);
    });
    root.querySelectorAll("button[data-add]").forEach(function (b) {
      if (b.dataset.wired) return;
      b.dataset.wired = "1";
      b.addEventListener("click", function () {
        const array = b.closest("fieldset.array");
        const tpl = array.querySelector(":scope > template");
        const n = Number(array.dataset.next || 0);
        array.dataset.next = String(n + 1);
        const html = tpl.innerHTML.split(array.dataset.placeholder).join(String(n));
        const holder = document.createElement("div");
        holder.innerHTML = html;
        const item = holder.firstElementChild;
        array.querySelector(":scope > .items").appendChild(item);
        wire(item);
      });
    });
    root.querySelectorAll("button[data-remove]").forEach(function (b) {
      if (b.dataset.wired) return;
      b.dataset.wired = "1";
      b.addEventListener("click", function () { b.closest(".item").remove(); });
    });
  }
  wire(document);

  // Whether an input counts: not inside a hidden variant, a template, or an excluded object.
  function active(el) {
    if (el.closest("template")) return false;
    for (let n = el.parentElement; n; n = n.parentElement) {
      if (n.classList && n.classList.contains("variant") && n.hidden) return false;
      if (n.tagName === "FIELDSET" && n.classList.contains("object")) {
        const inc = n.querySelector(":scope > legend input[type=checkbox]");
        if (inc && !inc.checked) return false;
      }
    }
    return true;
  }

  // The schema's bounds, checked as the server's validator checks them.
  function problem(el) {
    const d = el.dataset;
    const v = el.value.trim();
    if (v === "") {
      return d.required && d.kind !== "text" && d.kind !== "bool" ? "required: enter a value" : null;
    }
    if (d.kind === "integer" || d.kind === "number") {
      if (d.kind === "integer" && !/^-?\d+$/.test(v)) return JSON.stringify(v) + " is not a whole number";
      const x = Number(v);
      if (!isFinite(x)) return JSON.stringify(v) + " is not a number";
      if (d.min !== undefined && x < Number(d.min)) return v + " is less than the minimum of " + d.min;
      if (d.max !== undefined && x > Number(d.max)) return v + " is greater than the maximum of " + d.max;
      if (d.xmin !== undefined && x <= Number(d.xmin)) return v + " must be more than " + d.xmin;
      if (d.xmax !== undefined && x >= Number(d.xmax)) return v + " must be less than " + d.xmax;
    }
    if (d.kind === "text") {
      const len = Array.from(el.value).length;
      if (d.minlength !== undefined && len < Number(d.minlength)) return "shorter than " + d.minlength + " characters";
      if (d.maxlength !== undefined && len > Number(d.maxlength)) return "longer than " + d.maxlength + " characters";
      if (d.pattern !== undefined) {
        try { if (!new RegExp(d.pattern, "u").test(el.value)) return "does not match " + d.pattern; } catch (e) { /* the server checks */ }
      }
    }
    if (d.kind === "json") {
      try { JSON.parse(v); } catch (e) { return "not valid JSON: " + e.message; }
    }
    return null;
  }

  document.querySelectorAll("form.generated").forEach(function (form) {
    form.addEventListener("submit", function (ev) {
      let bad = 0;
      form.querySelectorAll("[data-kind]").forEach(function (el) {
        if (!el.name) return;
        const path = el.name.replace(/#$/, "");
        const out = form.querySelector('[data-err-for="' + CSS.escape(path) + '"]');
        const p = active(el) ? problem(el) : null;
        el.classList.toggle("invalid", !!p);
        if (out) out.textContent = p || "";
        if (p) bad += 1;
      });
      if (bad > 0) {
        ev.preventDefault();
        const first = form.querySelector(".invalid");
        if (first) first.focus();
      }
    });
  });
})();
