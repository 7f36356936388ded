// Rooms: the user's rooms in the user's order, each with its icon, temperature and light; a search
// box filters by name (any case), a toggle sorts A–Z.

import * as store from '../store.js';
import { h, icon } from '../dom.js';
import { display, roomIcon } from '../sensors.js';

export function render(main, _route, app) {
  document.title = 'Rooms · SmartHome';
  const ui = (app.ui.rooms ??= { query: '', sorted: false });

  const search = h('input', {
    id: 'room-search', type: 'search', placeholder: 'Search rooms', autocomplete: 'off',
    'aria-controls': 'room-grid', value: ui.query,
  });
  const sort = h('button', {
    type: 'button', id: 'room-sort', class: 'button toggle', 'aria-pressed': String(ui.sorted),
    'aria-controls': 'room-grid', title: 'Sort rooms by name',
  }, h('span', { 'aria-hidden': 'true', class: 'toggle-mark' }), 'A–Z');
  const grid = h('ul', { class: 'room-grid', id: 'room-grid', 'aria-busy': 'true' });
  const summary = h('p', { class: 'summary', id: 'room-summary', role: 'status' });
  const empty = h('p', { class: 'empty', id: 'room-empty', hidden: true });
  const failure = h('p', { class: 'form-error', role: 'alert' });

  main.append(
    h('div', { class: 'page-head' },
      h('h1', { tabindex: '-1' }, 'Rooms'),
      h('div', { class: 'toolbar', role: 'search' },
        h('label', { for: 'room-search', class: 'sr-only' }, 'Search rooms by name'),
        search, sort)),
    summary, failure, grid, empty);

  const cards = new Map(); // room id -> {item, temperature, light}

  function card(room) {
    const temperature = h('span', { class: 'room-temp', 'data-field': 'temperature' }, '–');
    const lightText = h('span', { class: 'room-light-text' }, '–');
    const light = h('span', { class: 'room-light', 'data-field': 'lights', 'data-state': '' },
      icon('lights', { size: 20, className: 'icon icon-small' }), lightText);
    const link = h('a', { href: `#/rooms/${encodeURIComponent(room.id)}`, class: 'room-card', 'data-room': room.id },
      icon(roomIcon(room.icon), { size: 64, className: 'icon room-icon' }),
      h('span', { class: 'room-name' }, room.name),
      h('span', { class: 'room-meta' }, temperature, light));
    const item = h('li', { 'data-room': room.id }, link);
    cards.set(room.id, { item, link, temperature, light, lightText, room });
    update(room.id);
    return item;
  }

  function update(id) {
    const entry = cards.get(id);
    const room = store.detail(id);
    if (!entry || !room) return;
    const temperature = room.sensors.find((sensor) => sensor.id === 'temperature');
    const lights = room.sensors.find((sensor) => sensor.id === 'lights');
    const t = temperature ? display('temperature', temperature.value) : null;
    entry.temperature.textContent = t ? `${t.text} ${t.unit}` : '';
    entry.temperature.hidden = !t;
    const l = lights ? display('lights', lights.value) : null;
    entry.lightText.textContent = l ? `Light ${l.text.toLowerCase()}` : 'No light';
    entry.light.dataset.state = l?.state ?? '';
    entry.link.setAttribute('aria-label',
      [entry.room.name, t && `${t.text} ${t.unit}`, l && `light ${l.text.toLowerCase()}`].filter(Boolean).join(', '));
  }

  function apply() {
    const query = ui.query.trim().toLocaleLowerCase();
    let list = store.rooms().filter((room) => room.name.toLocaleLowerCase().includes(query));
    if (ui.sorted) list = [...list].sort((a, b) => a.name.localeCompare(b.name, undefined, { sensitivity: 'base' }));
    grid.replaceChildren(...list.map((room) => cards.get(room.id).item));
    const total = store.rooms().length;
    summary.textContent = query ? `${list.length} of ${total} rooms` : `${total} rooms`;
    empty.hidden = list.length > 0 || total === 0;
    empty.textContent = `No room matches “${ui.query.trim()}”.`;
  }

  search.addEventListener('input', () => {
    ui.query = search.value;
    apply();
  });
  search.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && search.value !== '') {
      search.value = '';
      ui.query = '';
      apply();
    }
  });
  sort.addEventListener('click', () => {
    ui.sorted = !ui.sorted;
    sort.setAttribute('aria-pressed', String(ui.sorted));
    apply();
  });

  const unsubscribe = store.subscribe((change) => update(change.room));
  const controller = new AbortController();

  (async () => {
    try {
      const list = await store.loadRooms();
      if (controller.signal.aborted) return;
      for (const room of list) card(room);
      apply();
      await Promise.allSettled(list.map((room) => store.loadRoom(room.id, { signal: controller.signal })));
    } catch (problem) {
      if (problem.name !== 'AbortError') failure.textContent = problem.message;
    } finally {
      if (!controller.signal.aborted) grid.setAttribute('aria-busy', 'false');
    }
  })();

  return () => {
    controller.abort();
    unsubscribe();
  };
}
