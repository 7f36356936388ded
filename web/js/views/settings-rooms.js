// The settings page's rooms (README "The settings page"): the user's rooms with their sensors and
// bindings, a form that makes or edits a room made through the API, and the binding of an unbound
// device to a sensor. The bridge validates; its message is shown as it is, and after every change
// the list is loaded from the bridge again.

import * as API from '../api.js';
import { h, icon } from '../dom.js';
import { editableForm, editableList } from './editable-list.js';

const SENSOR_NAMES = ['Temperature', 'Humidity', 'Lights', 'Movement', 'Gas'];
// The sources the form offers; `json` takes any binding as the API writes it (README "Connect your devices").
const KINDS = [
  ['simulated', 'Simulated', ''], ['zigbee2mqtt', 'zigbee2mqtt device', 'device'], ['tasmota', 'Tasmota topic', 'topic'],
  ['mqtt', 'MQTT topic', 'topic'], ['json', 'Binding as JSON', ''],
];
const BINDING_KEYS = ['zigbee2mqtt', 'tasmota', 'shelly', 'esphome', 'rtl_433', 'mqtt', 'http'];

const entryName = (entry) => (typeof entry === 'string' ? entry : entry?.name ?? '');

/** A sensor entry's binding in words: `simulated`, `zigbee2mqtt device porch_motion`, … */
export function bindingText(entry) {
  if (typeof entry === 'string') return 'simulated';
  const key = BINDING_KEYS.find((candidate) => entry[candidate] && typeof entry[candidate] === 'object');
  if (!key) return 'simulated';
  const b = entry[key];
  const parts = {
    zigbee2mqtt: () => [`zigbee2mqtt device ${b.device}`, b.field && `field ${b.field}`],
    tasmota: () => [`Tasmota ${b.topic}`, b.sensor && `sensor ${b.sensor}`, b.relay !== undefined && `relay ${b.relay}`],
    shelly: () => [`Shelly ${b.prefix}`, b.id !== undefined && `switch ${b.id}`],
    esphome: () => [`ESPHome ${b.prefix}/${b.component ? `${b.component}/` : ''}${b.object_id}`],
    rtl_433: () => [`rtl_433 ${b.model} id ${b.id}`, b.channel && `channel ${b.channel}`, b.field && `field ${b.field}`],
    mqtt: () => [b.topic ? `MQTT ${b.topic}` : null, b.value && `value ${b.value}`,
      b.command_topic && `commands to ${b.command_topic}`, b.state_topic && `state from ${b.state_topic}`],
    http: () => [`HTTP ${b.url}`, b.value && `value ${b.value}`],
  }[key]();
  if (entry.expire_after) parts.push(`stale after ${entry.expire_after}`);
  return parts.filter(Boolean).join(' · ');
}

/** The sensor a device's last payload suggests (`occupancy` → Movement), else Temperature. */
export function suggestedSensor(device) {
  let payload = null;
  try { payload = JSON.parse(device.payload); } catch { /* not JSON: no hint */ }
  const fields = payload && typeof payload === 'object' ? Object.keys(payload).map((key) => key.toLowerCase()) : [];
  const hints = [['occupancy', 'Movement'], ['temperature', 'Temperature'], ['temperature_c', 'Temperature'],
    ['humidity', 'Humidity'], ['gas', 'Gas'], ['state', 'Lights'], ['power', 'Lights']];
  return hints.find(([field]) => fields.includes(field))?.[1] ?? 'Temperature';
}

/** The form's sensor row for an entry: a simple binding gets its own kind, any other the JSON one. */
function kindOf(entry) {
  if (typeof entry === 'string') return ['simulated', ''];
  const { name: _name, ...rest } = entry;
  const keys = Object.keys(rest);
  for (const [kind, , field] of KINDS) {
    const b = rest[kind];
    if (field && keys.length === 1 && b && Object.keys(b).length === 1 && typeof b[field] === 'string') return [kind, b[field]];
  }
  return ['json', JSON.stringify(rest)];
}

/**
 * The rooms section. `onChanged()` runs after every change the bridge accepted (the page's other
 * parts know the rooms too).
 */
