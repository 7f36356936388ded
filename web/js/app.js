// The dashboard: routes (#/login, #/rooms, #/rooms/<id>, #/alarms, #/watchdogs, #/settings, and
// #/guest/<token>, a guest's login link), the header with the connection state, the live event
// stream, and notices.

import * as API from './api.js';
import * as store from './store.js';
import { EventStream } from './sse.js';
import { h, icon } from './dom.js';
import * as loginView from './views/login.js';
import * as roomsView from './views/rooms.js';
import * as roomView from './views/room.js';
import * as alarmsView from './views/alarms.js';
import * as watchdogsView from './views/watchdogs.js';
import * as settingsView from './views/settings.js';

const main = document.getElementById('main');
const topbar = document.getElementById('topbar');
const connection = document.getElementById('conn');
const connectionText = document.getElementById('conn-text');
const toasts = document.getElementById('toasts');

const STATUS_TEXT = { idle: 'Offline', connecting: 'Connecting…', live: 'Live', reconnecting: 'Reconnecting…' };

/** Shared with the views. */
const app = {
  navigate(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
  },
  notify,
  events: new EventTarget(),   // 'alarm', 'gas', 'command_rejected' events from the stream; 'history' for each kept
  history: [],                 // the stream's alarm, gas and watchdog events since login, oldest first (at most 50)
  ui: {},                      // view state that outlives a view (the rooms filter, the sort order)
  signIn,
  afterLogin: null,            // the route a user asked for before logging in
};

let stream = null;
let cleanup = null;
let firstRoute = true;

// ---- the event stream ---------------------------------------------------------------------

function startEvents() {
  stream?.stop();
  stream = new EventStream({
    url: API.apiURL('/events'),
    headers: API.authHeaders,
    onStatus: showStatus,
    onOpen: (count) => {
      // After a reconnect the values may be stale: fetch them again once.
      if (count > 1) store.refreshAll().catch(() => {});
    },
    onEvent: handleEvent,
    onUnauthorized: () => endSession('Your session has ended. Please log in again.'),
  });
  stream.start();
}

function showStatus(status) {
  connection.dataset.state = status;
  connectionText.textContent = STATUS_TEXT[status] ?? status;
  connection.title = status === 'live' ? 'Receiving live updates from the bridge'
    : status === 'reconnecting' ? 'The connection to the bridge dropped; reconnecting' : '';
}

function remember(type, data) {
  app.history.push({ type, data, at: new Date() });
  if (app.history.length > 50) app.history.shift();
  app.events.dispatchEvent(new CustomEvent('history', { detail: { type, data } }));
}

function handleEvent(type, data) {
  if (type === 'alarm' || type === 'gas' || type === 'watchdog') remember(type, data);
  switch (type) {
    case 'state':
      store.applyState(data);
      break;
    case 'alarm':
      notify(`Alarm “${data.title}” went off.`, { icon: 'alarm' });
      app.events.dispatchEvent(new CustomEvent('alarm', { detail: data }));
      break;
    case 'gas': {
      // The alarm stays until the gas is gone (or it is dismissed), then says so.
      const room = store.findRoom(data.room)?.name ?? data.room;
      toasts.querySelector(`[data-gas="${CSS.escape(data.room)}"]`)?.remove();
      if (data.state === 'ON') notify(`Gas detected in ${room}!`, { icon: 'gas', urgent: true, key: data.room });
      else notify(`No more gas in ${room}.`, { icon: 'gas' });
      break;
    }
    case 'watchdog':
      notify(data.state === 'recovered' ? `“${data.title}” recovered.`
        : `Watchdog “${data.title}”: ${store.findRoom(data.room)?.name ?? data.room} ${data.sensor}.`, { icon: 'sensor' });
      break;
    case 'command_rejected':
      notify(`A command was refused: ${data.message}`, { icon: 'lights' });
      break;
    case 'overflow':
      // The bridge closes the stream right after this; the stream reconnects and reloads.
      break;
    default:
      break;
  }
}

window.addEventListener('online', () => stream?.retryNow());

// ---- notices ------------------------------------------------------------------------------

function notify(message, { icon: iconName, urgent = false, timeout = 6000, key } = {}) {
  const close = h('button', { type: 'button', class: 'toast-close', 'aria-label': 'Dismiss' }, '×');
  const toast = h('div', { class: `toast${urgent ? ' toast-urgent' : ''}`, role: urgent ? 'alert' : 'status',
    dataset: key ? { gas: key } : undefined },
    iconName ? icon(iconName, { size: 24 }) : null, h('span', {}, message), close);
  const remove = () => toast.remove();
  close.addEventListener('click', remove);
  toasts.append(toast);
  if (!urgent) setTimeout(remove, timeout);
  while (toasts.children.length > 4) toasts.firstElementChild.remove();
}

