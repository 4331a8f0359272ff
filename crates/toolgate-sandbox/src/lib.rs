//! Code mode's sandbox: the messages a gateway and a sandbox worker exchange, and (with the
//! `worker` feature) the worker itself, which runs one untrusted JavaScript program per
//! process in a fresh QuickJS runtime under OS limits.
//!
//! # Layout
//!
//! - [`protocol`]: the JSON-lines messages on the worker's stdin and stdout.
//! - `worker` (feature `worker`): OS limits, the QuickJS runtime, the `tools` bridge.
//!
//! The worker holds no credentials and reaches nothing but its own stdin and stdout: every
//! tool call is a message to the gateway, which checks and runs it.
#![forbid(unsafe_code)]
// stdout is the MCP stream of `toolgate serve --stdio` (and the sandbox worker's channel to
// the gateway): a library writes nothing there; what the CLI prints is the CLI's to say.
#![warn(clippy::print_stdout)]
// The public API is `protocol` and `worker`; each item of it says what it is.
#![warn(missing_docs)]

pub mod protocol;
#[cfg(feature = "worker")]
pub mod worker;
