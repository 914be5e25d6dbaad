// DOM helpers shared by the dashboard's pages (dashboard.js, requests.js),
// loaded before them. Every value from the server goes in as text or an
// attribute, never parsed as HTML.
"use strict";
window.switchyardDom = {
  // An element with attributes (`text` sets its text) and children; null
  // attributes and children are left out.
  el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v == null) continue;
      if (k === "text") e.textContent = v; else e.setAttribute(k, v);
    }
    e.append(...kids.filter(k => k != null));
    return e;
  },
};