// ---- session ------------------------------------------------------------------------------

function signIn(result, username) {
  API.saveSession({ token: result.token, userID: result.userID, username, admin: result.admin === true });
  store.reset();
  startEvents();
  const next = app.afterLogin ?? '#/rooms';
  app.afterLogin = null;
  app.navigate(next);
}

function endSession(message) {
  if (!API.currentSession()) return; // already ended (the stream and a request may both see a 401)
  stream?.stop();
  stream = null;
  API.saveSession(null);
  store.reset();
  app.ui = {};
  app.history = [];
  if (message) app.loginMessage = message;
  app.navigate('#/login');
}

async function logOut() {
  // A guest's link is shared: logging out would end it for everyone who has it (README "Guests"), so a
  // guest's tab only forgets the token.
  if (API.currentSession()?.guest) {
    endSession(null);
    return;
  }
  try {
    await API.logout();
  } catch {
    // The token is dropped here either way; a bridge that can't be reached forgets it at expiry.
  }
  endSession(null);
}

API.onUnauthorized(() => endSession('Your session has ended. Please log in again.'));
document.getElementById('logout').addEventListener('click', logOut);

// ---- routes -------------------------------------------------------------------------------

function parse(hash) {
  let parts;
  try {
    parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  } catch {
    return { name: 'missing' }; // a malformed %-escape
  }
  if (parts.length === 0) return { name: 'home' };
  if (parts[0] === 'login' && parts.length === 1) return { name: 'login' };
  if (parts[0] === 'rooms' && parts.length === 1) return { name: 'rooms' };
  if (parts[0] === 'rooms' && parts.length === 2) return { name: 'room', id: parts[1] };
  if (parts[0] === 'alarms' && parts.length === 1) return { name: 'alarms' };
  if (parts[0] === 'watchdogs' && parts.length === 1) return { name: 'watchdogs' };
  if (parts[0] === 'settings' && parts.length === 1) return { name: 'settings' };
  if (parts[0] === 'guest' && parts.length === 2) return { name: 'guest', token: parts[1] };
  return { name: 'missing' };
}

/** A guest's login link: the tab becomes the guest's, and the token leaves the address bar and history. */
function enterAsGuest(token) {
  stream?.stop();
  stream = null;
  API.saveSession({ token, userID: null, username: 'Guest', guest: true });
  store.reset();
  app.ui = {};
  app.history = [];
  location.replace('#/rooms');
}

function route() {
  const target = parse(location.hash);
  if (target.name === 'guest') {
    enterAsGuest(target.token);
    return;
  }
  const session = API.currentSession();
  if (!session && target.name !== 'login') {
    if (target.name !== 'home' && target.name !== 'missing') app.afterLogin = location.hash;
    app.navigate('#/login');
    return;
  }
  if (session?.guest && ['alarms', 'watchdogs', 'settings'].includes(target.name)) {
    app.navigate('#/rooms');
    return;
  }
  if (session && (target.name === 'login' || target.name === 'home')) {
    app.navigate('#/rooms');
    return;
  }
  if (session && !stream) startEvents();

  cleanup?.();
  cleanup = null;
  main.replaceChildren();
  topbar.hidden = !session;
  document.getElementById('user-name').textContent = session?.username ?? '';
  // A guest sees its rooms only: the user's own screens answer it 403.
  for (const link of document.querySelectorAll('[data-owner-only]')) link.hidden = Boolean(session?.guest);
  document.getElementById('logout').textContent = session?.guest ? 'Leave' : 'Log out';
  for (const link of document.querySelectorAll('[data-nav]')) {
    const current = link.dataset.nav === target.name || (link.dataset.nav === 'rooms' && target.name === 'room');
    if (current) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  document.body.dataset.view = target.name;

  const views = { login: loginView, rooms: roomsView, room: roomView, alarms: alarmsView, watchdogs: watchdogsView,
    settings: settingsView };
  const view = views[target.name];
  if (view) {
    cleanup = view.render(main, target, app) ?? null;
  } else {
    document.title = 'Not found · SmartHome';
    main.append(h('h1', { tabindex: '-1' }, 'Page not found'), h('p', {}, h('a', { href: '#/rooms' }, 'Back to your rooms')));
  }
  // Keyboard and screen reader users land on the new screen's heading, not at the old focus.
  if (!firstRoute && !main.contains(document.activeElement)) {
    const heading = main.querySelector('h1');
    heading?.focus({ preventScroll: false });
    window.scrollTo(0, 0);
  }
  firstRoute = false;
}

// The skip link moves focus without changing the route.
document.getElementById('skip-link').addEventListener('click', (event) => {
  event.preventDefault();
  (main.querySelector('h1') ?? main).focus();
});

window.addEventListener('hashchange', route);
document.getElementById('boot')?.remove();
route();
