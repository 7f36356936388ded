// What the dashboard knows about rooms and sensors: icons, units, and the two vocabularies values
// arrive in (the seed words of HTTP, "On"/"Detected"/"Okey", and the ON/OFF of MQTT and the
// event stream).

/** Room icons shipped in web/icons; any other room gets the generic house. */
export const ROOM_ICONS = new Set(['livingroom', 'bathroom', 'bedroom', 'kitchen', 'garden', 'saloon', 'babyroom', 'balcony']);

const KINDS = {
  temperature: { unit: '°C', numeric: true },
  humidity: { unit: '%', numeric: true },
  lights: { on: 'On', off: 'Off' },
  movement: { on: 'Detected', off: 'Not detected' },
  gas: { on: 'Gas detected', off: 'No gas', alert: true },
};

/** The words that mean "on" in either vocabulary. */
const ON_WORDS = new Set(['ON', 'DETECTED', 'GAS', 'TRUE']);

export function roomIcon(icon) {
  return ROOM_ICONS.has(icon) ? icon : 'room';
}

export function sensorIcon(id) {
  return id in KINDS ? id : 'sensor';
}

/** A sensor's id from its display name, as the bridge makes it (lower case, `_` for the rest). */
export function sensorId(name) {
  const id = name.toLowerCase().replace(/[^\p{L}\p{N}-]/gu, '_');
  return id === '' ? '_' : id;
}

export function isBinary(id) {
  return Boolean(KINDS[id]?.on);
}

export function unit(id) {
  return KINDS[id]?.unit ?? '';
}

/** A value as the store keeps it: `{on}` for the on/off sensors, `{text}` for the rest. */
export function parseValue(id, raw) {
  const text = String(raw ?? '').trim();
  if (isBinary(id)) return { on: ON_WORDS.has(text.toUpperCase()), text };
  return { text };
}

/** `{text, unit, state}`: what a person reads, and a word for CSS (`on`, `off`, `alert`). */
export function display(id, value) {
  const kind = KINDS[id];
  if (!value) return { text: '–', unit: '', state: '' };
  if (kind?.on) {
    const state = value.on ? (kind.alert ? 'alert' : 'on') : 'off';
    return { text: value.on ? kind.on : kind.off, unit: '', state };
  }
  return { text: value.text === '' ? '–' : value.text, unit: kind?.unit ?? '', state: '' };
}

/** How long a bound sensor may go without word from its device before the page calls it stale.
 * The page can't see the room's availability (no HTTP answer or stream event carries it) nor the
 * sensor's `expire_after`, so it judges by `SensorLastSeen` alone (README, "Web dashboard"). */
export const STALE_AFTER_MS = 10 * 60 * 1000;

/** `{text, stale, title}` for a sensor's `SensorLastSeen` (an ISO 8601 time, or null: never). */
export function lastSeen(iso, now = Date.now()) {
  if (!iso) return { text: 'Not seen yet', stale: true, title: 'No message from its device since the bridge started' };
  const at = Date.parse(iso);
  if (!Number.isFinite(at)) return { text: 'Not seen yet', stale: true, title: '' };
  const age = Math.max(0, now - at);
  const seconds = Math.floor(age / 1000);
  let ago;
  if (seconds < 10) ago = 'just now';
  else if (seconds < 60) ago = `${seconds} s ago`;
  else if (seconds < 3600) ago = `${Math.floor(seconds / 60)} min ago`;
  else if (seconds < 86400) ago = `${Math.floor(seconds / 3600)} h ago`;
  else ago = `${Math.floor(seconds / 86400)} d ago`;
  const stale = age > STALE_AFTER_MS;
  return { text: stale ? `Stale: seen ${ago}` : `Seen ${ago}`, stale, title: new Date(at).toLocaleString() };
}
