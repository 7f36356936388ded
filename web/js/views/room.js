// One room: every sensor with its icon, value and unit, live from the event stream (and, in a room
// with devices, when each was last heard from); the light switch; the last 24 hours of temperature
// and humidity.

import * as API from '../api.js';
import * as store from '../store.js';
import { h, s, icon } from '../dom.js';
import { display, lastSeen, roomIcon, sensorIcon, unit } from '../sensors.js';
import { drawChart } from '../chart.js';

const DAY = 24 * 60 * 60 * 1000;
const CHARTED = [
  { id: 'temperature', label: 'Temperature' },
  { id: 'humidity', label: 'Humidity' },
];
const PAGE = 10_000;      // the history route's largest page
const MAX_PAGES = 5;
const SEEN_TICK_MS = 5_000;       // the "Seen 25 s ago" texts are redrawn this often
const SEEN_RELOAD_MS = 30_000;    // a room with devices is reloaded this often (see store.applyState)

const clock = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });

export function render(main, route, app) {
  const controller = new AbortController();
  const cleanups = [() => controller.abort()];
  const cleanup = () => cleanups.forEach((fn) => fn());
  const back = h('a', { href: '#/rooms', class: 'back' }, h('span', { 'aria-hidden': 'true' }, '← '), 'All rooms');
  const status = h('p', { class: 'summary', role: 'status' }, 'Loading…');
  main.append(back, status);

  (async () => {
    let rooms;
    try {
      rooms = await store.loadRooms();
    } catch (problem) {
      status.textContent = problem.message;
      return;
    }
    if (controller.signal.aborted) return;
    const room = rooms.find((candidate) => candidate.id === route.id);
    if (!room) {
      // Only the user's own rooms exist here; the API would answer 404 for anyone else's.
      document.title = 'Room not found · SmartHome';
      status.remove();
      main.append(h('h1', { tabindex: '-1' }, 'Room not found'),
        h('p', { class: 'empty', id: 'room-missing' }, `There is no room “${route.id}” in your home.`));
      main.querySelector('h1').focus();
      return;
    }
    document.title = `${room.name} · SmartHome`;
    status.remove();
    cleanups.push(showRoom(main, room, controller.signal, app));
  })();

  return cleanup;
}

