/*
 * Tessera search page. Reads its settings from <script id="search-page-config" type="application/json">,
 * runs the published retriever through the public API of this origin (verify, execute, interactions) and
 * renders result cards with DOM methods and textContent only: no value from a result or a setting is ever
 * parsed as HTML. Views and clicks are sent as interactions with their position and execution id.
 */
(function () {
  'use strict';

  var NUMERIC_FORMATS = ['number', 'decimal', 'float', 'integer', 'currency', 'price', 'percent', 'percentage'];
  var MAX_IMAGE_BYTES = 10 * 1024 * 1024;

  // ------------------------------------------------------------------------------------------ pure helpers

  /** A link or image address kept only when it is http(s), a path on this site, or (images) a data: image. */
  function safeHref(raw, allowDataImage) {
    if (typeof raw !== 'string') return null;
    var url = raw.trim();
    if (!url || url.length > 4096 || /[\u0000-\u0020\u007f\\]/.test(url)) return null;
    if (/^https?:\/\/[^/?#]+/i.test(url)) return url;
    if (/^\/(?!\/)/.test(url) || /^(\.{1,2}\/|#|\?)/.test(url)) return url;
    if (allowDataImage && /^data:image\/(png|jpe?g|gif|webp|avif);base64,[A-Za-z0-9+/=]+$/i.test(url)) return url;
    return null;
  }

  function walk(root, path) {
    var value = root;
    for (var i = 0; i < path.length; i++) {
      if (value === null || typeof value !== 'object' || !Object.prototype.hasOwnProperty.call(value, path[i])) return undefined;
      value = value[path[i]];
    }
    return value;
  }

  /** A result field by name (dots reach into objects), wherever the result carries it. */
  function fieldValue(doc, name) {
    if (!doc || typeof doc !== 'object' || typeof name !== 'string') return undefined;
    var path = name.split('.');
    var payload = doc.payload && typeof doc.payload === 'object' ? doc.payload : null;
    var roots = [doc, doc.fields, payload && payload.fields, payload, doc.metadata, payload && payload.metadata];
    for (var i = 0; i < roots.length; i++) {
      if (!roots[i] || typeof roots[i] !== 'object') continue;
      // A public result carries an exposed field under its exposed name, dots included.
      var value = Object.prototype.hasOwnProperty.call(roots[i], name) ? roots[i][name] : walk(roots[i], path);
      if (value !== undefined) return value;
    }
    return undefined;
  }

  /** A stored blob reference ({url, ...}) or a plain address, as an address. */
  function addressOf(value) {
    if (typeof value === 'string') return value;
    if (value && typeof value === 'object') {
      if (typeof value.url === 'string') return value.url;
      if (typeof value.presigned_url === 'string') return value.presigned_url;
      if (typeof value.thumbnail_url === 'string') return value.thumbnail_url;
    }
    if (Array.isArray(value) && value.length > 0) return addressOf(value[0]);
    return null;
  }

  function plainText(value) {
    if (value === null || value === undefined) return '';
    if (typeof value === 'string') return value;
    if (typeof value === 'number' || typeof value === 'boolean') return String(value);
    if (Array.isArray(value)) return value.map(plainText).filter(Boolean).join(', ');
    try {
      return JSON.stringify(value);
    } catch (err) {
      return '';
    }
  }

  function truncate(text, limit) {
    if (!limit || text.length <= limit) return text;
    return text.slice(0, limit).replace(/\s+\S*$/, '') + '\u2026';
  }

  /**
   * One field as the card shows it, per its field_config: {kind: 'text' | 'link' | 'image', text, href}.
   * `label`, `prefix`, `decimals` and `truncate_chars` come from format_options. null: nothing to show.
   */
  function formatValue(value, format) {
    if (value === undefined || value === null || value === '') return null;
    var f = format || {};
    var kind = f.format || 'text';
    var prefix = f.prefix || '';
    if (kind === 'image' || kind === 'thumbnail') {
      var src = safeHref(addressOf(value), true);
      return src ? { kind: 'image', text: '', href: src } : null;
    }
    if (kind === 'url' || kind === 'link') {
      var href = safeHref(addressOf(value), false);
      var shown = truncate(prefix + plainText(value), f.truncate);
      return href ? { kind: 'link', text: shown, href: href } : { kind: 'text', text: shown, href: null };
    }
    var text;
    var number = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' && isFinite(Number(value)) ? Number(value) : null;
    if (NUMERIC_FORMATS.indexOf(kind) >= 0 && number !== null) {
      var n = kind === 'percent' || kind === 'percentage' ? number * 100 : number;
      text = f.decimals !== null && f.decimals !== undefined ? n.toFixed(f.decimals) : String(n);
      if (kind === 'percent' || kind === 'percentage') text += '%';
    } else if (typeof value === 'number' && f.decimals !== null && f.decimals !== undefined) {
      text = value.toFixed(f.decimals);
    } else if ((kind === 'date' || kind === 'datetime') && (typeof value === 'string' || typeof value === 'number')) {
      var date = new Date(value);
      text = isNaN(date.getTime()) ? plainText(value) : kind === 'date' ? date.toISOString().slice(0, 10) : date.toISOString().replace('T', ' ').slice(0, 16);
    } else if (kind === 'boolean' || typeof value === 'boolean') {
      text = value === true || value === 'true' ? 'Yes' : value === false || value === 'false' ? 'No' : plainText(value);
    } else {
      text = plainText(value);
    }
    return { kind: 'text', text: truncate(prefix + text, f.truncate), href: null };
  }

  function firstMapped(mappings, roles) {
    for (var i = 0; i < roles.length; i++) if (mappings[roles[i]]) return mappings[roles[i]];
    return null;
  }

  /** What one result card shows: title, thumbnail, link, description and its fields in `field_order`. */
  function cardModel(doc, config, position) {
    var mappings = config.fieldMappings || {};
    var formats = config.fieldConfig || {};
    var titleField = firstMapped(mappings, ['title', 'name', 'heading']);
    var thumbField = firstMapped(mappings, ['thumbnail', 'image', 'thumbnail_url', 'image_url']);
    var urlField = firstMapped(mappings, ['url', 'link', 'href']);
    var descField = firstMapped(mappings, ['description', 'subtitle', 'summary', 'snippet', 'text']);
    var used = [titleField, thumbField, urlField, descField];
    var title = titleField ? formatValue(fieldValue(doc, titleField), formats[titleField]) : null;
    var description = descField ? formatValue(fieldValue(doc, descField), formats[descField]) : null;
    var thumbnail = null;
    if (thumbField && config.card.showThumbnail) {
      var thumb = formatValue(fieldValue(doc, thumbField), { format: 'image' });
      thumbnail = thumb ? thumb.href : null;
    }
    var url = urlField ? safeHref(addressOf(fieldValue(doc, urlField)), false) : null;
    var order = config.card.fieldOrder && config.card.fieldOrder.length ? config.card.fieldOrder : (config.exposedFields || []).filter(function (f) {
      return used.indexOf(f) < 0;
    });
    var fields = [];
    order.forEach(function (name) {
      if (name === titleField || name === thumbField) return;
      var shown = formatValue(fieldValue(doc, name), formats[name]);
      if (shown) fields.push({ name: name, label: (formats[name] && formats[name].label) || null, kind: shown.kind, text: shown.text, href: shown.href });
    });
    var details = [];
    (config.exposedFields || []).forEach(function (name) {
      if (order.indexOf(name) >= 0 || used.indexOf(name) >= 0) return;
      var shown = formatValue(fieldValue(doc, name), formats[name]);
      if (shown && shown.kind !== 'image') details.push({ name: name, label: (formats[name] && formats[name].label) || name, kind: shown.kind, text: shown.text, href: shown.href });
    });
    return {
      documentId: typeof doc.document_id === 'string' ? doc.document_id : null,
      title: title && title.text ? title.text : 'Result ' + (position + 1),
      description: description ? description.text : null,
      thumbnail: thumbnail,
      url: url,
      fields: fields,
      details: details,
    };
  }

  var helpers = { safeHref: safeHref, fieldValue: fieldValue, formatValue: formatValue, cardModel: cardModel };
  if (typeof document === 'undefined') {
    // Loaded by the unit tests outside a browser: expose the pure helpers, start nothing.
    globalThis.searchPageHelpers = helpers;
    return;
  }

  // ------------------------------------------------------------------------------------------ the page

  var config;
  try {
    config = JSON.parse(document.getElementById('search-page-config').textContent);
  } catch (err) {
    return;
  }
  var base = '/v1/public/retrievers/' + encodeURIComponent(config.publicName);
  var $ = function (id) { return document.getElementById(id); };
  var form = $('search-form');
  var list = $('results');
  var status = $('results-status');
  var empty = $('results-empty');
  var errorBox = $('results-error');
  var more = $('results-more');
  var autoSearch = form.hasAttribute('data-auto-search');
  var state = { password: null, apiKey: null, inputs: null, offset: 0, executionId: null, images: {}, busy: false, runs: 0, inFlight: null };

  function applyTheme() {
    var root = document.documentElement.style;
    var theme = config.theme || {};
    if (theme.primaryColor) root.setProperty('--primary', theme.primaryColor);
    if (theme.fontFamily) root.setProperty('--font', theme.fontFamily + ', system-ui, sans-serif');
    if (theme.borderRadius !== null && theme.borderRadius !== undefined) root.setProperty('--radius', theme.borderRadius + 'px');
    root.setProperty('--columns', String(config.layout.columns));
    root.setProperty('--gap', config.layout.gap + 'px');
  }

  function sessionId() {
    var key = 'tessera-search-session';
    try {
      var stored = sessionStorage.getItem(key);
      if (stored) return stored;
    } catch (err) { /* storage refused (private mode): a per-page session */ }
    var bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    var id = 'sess_' + Array.prototype.map.call(bytes, function (b) { return ('0' + b.toString(16)).slice(-2); }).join('');
    try { sessionStorage.setItem(key, id); } catch (err) { /* ignored */ }
    return id;
  }
  var session = sessionId();

  function headers(extra) {
    var h = { 'Content-Type': 'application/json' };
    if (state.password !== null) h['X-Retriever-Password'] = state.password;
    if (state.apiKey) h['X-Public-API-Key'] = state.apiKey;
    for (var k in extra || {}) h[k] = extra[k];
    return h;
  }

  /** The message of an ErrorResponse or HTTPValidationError body, for people. */
  function problemOf(body, statusCode) {
    if (body && body.error && typeof body.error.message === 'string') return body.error.message;
    if (body && Array.isArray(body.detail)) return body.detail.map(function (d) { return d.msg; }).join('; ');
    if (statusCode === 429) return 'Too many searches right now. Wait a moment and try again.';
    return 'The search failed (HTTP ' + statusCode + '). Try again in a moment.';
  }

  function post(path, body, extraHeaders, keepalive, signal) {
    var init = { method: 'POST', headers: headers(extraHeaders), body: JSON.stringify(body), credentials: 'omit', keepalive: !!keepalive };
    if (signal) init.signal = signal;
    return fetch(base + path, init).then(function (res) {
      return res.text().then(function (text) {
        var parsed = null;
        try { parsed = text ? JSON.parse(text) : null; } catch (err) { parsed = null; }
        return { status: res.status, ok: res.ok, body: parsed, retryAfter: res.headers.get('Retry-After') };
      });
    });
  }

  function sendInteractions(items, keepalive) {
    if (items.length === 0) return;
    var request = items.length === 1 ? post('/interactions', items[0], { 'X-Session-ID': session }, keepalive) : post('/interactions/batch', { interactions: items }, { 'X-Session-ID': session }, keepalive);
    request.catch(function () { /* signals are best effort: a lost view never breaks the page */ });
  }

  function show(el, visible) { el.hidden = !visible; }

  function setError(message) {
    errorBox.textContent = '';
    if (message) {
      var p = document.createElement('p');
      p.textContent = message;
      errorBox.appendChild(p);
    }
    show(errorBox, !!message);
  }

  function collectInputs() {
    var inputs = {};
    var missing = [];
    var controls = form.querySelectorAll('[data-input]');
    for (var i = 0; i < controls.length; i++) {
      var el = controls[i];
      var name = el.getAttribute('data-input');
      var type = el.getAttribute('data-value-type');
      var value;
      if (el.getAttribute('data-kind') === 'image') value = state.images[name];
      else if (el.type === 'checkbox') value = el.checked;
      else if (el.value.trim() === '') value = undefined;
      else if (type === 'number' || type === 'integer') value = Number(el.value);
      else value = el.value.trim();
      if (value === undefined || (typeof value === 'number' && !isFinite(value))) {
        if (el.required) missing.push(el);
        continue;
      }
      inputs[name] = type === 'integer' ? Math.round(value) : value;
    }
    return { inputs: inputs, missing: missing };
  }

  function labelOf(el) {
    var label = document.querySelector('label[for="' + el.id + '"]');
    return label ? label.textContent.replace(/\*\s*$/, '').trim() : el.name;
  }

  function field(parent, item) {
    var row = document.createElement('div');
    row.className = 'card-field field-' + item.name.replace(/[^A-Za-z0-9_-]/g, '-');
    if (item.label) {
      var label = document.createElement('span');
      label.className = 'card-field-label';
      label.textContent = item.label + ': ';
      row.appendChild(label);
    }
    var value;
    if (item.kind === 'link') {
      value = document.createElement('a');
      value.href = item.href;
      value.rel = 'noopener noreferrer nofollow';
      value.target = '_blank';
    } else if (item.kind === 'image') {
      value = document.createElement('img');
      value.src = item.href;
      value.alt = item.label || item.name;
      value.loading = 'lazy';
    } else {
      value = document.createElement('span');
    }
    if (item.kind !== 'image') value.textContent = item.text;
    value.className = (value.className ? value.className + ' ' : '') + 'card-field-value';
    row.appendChild(value);
    parent.appendChild(row);
  }

  // executionId: the execution that returned the card (each offset page is an execution of its own).
  function renderCard(doc, position, executionId) {
    var card = cardModel(doc, config, position);
    var li = document.createElement('li');
    li.className = 'result';
    var article = document.createElement('article');
    article.className = 'card';
    article.setAttribute('data-document-id', card.documentId || '');
    article.setAttribute('data-position', String(position));
    var headingId = 'result-' + position + '-title';
    article.setAttribute('aria-labelledby', headingId);
    if (card.thumbnail) {
      var img = document.createElement('img');
      img.className = 'thumbnail';
      img.src = card.thumbnail;
      img.alt = card.title;
      img.loading = 'lazy';
      article.appendChild(img);
    }
    var body = document.createElement('div');
    body.className = 'card-body';
    var heading = document.createElement('h3');
    heading.className = 'card-title';
    heading.id = headingId;
    var action = config.card.clickAction;
    if (action === 'open_url' && !card.url) action = 'expand';
    var control;
    var detailsId = 'result-' + position + '-details';
    if (action === 'open_url') {
      control = document.createElement('a');
      control.href = card.url;
      control.rel = 'noopener noreferrer nofollow';
      control.target = '_blank';
    } else if (action === 'none') {
      control = document.createElement('span');
    } else {
      control = document.createElement('button');
      control.type = 'button';
      if (action === 'expand') {
        control.setAttribute('aria-expanded', 'false');
        control.setAttribute('aria-controls', detailsId);
      }
    }
    control.className = 'card-action';
    control.textContent = card.title;
    heading.appendChild(control);
    body.appendChild(heading);
    if (card.description) {
      var p = document.createElement('p');
      p.className = 'card-description';
      p.textContent = card.description;
      body.appendChild(p);
    }
    card.fields.forEach(function (item) { field(body, item); });
    var details = null;
    if (action === 'expand') {
      details = document.createElement('div');
      details.className = 'card-details';
      details.id = detailsId;
      details.hidden = true;
      card.details.forEach(function (item) { field(details, item); });
      body.appendChild(details);
    }
    if (config.card.showFindSimilar && card.documentId) {
      var similar = document.createElement('button');
      similar.type = 'button';
      similar.className = 'find-similar';
      similar.textContent = 'Find similar';
      similar.setAttribute('aria-label', 'Find results similar to ' + card.title);
      similar.addEventListener('click', function (event) {
        event.stopPropagation();
        findSimilar(card.documentId);
      });
      body.appendChild(similar);
    }
    article.appendChild(body);
    li.appendChild(article);

    function clicked() {
      if (!card.documentId) return;
      sendInteractions([interaction(card.documentId, 'CLICK', position, executionId)], action === 'open_url');
    }
    control.addEventListener('click', function (event) {
      event.stopPropagation();
      clicked();
      if (action === 'expand') {
        var open = control.getAttribute('aria-expanded') === 'true';
        control.setAttribute('aria-expanded', open ? 'false' : 'true');
        details.hidden = open;
      } else if (action === 'find_similar') {
        findSimilar(card.documentId);
      }
    });
    // A click anywhere else on the card does what its title does (links and buttons inside keep their own).
    article.addEventListener('click', function (event) {
      if (event.target.closest && event.target.closest('a, button')) return;
      if (action === 'none') clicked();
      else control.click();
    });
    return li;
  }

  function interaction(documentId, type, position, executionId) {
    var item = { document_id: documentId, interaction_type: [type], position: position };
    if (executionId) item.execution_id = executionId;
    var snapshot = {};
    for (var k in state.inputs || {}) if (typeof state.inputs[k] !== 'string' || state.inputs[k].length <= 500) snapshot[k] = state.inputs[k];
    if (type === 'CLICK') item.query_snapshot = snapshot;
    return item;
  }

  function documentsOf(body) {
    if (!body) return [];
    if (Array.isArray(body.documents)) return body.documents;
    if (Array.isArray(body.results)) return body.results;
    return [];
  }

  /**
   * Runs the retriever. A new search supersedes one still running (its request is aborted and its answer,
   * should it still arrive, is dropped), so the page always shows the latest query; "Show more" waits
   * for the running search instead.
   */
  function run(inputs, append) {
    if (state.busy && append) return;
    if (state.inFlight) state.inFlight.abort();
    var ticket = ++state.runs;
    var controller = typeof AbortController === 'function' ? new AbortController() : null;
    state.inFlight = controller;
    state.busy = true;
    if (!append) {
      state.inputs = inputs;
      state.offset = 0;
    }
    list.setAttribute('aria-busy', 'true');
    status.textContent = 'Searching\u2026';
    setError(null);
    show(empty, false);
    var body = { inputs: state.inputs, pagination: { method: 'offset', offset: state.offset }, settings: { limit: config.pageSize } };
    post('/execute', body, undefined, false, controller && controller.signal).then(function (res) {
      if (ticket !== state.runs) return;
      state.busy = false;
      state.inFlight = null;
      list.setAttribute('aria-busy', 'false');
      if (!res.ok) {
        if ((res.status === 401 || res.status === 403) && config.passwordProtected) lock('Enter the password again to keep searching.');
        if (!append) list.textContent = '';
        show(more, false);
        status.textContent = 'The search failed.';
        setError(problemOf(res.body, res.status));
        return;
      }
      if (res.body && res.body.status === 'failed') {
        if (!append) list.textContent = '';
        show(more, false);
        status.textContent = 'The search failed.';
        setError(res.body.error ? 'The search failed: ' + res.body.error : 'The search failed. Try again in a moment.');
        return;
      }
      state.executionId = res.body && typeof res.body.execution_id === 'string' ? res.body.execution_id : null;
      var docs = documentsOf(res.body);
      if (!append) list.textContent = '';
      var start = state.offset;
      var views = [];
      docs.forEach(function (doc, i) {
        list.appendChild(renderCard(doc, start + i, state.executionId));
        if (typeof doc.document_id === 'string') views.push(interaction(doc.document_id, 'VIEW', start + i, state.executionId));
      });
      sendInteractions(views, false);
      state.offset = start + docs.length;
      var pagination = (res.body && res.body.pagination) || {};
      var shown = state.offset;
      var total = typeof pagination.total === 'number' ? pagination.total : null;
      if (shown === 0) {
        status.textContent = 'No results.';
        show(empty, true);
      } else {
        status.textContent = total !== null && total > shown ? 'Showing ' + shown + ' of ' + total + ' results.' : shown === 1 ? '1 result.' : shown + ' results.';
      }
      show(more, !!pagination.has_next && docs.length > 0);
    }, function () {
      if (ticket !== state.runs) return;
      state.busy = false;
      state.inFlight = null;
      list.setAttribute('aria-busy', 'false');
      status.textContent = 'The search failed.';
      setError('The search could not reach the server. Check your connection and try again.');
    });
  }

  function findSimilar(documentId) {
    var inputs = {};
    for (var k in state.inputs || {}) inputs[k] = state.inputs[k];
    inputs[config.similarInput || 'document_id'] = documentId;
    run(inputs, false);
    if (list.scrollIntoView) list.scrollIntoView({ block: 'start' });
  }

  function lock(message) {
    state.password = null;
    state.apiKey = null;
    show($('password-gate'), true);
    show(form, false);
    var err = $('password-error');
    err.textContent = message || '';
    show(err, !!message);
    $('password-input').focus();
  }

  function unlock() {
    show($('password-gate'), false);
    document.body.classList.remove('locked');
    if (autoSearch) {
      run({}, false);
      return;
    }
    show(form, true);
    var first = form.querySelector('input, select, textarea');
    if (first) first.focus();
  }

  function setupPassword() {
    var gate = $('password-form');
    gate.addEventListener('submit', function (event) {
      event.preventDefault();
      var input = $('password-input');
      var password = input.value;
      var err = $('password-error');
      if (!password) {
        err.textContent = 'Enter the password to search.';
        show(err, true);
        input.focus();
        return;
      }
      var button = gate.querySelector('button');
      button.disabled = true;
      post('/verify', { password: password }).then(function (res) {
        button.disabled = false;
        if (res.ok && res.body && res.body.valid === true) {
          state.password = password;
          state.apiKey = typeof res.body.public_api_key === 'string' ? res.body.public_api_key : null;
          input.value = '';
          show(err, false);
          unlock();
          return;
        }
        err.textContent = res.ok ? 'That password is not right. Check it and try again.' : problemOf(res.body, res.status);
        show(err, true);
        input.select();
      }, function () {
        button.disabled = false;
        err.textContent = 'The server could not be reached. Try again.';
        show(err, true);
      });
    });
  }

  function setupImages() {
    var files = form.querySelectorAll('[data-kind="image"]');
    Array.prototype.forEach.call(files, function (el) {
      var name = el.getAttribute('data-input');
      var preview = el.parentNode.querySelector('.image-preview');
      el.addEventListener('change', function () {
        delete state.images[name];
        preview.hidden = true;
        var file = el.files && el.files[0];
        if (!file) return;
        if (file.size > MAX_IMAGE_BYTES) {
          setError('The image is larger than 10 MB. Choose a smaller one.');
          el.value = '';
          return;
        }
        var reader = new FileReader();
        reader.onload = function () {
          var url = String(reader.result);
          state.images[name] = url.slice(url.indexOf(',') + 1);
          if (safeHref(url, true)) {
            preview.src = url;
            preview.alt = 'Chosen image: ' + file.name;
            preview.hidden = false;
          }
        };
        reader.readAsDataURL(file);
      });
    });
  }

  applyTheme();
  form.addEventListener('submit', function (event) {
    event.preventDefault();
    var collected = collectInputs();
    if (collected.missing.length > 0) {
      setError('Fill in ' + collected.missing.map(labelOf).join(', ') + ' to search.');
      collected.missing[0].focus();
      return;
    }
    run(collected.inputs, false);
  });
  more.addEventListener('click', function () { run(state.inputs, true); });
  setupImages();
  if (config.passwordProtected) setupPassword();
  else if (autoSearch) run({}, false);
})();
