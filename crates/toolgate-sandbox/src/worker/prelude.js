// Evaluated in each fresh context before the program. Builds `tools`, `state`, `skills`, `fs`,
// `console`, `ToolError` and the timers around native functions that stay private to this
// closure: `bridge` (start a tool call), `log` (one console line), `arm` (a timer's due
// time, kept by the worker's loop) and `disarm`. Strict mode, so no `caller` walks out.
(function (bridge, log, spec, arm, disarm) {
  "use strict";
  const create = Object.create, define = Object.defineProperty, freeze = Object.freeze;
  const P = Promise;
  class ToolError extends Error {
    constructor(server, tool, code, message) {
      super(message);
      this.name = "ToolError";
      this.server = server;
      this.tool = tool;
      this.code = code;
    }
  }
  const call = (server, tool, args) =>
    new P((resolve, reject) => {
      const refused = bridge(server, tool, args, resolve, reject);
      if (refused) reject(new ToolError(server, tool, refused[0], refused[1]));
    });
  const tools = create(null);
  for (let i = 0; i < spec.length; i++) {
    const [server, tool, serverIdent, toolIdent] = spec[i];
    let ns = tools[serverIdent];
    if (ns === undefined) {
      ns = create(null);
      define(tools, serverIdent, { value: ns, enumerable: true });
    }
    define(ns, toolIdent, {
      value: function (args) { return call(server, tool, args); },
      enumerable: true,
    });
  }
  define(tools, "call", {
    value: function (server, tool, args) { return call(server, tool, args); },
  });
  for (const k of Object.keys(tools)) freeze(tools[k]);
  freeze(tools);
  const state = freeze({
    get: function (key) { return call("", "get", { key }); },
    set: function (key, value) { return call("", "set", { key, value }); },
  });
  // A skill runs in the gateway (its own worker, the caller's authorization); this only asks.
  const skills = freeze({
    run: function (name, input) { return call("skills", name, input); },
  });
  // The workspace (`./workspace/...`) and the tool tree (`./servers/...`) are the gateway's.
  const fsCall = (op, args) => call("", "fs." + op, args);
  const fs = freeze({
    readFile: function (path) { return fsCall("readFile", { path }); },
    writeFile: function (path, data) { return fsCall("writeFile", { path, data }); },
    readdir: function (path) { return fsCall("readdir", { path }); },
    rm: function (path) { return fsCall("rm", { path }); },
  });
  // Timers: the worker's loop keeps the due times and calls `fire(id)`; callbacks stay here.
  const timers = new Map();
  const schedule = (fn, ms, args, repeat) => {
    if (typeof fn !== "function") throw new TypeError("a timer needs a function to call");
    const id = arm(Number(ms) || 0, repeat);
    timers.set(id, [fn, args, repeat]);
    return id;
  };
  const clear = function (id) {
    if (timers.delete(id)) disarm(id);
  };
  const setTimeout = function (fn, ms, ...args) { return schedule(fn, ms, args, false); };
  const setInterval = function (fn, ms, ...args) { return schedule(fn, ms, args, true); };
  const sleep = function (ms) { return new P((resolve) => schedule(resolve, ms, [], false)); };
  const fire = (id) => {
    const t = timers.get(id);
    if (t === undefined) return;
    if (!t[2]) timers.delete(id);
    t[0](...t[1]);
  };
  const line = (level) => function (...args) { log(level, args); };
  const console = freeze({
    log: line("log"), info: line("info"), warn: line("warn"),
    error: line("error"), debug: line("debug"),
  });
  return {
    tools, console, ToolError, state, skills, fs,
    setTimeout, setInterval, clearTimeout: clear, clearInterval: clear, sleep, fire,
    makeError: (server, tool, code, message) => new ToolError(server, tool, code, message),
  };
})