function showRoom(main, room, signal) {
  const updated = h('p', { class: 'updated', id: 'room-updated' });
  const list = h('ul', { class: 'sensor-list', id: 'sensor-list', 'aria-busy': 'true' });
  const failure = h('p', { class: 'form-error', role: 'alert' });
  const charts = h('section', { class: 'charts', 'aria-labelledby': 'charts-title' },
    h('h2', { id: 'charts-title' }, 'Last 24 hours'));
  main.append(
    h('div', { class: 'room-head' },
      icon(roomIcon(room.icon), { size: 56, className: 'icon room-icon' }),
      h('div', {}, h('h1', { tabindex: '-1' }, room.name), updated)),
    failure, list, charts);
  main.querySelector('h1').focus({ preventScroll: true });

  const rows = new Map(); // sensor id -> {value, unit, row, switch}
  const switchState = { pending: null };

  function row(sensor) {
    const value = h('span', { class: 'sensor-value', 'data-value': '' });
    const unitText = h('span', { class: 'sensor-unit' });
    const item = h('li', { class: 'sensor', 'data-sensor': sensor.id },
      icon(sensorIcon(sensor.id), { size: 40, className: 'icon sensor-icon' }),
      h('span', { class: 'sensor-name', id: `sensor-${sensor.id}-name` }, sensor.name),
      h('span', { class: 'sensor-reading' }, value, unitText));
    const entry = { item, value, unitText, sensor };
    if (store.detail(room.id)?.tracksSeen) {
      entry.seen = h('span', { class: 'sensor-seen', 'data-seen': '', id: `sensor-${sensor.id}-seen` });
      item.append(entry.seen);
    }
    if (sensor.id === 'lights') {
      entry.toggle = h('button', {
        type: 'button', role: 'switch', class: 'switch', id: 'light-switch', 'aria-checked': 'false',
        'aria-label': `${room.name} lights`,
      }, h('span', { class: 'switch-track', 'aria-hidden': 'true' }, h('span', { class: 'switch-thumb' })),
      h('span', { class: 'switch-text', 'aria-hidden': 'true' }, ''));
      entry.toggle.addEventListener('click', () => flip(entry));
      item.append(entry.toggle);
    }
    rows.set(sensor.id, entry);
    return item;
  }

  function paint(entry) {
    const current = store.detail(room.id)?.sensors.find((sensor) => sensor.id === entry.sensor.id);
    // A device not heard from yet has no value, whatever placeholder the room answer carries.
    const unheard = entry.seen && !current?.lastSeen;
    const shown = display(entry.sensor.id, unheard ? null : current?.value);
    entry.value.textContent = shown.text;
    entry.unitText.textContent = shown.unit ? ` ${shown.unit}` : '';
    entry.item.dataset.state = shown.state;
    paintSeen(entry, current);
    if (entry.toggle) {
      const on = Boolean(current?.value?.on);
      const pending = switchState.pending;
      entry.toggle.setAttribute('aria-checked', String(on));
      entry.toggle.dataset.pending = pending ? 'true' : 'false';
      if (pending) entry.toggle.setAttribute('aria-busy', 'true');
      else entry.toggle.removeAttribute('aria-busy');
      entry.toggle.querySelector('.switch-text').textContent =
        pending ? (pending === 'ON' ? 'Turning on…' : 'Turning off…') : on ? 'On' : 'Off';
    }
  }

  function paintSeen(entry, current = store.detail(room.id)?.sensors.find((sensor) => sensor.id === entry.sensor.id)) {
    if (!entry.seen) return;
    const seen = lastSeen(current?.lastSeen ?? null);
    entry.seen.textContent = seen.text;
    entry.seen.title = seen.title;
    entry.item.dataset.stale = String(seen.stale);
  }

  function paintUpdated() {
    const at = store.detail(room.id)?.updatedAt;
    updated.textContent = at ? `Updated ${clock.format(new Date(at))}` : '';
  }

  async function flip(entry) {
    if (switchState.pending) return;
    const current = store.detail(room.id)?.sensors.find((sensor) => sensor.id === 'lights');
    const target = current?.value?.on ? 'OFF' : 'ON';
    switchState.pending = target;
    failure.textContent = '';
    paint(entry);
    try {
      // The answer is the room as the bridge now has it: the switch shows that, confirmed.
      store.setRoomShape(room.id, await API.switchLights(room.id, target));
    } catch (problem) {
      failure.textContent = `The light could not be switched: ${problem.message}`;
    } finally {
      switchState.pending = null;
      if (rows.has('lights')) paint(rows.get('lights'));
    }
  }

  function build() {
    const detail = store.detail(room.id);
    if (!detail) return;
    list.replaceChildren(...detail.sensors.map(row));
    for (const entry of rows.values()) paint(entry);
    paintUpdated();
    list.setAttribute('aria-busy', 'false');
  }

  // Charts: history first, then the stream's readings appended as they come. The stream's readings
  // are kept from the start, since the history route lags the stream by up to a second (it is
  // written in batches).
  const live = new Map(CHARTED.map((spec) => [spec.id, []]));
  const series = new Map();
  function chart(spec) {
    const svg = s('svg', { class: 'chart', role: 'img', 'aria-labelledby': `chart-${spec.id}-title` });
    const stats = h('span', { class: 'chart-stats' });
    const caption = h('figcaption', { id: `chart-${spec.id}-title` }, h('strong', {}, spec.label), stats);
    const figure = h('figure', { class: 'chart-figure', 'data-chart': spec.id }, caption, h('div', { class: 'chart-box' }, svg));
    charts.append(figure);
    const entry = { spec, svg, stats, points: live.get(spec.id), loaded: false };
    series.set(spec.id, entry);
    return entry;
  }

  let frame = 0;
  function redraw() {
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      const now = Date.now();
      for (const entry of series.values()) {
        entry.points = entry.points.filter((point) => point.t >= now - DAY);
        const u = unit(entry.spec.id);
        drawChart(entry.svg, { points: entry.points, from: entry.points[0]?.t ?? now - 60_000, to: now, unit: u,
          label: entry.spec.label, className: `series-${entry.spec.id}` });
        entry.stats.textContent = summary(entry.points, u);
      }
    });
  }

  async function loadHistory(entry) {
    const since = new Date(Date.now() - DAY).toISOString();
    let cursor = since;
    const points = [];
    for (let page = 0; page < MAX_PAGES; page += 1) {
      const answer = await API.history(room.id, entry.spec.id, cursor, PAGE, { signal });
      let batch = answer.points ?? [];
      // `since` includes the reading at that instant, which the previous page already had.
      if (page > 0 && batch.length && batch[0].t === cursor) batch = batch.slice(1);
      for (const point of batch) {
        const v = Number(point.v);
        if (Number.isFinite(v)) points.push({ t: Date.parse(point.t), v, text: point.v });
      }
      if ((answer.points ?? []).length < PAGE) break;
      cursor = answer.points[answer.points.length - 1].t;
    }
    // Readings that arrived over the stream meanwhile stay; history goes before them.
    const first = entry.points[0]?.t ?? Infinity;
    entry.points = [...points.filter((point) => point.t < first), ...entry.points];
    entry.loaded = true;
  }

  const unsubscribe = store.subscribe((change) => {
    if (change.room !== room.id) return;
    if (change.all) {
      if (list.childElementCount === 0 || rows.size !== store.detail(room.id).sensors.length) build();
      else for (const entry of rows.values()) paint(entry);
      paintUpdated();
      return;
    }
    if (!rows.has(change.sensor)) build();
    else paint(rows.get(change.sensor));
    paintUpdated();
    const points = series.get(change.sensor)?.points ?? live.get(change.sensor);
    const v = Number(change.value);
    if (points && Number.isFinite(v)) {
      points.push({ t: change.at ? Date.parse(change.at) : Date.now(), v, text: change.value });
      if (series.has(change.sensor)) redraw();
    }
  });

  const resize = new ResizeObserver(() => redraw());
  resize.observe(charts);

  // Last seen: ages move on by themselves, and a device's unchanged reading never reaches the
  // stream, so a room with devices is reloaded now and then.
  let sinceReload = 0;
  const ticker = setInterval(() => {
    if (!store.detail(room.id)?.tracksSeen) return;
    sinceReload += SEEN_TICK_MS;
    if (sinceReload >= SEEN_RELOAD_MS && !switchState.pending) {
      sinceReload = 0;
      store.loadRoom(room.id, { signal }).catch(() => {});  // the stream's reconnect shows failures
    }
    for (const entry of rows.values()) paintSeen(entry);
  }, SEEN_TICK_MS);

  (async () => {
    try {
      await store.loadRoom(room.id, { signal });
    } catch (problem) {
      if (problem.name !== 'AbortError') failure.textContent = problem.message;
      return;
    }
    build();
    const sensors = new Set(store.detail(room.id).sensors.map((sensor) => sensor.id));
    const specs = CHARTED.filter((spec) => sensors.has(spec.id));
    if (specs.length === 0) {
      charts.hidden = true;
      return;
    }
    const entries = specs.map(chart);
    const results = await Promise.allSettled(entries.map(loadHistory));
    if (signal.aborted) return;
    const problem = results.find((result) => result.status === 'rejected');
    if (problem) failure.textContent = `History could not be loaded: ${problem.reason.message}`;
    charts.dataset.loaded = 'true';
    redraw();
  })();

  return () => {
    unsubscribe();
    clearInterval(ticker);
    resize.disconnect();
    cancelAnimationFrame(frame);
  };
}

/** `now 25.7 °C · low 25.1 · high 26.9` */
function summary(points, u) {
  if (points.length === 0) return 'no readings yet';
  let low = points[0];
  let high = points[0];
  for (const point of points) {
    if (point.v < low.v) low = point;
    if (point.v > high.v) high = point;
  }
  return `now ${points[points.length - 1].text} ${u} · low ${low.text} · high ${high.text}`;
}
