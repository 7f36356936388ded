// Small DOM helpers. Everything is built with createElement and textContent, never innerHTML, so
// names and titles from the bridge can't inject markup, and the page's CSP (no inline styles or
// scripts) holds: styling is by class only.

const SVG_NS = 'http://www.w3.org/2000/svg';

/** Sets attributes, properties and listeners: `class`, `dataset`, `on*` functions, booleans. */
function assign(element, attributes) {
  for (const [key, value] of Object.entries(attributes ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'dataset') {
      Object.assign(element.dataset, value);
    } else if (key.startsWith('on') && typeof value === 'function') {
      element.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === 'text') {
      element.textContent = value;
    } else {
      element.setAttribute(key, value === true ? '' : String(value));
    }
  }
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
}

/** `h('p', {class: 'note'}, 'text', child)` */
export function h(tag, attributes, ...children) {
  const element = document.createElement(tag);
  assign(element, attributes);
  append(element, children);
  return element;
}

/** The same for SVG elements. */
export function s(tag, attributes, ...children) {
  const element = document.createElementNS(SVG_NS, tag);
  assign(element, attributes);
  append(element, children);
  return element;
}

/** An icon shipped in web/icons; decorative unless `alt` is given. */
export function icon(name, { alt = '', className = 'icon', size = 48 } = {}) {
  return h('img', { src: `icons/${name}.svg`, alt, class: className, width: size, height: size, decoding: 'async' });
}

/** An element only screen readers announce. */
export function srOnly(text) {
  return h('span', { class: 'sr-only' }, text);
}

export function replaceChildren(element, ...children) {
  element.replaceChildren();
  append(element, children);
}
