//! The guided surface: the three meta-tool definitions and the standing instruction.
//! Nothing here depends on the catalog, so the surface costs the same whatever it holds.
//! Each schema is the hand-written, short form of its tool's typed arguments
//! (`toolgate_core::meta::args`, which the handlers parse with); a test keeps the two in step.

use serde_json::{json, Value};

/// The standing rule sent as the initialize result's `instructions`.
pub const INSTRUCTIONS: &str = "Tools are reached through a gateway. For a new task, call \
route with the task in a few words; then run the nextCall it returns with execute. If route \
asks a question, pick a candidate (or ask the user) and run that candidate's nextCall. When a \
result carries nextCursor or operationId, call continue with it to get the rest.";

/// Meta-tool names without a prefix.
pub(crate) const ROUTE: &str = "route";
pub(crate) const EXECUTE: &str = "execute";
pub(crate) const CONTINUE: &str = "continue";
pub(crate) const EXECUTE_CODE: &str = "execute_code";
pub(crate) const DESCRIBE_TOOLS: &str = "describe_tools";
pub(crate) const PROPOSE_SKILL: &str = "propose_skill";

/// The tool `_meta` key asking Claude Code to list a tool in the model's first request
/// (its schema and description) instead of deferring it behind its own tool search, which
/// it does by default for every MCP tool: a model that sees only a deferred `route` has to
/// search before it can follow the guided surface.
pub(crate) const ALWAYS_LOAD: &str = "anthropic/alwaysLoad";

/// Added to the standing rule when code mode is on.
pub const CODE_INSTRUCTIONS: &str = " When a task chains several tools or handles large data, \
describe_tools the tools route found and run a JavaScript program with execute_code: each tool \
is `await tools.<server>.<tool>(args)`; only what the program returns or logs comes back.";

/// Added to the standing rule when skills are configured.
pub(crate) const SKILL_INSTRUCTIONS: &str = " Route also finds skills (reviewed programs, server \
`skills`): run one with execute, or from a program with `await skills.run(name, input)`. When \
a program worked and would help again, propose_skill saves it as a draft for an operator to review.";

/// The standing rule a guided session gets: with code mode's sentence when `code` is on,
/// and skills' when they are configured too.
pub(crate) fn instructions(code: bool, skills: bool) -> String {
    let mut text = INSTRUCTIONS.to_string();
    if code {
        text.push_str(CODE_INSTRUCTIONS);
        if skills {
            text.push_str(SKILL_INSTRUCTIONS);
        }
    }
    text
}

/// The meta-tools a guided session lists (before pinned and expanded tools): the three,
/// code mode's two when `code` is on, and `propose_skill` when skills are configured too.
/// The front lists exactly these, and `toolgate tokens` counts exactly these.
pub(crate) fn session_tools(prefix: &str, code: bool, skills: bool) -> Vec<Value> {
    let mut tools = meta_tools(prefix);
    if code {
        tools.extend(code_tools(prefix));
        if skills {
            tools.extend(skill_tools(prefix));
        }
    }
    tools
}

/// The `propose_skill` meta-tool (listed when code mode and skills are on).
pub(crate) fn skill_tools(prefix: &str) -> Vec<Value> {
    vec![json!({
        "name": format!("{prefix}{PROPOSE_SKILL}"),
        "description": "Propose a finished execute_code run (its runId) as a reusable skill. It is saved as a draft and cannot be used until an operator approves it. The program reads its parameters from `input`.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "runId": {"type": "string", "description": "From a successful execute_code answer in this session"},
                "name": {"type": "string", "pattern": "^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,47}$", "description": "Short name, e.g. weekly-report"},
                "description": {"type": "string", "maxLength": 1024, "description": "What the skill does and when to use it"},
                "input_schema": {"type": "object", "description": "JSON Schema of the program's input (an object); default any object"},
                "servers": {"type": "array", "items": {"type": "string"}, "description": "Servers it calls (default: those the run called)"}
            },
            "required": ["runId", "name", "description"]
        },
        "annotations": {"readOnlyHint": false, "destructiveHint": false, "openWorldHint": false}
    })]
}

