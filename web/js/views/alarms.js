// Alarms: list, create, edit, toggle, delete. The form sends what was typed; the bridge validates,
// and its message (`field "fireDate" must be ...`) is shown as it is.

import * as API from '../api.js';
import * as store from '../store.js';
import { h, icon } from '../dom.js';
import { editableForm, editableList } from './editable-list.js';

const timeOfDay = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
const day = new Intl.DateTimeFormat(undefined, { weekday: 'short', day: 'numeric', month: 'short', year: 'numeric' });
const LIGHTS = { ON: 'lights on', OFF: 'lights off', TOGGLE: 'lights toggled' };
const DAYS = [['mon', 'Mon'], ['tue', 'Tue'], ['wed', 'Wed'], ['thu', 'Thu'], ['fri', 'Fri'], ['sat', 'Sat'], ['sun', 'Sun']];
const SUN = { sunrise: 'sunrise', sunset: 'sunset' };

const pad = (n) => String(n).padStart(2, '0');

/** `+03:00`, or `Z` for UTC: the browser's offset from UTC at that moment. */
function offset(date) {
  const minutes = -date.getTimezoneOffset();
  if (!Number.isFinite(minutes) || minutes === 0) return 'Z';
  const sign = minutes > 0 ? '+' : '-';
  const abs = Math.abs(minutes);
  return `${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
}

/**
 * The fireDate for a local date (YYYY-MM-DD) and time (HH:MM) as typed: ISO 8601 with the
 * browser's UTC offset. A date or time that isn't one (`7pm`, `25:00`, `2026-02-30`) goes to the
 * bridge as typed, without an offset, so the bridge refuses it and its message is what the
 * person reads; the page has no validation rules of its own.
 */
export function fireDate(dateText, timeText) {
  const date = dateText.trim();
  const time = timeText.trim();
  const d = /^(\d{4})-(\d{2})-(\d{2})$/.exec(date);
  const t = /^(\d{1,2})[:.](\d{2})(?::(\d{2}))?$/.exec(time);
  if (d && t) {
    const [year, month, dayOfMonth] = [Number(d[1]), Number(d[2]), Number(d[3])];
    const [hours, minutes, seconds] = [Number(t[1]), Number(t[2]), Number(t[3] ?? 0)];
    const local = new Date(year, month - 1, dayOfMonth, hours, minutes, seconds);
    const exists = local.getFullYear() === year && local.getMonth() === month - 1 && local.getDate() === dayOfMonth
      && hours < 24 && minutes < 60 && seconds < 60;
    if (exists) return `${date}T${pad(hours)}:${pad(minutes)}:${pad(seconds)}${offset(local)}`;
  }
  return `${date}T${time}`;
}

function localDate(date) {
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
}

/** `30m before sunset`, `at sunrise`, `1h after sunrise`. */
function sunText(sun) {
  const offset = sun.offset ?? '0m';
  if (/^[-+]?0+[hms]?$/.test(offset)) return `at ${SUN[sun.event] ?? sun.event}`;
  return offset.startsWith('-') ? `${offset.slice(1)} before ${sun.event}` : `${offset.replace(/^\+/, '')} after ${sun.event}`;
}

function describe(alarm, roomName) {
  const when = new Date(alarm.fireDate);
  const days = (alarm.days ?? []).map((id) => DAYS.find(([value]) => value === id)?.[1] ?? id).join(', ');
  const parts = [alarm.repeats === 'daily' ? 'Every day' : alarm.repeats === 'weekly' ? days : `Once, ${day.format(when)}`];
  if (alarm.sun) parts.push(sunText(alarm.sun));
  if (alarm.action) parts.push(`${roomName(alarm.action.room)} ${LIGHTS[alarm.action.lights] ?? alarm.action.lights}`);
  if (alarm.nextFire) parts.push(`next ${day.format(new Date(alarm.nextFire))} ${timeOfDay.format(new Date(alarm.nextFire))}`);
  else if (alarm.skipReason && alarm.skipReason !== 'disabled') parts.push(alarm.skipReason);
  return parts.join(' · ');
}

export function render(main, _route, app) {
  document.title = 'Alarms · SmartHome';
  const controller = new AbortController();

  // ---- the form ----
  const title = h('input', { id: 'alarm-title', name: 'title', type: 'text', autocomplete: 'off', 'aria-describedby': 'alarm-error' });
  const date = h('input', { id: 'alarm-date', name: 'date', type: 'date', 'aria-describedby': 'alarm-error' });
  const time = h('input', {
    id: 'alarm-time', name: 'time', type: 'text', autocomplete: 'off', placeholder: '07:00',
    'aria-describedby': 'alarm-time-hint alarm-error',
  });
  const repeats = h('select', { id: 'alarm-repeats', name: 'repeats' },
    h('option', { value: 'never' }, 'Once'), h('option', { value: 'daily' }, 'Every day'),
    h('option', { value: 'weekly' }, 'On some days'));
  const dayBoxes = DAYS.map(([value]) => h('input', { type: 'checkbox', id: `alarm-day-${value}`, name: 'days', value }));
  const days = h('fieldset', { class: 'field day-picker', id: 'alarm-days', hidden: true },
    h('legend', {}, 'Days'),
    ...DAYS.map(([value, text], index) => h('span', { class: 'field-check' }, dayBoxes[index],
      h('label', { for: `alarm-day-${value}` }, text))));
  const sunEvent = h('select', { id: 'alarm-sun', name: 'sun' },
    h('option', { value: '' }, 'the clock'), h('option', { value: 'sunrise' }, 'sunrise'), h('option', { value: 'sunset' }, 'sunset'));
  const sunOffset = h('input', { id: 'alarm-sun-offset', name: 'offset', type: 'text', autocomplete: 'off', placeholder: '-30m',
    disabled: true, 'aria-describedby': 'alarm-sun-hint alarm-error' });
  const showRepeats = () => { days.hidden = repeats.value !== 'weekly'; };
  const showSun = () => { sunOffset.disabled = sunEvent.value === ''; };
  repeats.addEventListener('change', showRepeats);
  sunEvent.addEventListener('change', showSun);
  const actionRoom = h('select', { id: 'alarm-room', name: 'room' }, h('option', { value: '' }, 'Nothing else'));
  const actionLights = h('select', { id: 'alarm-lights', name: 'lights', disabled: true },
    h('option', { value: 'ON' }, 'Turn lights on'), h('option', { value: 'OFF' }, 'Turn lights off'),
    h('option', { value: 'TOGGLE' }, 'Toggle lights'));
  const enabled = h('input', { id: 'alarm-enabled', name: 'enabled', type: 'checkbox', checked: true });
  const editor = editableForm({
    prefix: 'alarm', noun: 'alarm', items: () => items,
    fields: [
      h('div', { class: 'field' }, h('label', { for: 'alarm-title' }, 'Title'), title),
      h('div', { class: 'field-row' },
        h('div', { class: 'field' }, h('label', { for: 'alarm-date' }, 'Date'), date),
        h('div', { class: 'field' }, h('label', { for: 'alarm-time' }, 'Time'), time,
          h('small', { id: 'alarm-time-hint', class: 'hint' }, '24-hour, e.g. 07:00'))),
      h('div', { class: 'field' }, h('label', { for: 'alarm-repeats' }, 'Repeats'), repeats),
      days,
      h('div', { class: 'field-row' },
        h('div', { class: 'field' }, h('label', { for: 'alarm-sun' }, 'Time from'), sunEvent),
        h('div', { class: 'field' }, h('label', { for: 'alarm-sun-offset' }, 'Before (-) or after'), sunOffset,
          h('small', { id: 'alarm-sun-hint', class: 'hint' }, 'e.g. -30m; the date says the first day'))),
      h('div', { class: 'field-row' },
        h('div', { class: 'field' }, h('label', { for: 'alarm-room' }, 'Then, in room'), actionRoom),
        h('div', { class: 'field' }, h('label', { for: 'alarm-lights' }, 'Lights'), actionLights)),
      h('div', { class: 'field field-check' }, enabled, h('label', { for: 'alarm-enabled' }, 'Enabled')),
    ],
    clear: () => {
      const tomorrow = new Date(Date.now() + 24 * 60 * 60 * 1000);
      date.value = localDate(tomorrow);
      time.value = '07:00';
      actionLights.disabled = true;
      enabled.checked = true;
      showRepeats();
      showSun();
    },
    fill: (alarm) => {
      const when = new Date(alarm.fireDate);
      title.value = alarm.title;
      date.value = localDate(when);
      time.value = `${pad(when.getHours())}:${pad(when.getMinutes())}`;
      repeats.value = alarm.repeats;
      for (const box of dayBoxes) box.checked = (alarm.days ?? []).includes(box.value);
      sunEvent.value = alarm.sun?.event ?? '';
      sunOffset.value = alarm.sun?.offset ?? '';
      showRepeats();
      showSun();
      actionRoom.value = alarm.action?.room ?? '';
      actionLights.value = alarm.action?.lights ?? 'ON';
      actionLights.disabled = !alarm.action;
      enabled.checked = alarm.isEnabled;
    },
    body: () => {
      const body = { title: title.value, fireDate: fireDate(date.value, time.value), isEnabled: enabled.checked,
        repeats: repeats.value };
      if (repeats.value === 'weekly') body.days = dayBoxes.filter((box) => box.checked).map((box) => box.value);
      if (sunEvent.value) body.sun = { event: sunEvent.value, offset: sunOffset.value.trim() || '0m' };
      if (actionRoom.value) body.action = { room: actionRoom.value, lights: actionLights.value };
      return body;
    },
    save: (uuid, body) => (uuid ? API.updateAlarm(uuid, body) : API.createAlarm(body)),
    fieldFor: { title, fireDate: time, repeats, days: dayBoxes[0], sun: sunEvent, 'sun.offset': sunOffset, isEnabled: enabled, action: actionRoom, 'action.room': actionRoom,
      'action.lights': actionLights },
  });

  actionRoom.addEventListener('change', () => { actionLights.disabled = actionRoom.value === ''; });

  // ---- the list ----
  function roomName(id) {
    return store.findRoom(id)?.name ?? id;
  }

  const items = editableList({
    prefix: 'alarm', noun: 'alarm',
    load: async () => (await API.alarms()).alarms ?? [],
    toggle: API.toggleAlarm, remove: API.deleteAlarm,
    content: (alarm) => [icon('alarm', { size: 36, className: 'icon alarm-icon' }),
      h('div', { class: 'alarm-main' },
        h('span', { class: 'alarm-time' }, timeOfDay.format(new Date(alarm.sun && alarm.nextFire ? alarm.nextFire : alarm.fireDate))),
        h('span', { class: 'alarm-title' }, alarm.title),
        h('span', { class: 'alarm-meta' }, describe(alarm, roomName)))],
    onEdit: (alarm) => editor.edit(alarm),
    onRemoved: (alarm) => { if (editor.editing()?.uuid === alarm.uuid) editor.reset(); },
    heading: () => main.querySelector('#alarms-title'),
  });

  main.append(
    h('div', { class: 'page-head' }, h('h1', { id: 'alarms-title', tabindex: '-1' }, 'Alarms')),
    h('div', { class: 'alarms-layout' },
      h('section', { class: 'alarm-column', 'aria-labelledby': 'alarms-title' }, ...items.elements),
      h('section', { class: 'form-column' }, editor.form)));
  editor.reset();

  const onAlarm = () => items.reload();
  app.events.addEventListener('alarm', onAlarm);

  (async () => {
    try {
      const rooms = await store.loadRooms();
      if (controller.signal.aborted) return;
      actionRoom.append(...rooms.map((room) => h('option', { value: room.id }, room.name)));
    } catch {
      // The list of rooms only fills the action menu; the alarms still work without it.
    }
    await items.reload();
  })();

  return () => {
    controller.abort();
    app.events.removeEventListener('alarm', onAlarm);
  };
}
