// The list the alarms, the watchdogs and the settings page's rooms show: each item with its on/off
// switch (when it has one), Edit, and Delete after a confirmation; reloaded from the API, every change
// announced. Class names are the page's prefix plus the control (`alarm-toggle`, `watchdog-delete`),
// which the styles and tests use.

import { h } from '../dom.js';

/**
 * @param options.prefix   `alarm` or `watchdog`
 * @param options.noun     `alarm` or `watchdog`, for "Delete this alarm?"
 * @param options.load     () => Promise<items>;  options.toggle / options.remove: (uuid) => Promise;
 *                         without `toggle` the items have no on/off switch
 * @param options.editable (item) => whether it has Edit and Delete (default: every item)
 * @param options.content  (item) => the item's icon and text, as children of its row
 * @param options.itemData (item) => extra attributes of its row (e.g. `data-state`)
 * @param options.onEdit   (item) => void;  options.onRemoved: (item) => void, before the reload
 * @param options.heading  the page's heading, focused after a delete
 */
export function editableList({ prefix, noun, load, toggle, remove, content, itemData = () => ({}), editable = () => true,
  onEdit, onRemoved, heading }) {
  let items = [];
  let confirming = null;  // the uuid whose delete waits for confirmation
  const list = h('ul', { class: 'alarm-list', id: `${prefix}-list`, 'aria-busy': 'true' });
  const empty = h('p', { class: 'empty', id: `${prefix}-empty`, hidden: true }, `No ${noun}s yet. Add one with the form.`);
  const announce = h('p', { class: 'summary', id: `${prefix}-status`, role: 'status' });
  const error = h('p', { class: 'form-error', role: 'alert' });
  const focus = (uuid, control) => list.querySelector(`[data-uuid="${uuid}"] .${prefix}-${control}`)?.focus();

  function row(item) {
    const onOff = toggle && h('button', {
      type: 'button', role: 'switch', class: `switch ${prefix}-toggle`, 'aria-checked': String(item.isEnabled),
      'aria-label': `${item.title} enabled`,
    }, h('span', { class: 'switch-track', 'aria-hidden': 'true' }, h('span', { class: 'switch-thumb' })),
    h('span', { class: 'switch-text', 'aria-hidden': 'true' }, item.isEnabled ? 'On' : 'Off'));
    onOff?.addEventListener('click', () => flip(item, onOff));
    const element = h('li', { class: `alarm ${prefix}`, 'data-uuid': item.uuid, 'data-enabled': toggle && String(item.isEnabled),
      ...itemData(item) }, ...content(item), onOff);
    if (!editable(item)) return element;
    if (confirming === item.uuid) {
      const yes = h('button', { type: 'button', class: `button button-danger ${prefix}-confirm` }, 'Delete');
      const no = h('button', { type: 'button', class: `button ${prefix}-keep` }, 'Keep');
      yes.addEventListener('click', () => removeItem(item));
      no.addEventListener('click', () => {
        confirming = null;
        paint();
        focus(item.uuid, 'delete');
      });
      element.append(h('div', { class: 'alarm-actions alarm-confirming', role: 'group', 'aria-label': `Delete ${item.title}?` },
        h('span', {}, `Delete this ${noun}?`), yes, no));
    } else {
      const edit = h('button', { type: 'button', class: `button button-quiet ${prefix}-edit`, 'aria-label': `Edit ${item.title}` }, 'Edit');
      edit.addEventListener('click', () => onEdit(item));
      const del = h('button', { type: 'button', class: `button button-quiet button-danger ${prefix}-delete`, 'aria-label': `Delete ${item.title}` }, 'Delete');
      del.addEventListener('click', () => {
        confirming = item.uuid;
        paint();
        focus(item.uuid, 'confirm');
      });
      element.append(h('div', { class: 'alarm-actions' }, edit, del));
    }
    return element;
  }

  function paint() {
    list.replaceChildren(...items.map(row));
    empty.hidden = items.length > 0;
    list.setAttribute('aria-busy', 'false');
  }

  async function reload() {
    try {
      items = await load();
      error.textContent = '';
      paint();
    } catch (problem) {
      if (problem.name !== 'AbortError') error.textContent = problem.message;
    }
  }

  async function flip(item, onOff) {
    if (onOff.getAttribute('aria-busy') === 'true') return;
    onOff.setAttribute('aria-busy', 'true');
    try {
      const updated = await toggle(item.uuid);
      items = items.map((candidate) => (candidate.uuid === updated.uuid ? updated : candidate));
      announce.textContent = `“${updated.title}” is ${updated.isEnabled ? 'on' : 'off'}.`;
      paint();
      focus(updated.uuid, 'toggle');
    } catch (problem) {
      onOff.removeAttribute('aria-busy');
      error.textContent = problem.message;
    }
  }

  async function removeItem(item) {
    try {
      await remove(item.uuid);
      announce.textContent = `Deleted “${item.title}”.`;
      onRemoved(item);
      confirming = null;
      await reload();
      heading().focus();
    } catch (problem) {
      error.textContent = problem.message;
    }
  }

  return {
    /** The announcement, the error, the list and its empty note, in page order. */
    elements: [announce, error, list, empty],
    list,
    announce,
    reload,
    /** Marks a just-saved item. */
    highlight: (uuid) => list.querySelector(`[data-uuid="${uuid}"]`)?.classList.add('is-new'),
    focus,
  };
}

