// The JSON API, with the session cookie (sent by the browser) and the
// session's CSRF token on every request that changes something.

let csrf = "";

/** Remembers the CSRF token of the signed-in session. */
export function setCsrf(token) {
  csrf = token || "";
}

/** An API error: HTTP status, code, message and details. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message || `HTTP ${status}`);
    this.status = status;
    this.code = body?.error?.code;
    this.details = body?.error?.details;
  }
}

/** Calls the API; resolves with the parsed answer (text for non-JSON). */
export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-CSRF-Token"] = csrf;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const type = response.headers.get("content-type") || "";
  const parsed = response.status === 204 ? null : type.includes("json") ? await response.json() : await response.text();
  if (!response.ok) {
    const error = new ApiError(response.status, typeof parsed === "object" ? parsed : null);
    if (response.status === 401) window.dispatchEvent(new CustomEvent("cairn:signed-out"));
    throw error;
  }
  return parsed;
}

export const get = (path) => api("GET", path);
export const post = (path, body) => api("POST", path, body);
export const put = (path, body) => api("PUT", path, body);
export const del = (path) => api("DELETE", path);
