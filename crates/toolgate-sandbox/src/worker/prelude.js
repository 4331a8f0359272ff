// Evaluated in each fresh context before the program. Builds `tools`, `state`, `skills`, `console` and
// `ToolError` around two native functions that stay private to this closure: `bridge`
// (start a tool call) and `log` (one console line). Strict mode, so no `caller` walks out.
(function (bridge, log, spec) {
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
  const line = (level) => function (...args) { log(level, args); };
  const console = freeze({
    log: line("log"), info: line("info"), warn: line("warn"),
    error: line("error"), debug: line("debug"),
  });
  return {
    tools, console, ToolError, state, skills,
    makeError: (server, tool, code, message) => new ToolError(server, tool, code, message),
  };
})
