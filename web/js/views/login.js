// Login: username and password against POST /api/v1/login.

import * as API from '../api.js';
import { h } from '../dom.js';

export function render(main, _route, app) {
  document.title = 'Log in · SmartHome';
  const error = h('p', { class: 'form-error', id: 'login-error', role: 'alert' });
  if (app.loginMessage) {
    error.textContent = app.loginMessage;
    app.loginMessage = null;
  }
  const username = h('input', {
    id: 'username', name: 'username', type: 'text', autocomplete: 'username', autocapitalize: 'none',
    spellcheck: 'false', required: true, 'aria-describedby': 'login-error',
  });
  const password = h('input', {
    id: 'password', name: 'password', type: 'password', autocomplete: 'current-password', required: true,
    'aria-describedby': 'login-error',
  });
  const submit = h('button', { type: 'submit', class: 'button button-primary', id: 'login-submit' }, 'Log in');
  const form = h('form', { class: 'login-form', id: 'login-form', novalidate: true },
    h('div', { class: 'field' }, h('label', { for: 'username' }, 'Username'), username),
    h('div', { class: 'field' }, h('label', { for: 'password' }, 'Password'), password),
    error,
    submit);

  let busy = false;
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (busy) return;
    const name = username.value.trim();
    if (name === '' || password.value === '') {
      error.textContent = 'Enter your username and password.';
      (name === '' ? username : password).focus();
      return;
    }
    busy = true;
    submit.textContent = 'Logging in…';
    submit.setAttribute('aria-disabled', 'true');
    error.textContent = '';
    try {
      const result = await API.login(name, password.value);
      app.signIn(result, name);
    } catch (problem) {
      error.textContent = problem.message;
      password.value = '';
      password.focus();
    } finally {
      busy = false;
      submit.textContent = 'Log in';
      submit.removeAttribute('aria-disabled');
    }
  });

  main.append(h('section', { class: 'login', 'aria-labelledby': 'login-title' },
    h('img', { src: 'icons/favicon.svg', alt: '', width: 56, height: 56, class: 'login-logo' }),
    h('h1', { id: 'login-title', tabindex: '-1' }, 'SmartHome'),
    h('p', { class: 'lead' }, 'Log in to see your rooms.'),
    form));
  username.focus();
}