/**
 * The form beside the list: "New …" until an item's Edit fills it, then "Edit “…”" with Cancel.
 * It sends what was typed (`body()`); the bridge validates, and its message is shown as it is, with
 * the cursor put in the field it names.
 * @param options.fields   the form's fields between its heading and the error line
 * @param options.clear    () => void: the fields' values for a new item (after `form.reset()`)
 * @param options.fill     (item) => void: the fields' values from an item
 * @param options.body     () => the API body;  options.save: (uuid or null, body) => Promise<item>
 * @param options.fieldFor the field element for each name the API's messages use
 * @param options.items    the `editableList` it adds to
 */
export function editableForm({ prefix, noun, fields, clear, fill, body, save, fieldFor, items }) {
  let editing = null;
  const error = h('p', { class: 'form-error', id: `${prefix}-error`, role: 'alert' });
  const submit = h('button', { type: 'submit', class: 'button button-primary', id: `${prefix}-submit` }, `Add ${noun}`);
  const cancel = h('button', { type: 'button', class: 'button', id: `${prefix}-cancel`, hidden: true }, 'Cancel');
  const heading = h('h2', { id: `${prefix}-form-title` }, `New ${noun}`);
  const form = h('form', { class: 'alarm-form', id: `${prefix}-form`, novalidate: true, 'aria-labelledby': `${prefix}-form-title` },
    heading, ...fields, error, h('div', { class: 'actions' }, submit, cancel));

  function reset() {
    editing = null;
    form.reset();
    clear();
    heading.textContent = `New ${noun}`;
    submit.textContent = `Add ${noun}`;
    cancel.hidden = true;
    error.textContent = '';
  }

  function edit(item) {
    editing = item;
    fill(item);
    heading.textContent = `Edit “${item.title}”`;
    submit.textContent = `Save ${noun}`;
    cancel.hidden = false;
    error.textContent = '';
    form.scrollIntoView({ block: 'nearest' });
    fieldFor.title.focus();
  }

  cancel.addEventListener('click', () => {
    const uuid = editing?.uuid;
    reset();
    items().focus(uuid, 'edit');
  });

  let saving = false;
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (saving) return;
    saving = true;
    submit.setAttribute('aria-disabled', 'true');
    error.textContent = '';
    try {
      const saved = await save(editing?.uuid ?? null, body());
      items().announce.textContent = editing ? `Saved “${saved.title}”.` : `Added “${saved.title}”.`;
      reset();
      await items().reload();
      items().highlight(saved.uuid);
    } catch (problem) {
      error.textContent = problem.message;
      // Put the cursor where the problem is: the API names the field (`action.room`, `sun.offset`).
      const field = /field "([^"]+)"/.exec(problem.message)?.[1] ?? '';
      (fieldFor[field] ?? fieldFor[field.split('.')[0]])?.focus();
    } finally {
      saving = false;
      submit.removeAttribute('aria-disabled');
    }
  });

  return { form, reset, edit, editing: () => editing };
}
