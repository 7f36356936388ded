// Settings (README "Managing the home"): rooms, sensors and their bindings (settings-rooms.js), guests
// (create with rooms, access and how long; list with a copyable login link; revoke) and, for admins,
// the devices heard that no binding claims, each bound to a sensor with a click. Like the other
// forms, the bridge validates and its message is shown as it is.

import * as API from '../api.js';
import * as store from '../store.js';
import { h } from '../dom.js';
import { roomsSection } from './settings-rooms.js';

const DURATIONS = [
  ['3600', '1 hour'], ['86400', '1 day'], ['259200', '3 days'], ['604800', '1 week'], ['2592000', '30 days'],
];
const when = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const seen = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });

/** The link that logs a browser in as the guest: the token rides in the fragment, which browsers never send. */
export function guestLink(token) {
  return `${location.origin}${location.pathname}#/guest/${encodeURIComponent(token)}`;
}

/** Loads a list into `list` (one `item` each), says when it is empty, and shows a failure in `error`. */
async function fill({ list, empty, error, item, load, signal }) {
  list.setAttribute('aria-busy', 'true');
  try {
    const entries = await load();
    if (signal.aborted) return;
    list.replaceChildren(...entries.map(item));
    empty.hidden = entries.length > 0;
    error.textContent = '';
  } catch (problem) {
    error.textContent = problem.message;
  } finally {
    list.setAttribute('aria-busy', 'false');
  }
}

