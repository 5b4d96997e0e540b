// A horizonrl v1 environment server in plain Node.js (no packages), written from docs/protocol.md.
//
//   node server.js ITEMS_FILE [PORT]      (PORT 0 or absent: a free port)
//   -> prints "ready on http://127.0.0.1:PORT" once it listens
//
// The env: guess a whole number from 1 to `high`; a wrong guess is answered "higher" or "lower".
// Items come from ITEMS_FILE (JSONL, row i is item guessjs_i: {split, category, target, high}).
// With BROKEN=1 it breaks the protocol on purpose (tests/custom/test_node_server.py): the step
// answer says `done` instead of terminated/truncated, an unknown session gets 200 with an error
// body, and every reset observation differs (a counter), so episodes are not deterministic.
"use strict";
const fs = require("fs");
const http = require("http");
const crypto = require("crypto");

const FAMILY = "guessjs";
const BROKEN = process.env.BROKEN === "1";
const items = fs
  .readFileSync(process.argv[2], "utf8")
  .split("\n")
  .filter((line) => line.trim() && !line.trim().startsWith("#"))
  .map((line) => JSON.parse(line));
const sessions = new Map(); // session_id -> {item, done, success}
let resets = 0;

function info(session, success) {
  return { success, score: success ? 1.0 : 0.0, category: session.item.category };
}

function reset(session, itemId) {
  const match = /^guessjs_(\d+)$/.exec(String(itemId));
  const item = match ? items[Number(match[1])] : undefined;
  if (item === undefined) {
    throw apiError(404, "unknown_item", `unknown item ${JSON.stringify(itemId)}: items are ${FAMILY}_0..${FAMILY}_${items.length - 1}`);
  }
  Object.assign(session, { item, done: false, success: false });
  resets += 1;
  const suffix = BROKEN ? ` (reset number ${resets})` : "";
  return `I am thinking of a whole number from 1 to ${item.high}. Find it.\nAnswer with: guess N${suffix}`;
}

function step(session, action) {
  const match = /^\s*guess\s+(-?\d+)\s*$/i.exec(action);
  if (session.done) {
    return [session.success ? "The game is over: you found it." : "The game is over.", 0.0, true];
  }
  if (!match) {
    return [`Invalid action ${JSON.stringify(action.slice(0, 40))}. Valid: guess N`, 0.0, false];
  }
  const guess = Number(match[1]);
  if (guess === session.item.target) {
    Object.assign(session, { done: true, success: true });
    return [`Yes, it is ${guess}!`, 1.0, true];
  }
  return [`No, ${guess < session.item.target ? "higher" : "lower"}.`, 0.0, false];
}

function apiError(status, code, message) {
  return { status, body: { error: { code, message } } };
}

function field(body, key) {
  if (typeof body[key] !== "string") {
    throw apiError(422, key in body ? "bad_field" : "missing_field", `field '${key}' must be a string`);
  }
  return body[key];
}

function session(sid) {
  const found = sessions.get(sid);
  if (found === undefined) {
    if (BROKEN) throw { status: 200, body: { error: `no session ${sid}` } };
    throw apiError(404, "unknown_session", `no session '${sid}' on this server`);
  }
  return found;
}

function route(method, path, body) {
  if (method === "GET" && path === "/healthz") return [200, { status: "ok", family: FAMILY }];
  if (method === "GET" && path === "/v1/info") {
    const splits = {};
    for (const item of items) splits[item.split] = (splits[item.split] || 0) + 1;
    const categories = [...new Set(items.map((item) => item.category))];
    return [200, { family: FAMILY, splits, categories }];
  }
  if (method === "POST" && path === "/v1/sessions") {
    const created = {};
    const observation = reset(created, field(body, "item_id"));
    const sid = crypto.randomBytes(8).toString("hex");
    sessions.set(sid, created);
    return [201, { session_id: sid, observation, info: info(created, false) }];
  }
  const match = /^\/v1\/sessions\/([^/]+)(\/reset|\/step|\/actions)?$/.exec(path);
  if (match === null) throw apiError(404, "not_found", `${method} ${path}: no such route`);
  const [, sid, action] = match;
  if (method === "POST" && action === "/reset") {
    const found = session(sid);
    const observation = reset(found, field(body, "item_id"));
    return [200, { session_id: sid, observation, info: info(found, false) }];
  }
  if (method === "POST" && action === "/step") {
    const found = session(sid);
    const [observation, reward, terminated] = step(found, field(body, "action"));
    if (BROKEN) return [200, { observation, reward, done: terminated, info: info(found, found.success) }];
    return [200, { observation, reward, terminated, truncated: false, info: info(found, found.success) }];
  }
  if (method === "GET" && action === "/actions") {
    session(sid);
    return [200, { actions: null }];
  }
  if (method === "DELETE" && action === undefined) {
    session(sid);
    sessions.delete(sid);
    return [200, { session_id: sid, closed: true }];
  }
  throw apiError(405, "method_not_allowed", `${method} ${path}: method not allowed`);
}

const server = http.createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => {
    let status = 200;
    let answer;
    try {
      const text = Buffer.concat(chunks).toString("utf8");
      let body = {};
      if (request.method === "POST") {
        try {
          body = JSON.parse(text);
        } catch (exc) {
          throw apiError(400, "bad_json", `request body is not valid JSON: ${exc.message}`);
        }
        if (body === null || typeof body !== "object" || Array.isArray(body)) {
          throw apiError(400, "bad_json", "request body must be a JSON object");
        }
      }
      [status, answer] = route(request.method, new URL(request.url, "http://x").pathname, body);
    } catch (exc) {
      const known = exc.status !== undefined; // an apiError; anything else is the env's own failure
      [status, answer] = known ? [exc.status, exc.body] : [500, apiError(500, "env_failed", String(exc)).body];
    }
    response.writeHead(status, { "Content-Type": "application/json" });
    response.end(JSON.stringify(answer));
  });
});

server.listen(Number(process.argv[3] || 0), "127.0.0.1", () => {
  console.log(`ready on http://127.0.0.1:${server.address().port}`);
});
