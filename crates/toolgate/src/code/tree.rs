//! The tool tree a program can explore: `fs.readdir("./servers")` lists the servers,
//! `fs.readdir("./servers/<server>")` their tools as `<tool>.d.ts` files, and
//! `fs.readFile("./servers/<server>/<tool>.d.ts")` is that tool's TypeScript declaration,
//! as `describe_tools` writes it. Built from the run's own tools (what the caller's key may
//! call) narrowed to what the caller's profile shows: what the profile hides is not there.

use super::typescript;
use super::workspace::{fail, paths::Checked};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use toolgate_core::catalog::ToolRecord;
use toolgate_sandbox::protocol::{CallFailure, ToolEntry};

/// The extension of a tool's file.
pub(crate) const EXT: &str = ".d.ts";

/// server -> tool name -> (entry, record), in name order.
#[derive(Default)]
pub(crate) struct ToolTree {
    servers: BTreeMap<String, BTreeMap<String, (ToolEntry, Arc<ToolRecord>)>>,
}

impl ToolTree {
    /// The tree of `tools` (each with its run entry) that `shows` lets through.
    pub(crate) fn new<'a>(
        tools: impl IntoIterator<Item = (&'a ToolEntry, &'a Arc<ToolRecord>)>,
        shows: impl Fn(&ToolRecord) -> bool,
    ) -> Self {
        let mut tree = Self::default();
        for (entry, record) in tools {
            if shows(record) {
                tree.servers
                    .entry(entry.server.clone())
                    .or_default()
                    .insert(entry.tool.clone(), (entry.clone(), record.clone()));
            }
        }
        tree
    }

    /// Answers `fs.readdir` or `fs.readFile` on a `./servers` path; the tree is read-only.
    pub(crate) fn request(&self, op: &str, path: &Checked) -> Result<Value, CallFailure> {
        let shown = format!("./servers/{}", path.rel());
        let missing = || {
            fail(
                "not_found",
                format!("there is no {shown} (fs.readdir(\"./servers\") lists the servers this caller may use)"),
            )
        };
        match (op, path.parts.as_slice()) {
            ("readdir", []) => Ok(json!(self.servers.keys().collect::<Vec<_>>())),
            ("readdir", [server]) => {
                let tools = self.servers.get(server).ok_or_else(missing)?;
                Ok(json!(tools
                    .keys()
                    .map(|t| format!("{t}{EXT}"))
                    .collect::<Vec<_>>()))
            }
            ("readFile", [server, file]) => {
                let (entry, record) = file
                    .strip_suffix(EXT)
                    .and_then(|t| self.servers.get(server)?.get(t))
                    .ok_or_else(missing)?;
                Ok(Value::String(typescript::declare(&[(
                    entry.clone(),
                    record.as_ref(),
                )])))
            }
            ("readFile", _) => Err(fail(
                "invalid_arguments",
                format!(
                    "{shown} is a folder: fs.readdir it, then read ./servers/<server>/<tool>.d.ts"
                ),
            )),
            ("readdir", _) => Err(missing()),
            ("writeFile" | "rm", _) => Err(fail(
                "denied",
                "./servers is read-only: it describes the tools; write to ./workspace instead",
            )),
            _ => Err(fail("invalid_arguments", format!("there is no fs.{op}"))),
        }
    }
}
