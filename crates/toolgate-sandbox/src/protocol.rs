//! The worker protocol: one JSON object per line. The worker starts its runtime and writes
//! [`ToGateway::Ready`]; the gateway writes a [`Run`] (it may do so before `Ready` arrives)
//! and then [`ToGateway::Call`] answers ([`CallAnswer`]); the worker writes calls, logs, and
//! one [`ToGateway::Done`] before it exits.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Limits the worker applies to itself (the gateway enforces the deadline and call count
/// again from outside, since a worker's own checks are only the first defence).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Limits {
    /// Wall-clock time for the program, in milliseconds (the interrupt handler's deadline).
    pub timeout_ms: u64,
    /// QuickJS heap limit in bytes.
    pub heap_bytes: usize,
    /// QuickJS stack limit in bytes (deep recursion throws a RangeError past it).
    pub stack_bytes: usize,
    /// Tool calls the program may start.
    pub max_calls: u32,
    /// Bytes of console output kept; the rest is counted and dropped.
    pub max_log_bytes: usize,
    /// Bytes of the returned value's JSON sent back; past it the value is cut.
    pub max_result_bytes: usize,
    /// Bytes of one call's arguments as JSON.
    pub max_args_bytes: usize,
    /// RLIMIT_AS for the worker process (the heap limit plus the runtime's own needs).
    pub address_space_bytes: u64,
    /// RLIMIT_CPU for the worker process, in seconds (the kernel kills it past this).
    pub cpu_secs: u64,
}

/// A tool the program may call, with the identifiers it is reached by.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolEntry {
    /// Upstream server name, as `tools.call` takes it.
    pub server: String,
    /// Original tool name, as `tools.call` takes it.
    pub tool: String,
    /// `tools.<server_ident>.<tool_ident>`.
    pub server_ident: String,
    /// `tool_ident` of that path.
    pub tool_ident: String,
}

/// The first and only request of a worker's life.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Run {
    /// The program, already stripped of markdown fences.
    pub code: String,
    /// The `input` global (JSON; `null` when none was given).
    pub input: Value,
    /// The tools it may call.
    pub tools: Vec<ToolEntry>,
    /// The limits it runs under.
    pub limits: Limits,
}

/// A finished (or refused) tool call, gateway to worker.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CallAnswer {
    /// The `id` of the [`ToGateway::Call`] it answers.
    pub id: u64,
    /// The tool's value: its structuredContent, else its JSON text parsed, else its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Why the call failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<CallFailure>,
}

/// Why a call failed; becomes a `ToolError` in the program.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CallFailure {
    /// One of [`ERROR_CODES`].
    pub code: String,
    /// What went wrong, for the program.
    pub message: String,
}

/// The server name of `state.get`/`state.set` requests (tool `get` or `set`, arguments
/// `{key, value?}`): no upstream can have an empty name, and these are not tool calls.
pub const STATE_SERVER: &str = "";

/// The server name of `skills.run(name, input)` requests (tool: the skill's name,
/// arguments: the input). They count and are listed as tool calls; the gateway runs the
/// skill, and no upstream may take this name while skills are configured.
pub const SKILLS_SERVER: &str = "skills";

/// The `code` values a `ToolError` can carry.
pub const ERROR_CODES: [&str; 7] = [
    "invalid_arguments",
    "denied",
    "upstream",
    "timeout",
    "limit",
    "approval_required",
    // A workspace or tool-tree path that is not there.
    "not_found",
];

/// Worker to gateway.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToGateway {
    /// The worker is started and its fresh runtime made; it waits for its one [`Run`]. A
    /// gateway keeping workers warm hands out only those that said so.
    Ready,
    /// The program called a tool.
    Call {
        /// The call's id, unique in the run; its [`CallAnswer`] carries it back.
        id: u64,
        /// The server, as in [`ToolEntry::server`] (or [`STATE_SERVER`], [`SKILLS_SERVER`]).
        server: String,
        /// The tool, as in [`ToolEntry::tool`].
        tool: String,
        /// The arguments the program passed.
        arguments: Value,
    },
    /// One console line (sent at once, so a run killed later still shows it).
    Log {
        /// `log`, `info`, `warn`, `error` or `debug`: the console method.
        level: String,
        /// The line.
        text: String,
    },
    /// The program ended; the worker exits after this.
    Done(Done),
}

/// How a program ended, as the worker saw it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Done {
    /// `ok`, `error` (the program threw or never settled), or `timeout`.
    pub status: String,
    /// The returned value (`null` for none).
    #[serde(default)]
    pub result: Value,
    /// Set when the value (or console output) was cut to fit the limits.
    #[serde(default)]
    pub truncated: bool,
    /// What was thrown, for status `error`/`timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ProgramError>,
    /// Console bytes dropped past `max_log_bytes`.
    #[serde(default)]
    pub dropped_log_bytes: u64,
}

/// What the program threw.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProgramError {
    /// `Error`, `TypeError`, `ToolError`, ...
    pub name: String,
    /// What it says.
    pub message: String,
    /// A ToolError's code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The server of the failed call, for a ToolError.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The tool of the failed call, for a ToolError.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}