export function roomsSection({ heading, onChanged }) {
  let rooms = [];
  let savedName = null;
  let rowCount = 0;
  const name = h('input', { id: 'settings-room-name', name: 'name', type: 'text', autocomplete: 'off',
    'aria-describedby': 'settings-room-error' });
  const sensorRows = h('ol', { class: 'sensor-rows', id: 'settings-room-sensors' });
  const addSensor = h('button', { type: 'button', class: 'button', id: 'settings-room-add-sensor' }, 'Add sensor');
  const names = h('datalist', { id: 'settings-sensor-names' }, ...SENSOR_NAMES.map((value) => h('option', { value })));

  function sensorRow(entry = 'Temperature') {
    rowCount += 1;
    const id = `settings-sensor-${rowCount}`;
    const [kind, value] = kindOf(entry);
    const sensorName = h('input', { id: `${id}-name`, class: 'sensor-row-name', type: 'text', list: 'settings-sensor-names',
      autocomplete: 'off', value: entryName(entry) });
    const source = h('select', { id: `${id}-kind`, class: 'sensor-row-kind' },
      ...KINDS.map(([v, text]) => h('option', { value: v, selected: v === kind }, text)));
    const binding = h('input', { id: `${id}-binding`, class: 'sensor-row-binding', type: 'text', autocomplete: 'off', value });
    const bindingLabel = h('label', { for: `${id}-binding` });
    const remove = h('button', { type: 'button', class: 'button button-quiet button-danger sensor-row-remove' }, 'Remove');
    const showKind = () => {
      const [, text] = KINDS.find(([v]) => v === source.value);
      bindingLabel.textContent = source.value === 'json' ? 'Binding, e.g. {"rtl_433":{"model":"…","id":"…"}}' : text;
      binding.parentElement.hidden = source.value === 'simulated';
    };
    const row = h('li', { class: 'sensor-row' },
      h('div', { class: 'field' }, h('label', { for: `${id}-name` }, 'Sensor'), sensorName),
      h('div', { class: 'field' }, h('label', { for: `${id}-kind` }, 'Comes from'), source),
      h('div', { class: 'field sensor-row-wide' }, bindingLabel, binding),
      remove);
    source.addEventListener('change', showKind);
    remove.addEventListener('click', () => { row.remove(); addSensor.focus(); });
    showKind();
    return row;
  }

  /** The row as a sensor list has it. A JSON binding that is not JSON is named before anything is sent. */
  function entryOf(row, index) {
    const sensorName = row.querySelector('.sensor-row-name').value;
    const kind = row.querySelector('.sensor-row-kind').value;
    const value = row.querySelector('.sensor-row-binding').value;
    if (kind === 'simulated') return sensorName;
    if (kind !== 'json') return { name: sensorName, [kind]: { [KINDS.find(([v]) => v === kind)[2]]: value.trim() } };
    let binding;
    try { binding = JSON.parse(value); } catch { binding = null; }
    if (!binding || typeof binding !== 'object' || Array.isArray(binding)) {
      throw new Error(`sensors[${index}]: the binding is not a JSON object (e.g. {"zigbee2mqtt":{"device":"hall_motion"}})`);
    }
    return { name: sensorName, ...binding };
  }

  addSensor.addEventListener('click', () => {
    sensorRows.append(sensorRow());
    sensorRows.lastElementChild.querySelector('.sensor-row-name').focus();
  });

  const listItems = editableList({
    prefix: 'settings-room', noun: 'room',
    load: async () => {
      rooms = (await API.roomSettings()) ?? [];
      return rooms.map((room) => ({ ...room, uuid: room.id, title: room.name }));
    },
    remove: API.deleteRoom,
    editable: (room) => room.origin === 'api',
    itemData: (room) => ({ 'data-origin': room.origin }),
    content: (room) => [icon('room', { size: 36, className: 'icon alarm-icon' }),
      h('div', { class: 'alarm-main' },
        h('span', { class: 'alarm-title settings-room-title' }, room.name),
        h('span', { class: 'alarm-meta settings-room-origin' }, room.origin === 'file'
          ? 'From the config file: change it there and reload' : 'Made here'),
        h('ul', { class: 'binding-list' }, ...room.sensors.map((entry) => h('li', { 'data-sensor': entryName(entry) },
          h('span', { class: 'binding-sensor' }, entryName(entry)), ' ',
          h('span', { class: 'binding-text' }, bindingText(entry))))))],
    onEdit: (room) => editor.edit(room),
    onRemoved: (room) => {
      if (editor.editing()?.uuid === room.uuid) editor.reset();
      onChanged();
    },
    heading,
  });
  // The form's view of the list: a room just made is found by its name (the bridge chose its id).
  const items = {
    ...listItems,
    highlight: (uuid) => listItems.highlight(uuid ?? rooms.find((room) => room.name === savedName)?.id),
  };

  const editor = editableForm({
    prefix: 'settings-room', noun: 'room', items: () => items,
    fields: [
      h('div', { class: 'field' }, h('label', { for: 'settings-room-name' }, 'Name'), name),
      h('fieldset', { class: 'field sensor-fieldset' }, h('legend', {}, 'Sensors'), sensorRows, names,
        h('div', { class: 'actions' }, addSensor)),
    ],
    clear: () => sensorRows.replaceChildren(sensorRow('Temperature')),
    fill: (room) => {
      name.value = room.name;
      sensorRows.replaceChildren(...room.sensors.map((entry) => sensorRow(entry)));
    },
    body: () => ({ name: name.value, sensors: [...sensorRows.children].map(entryOf) }),
    save: async (id, body) => {
      if (id) await API.updateRoom(id, body);
      else await API.createRoom(body);
      savedName = body.name;
      onChanged();
      return { uuid: id, title: body.name };
    },
    fieldFor: { title: name, name },
  });

  /**
   * Binds `device` (an entry of the unbound devices) to a sensor: added to a room made here, or to
   * a new room; a sensor of that name in the room gets the binding instead.
   */
  function bindPanel(device, { done, cancel }) {
    const key = encodeURIComponent(device.topic).replace(/%/g, '_');
    const sensor = h('select', { id: `bind-${key}-sensor`, class: 'bind-sensor' },
      ...SENSOR_NAMES.map((value) => h('option', { value, selected: value === suggestedSensor(device) }, value)));
    const own = rooms.filter((room) => room.origin === 'api');
    const room = h('select', { id: `bind-${key}-room`, class: 'bind-room' },
      ...own.map((candidate) => h('option', { value: candidate.id }, candidate.name)),
      h('option', { value: '' }, 'A new room…'));
    const newName = h('input', { id: `bind-${key}-name`, class: 'bind-new-name', type: 'text', autocomplete: 'off' });
    const newField = h('div', { class: 'field' }, h('label', { for: `bind-${key}-name` }, 'New room’s name'), newName);
    const error = h('p', { class: 'form-error bind-error', role: 'alert' });
    const bind = h('button', { type: 'button', class: 'button button-primary bind-confirm' }, 'Bind');
    const keep = h('button', { type: 'button', class: 'button bind-cancel' }, 'Cancel');
    const showNew = () => { newField.hidden = room.value !== ''; };
    room.addEventListener('change', showNew);
    showNew();
    keep.addEventListener('click', cancel);
    bind.addEventListener('click', async () => {
      if (bind.getAttribute('aria-disabled') === 'true') return;
      bind.setAttribute('aria-disabled', 'true');
      error.textContent = '';
      const entry = { name: sensor.value, ...device.binding };
      try {
        const target = rooms.find((candidate) => candidate.id === room.value);
        if (target) {
          const others = target.sensors.filter((e) => entryName(e).toLowerCase() !== sensor.value.toLowerCase());
          await API.updateRoom(target.id, { sensors: [...others, entry] });
        } else {
          await API.createRoom({ name: newName.value, sensors: [entry] });
        }
        onChanged();
        await listItems.reload();
        done();
      } catch (problem) {
        error.textContent = problem.message;
      } finally {
        bind.removeAttribute('aria-disabled');
      }
    });
    return h('div', { class: 'bind-panel', role: 'group', 'aria-label': `Bind ${device.topic}` },
      h('div', { class: 'field-row' },
        h('div', { class: 'field' }, h('label', { for: `bind-${key}-sensor` }, 'As the sensor'), sensor),
        h('div', { class: 'field' }, h('label', { for: `bind-${key}-room` }, 'Of the room'), room)),
      newField, error, h('div', { class: 'actions' }, bind, keep));
  }

  const section = h('section', { class: 'settings-section', id: 'settings-rooms', 'aria-labelledby': 'rooms-title' },
    h('h2', { id: 'rooms-title', tabindex: '-1' }, 'Rooms and sensors'),
    h('div', { class: 'alarms-layout' },
      h('div', { class: 'alarm-column' }, ...listItems.elements),
      h('div', { class: 'form-column' }, editor.form)));
  editor.reset();

  return { section, reload: listItems.reload, bindPanel };
}
