// verigym GUI tasks: deterministic renderers of task specs generated in Python.
// The page never decides success: Python reads window.vg.observe() (the state and the elements)
// and verifies the state against the spec it generated. No timers, no Math.random, no Date.now.
(function () {
  "use strict";

  const vg = (window.vg = { task: null, spec: null, st: null });

  // -- tiny DOM helpers ---------------------------------------------------------------------
  function h(tag, props, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null) continue;
      if (k === "role") e.dataset.role = v;
      else if (k === "name") e.dataset.name = v;
      else if (k === "cls") e.className = v;
      else if (k === "style") e.style.cssText = v;
      else if (k === "checked") e.dataset.checked = String(!!v);
      else if (k === "selected") e.dataset.selected = String(!!v);
      else if (k === "expanded") e.dataset.expanded = String(!!v);
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const kid of kids.flat(3)) {
      if (kid === null || kid === undefined || kid === false) continue;
      e.append(kid instanceof Node ? kid : String(kid));
    }
    return e;
  }

  // an event handler that changes the state, then re-renders
  function act(fn) {
    return (ev) => {
      ev.preventDefault();
      ev.stopPropagation();
      fn(vg.st, ev);
      vg.update();
    };
  }
  const finish = (st) => { st.ended = true; };
  const text = (s, cls) => h("div", { role: "text", cls }, s);
  const title = (s) => h("div", { role: "heading", cls: "title" }, s);
  const button = (label, fn, extra) => h("button", Object.assign({ role: "button", onclick: act(fn) }, extra || {}), label);
  const link = (label, fn, extra) => h("span", Object.assign({ role: "link", cls: "link", onclick: act(fn) }, extra || {}), label);
  function textbox(label, key, extra) {
    // a real <input>: typing updates the state without re-rendering (the focus stays)
    const input = h("input", Object.assign({ role: "textbox", name: label, "aria-label": label, placeholder: label, autocomplete: "off", spellcheck: "false" }, extra || {}));
    input.value = vg.st[key] || "";
    input.addEventListener("input", () => { vg.st[key] = input.value; });
    return input;
  }
  function checkbox(label, on, fn) {
    return h("div", { role: "checkbox", name: label, checked: on, cls: "box", onclick: act(fn) }, (on ? "\u2611 " : "\u2610 ") + label);
  }
  function toggle(label, on, fn) {
    return h("div", { cls: "row" }, h("span", {}, label),
      h("span", { role: "switch", name: label, checked: on, cls: "switch" + (on ? " on" : ""), onclick: act(fn) }, on ? "ON" : "OFF"));
  }
  const pad = (n) => String(n).padStart(2, "0");

  // -- the tasks ----------------------------------------------------------------------------
  const TASKS = {};

  TASKS["click-button"] = {
    init: () => ({ clicked: null }),
    render: (spec) => h("div", { style: `height:${spec.height}px` },
      spec.buttons.map((b) => button(b.label, (st) => { st.clicked = b.label; finish(st); },
        { cls: "abs", style: `left:${b.x}px;top:${b.y}px` }))),
  };

  TASKS["click-checkboxes"] = {
    init: (spec) => ({ checked: spec.items.filter((_, i) => spec.initial[i]) }),
    render: (spec, st) => h("div", {},
      spec.items.map((item) => checkbox(item, st.checked.includes(item), (s) => {
        s.checked = s.checked.includes(item) ? s.checked.filter((x) => x !== item) : s.checked.concat([item]);
      })),
      button("Submit", finish)),
  };

  TASKS["enter-text"] = {
    init: () => ({ value: "" }),
    render: (spec) => h("div", {}, text(spec.label), textbox(spec.label, "value"), h("br"), button("Submit", finish)),
  };

  TASKS["login"] = {
    init: () => ({ username: "", password: "" }),
    render: () => h("div", {},
      title("Sign in"),
      text("Username"), textbox("Username", "username"),
      text("Password"), textbox("Password", "password", { type: "password" }),
      h("br"), button("Log in", finish)),
  };

  TASKS["choose-dropdown"] = {
    init: () => ({ selected: null, open: false }),
    render: (spec, st) => h("div", {},
      text(spec.label),
      h("div", { role: "combobox", name: spec.label, expanded: st.open, cls: "dropdown", onclick: act((s) => { s.open = !s.open; }) },
        (st.selected || "Select an option") + " \u25BE"),
      st.open ? h("div", { cls: "options" }, spec.options.map((o) =>
        h("div", { role: "option", selected: st.selected === o, cls: "item" + (st.selected === o ? " on" : ""),
          onclick: act((s) => { s.selected = o; s.open = false; }) }, o))) : null,
      button("Submit", finish)),
  };

  const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
  const daysIn = (y, m) => new Date(Date.UTC(y, m, 0)).getUTCDate(); // m is 1-based
  const weekday = (y, m, d) => new Date(Date.UTC(y, m - 1, d)).getUTCDay();
  TASKS["pick-date"] = {
    init: (spec) => ({ date: null, open: false, view: [spec.today[0], spec.today[1]] }),
    render: (spec, st) => {
      const shown = st.date ? `${pad(st.date[1])}/${pad(st.date[2])}/${st.date[0]}` : "MM/DD/YYYY";
      const kids = [text("Date"), h("div", { role: "combobox", name: "Date", expanded: st.open, cls: "dropdown", onclick: act((s) => { s.open = !s.open; }) }, shown)];
      if (st.open) {
        const [y, m] = st.view;
        const move = (delta) => (s) => {
          let mm = s.view[1] + delta, yy = s.view[0];
          if (mm < 1) { mm = 12; yy -= 1; } else if (mm > 12) { mm = 1; yy += 1; }
          s.view = [yy, mm];
        };
        const cells = ["Su", "Mo", "Tu", "We", "Th", "Fr", "Sa"].map((d) => h("div", { cls: "muted" }, d));
        for (let i = 0; i < weekday(y, m, 1); i++) cells.push(h("div", {}));
        for (let d = 1; d <= daysIn(y, m); d++) {
          const on = st.date && st.date[0] === y && st.date[1] === m && st.date[2] === d;
          cells.push(h("div", { role: "gridcell", name: String(d), selected: !!on, cls: on ? "on" : "", onclick: act((s) => { s.date = [y, m, d]; s.open = false; }) }, d));
        }
        kids.push(h("div", { cls: "cal" },
          h("div", { cls: "row" }, button("\u2039", move(-1), { name: "Previous month" }),
            h("span", { role: "heading", name: `${MONTHS[m - 1]} ${y}` }, `${MONTHS[m - 1]} ${y}`),
            button("\u203A", move(1), { name: "Next month" })),
          h("div", { cls: "cal-grid" }, cells)));
      }
      kids.push(h("br"), button("Submit", finish));
      return h("div", {}, kids);
    },
  };

  TASKS["navigate-tabs"] = {
    init: () => ({ tab: 0, clicked: null }),
    render: (spec, st) => h("div", {},
      h("div", { cls: "tabs" }, spec.tabs.map((t, i) =>
        h("div", { role: "tab", selected: st.tab === i, cls: "tab" + (st.tab === i ? " on" : ""), onclick: act((s) => { s.tab = i; }) }, t.title))),
      h("div", { style: "padding:4px" }, spec.tabs[st.tab].links.map((l) =>
        h("div", {}, link(l, (s) => { s.clicked = [spec.tabs[s.tab].title, l]; finish(s); }))))),
  };

  TASKS["navigate-menu"] = {
    init: () => ({ open: [], chosen: null }),
    render: (spec, st) => {
      const columns = [];
      let level = spec.menu;
      const path = [];
      const bar = h("div", { cls: "menubar" });
      for (let depth = 0; depth <= st.open.length && level; depth++) {
        const holder = depth === 0 ? bar : h("div", { cls: "menu" });
        const prefix = path.slice();
        for (const node of level) {
          const on = st.open[depth] === node.label;
          holder.append(h("div", { role: "menuitem", name: node.label, expanded: node.children ? on : undefined, cls: "item" + (on ? " on" : ""),
            onclick: act((s) => {
              if (node.children) s.open = prefix.concat([node.label]);
              else { s.chosen = prefix.concat([node.label]); finish(s); }
            }) }, node.label + (node.children ? " \u25B8" : "")));
        }
        if (depth > 0) columns.push(holder);
        const next = level.find((n) => n.label === st.open[depth]);
        if (!next) break;
        path.push(next.label);
        level = next.children;
      }
      return h("div", {}, bar, h("div", {}, columns));
    },
  };

  TASKS["search-list"] = {
    init: () => ({ query: "", results: null, opened: null }),
    render: (spec, st) => {
      const search = (s) => {
        const q = s.query.trim().toLowerCase();
        s.results = spec.items.filter((it) => it.name.toLowerCase().includes(q)).map((it) => it.name);
      };
      const box = textbox("Search", "query");
      box.addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); search(vg.st); vg.update(); } });
      const shown = st.results === null ? spec.items.map((it) => it.name) : st.results;
      return h("div", {}, h("div", { cls: "row" }, box, button("Search", search)),
        st.results !== null ? text(`${shown.length} results`, "muted") : null,
        h("div", { cls: "list" }, shown.map((name) => {
          const item = spec.items.find((it) => it.name === name);
          return h("div", {}, link(name, (s) => { s.opened = name; finish(s); }), h("div", { role: "text", cls: "muted" }, item.desc));
        })));
    },
  };

  TASKS["email-inbox"] = {
    init: () => ({ screen: "inbox", open: null, deleted: [], to: "", body: "", mode: null, done: null }),
    render: (spec, st) => {
      const mail = spec.emails.find((m) => m.id === st.open);
      if (st.screen === "inbox") {
        return h("div", {}, title("Inbox"), h("div", { cls: "list" }, spec.emails.filter((m) => !st.deleted.includes(m.id)).map((m) =>
          h("div", {}, link(`${m.sender}: ${m.subject}`, (s) => { s.open = m.id; s.screen = "read"; })))));
      }
      if (st.screen === "read") {
        return h("div", {}, button("Back", (s) => { s.screen = "inbox"; }),
          text(`From: ${mail.sender}`), text(`Subject: ${mail.subject}`), text(mail.body, "muted"),
          h("div", { cls: "row" },
            button("Reply", (s) => { s.screen = "compose"; s.mode = "reply"; s.to = mail.sender; s.body = ""; }),
            button("Forward", (s) => { s.screen = "compose"; s.mode = "forward"; s.to = ""; s.body = ""; }),
            button("Delete", (s) => { s.deleted.push(mail.id); s.done = { kind: "delete", id: mail.id }; s.screen = "inbox"; finish(s); })));
      }
      return h("div", {}, button("Back", (s) => { s.screen = "read"; }),
        title(st.mode === "reply" ? `Reply to ${mail.sender}` : `Forward: ${mail.subject}`),
        st.mode === "reply" ? text(`To: ${st.to}`) : textbox("To", "to"),
        textbox("Message", "body"), h("br"),
        button("Send", (s) => { s.done = { kind: s.mode, id: mail.id, to: s.to, body: s.body }; s.screen = "inbox"; finish(s); }));
    },
  };

  const EMAIL = /^[^@\s]+@[^@\s]+\.[a-z]{2,}$/;
  TASKS["form-validation"] = {
    init: (spec) => ({ name: spec.initial.name, email: spec.initial.email, age: spec.initial.age, errors: [], submitted: null }),
    render: (spec, st) => {
      const submit = (s) => {
        const errors = [];
        if (!s.name.trim()) errors.push("Name is required");
        if (!EMAIL.test(s.email)) errors.push("Email is not valid");
        const age = Number(s.age);
        if (!/^\d+$/.test(s.age) || age < 18 || age > 99) errors.push("Age must be a whole number from 18 to 99");
        s.errors = errors;
        if (!errors.length) { s.submitted = { name: s.name, email: s.email, age: s.age }; finish(s); }
      };
      return h("div", {}, title("Registration"),
        text("Name"), textbox("Name", "name"), text("Email"), textbox("Email", "email"), text("Age"), textbox("Age", "age"),
        st.errors.map((e) => text(e, "error")), button("Submit", submit));
    },
  };

  TASKS["phone-settings"] = {
    init: (spec) => ({ screen: "home", wifi: spec.initial.wifi, bluetooth: spec.initial.bluetooth, alarms: spec.initial.alarms.slice(), hour: 8, minute: 0 }),
    render: (spec, st) => {
      const back = (to) => button("Back", (s) => { s.screen = to; });
      let body;
      if (st.screen === "home") {
        body = h("div", {}, spec.apps.map((app) => h("div", { role: "button", name: app, cls: "icon", onclick: act((s) => { if (app === "Settings" || app === "Clock") s.screen = app.toLowerCase(); }) }, app)));
      } else if (st.screen === "settings") {
        body = h("div", {}, back("home"), title("Settings"), ["Wi-Fi", "Bluetooth", "Display", "Sound"].map((row) =>
          h("div", { role: "link", name: row, cls: "item", onclick: act((s) => { if (row === "Wi-Fi") s.screen = "wifi"; if (row === "Bluetooth") s.screen = "bluetooth"; }) }, row + " \u203A")));
      } else if (st.screen === "wifi" || st.screen === "bluetooth") {
        const key = st.screen;
        const label = key === "wifi" ? "Wi-Fi" : "Bluetooth";
        body = h("div", {}, back("settings"), title(label), toggle(label, st[key], (s) => { s[key] = !s[key]; }));
      } else if (st.screen === "clock") {
        body = h("div", {}, back("home"), title("Alarms"),
          st.alarms.map((a) => text(`\u23F0 ${a}`)),
          button("Add alarm", (s) => { s.screen = "alarm"; s.hour = 8; s.minute = 0; }));
      } else {
        const shift = (dh, dm) => (s) => { s.hour = (s.hour + dh + 24) % 24; s.minute = (s.minute + dm + 60) % 60; };
        body = h("div", {}, back("clock"), title("New alarm"),
          h("div", { role: "text", cls: "title" }, `${pad(st.hour)}:${pad(st.minute)}`),
          h("div", { cls: "row" }, button("+1 h", shift(1, 0), { name: "Hour up" }), button("-1 h", shift(-1, 0), { name: "Hour down" })),
          h("div", { cls: "row" }, button("+5 min", shift(0, 5), { name: "Minute up" }), button("-5 min", shift(0, -5), { name: "Minute down" })),
          button("Save", (s) => { const t = `${pad(s.hour)}:${pad(s.minute)}`; if (!s.alarms.includes(t)) s.alarms.push(t); s.screen = "clock"; }));
      }
      return h("div", { cls: "phone" }, h("div", { role: "text", cls: "muted" }, "12:00  \u25CF\u25CF\u25CF"), body);
    },
  };

  TASKS["shopping-cart"] = {
    init: () => ({ screen: "shop", cart: {}, purchased: null }),
    render: (spec, st) => {
      const count = Object.values(st.cart).reduce((a, b) => a + b, 0);
      if (st.screen === "shop") {
        return h("div", {}, h("div", { cls: "row" }, title("Shop"), link(`Cart (${count})`, (s) => { s.screen = "cart"; }, { name: "Cart" })),
          spec.products.map((p) => h("div", { cls: "row" }, h("span", { role: "text" }, `${p.name} $${p.price}`),
            button("Add", (s) => { s.cart[p.name] = (s.cart[p.name] || 0) + 1; }, { name: `Add ${p.name}` }))));
      }
      const rows = Object.entries(st.cart).filter(([, q]) => q > 0);
      return h("div", {}, h("div", { cls: "row" }, title("Cart"), link("Back to shop", (s) => { s.screen = "shop"; })),
        rows.length ? rows.map(([name, q]) => h("div", { cls: "row" }, h("span", { role: "text" }, `${q} x ${name}`),
          button("Remove", (s) => { s.cart[name] -= 1; if (!s.cart[name]) delete s.cart[name]; }, { name: `Remove ${name}` }))) : text("The cart is empty", "muted"),
        button("Checkout", (s) => { s.purchased = Object.assign({}, s.cart); finish(s); }));
    },
  };

  TASKS["grounding"] = {
    init: () => ({ click: null, hit: false }),
    render: (spec) => h("div", { style: `height:${spec.height}px` }, spec.elements.map((e, i) => {
      const style = `left:${e.x}px;top:${e.y}px;`;
      if (e.kind === "button") return h("button", { role: "button", cls: "abs", "data-key": i, style: style + `background:${e.color};color:#fff` }, e.label);
      if (e.kind === "link") return h("span", { role: "link", cls: "abs link", "data-key": i, style: style + `color:${e.color}` }, e.label);
      if (e.kind === "icon") return h("span", { role: "img", name: e.label, cls: "abs", "data-key": i, style: style + `width:22px;height:22px;border-radius:11px;background:${e.color}` });
      return h("span", { role: "text", cls: "abs", "data-key": i, style: style + `color:${e.color}` }, e.label);
    })),
  };

  // ScreenSpot-style grounding: the first click anywhere ends the episode; the page records where
  // it landed and the target's box, and Python decides whether the point is inside.
  document.addEventListener("mousedown", (ev) => {
    if (vg.task !== "grounding" || vg.st.ended) return;
    const target = document.querySelector(`[data-key="${vg.spec.target}"]`);
    const r = target.getBoundingClientRect();
    vg.st.click = [ev.clientX, ev.clientY];
    vg.st.box = [r.left, r.top, r.right, r.bottom];
    vg.st.ended = true;
  }, true);

  // -- change tracking: the env reuses the last screenshot while nothing visible changed -------
  // (DOM mutations other than our own element ids, input values, focus, selection, scrolling)
  vg.version = 0;
  const bump = () => { vg.version += 1; };
  const mutations = new MutationObserver((records) => { if (records.some((r) => r.attributeName !== "data-vg-id")) bump(); });
  mutations.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
  for (const kind of ["input", "focusin", "focusout", "selectionchange", "scroll"]) document.addEventListener(kind, bump, true);

  // -- the shell API (called by verigym.envs.gui.browser) -------------------------------------
  vg.load = function (task, spec) {
    if (!TASKS[task]) throw new Error(`unknown task ${task}`);
    vg.task = task;
    vg.spec = spec;
    vg.st = Object.assign({ ended: false }, TASKS[task].init(spec));
    // a reset must leave nothing of the previous episode: scroll, focus, selection
    if (document.activeElement && document.activeElement !== document.body) document.activeElement.blur();
    window.getSelection().removeAllRanges();
    window.scrollTo(0, 0);
    document.getElementById("query").textContent = spec.instruction;
    vg.update();
  };

  // the centre of element `id` (an id of the last observation), scrolled into view first if needed
  vg.locate = function (id) {
    const e = document.querySelector(`[data-vg-id="${id}"]`);
    if (!e) return null;
    let r = e.getBoundingClientRect();
    if (r.top < 0 || r.left < 0 || r.bottom > window.innerHeight || r.right > window.innerWidth) {
      e.scrollIntoView({ block: "center", inline: "nearest" });
      r = e.getBoundingClientRect();
    }
    return [r.left + r.width / 2, r.top + r.height / 2];
  };

  vg.scroll = function (dy) {
    window.scrollBy(0, dy);
  };

  vg.update = function () {
    const area = document.getElementById("area");
    area.replaceChildren(TASKS[vg.task].render(vg.spec, vg.st));
  };

  // The elements an agent can address (visible nodes with a data-role, in document order) get the
  // ids 0..n-1; ids are reassigned at every observation.
  vg.observe = function (maxElements) {
    const elements = [];
    for (const e of document.querySelectorAll("[data-vg-id]")) e.removeAttribute("data-vg-id");
    for (const e of document.querySelectorAll("#area [data-role]")) {
      const r = e.getBoundingClientRect();
      if (r.width <= 0 || r.height <= 0) continue;
      if (elements.length >= maxElements) break;
      const item = {
        id: elements.length,
        role: e.dataset.role,
        name: (e.dataset.name !== undefined ? e.dataset.name : e.textContent).trim().replace(/\s+/g, " ").slice(0, 80),
        box: [Math.round(r.left), Math.round(r.top), Math.round(r.right), Math.round(r.bottom)],
      };
      if (e.tagName === "INPUT") item.value = e.type === "password" ? "\u2022".repeat(e.value.length) : e.value;
      for (const flag of ["checked", "selected", "expanded"]) if (e.dataset[flag] !== undefined) item[flag] = e.dataset[flag] === "true";
      if (document.activeElement === e) item.focused = true;
      e.setAttribute("data-vg-id", String(item.id));
      elements.push(item);
    }
    if (mutations.takeRecords().some((r) => r.attributeName !== "data-vg-id")) bump();
    // "scroll" and "selectionchange" events fire at the next frame, after this call may already
    // have run: compare what they stand for here, synchronously, so a screenshot is never stale
    const sel = window.getSelection();
    const seen = [window.scrollX, window.scrollY, document.activeElement ? document.activeElement.getAttribute("data-vg-id") : null,
      sel.rangeCount, sel.anchorOffset, sel.focusOffset, document.activeElement && "selectionStart" in document.activeElement ? [document.activeElement.selectionStart, document.activeElement.selectionEnd] : null];
    const key = JSON.stringify(seen);
    if (key !== vg.seenKey) { vg.seenKey = key; bump(); }
    return { elements: elements, state: vg.st, version: vg.version };
  };
})();
