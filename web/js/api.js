// The bridge's authenticated API (/api/v1). URLs are relative to the page, so the dashboard also
// works behind a reverse proxy that serves the bridge under a path.

const BASE = 'api/v1';
const SESSION_KEY = 'smarthome.session';

/** An answer that was not 2xx; `message` is the API's own (`field "title" must be ...`). */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
  }
}

let session = readSession();
let unauthorizedHandler = () => {};

/** The token, userID and username, kept in sessionStorage only: closing the tab logs out. */
export function currentSession() {
  return session;
}

export function saveSession(value) {
  session = value;
  try {
    if (value) sessionStorage.setItem(SESSION_KEY, JSON.stringify(value));
    else sessionStorage.removeItem(SESSION_KEY);
  } catch {
    // Storage can be disabled; the session then lasts until the page is reloaded.
  }
}

function readSession() {
  try {
    const value = JSON.parse(sessionStorage.getItem(SESSION_KEY) ?? 'null');
    return value && typeof value.token === 'string' ? value : null;
  } catch {
    return null;
  }
}

/** Called once when an authenticated request answers 401 (expired or revoked token). */
export function onUnauthorized(handler) {
  unauthorizedHandler = handler;
}

export function authHeaders() {
  return session ? { Authorization: `Bearer ${session.token}` } : {};
}

export function apiURL(path) {
  return `${BASE}${path}`;
}

/** One request; resolves to the parsed JSON (null for 204), rejects with an ApiError. */
export async function api(path, { method = 'GET', body, signal } = {}) {
  const headers = { Accept: 'application/json', ...authHeaders() };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(apiURL(path), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: 'no-store',
    });
  } catch (error) {
    if (error.name === 'AbortError') throw error;
    throw new ApiError(0, 'The bridge cannot be reached. Check the connection and try again.');
  }
  if (response.status === 204) return null;
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const message = data?.error?.message ?? `The bridge answered ${response.status}.`;
    if (response.status === 401 && session && !path.startsWith('/login')) unauthorizedHandler();
    throw new ApiError(response.status, message);
  }
  return data;
}

export const login = (username, password) => api('/login', { method: 'POST', body: { username, password } });
export const logout = () => api('/logout', { method: 'POST' });
export const rooms = () => api('/rooms');
export const room = (id, options) => api(`/rooms/${encodeURIComponent(id)}`, options);
export const switchLights = (id, state) =>
  api(`/rooms/${encodeURIComponent(id)}/lights`, { method: 'POST', body: { state } });
export const history = (id, sensor, since, limit, options) =>
  api(`/rooms/${encodeURIComponent(id)}/history?sensor=${encodeURIComponent(sensor)}` +
      `&since=${encodeURIComponent(since)}&limit=${limit}`, options);
/** Every alarm of the user: the list's pages one after another, following `next` (README "Alarms");
 * at most 200 pages of 500, the most alarms.max_per_user allows. */
export async function alarms() {
  const all = [];
  let path = '/alarms?limit=500';
  for (let page = 0; path && page < 200; page += 1) {
    const body = await api(path);
    all.push(...(body?.alarms ?? []));
    path = body?.next ? body.next.replace(/^\/api\/v1/, '') : null;
  }
  return { alarms: all };
}
export const createAlarm = (alarm) => api('/alarms', { method: 'POST', body: alarm });
export const updateAlarm = (uuid, alarm) => api(`/alarms/${encodeURIComponent(uuid)}`, { method: 'PUT', body: alarm });
export const toggleAlarm = (uuid) => api(`/alarms/${encodeURIComponent(uuid)}/toggle`, { method: 'POST' });
export const deleteAlarm = (uuid) => api(`/alarms/${encodeURIComponent(uuid)}`, { method: 'DELETE' });
export const watchdogs = () => api('/watchdogs');
export const createWatchdog = (watchdog) => api('/watchdogs', { method: 'POST', body: watchdog });
export const updateWatchdog = (uuid, watchdog) =>
  api(`/watchdogs/${encodeURIComponent(uuid)}`, { method: 'PUT', body: watchdog });
export const toggleWatchdog = (uuid) => api(`/watchdogs/${encodeURIComponent(uuid)}/toggle`, { method: 'POST' });
export const deleteWatchdog = (uuid) => api(`/watchdogs/${encodeURIComponent(uuid)}`, { method: 'DELETE' });
export const guests = () => api('/guests');
export const createGuest = (guest) => api('/guests', { method: 'POST', body: guest });
export const deleteGuest = (id) => api(`/guests/${encodeURIComponent(id)}`, { method: 'DELETE' });
export const unboundDevices = () => api('/devices/unbound');
/** Every room of the user with its origin (`file` or `api`) and its sensors as the bodies take them (README "Rooms through the API"). */
export const roomSettings = () => api('/rooms?detail=1');
export const createRoom = (room) => api('/rooms', { method: 'POST', body: room });
export const updateRoom = (id, room) => api(`/rooms/${encodeURIComponent(id)}`, { method: 'PUT', body: room });
export const deleteRoom = (id) => api(`/rooms/${encodeURIComponent(id)}`, { method: 'DELETE' });
