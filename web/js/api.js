// ---- the service's API ---------------------------------------------------------------

export const api = {
  key: (sessionStorage.getItem("attention-api-key") || "").replace(/[^\x21-\x7e]/g, ""),
  headers(extra) {
    const h = Object.assign({}, extra);
    if (this.key) h.Authorization = "Bearer " + this.key;
    return h;
  },
  // Resolves to {ok, status, body, timing}; body is the parsed JSON (an error object when !ok).
  async call(path, bodyText) {
    const init = bodyText === undefined
      ? { headers: this.headers() }
      : { method: "POST", headers: this.headers({ "Content-Type": "application/json" }), body: bodyText };
    const res = await fetch(path, init);
    let body = null;
    try { body = await res.json(); } catch (_) { body = null; }
    if (!res.ok && !(body && body.error))
      body = { error: { code: "http_" + res.status, message: "The service answered " + res.status + " " + res.statusText + "." } };
    return { ok: res.ok, status: res.status, body, timing: res.headers.get("Server-Timing") || "" };
  },
};
