// Watchdogs (README "Watchdogs"): list, create, edit, toggle, delete, and the events the stream
// brought since the page was opened (fired, recovered, alarms, gas). Like the alarms page, the form
// sends what was typed; the bridge validates, and its message is shown as it is.

import * as API from '../api.js';
import * as store from '../store.js';
import { h, icon } from '../dom.js';
import { editableForm, editableList } from './editable-list.js';

const CONDITIONS = {
  unchanged: 'no change', silent: 'no reading at all', above: 'above', below: 'below',
};
const SENSORS = ['movement', 'temperature', 'humidity', 'lights', 'gas'];
const clock = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });

function describe(watchdog, roomName) {
  const what = watchdog.condition === 'above' || watchdog.condition === 'below'
    ? `${CONDITIONS[watchdog.condition]} ${watchdog.value}` : CONDITIONS[watchdog.condition] ?? watchdog.condition;
  const parts = [`${roomName(watchdog.room)} ${watchdog.sensor}: ${what} for ${watchdog.for}`];
  if (watchdog.quiet) parts.push(`quiet ${watchdog.quiet.from}–${watchdog.quiet.to}`);
  return parts.join(' · ');
}

/** One line of the event history, as text. */
export function historyText(type, data, roomName) {
  switch (type) {
    case 'watchdog':
      return data.state === 'recovered' ? `“${data.title}” recovered` : `“${data.title}” fired: ${roomName(data.room)} ${data.sensor}`;
    case 'alarm': return `Alarm “${data.title}” went off`;
    case 'gas': return data.state === 'ON' ? `Gas detected in ${roomName(data.room)}` : `No more gas in ${roomName(data.room)}`;
    default: return type;
  }
}

