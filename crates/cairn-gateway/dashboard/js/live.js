// One EventSource on /api/events for the whole page; views subscribe to
// event types (prefixes) while they are shown.

let source = null;
const handlers = new Set();

/** Opens the stream (once, after sign-in). */
export function connect() {
  if (source) return;
  source = new EventSource("/api/events", { withCredentials: true });
  source.onmessage = (message) => {
    let event;
    try {
      event = JSON.parse(message.data);
    } catch {
      return;
    }
    for (const { prefix, fn } of handlers) {
      if (event.type === prefix || event.type?.startsWith(`${prefix}.`) || prefix === "*") fn(event);
    }
  };
}

/** Closes the stream (sign-out). */
export function disconnect() {
  source?.close();
  source = null;
  handlers.clear();
}

/** Calls `fn` for each event whose type is `prefix` or under it; returns the unsubscribe. */
export function on(prefix, fn) {
  const entry = { prefix, fn };
  handlers.add(entry);
  return () => handlers.delete(entry);
}

/** Debounces `fn` so a burst of events re-reads once. */
export function soon(fn, ms = 150) {
  let timer = null;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(fn, ms);
  };
}
