// The user's rooms and their latest values: loaded over HTTP, kept current by the event stream,
// shared by every view. Views subscribe and redraw only what changed.

import * as API from './api.js';
import { parseValue, sensorId } from './sensors.js';

const listeners = new Set();
let roomList = null;          // [{id, name, icon}] in the user's order
let roomsLoading = null;
// id -> {sensors: [{id, name, value, lastSeen}], updatedAt, tracksSeen}; tracksSeen: the room has
// devices, and its answers carry `SensorLastSeen` (README, "Connect your devices").
const details = new Map();

export function subscribe(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

function notify(change) {
  for (const listener of [...listeners]) listener(change);
}

export function reset() {
  roomList = null;
  roomsLoading = null;
  details.clear();
}

/** The user's rooms in the user's order (loaded once per session). */
export async function loadRooms({ force = false } = {}) {
  if (roomList && !force) return roomList;
  if (!roomsLoading || force) {
    roomsLoading = API.rooms().then((shape) => {
      const names = shape.rooms ?? [];
      const icons = shape.roomsicon ?? [];
      roomList = names.map((name, index) => ({ id: icons[index] ?? name.toLowerCase(), name, icon: icons[index] ?? '' }));
      return roomList;
    }).finally(() => { roomsLoading = null; });
  }
  return roomsLoading;
}

export function rooms() {
  return roomList ?? [];
}

export function findRoom(id) {
  return rooms().find((room) => room.id === id) ?? null;
}

export function detail(id) {
  return details.get(id) ?? null;
}

/** Stores a room in the API's shape (`SensorNames`, `SensorValues`, `UpdatedAt`, and for a room
 * with devices `SensorLastSeen`). */
export function setRoomShape(id, shape) {
  const names = shape.SensorNames ?? [];
  const values = shape.SensorValues ?? [];
  const seen = Array.isArray(shape.SensorLastSeen) ? shape.SensorLastSeen : null;
  const sensors = names.map((name, index) => {
    const sid = sensorId(name);
    return { id: sid, name, value: parseValue(sid, values[index]), lastSeen: seen?.[index] ?? null };
  });
  details.set(id, { sensors, updatedAt: shape.UpdatedAt ?? null, tracksSeen: seen !== null });
  notify({ room: id, all: true });
}

export async function loadRoom(id, options) {
  const shape = await API.room(id, options);
  setRoomShape(id, shape);
  return details.get(id);
}

/** Reloads every room's values, e.g. after the event stream reconnected and may have missed some. */
export async function refreshAll() {
  const list = await loadRooms();
  await Promise.allSettled(list.map((room) => loadRoom(room.id)));
}

/** An `event: state` from the stream: `{room, sensor, value, at}`, value in the MQTT vocabulary. */
export function applyState(event) {
  const room = details.get(event.room);
  if (!room) return;
  let sensor = room.sensors.find((candidate) => candidate.id === event.sensor);
  if (!sensor) {
    sensor = { id: event.sensor, name: event.sensor, value: null, lastSeen: null };
    room.sensors.push(sensor);
  }
  sensor.value = parseValue(sensor.id, event.value);
  // A published reading is news from the device; one that didn't change the value isn't on the
  // stream, so the room view also reloads such rooms now and then.
  if (room.tracksSeen && event.at && (!sensor.lastSeen || event.at > sensor.lastSeen)) sensor.lastSeen = event.at;
  if (event.at && (!room.updatedAt || event.at > room.updatedAt)) room.updatedAt = event.at;
  notify({ room: event.room, sensor: event.sensor, value: event.value, at: event.at });
}
