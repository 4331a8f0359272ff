//! `toolgate conformance-client URL` (hidden): toolgate's upstream client as the MCP
//! conformance suite's client under test. The runner appends its test server's URL and
//! names the scenario in `MCP_CONFORMANCE_SCENARIO`.

use anyhow::{bail, Result};
use clap::Args;
use serde_json::{json, Map, Value};
use std::path::Path;
use std::time::Duration;
use toolgate::Config;
use toolgate::Gateway;
use toolgate::UpstreamStatus;
use toolgate_core::call::CallOptions;

#[derive(Args, Debug)]
pub(crate) struct ConformanceClientArgs {
    /// The upstream's `protocol` setting: `auto`, `2026-07-28` or `2025-11-25`.
    #[arg(long, default_value = "auto")]
    pub protocol: String,
    /// The test server's Streamable HTTP URL.
    pub url: String,
}

/// Connects through the gateway's own upstream module (the handshake `--protocol` says,
/// tools/list), then does
/// what the scenario asks: `tools_call` calls `add_numbers`.
pub(crate) async fn run(args: ConformanceClientArgs) -> Result<bool> {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let toml = format!(
        "[upstreams.test]\nurl = {}\nprefix = \"\"\nprotocol = {}\n",
        Value::String(args.url.clone()),
        Value::String(args.protocol.clone())
    );
    let gw = Gateway::start(Config::from_toml_str(
        &toml,
        Path::new("conformance-client"),
    )?);
    gw.wait_settled(Duration::from_secs(20)).await;
    let up = gw.upstream("test").expect("configured above");
    let outcome = match up.status() {
        UpstreamStatus::Ready { .. } => Ok(()),
        other => Err(format!("{other:?}")),
    };
    let result = match (outcome, scenario.as_str()) {
        (Err(e), _) => Err(anyhow::anyhow!("connecting to {} failed: {e}", args.url)),
        (Ok(()), "tools_call") => {
            let mut arguments = Map::new();
            arguments.insert("a".into(), json!(5));
            arguments.insert("b".into(), json!(3));
            match up
                .call("add_numbers", arguments, CallOptions::default())
                .await
            {
                Ok(o) => {
                    println!("{}", Value::Array(o.content));
                    Ok(())
                }
                Err(e) => Err(anyhow::anyhow!("add_numbers failed: {e}")),
            }
        }
        (Ok(()), _) => Ok(()),
    };
    gw.shutdown().await;
    match result {
        Ok(()) => Ok(true),
        Err(e) => bail!(e),
    }
}