export function render(main, _route, app) {
  document.title = 'Settings · SmartHome';
  const controller = new AbortController();
  const session = API.currentSession();

  // ---- rooms ----
  const rooms = roomsSection({
    heading: () => main.querySelector('#rooms-title'),
    // The guests' room choice, the rooms page and the menus of other pages know the rooms too.
    onChanged: () => { fillRoomBoxes().catch(() => {}); },
  });

  // ---- guests ----
  const roomBoxes = h('fieldset', { class: 'field day-picker', id: 'guest-rooms' }, h('legend', {}, 'Rooms'));
  const access = h('select', { id: 'guest-access', name: 'access' },
    h('option', { value: 'read' }, 'See only'), h('option', { value: 'control' }, 'See and switch lights'));
  const duration = h('select', { id: 'guest-duration', name: 'duration' },
    ...DURATIONS.map(([seconds, text]) => h('option', { value: seconds, selected: seconds === '86400' }, text)));
  const error = h('p', { class: 'form-error', id: 'guest-error', role: 'alert' });
  const submit = h('button', { type: 'submit', class: 'button button-primary', id: 'guest-submit' }, 'Create guest');
  const form = h('form', { class: 'alarm-form', id: 'guest-form', novalidate: true, 'aria-labelledby': 'guest-form-title' },
    h('h2', { id: 'guest-form-title' }, 'New guest'),
    roomBoxes,
    h('div', { class: 'field-row' },
      h('div', { class: 'field' }, h('label', { for: 'guest-access' }, 'May'), access),
      h('div', { class: 'field' }, h('label', { for: 'guest-duration' }, 'For'), duration)),
    error,
    h('div', { class: 'actions' }, submit));
  const list = h('ul', { class: 'alarm-list', id: 'guest-list', 'aria-busy': 'true' });
  const empty = h('p', { class: 'empty', id: 'guest-empty', hidden: true }, 'No guests. A guest sees only the rooms you pick, until the time you pick.');
  const listError = h('p', { class: 'form-error', role: 'alert', id: 'guest-list-error' });

  function roomName(id) {
    return store.findRoom(id)?.name ?? id;
  }

  function guestItem(guest) {
    const link = h('input', { type: 'text', class: 'guest-link', readonly: true, value: guestLink(guest.token),
      'aria-label': `Login link for the guest of ${guest.rooms.map(roomName).join(', ')}` });
    const copy = h('button', { type: 'button', class: 'button guest-copy' }, 'Copy link');
    const revoke = h('button', { type: 'button', class: 'button button-danger guest-revoke' }, 'Revoke');
    copy.addEventListener('click', async () => {
      link.select();
      try {
        await navigator.clipboard.writeText(link.value);
        copy.textContent = 'Copied';
      } catch {
        copy.textContent = 'Selected: copy it';  // no clipboard access (plain HTTP beyond localhost)
      }
    });
    revoke.addEventListener('click', async () => {
      revoke.setAttribute('aria-disabled', 'true');
      try {
        await API.deleteGuest(guest.id);
        app.notify('The guest’s link no longer works.');
      } catch (problem) {
        if (problem.status !== 404) listError.textContent = problem.message;
      }
      await reload();
      main.querySelector('#guests-title')?.focus();
    });
    return h('li', { class: 'alarm guest', 'data-guest': guest.id, 'data-access': guest.access },
      h('div', { class: 'alarm-main guest-main' },
        h('span', { class: 'alarm-title guest-rooms' }, guest.rooms.map(roomName).join(', ')),
        h('span', { class: 'alarm-meta guest-meta' },
          `${guest.access === 'control' ? 'Sees and switches lights' : 'Sees only'} · until ${when.format(new Date(guest.expires))}`),
        link),
      h('div', { class: 'alarm-actions' }, copy, revoke));
  }

  const reload = () => fill({ list, empty, error: listError, item: guestItem, signal: controller.signal,
    load: async () => (await API.guests()).guests ?? [] });

  let busy = false;
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (busy) return;
    busy = true;
    error.textContent = '';
    submit.setAttribute('aria-disabled', 'true');
    const rooms = [...roomBoxes.querySelectorAll('input:checked')].map((box) => box.value);
    const expires = new Date(Date.now() + Number(duration.value) * 1000).toISOString();
    try {
      const guest = await API.createGuest({ rooms, access: access.value, expires });
      for (const box of roomBoxes.querySelectorAll('input')) box.checked = false;
      await reload();
      const item = list.querySelector(`[data-guest="${CSS.escape(guest.id)}"]`);
      item?.classList.add('is-new');
      item?.querySelector('.guest-link')?.focus();
    } catch (problem) {
      error.textContent = problem.message;
    } finally {
      busy = false;
      submit.removeAttribute('aria-disabled');
    }
  });

  const guestsSection = h('section', { class: 'settings-section', 'aria-labelledby': 'guests-title' },
    h('h2', { id: 'guests-title', tabindex: '-1' }, 'Guests'),
    h('div', { class: 'alarms-layout' },
      h('div', { class: 'alarm-column' }, listError, list, empty),
      h('div', { class: 'form-column' }, form)));

  // ---- unbound devices (admins) ----
  const devicesSection = h('section', { class: 'settings-section', id: 'settings-devices', 'aria-labelledby': 'devices-title',
    hidden: !session?.admin });
  const deviceList = h('ul', { class: 'alarm-list', id: 'device-list', 'aria-busy': 'true' });
  const deviceEmpty = h('p', { class: 'empty', id: 'device-empty', hidden: true },
    'No unbound devices heard since the bridge started.');
  const deviceError = h('p', { class: 'form-error', role: 'alert' });
  const refresh = h('button', { type: 'button', class: 'button', id: 'device-refresh' }, 'Refresh');
  devicesSection.append(
    h('div', { class: 'page-head' }, h('h2', { id: 'devices-title', tabindex: '-1' }, 'Unbound devices'), refresh),
    h('p', { class: 'hint' }, 'Devices heard on zigbee2mqtt, Tasmota and rtl_433 topics that no sensor is bound to. '
      + 'Bind one to a sensor of a room made here, or put its binding on a sensor in the config.'),
    deviceError, deviceList, deviceEmpty);

  function deviceItem(device) {
    const bind = h('button', { type: 'button', class: 'button device-bind', 'aria-label': `Bind ${device.topic}` }, 'Bind');
    const actions = h('div', { class: 'alarm-actions' }, bind);
    const item = h('li', { class: 'alarm device', 'data-topic': device.topic, 'data-preset': device.preset },
      h('div', { class: 'alarm-main' },
        h('span', { class: 'alarm-title device-binding' }, JSON.stringify(device.binding)),
        h('span', { class: 'alarm-meta' }, `${device.topic} · last heard ${seen.format(new Date(device.lastSeen))}`),
        h('code', { class: 'device-payload' }, device.payload)),
      actions);
    bind.addEventListener('click', () => {
      const panel = rooms.bindPanel(device, {
        done: async () => {
          app.notify(`${device.topic} is bound.`);
          await reloadDevices();
          main.querySelector('#devices-title')?.focus();
        },
        cancel: () => { panel.replaceWith(actions); bind.focus(); },
      });
      actions.replaceWith(panel);
      panel.querySelector('select')?.focus();
    });
    return item;
  }

  const reloadDevices = () => fill({ list: deviceList, empty: deviceEmpty, error: deviceError, item: deviceItem,
    signal: controller.signal, load: async () => (await API.unboundDevices()).devices ?? [] });
  refresh.addEventListener('click', reloadDevices);

  main.append(h('div', { class: 'page-head' }, h('h1', { id: 'settings-title', tabindex: '-1' }, 'Settings')),
    rooms.section, guestsSection, devicesSection);

  /** The guests' room choice, from the bridge's list of rooms (again after a room changed); ticks kept. */
  async function fillRoomBoxes({ force = true } = {}) {
    const list = await store.loadRooms({ force });
    if (controller.signal.aborted) return;
    const ticked = new Set([...roomBoxes.querySelectorAll('input:checked')].map((box) => box.value));
    roomBoxes.querySelectorAll('.field-check').forEach((box) => box.remove());
    roomBoxes.append(...list.map((room) => h('span', { class: 'field-check' },
      h('input', { type: 'checkbox', id: `guest-room-${room.id}`, name: 'rooms', value: room.id, checked: ticked.has(room.id) }),
      h('label', { for: `guest-room-${room.id}` }, room.name))));
  }

  (async () => {
    try {
      await fillRoomBoxes({ force: false });
    } catch (problem) {
      error.textContent = problem.message;
    }
    await rooms.reload();
    await reload();
    if (session?.admin) await reloadDevices();
  })();

  return () => controller.abort();
}