export function render(main, _route, app) {
  document.title = 'Watchdogs · SmartHome';
  const controller = new AbortController();
  const history = h('ol', { class: 'event-history', id: 'event-history' });
  const historyEmpty = h('p', { class: 'empty', id: 'event-history-empty' }, 'Nothing yet: events appear here as they happen.');

  // ---- the form ----
  const title = h('input', { id: 'watchdog-title', name: 'title', type: 'text', autocomplete: 'off', 'aria-describedby': 'watchdog-error' });
  const room = h('select', { id: 'watchdog-room', name: 'room' });
  const sensor = h('select', { id: 'watchdog-sensor', name: 'sensor' }, ...SENSORS.map((id) => h('option', { value: id }, id)));
  const condition = h('select', { id: 'watchdog-condition', name: 'condition' },
    ...Object.entries(CONDITIONS).map(([value, text]) => h('option', { value }, text)));
  const value = h('input', { id: 'watchdog-value', name: 'value', type: 'text', inputmode: 'decimal', autocomplete: 'off', disabled: true });
  const duration = h('input', {
    id: 'watchdog-for', name: 'for', type: 'text', autocomplete: 'off', placeholder: '12h',
    'aria-describedby': 'watchdog-for-hint watchdog-error',
  });
  const quietFrom = h('input', { id: 'watchdog-quiet-from', name: 'quietFrom', type: 'text', autocomplete: 'off', placeholder: '22:00' });
  const quietTo = h('input', { id: 'watchdog-quiet-to', name: 'quietTo', type: 'text', autocomplete: 'off', placeholder: '07:00' });
  const enabled = h('input', { id: 'watchdog-enabled', name: 'enabled', type: 'checkbox', checked: true });
  const needsValue = () => { value.disabled = condition.value !== 'above' && condition.value !== 'below'; };
  condition.addEventListener('change', needsValue);
  const editor = editableForm({
    prefix: 'watchdog', noun: 'watchdog', items: () => items,
    fields: [
      h('div', { class: 'field' }, h('label', { for: 'watchdog-title' }, 'Title'), title),
      h('div', { class: 'field-row' },
        h('div', { class: 'field' }, h('label', { for: 'watchdog-room' }, 'Room'), room),
        h('div', { class: 'field' }, h('label', { for: 'watchdog-sensor' }, 'Sensor'), sensor)),
      h('div', { class: 'field-row' },
        h('div', { class: 'field' }, h('label', { for: 'watchdog-condition' }, 'When it shows'), condition),
        h('div', { class: 'field' }, h('label', { for: 'watchdog-value' }, 'Value'), value)),
      h('div', { class: 'field' }, h('label', { for: 'watchdog-for' }, 'For'), duration,
        h('small', { id: 'watchdog-for-hint', class: 'hint' }, 'e.g. 30m, 12h, 2d')),
      h('div', { class: 'field-row' },
        h('div', { class: 'field' }, h('label', { for: 'watchdog-quiet-from' }, 'Quiet from'), quietFrom),
        h('div', { class: 'field' }, h('label', { for: 'watchdog-quiet-to' }, 'Quiet until'), quietTo)),
      h('div', { class: 'field field-check' }, enabled, h('label', { for: 'watchdog-enabled' }, 'Enabled')),
    ],
    clear: () => {
      duration.value = '12h';
      enabled.checked = true;
      needsValue();
    },
    fill: (watchdog) => {
      title.value = watchdog.title;
      room.value = watchdog.room;
      sensor.value = watchdog.sensor;
      condition.value = watchdog.condition;
      value.value = watchdog.value ?? '';
      duration.value = watchdog.for;
      quietFrom.value = watchdog.quiet?.from ?? '';
      quietTo.value = watchdog.quiet?.to ?? '';
      enabled.checked = watchdog.isEnabled;
      needsValue();
    },
    body: () => {
      const body = { title: title.value, room: room.value, sensor: sensor.value, condition: condition.value,
        for: duration.value, isEnabled: enabled.checked };
      // A number when it reads as one; otherwise as typed, so the bridge's message says what is wrong.
      if (!value.disabled) {
        const text = value.value.trim();
        body.value = text !== '' && Number.isFinite(Number(text)) ? Number(text) : value.value;
      }
      if (quietFrom.value.trim() || quietTo.value.trim()) body.quiet = { from: quietFrom.value.trim(), to: quietTo.value.trim() };
      return body;
    },
    save: (uuid, body) => (uuid ? API.updateWatchdog(uuid, body) : API.createWatchdog(body)),
    fieldFor: { title, room, sensor, condition, value, for: duration, quiet: quietFrom, isEnabled: enabled },
  });

  // ---- the list ----
  const roomName = (id) => store.findRoom(id)?.name ?? id;

  const items = editableList({
    prefix: 'watchdog', noun: 'watchdog',
    load: async () => (await API.watchdogs()).watchdogs ?? [],
    toggle: API.toggleWatchdog, remove: API.deleteWatchdog,
    content: (watchdog) => {
      const fired = watchdog.state === 'fired';
      return [icon(SENSORS.includes(watchdog.sensor) ? watchdog.sensor : 'sensor', { size: 36, className: 'icon alarm-icon' }),
        h('div', { class: 'alarm-main' },
          h('span', { class: `watchdog-state${fired ? ' is-fired' : ''}` }, fired ? 'Fired' : 'Watching'),
          h('span', { class: 'alarm-title' }, watchdog.title),
          h('span', { class: 'alarm-meta' }, describe(watchdog, roomName)))];
    },
    itemData: (watchdog) => ({ 'data-state': watchdog.state }),
    onEdit: (watchdog) => editor.edit(watchdog),
    onRemoved: (watchdog) => { if (editor.editing()?.uuid === watchdog.uuid) editor.reset(); },
    heading: () => main.querySelector('#watchdogs-title'),
  });

  function paintHistory() {
    history.replaceChildren(...app.history.slice().reverse().map((entry) =>
      h('li', { class: 'event', 'data-type': entry.type, 'data-state': entry.data.state ?? '' },
        h('time', { datetime: entry.at.toISOString() }, clock.format(entry.at)), ' ',
        h('span', {}, historyText(entry.type, entry.data, roomName)))));
    historyEmpty.hidden = app.history.length > 0;
  }

  main.append(
    h('div', { class: 'page-head' }, h('h1', { id: 'watchdogs-title', tabindex: '-1' }, 'Watchdogs')),
    h('div', { class: 'alarms-layout' },
      h('section', { class: 'alarm-column', 'aria-labelledby': 'watchdogs-title' }, ...items.elements,
        h('h2', { id: 'event-history-title' }, 'Recent events'), historyEmpty, history),
      h('section', { class: 'form-column' }, editor.form)));
  editor.reset();
  paintHistory();

  // A watchdog that fires or recovers changes its state: reload the list; every event extends the history.
  const onEvent = (event) => {
    paintHistory();
    if (event.detail?.type === 'watchdog') items.reload();
  };
  app.events.addEventListener('history', onEvent);

  (async () => {
    try {
      const rooms = await store.loadRooms();
      if (controller.signal.aborted) return;
      room.append(...rooms.map((candidate) => h('option', { value: candidate.id }, candidate.name)));
    } catch {
      // Without the rooms the menu stays empty and the bridge says "field room must name one of your rooms".
    }
    await items.reload();
  })();

  return () => {
    controller.abort();
    app.events.removeEventListener('history', onEvent);
  };
}