/// Code mode's two meta-tools, each name with `prefix` prepended.
pub fn code_tools(prefix: &str) -> Vec<Value> {
    vec![
        json!({
            "name": format!("{prefix}{EXECUTE_CODE}"),
            "description": "Run a JavaScript program in a sandbox. Each tool is an async function: `await tools.<server>.<tool>(args)` or `await tools.call(\"server\", \"tool\", args)`; it returns the tool's structured result (else its JSON, else its text) and throws ToolError {code, message} on failure. Top-level await and return work; `input` holds the input argument; console.log lines come back. `await sleep(ms)` and setTimeout work. `fs.readFile/writeFile/readdir/rm` keep text files in ./workspace/ between runs; ./servers/<server>/<tool>.d.ts describe the tools. `await state.get(key)`/`state.set(key, value)` keep small JSON values in this session. Only the returned value and logs reach you, not the intermediate data. No network or modules.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "The program: a body that may await and return, or an async function of input"},
                    "input": {"description": "Any JSON value, available as `input`"},
                    "timeout_ms": {"type": "integer", "minimum": 50, "description": "Lower the run's time limit"},
                    "max_tool_calls": {"type": "integer", "minimum": 0, "description": "Lower the run's tool call limit"}
                },
                "required": ["code"]
            },
            "annotations": {"openWorldHint": true}
        }),
        json!({
            "name": format!("{prefix}{DESCRIBE_TOOLS}"),
            "description": "Tools for an execute_code program: TypeScript of named tools, a server's tools, or a search; no arguments: the servers.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "tools": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 20, "description": "Tool names, server/tool as route returns them"},
                    "server": {"type": "string"},
                    "search": {"type": "string", "description": "What the tools do, in a few words"},
                    "detail": {"type": "string", "enum": ["names", "summary", "typescript"]},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100}
                }
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }),
    ]
}

/// The three meta-tool definitions as MCP Tool objects, each name with `prefix` prepended
/// (e.g. `tg_`; empty for none).
pub fn meta_tools(prefix: &str) -> Vec<Value> {
    vec![
        json!({
            "name": format!("{prefix}{ROUTE}"),
            "description": "Find the one tool for a task: returns it with its input schema and a nextCall for execute, or a question whose candidates each carry a selectionId and nextCall. An exact tool name always wins. detail \"names\" lists matches; server alone lists that server's tools.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "task": {"type": "string", "description": "What to do, in a few words, or an exact tool name"},
                    "server": {"type": "string", "description": "Only this server's tools; alone, list them"},
                    "detail": {"type": "string", "enum": ["names", "summary", "signature", "full", "typescript"], "description": "names: list matches, select nothing; else how much schema to return (default signature; typescript for execute_code)"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Most candidates (default 5) or listed tools (default 10)"},
                    "cursor": {"type": "string", "description": "From a server listing's nextCall"}
                }
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false},
            "_meta": {ALWAYS_LOAD: true}
        }),
        json!({
            "name": format!("{prefix}{EXECUTE}"),
            "description": "Run a tool chosen by route (selectionId) or named exactly (tool). Arguments are checked against the tool's full schema; errors say how to fix them. Large results are paged (nextCursor); slow ones return an operationId.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "selectionId": {"type": "string", "description": "From route"},
                    "tool": {"type": "string", "description": "An exact tool name, instead of selectionId"},
                    "arguments": {"type": "object", "description": "The tool's arguments"},
                    "fields": {"type": "array", "items": {"type": "string"}, "description": "Keep only these parts of the result (JSON pointers or dotted paths)"},
                    "max_tokens": {"type": "integer", "minimum": 1, "description": "Lower the result budget for this call"}
                }
            },
            "_meta": {ALWAYS_LOAD: true}
        }),
        json!({
            "name": format!("{prefix}{CONTINUE}"),
            "description": "Get the next page of a result (cursor), or the status or result of a running operation (operationId; cancel: true stops it).",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "cursor": {"type": "string"},
                    "operationId": {"type": "string"},
                    "cancel": {"type": "boolean"}
                }
            },
            "annotations": {"openWorldHint": false},
            "_meta": {ALWAYS_LOAD: true}
        }),
    ]
}

#[cfg(test)]
#[path = "surface_tests.rs"]
mod tests;
