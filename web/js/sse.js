// Server-Sent Events over fetch(). The browser's EventSource cannot send an Authorization header,
// and GET /api/v1/events needs one, so the page reads the stream itself: fetch with the header,
// decode the body as it arrives, parse the `event:`/`data:` lines, reconnect with backoff.

/** The SSE text format (the WHATWG rules): fields, comments, and a blank line that dispatches. */
export class SSEParser {
  constructor({ onEvent, onComment = () => {}, onRetry = () => {} }) {
    this.onEvent = onEvent;
    this.onComment = onComment;
    this.onRetry = onRetry;
    this.buffer = '';
    this.lastEventId = '';
    this.reset();
  }

  reset() {
    this.type = '';
    this.data = [];
  }

  /** Feeds decoded text; complete lines are handled, a partial one waits for the next chunk. */
  push(text) {
    this.buffer += text;
    // A CR at the very end may be the first half of a CRLF that the next chunk completes.
    const holdBack = this.buffer.endsWith('\r') ? 1 : 0;
    const ready = this.buffer.slice(0, this.buffer.length - holdBack);
    const lines = ready.split(/\r\n|\r|\n/);
    this.buffer = lines.pop() + this.buffer.slice(this.buffer.length - holdBack);
    for (const line of lines) this.line(line);
  }

  line(line) {
    if (line === '') {
      this.dispatch();
      return;
    }
    if (line.startsWith(':')) {
      this.onComment(line.slice(1).trim());
      return;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'event': this.type = value; break;
      case 'data': this.data.push(value); break;
      case 'id': if (!value.includes('\0')) this.lastEventId = value; break;
      case 'retry': if (/^\d+$/.test(value)) this.onRetry(Number(value)); break;
      default: break; // unknown fields are ignored
    }
  }

  dispatch() {
    if (this.data.length > 0) {
      this.onEvent({ type: this.type || 'message', data: this.data.join('\n'), lastEventId: this.lastEventId });
    }
    this.reset();
  }
}

/**
 * A stream that stays open: `status` goes connecting → live, and reconnecting (with exponential
 * backoff and jitter, 1 s doubling to 30 s) whenever the connection drops, the bridge restarts,
 * or nothing (not even the 15 s heartbeat) arrived for `silenceLimit` ms.
 */
export class EventStream {
  constructor({ url, headers, onEvent, onStatus, onOpen = () => {}, onUnauthorized = () => {},
                silenceLimit = 45000, minDelay = 1000, maxDelay = 30000 }) {
    Object.assign(this, { url, headers, onEvent, onStatus, onOpen, onUnauthorized, silenceLimit, minDelay, maxDelay });
    this.running = false;
    this.status = 'idle';
    this.connections = 0;
  }

  start() {
    if (this.running) return;
    this.running = true;
    this.loop();
  }

  stop() {
    this.running = false;
    this.controller?.abort();
    this.wake?.();
    clearTimeout(this.watchdog);
    this.setStatus('idle');
  }

  /** Skips the wait before the next attempt (e.g. when the browser says it is online again). */
  retryNow() {
    this.wake?.();
  }

  setStatus(status) {
    if (status === this.status) return;
    this.status = status;
    this.onStatus(status);
  }

  async loop() {
    let failures = 0;
    while (this.running) {
      this.setStatus(this.connections === 0 && failures === 0 ? 'connecting' : 'reconnecting');
      const controller = new AbortController();
      this.controller = controller;
      try {
        const response = await fetch(this.url, {
          headers: { Accept: 'text/event-stream', ...this.headers() },
          cache: 'no-store',
          signal: controller.signal,
        });
        if (response.status === 401) {
          this.running = false;
          this.setStatus('idle');
          this.onUnauthorized();
          return;
        }
        if (!response.ok || !response.body) throw new Error(`events answered ${response.status}`);
        failures = 0;
        this.connections += 1;
        this.setStatus('live');
        this.onOpen(this.connections);
        await this.read(response.body, controller);
      } catch {
        // A dropped connection, a bridge that is down, or our own abort: all end in a retry.
      } finally {
        clearTimeout(this.watchdog);
      }
      if (!this.running) break;
      failures += 1;
      this.setStatus('reconnecting');
      await this.sleep(this.delay(failures));
    }
  }

  async read(body, controller) {
    const parser = new SSEParser({
      onEvent: (event) => {
        let data;
        try {
          data = JSON.parse(event.data);
        } catch {
          return; // not JSON: not one of the bridge's events
        }
        this.onEvent(event.type, data);
      },
    });
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    const arm = () => {
      clearTimeout(this.watchdog);
      this.watchdog = setTimeout(() => controller.abort(), this.silenceLimit);
    };
    arm();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      arm();
      parser.push(value);
    }
  }

  /** 1 s, 2 s, 4 s ... up to 30 s, ±20 % so that many pages don't come back in step. */
  delay(failures) {
    const exponential = Math.min(this.maxDelay, this.minDelay * 2 ** Math.min(failures - 1, 10));
    return Math.round(exponential * (0.8 + Math.random() * 0.4));
  }

  sleep(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }
}
