// verigym's reader of a MiniWoB++ page: what a user sees of the task area, and the task's verdict.
// Called by the env (never by the agent) as a function of [maxElements, locate]:
//  - locate === null: returns {elements, utterance, verdict}; elements are the rendered, visible
//    nodes of the page (or of the flight site's iframe document) in document order:
//    controls (role, name, value, checked, ...), text leaves (their own text), svg shapes and
//    coloured boxes (their fill colour), each with its pixel box in the viewport. Hidden inputs,
//    attributes, data and script state are never read; a password shows as bullets.
//  - locate === k: scrolls element k into view and returns its centre [x, y] (or null).
([maxElements, locate]) => {
  const view = document.getElementById('wrap');
  let root = document.body, dx = 0, dy = 0;  // jQuery UI puts dialogs and menus outside #wrap
  if (view && view.tagName === 'IFRAME') {
    const frame = view.getBoundingClientRect();
    dx = frame.left; dy = frame.top;
    try { root = view.contentDocument && view.contentDocument.body; } catch (e) { root = null; }
  }
  const out = [];
  const squash = (s) => (s || '').replace(/\s+/g, ' ').trim().slice(0, 200);
  const NOT_TEXT = new Set(['file', 'image', 'checkbox', 'radio', 'range', 'button', 'submit', 'reset']);
  const SHAPES = new Set(['circle', 'rect', 'ellipse', 'polygon', 'polyline', 'path', 'line', 'text']);
  const ownText = (el) => {
    let s = '';
    for (const c of el.childNodes) if (c.nodeType === 3) s += c.textContent;
    return squash(s);
  };
  // an icon's name: its alt text or title, else its file's name ("reply" for .../reply.png)
  const stem = (url) => { const m = /([^/"']+?)\.(png|gif|jpe?g|svg)/i.exec(url || ''); return m ? m[1] : ''; };
  const opaque = (c) => c && c !== 'transparent' && !/rgba\(.*,\s*0\)$/.test(c);
  const describe = (el, style) => {
    const tag = el.tagName.toLowerCase();
    const e = {};
    if (tag === 'input') {
      const type = (el.getAttribute('type') || '').toLowerCase();
      if (type === 'hidden') return null;
      if (type === 'checkbox' || type === 'radio') {
        e.role = type; e.checked = !!el.checked;
        const label = el.closest('label') || (el.id && el.ownerDocument.querySelector('label[for="' + el.id + '"]'));
        e.name = label ? squash(label.textContent) : '';
      } else if (type === 'button' || type === 'submit' || type === 'reset') {
        e.role = 'button'; e.name = squash(el.value);
      } else if (type === 'range') {
        e.role = 'slider'; e.name = ''; e.value = String(el.value);
      } else if (!NOT_TEXT.has(type)) {  // text, password ... and unknown types (a text field)
        e.role = 'textbox'; e.name = squash(el.placeholder);
        e.value = type === 'password' ? '\u2022'.repeat(el.value.length) : el.value;
      } else { e.role = 'input'; e.name = type; }
    } else if (tag === 'textarea') {
      e.role = 'textbox'; e.name = squash(el.placeholder); e.value = el.value; e.multiline = true;
    } else if (tag === 'select') {
      e.role = 'combobox'; e.name = '';
      const chosen = el.options[el.selectedIndex];
      e.value = chosen ? squash(chosen.textContent) : '';
      e.options = Array.from(el.options).map((o) => squash(o.textContent)).slice(0, 64);
    } else if (tag === 'button') {
      e.role = 'button'; e.name = squash(el.textContent);
    } else if (tag === 'a') {
      e.role = 'link'; e.name = squash(el.textContent);
    } else if (el.namespaceURI === 'http://www.w3.org/2000/svg' && SHAPES.has(tag)) {
      e.role = 'shape'; e.name = tag === 'text' ? squash(el.textContent) : tag;
      const fill = style.fill;
      if (opaque(fill) && fill !== 'none') e.color = fill;
    } else if (tag === 'img') {
      e.role = 'image'; e.name = squash(el.alt || el.title) || stem(el.src);
    } else if (tag === 'canvas') {
      e.role = 'canvas'; e.name = '';
    } else {
      const text = ownText(el);
      const role = el.getAttribute('role');
      if (el.id === 'query') { e.role = 'text'; e.name = squash(el.textContent); }
      else if (role) { e.role = role; e.name = text; }
      else if (text) { e.role = 'text'; e.name = text; }
      else if (!el.firstElementChild && /^url\(/.test(style.content + style.backgroundImage)) {
        e.role = 'image'; e.name = squash(el.title) || stem(style.content) || stem(style.backgroundImage);
      } else if (!el.firstElementChild && opaque(style.backgroundColor)) {
        e.role = 'box'; e.name = ''; e.color = style.backgroundColor;
      } else return null;
    }
    if (el.disabled) e.disabled = true;
    const expanded = el.getAttribute('aria-expanded'), selected = el.getAttribute('aria-selected');
    if (expanded !== null) e.expanded = expanded === 'true';
    if (selected === 'true') e.selected = true;
    if (el.ownerDocument.activeElement === el && el !== el.ownerDocument.body) e.focused = true;
    return e;
  };
  const walk = (el, inQuery) => {
    if (out.length >= maxElements) return;
    const style = el.ownerDocument.defaultView.getComputedStyle(el);
    if (style.display === 'none' || style.visibility === 'hidden') return;
    const tag = el.tagName.toLowerCase();
    if (tag === 'script' || tag === 'style' || tag === 'noscript' || tag === 'head') return;
    const rect = el.getBoundingClientRect();
    if (rect.width > 0 && rect.height > 0 && style.opacity !== '0') {
      const e = describe(el, style);
      if (e && !(inQuery && e.role !== 'box')) {
        e.box = [Math.round(rect.left + dx), Math.round(rect.top + dy),
                 Math.round(rect.right + dx), Math.round(rect.bottom + dy)];
        // what a click at its centre would reach: clipped by a scroll box or covered, it is not it
        const hit = el.ownerDocument.elementFromPoint((rect.left + rect.right) / 2,
                                                      (rect.top + rect.bottom) / 2);
        if (!hit || !(hit === el || el.contains(hit))) e.covered = true;
        e.node = el;
        out.push(e);
      }
    }
    if (tag === 'select' || tag === 'button' || tag === 'textarea') return;
    for (const child of el.children) walk(child, inQuery || el.id === 'query');
  };
  if (root) walk(root, false);
  if (locate !== null) {
    const e = out[locate];
    if (!e) return null;
    e.node.scrollIntoView({block: 'center', inline: 'center'});
    const r = e.node.getBoundingClientRect();
    return [r.left + dx + r.width / 2, r.top + dy + r.height / 2];
  }
  const elements = out.map((e, i) => { delete e.node; e.id = i; return e; });
  let utterance = '';
  try { let u = core.getUtterance(); if (u && typeof u === "object") u = u.utterance; utterance = String(u); } catch (err) { utterance = ''; }
  let verdict = null;
  if (typeof WOB_DONE_GLOBAL !== 'undefined') {
    verdict = {done: !!WOB_DONE_GLOBAL, raw: Number(WOB_RAW_REWARD_GLOBAL),
               reward: Number(WOB_REWARD_GLOBAL), ready: WOB_TASK_READY !== false};
  }
  return {elements, utterance, verdict};
}
