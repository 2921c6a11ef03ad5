// The runs page: rows refresh in place every two seconds (statuses change live), the
// filters apply on change, and ticked runs open in the compare view.
(function () {
  const rows = document.getElementById("rows");
  const form = document.getElementById("filters");
  const compare = document.getElementById("compare-selected");
  const picked = new Set();

  form.querySelectorAll("select").forEach((s) => s.addEventListener("change", () => form.submit()));

  function wire() {
    rows.querySelectorAll("input.pick").forEach((box) => {
      box.checked = picked.has(box.value);
      box.addEventListener("change", () => {
        box.checked ? picked.add(box.value) : picked.delete(box.value);
        compare.disabled = picked.size < 1;
      });
    });
  }
  compare.addEventListener("click", () => {
    location.href = "/compare?runs=" + encodeURIComponent([...picked].join(","));
  });

  // The runs could not be listed: say why in place of rows that may be stale by now.
  function showError(html, status) {
    const why = new DOMParser().parseFromString(html, "text/html").querySelector("p.error");
    const line = document.createElement("p");
    line.className = "error";
    line.textContent = why ? why.textContent : "the runs cannot be listed (HTTP " + status + ")";
    rows.replaceChildren(line);
  }

  async function refresh() {
    if (document.hidden) return;
    const query = rows.dataset.query;
    try {
      const r = await fetch("/?" + (query ? query + "&" : "") + "partial=rows", { headers: { Accept: "text/html" } });
      if (r.ok) { rows.innerHTML = await r.text(); wire(); }
      else { showError(await r.text(), r.status); }
    } catch (e) { /* the server restarts or the network blips: try again next time */ }
  }
  wire();
  setInterval(refresh, 2000);
})();
