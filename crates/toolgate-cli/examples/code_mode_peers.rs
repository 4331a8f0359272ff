//! Code mode with real MCP servers: a program reads a file with the filesystem server,
//! stores facts about it with the memory server, and returns a one-line summary; the
//! file's text never reaches the client.
//!
//! Install the servers (the versions `.ci/run` pins), build toolgate, then:
//!
//!     npm install --prefix PEERS @modelcontextprotocol/server-filesystem@2026.8.31 \
//!         @modelcontextprotocol/server-memory@2026.8.31
//!     cargo build -p toolgate-cli && cargo run -p toolgate-cli --example code_mode_peers -- PEERS

use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::path::PathBuf;

const PROGRAM: &str = r#"
const file = await tools.files.read_text_file({path: input.path});
const lines = file.content.split("\n").filter(l => l.trim() !== "");
const words = file.content.split(/\s+/).filter(Boolean).length;
await tools.memory.create_entities({entities: [{
  name: "notes.txt", entityType: "file",
  observations: [`title: ${lines[0]}`, `${lines.length} lines`, `${words} words`],
}]});
return `${lines[0]}: ${lines.length} lines, ${words} words; facts stored in memory`;
"#;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let peers = PathBuf::from(std::env::args().nth(1).ok_or_else(|| {
        anyhow::anyhow!("usage: code_mode_peers PEERS (the npm prefix holding the servers)")
    })?);
    let modules = peers.join("node_modules/@modelcontextprotocol");
    // target/debug/examples/<this> -> target/debug/toolgate
    let toolgate = std::env::current_exe()?
        .parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("toolgate"))
        .filter(|p| p.exists())
        .ok_or_else(|| anyhow::anyhow!("build toolgate first: cargo build -p toolgate-cli"))?;
    let dir = std::env::temp_dir().join(format!("toolgate-code-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let dir = dir.canonicalize()?;
    let mut text = String::from("Quarterly notes\n");
    for i in 0..300 {
        text.push_str(&format!(
            "Line {i}: CONFIDENTIAL-BODY details that the model never needs to read.\n"
        ));
    }
    std::fs::write(dir.join("notes.txt"), &text)?;
    let config = format!(
        "[gateway]\nmode = \"guided\"\n[code]\nenabled = true\n\
         [upstreams.files]\ncommand = \"node\"\nargs = [{:?}, {:?}]\n\
         [upstreams.memory]\ncommand = \"node\"\nargs = [{:?}]\nenv = {{ MEMORY_FILE_PATH = {:?} }}\n",
        modules.join("server-filesystem/dist/index.js").display().to_string(),
        dir.display().to_string(),
        modules.join("server-memory/dist/index.js").display().to_string(),
        dir.join("memory.json").display().to_string(),
    );
    std::fs::write(dir.join("toolgate.toml"), config)?;

    let mut cmd = tokio::process::Command::new(&toolgate);
    cmd.args(["serve", "--stdio", "--config"])
        .arg(dir.join("toolgate.toml"));
    let client = ().serve(TokioChildProcess::new(cmd)?).await?;
    let call = |name: &str, args: Value| {
        CallToolRequestParams::new(name.to_string())
            .with_arguments(args.as_object().cloned().unwrap_or_default())
    };

    let described = client
        .call_tool(call(
            "describe_tools",
            json!({"tools": ["files/read_text_file", "memory/create_entities"]}),
        ))
        .await?;
    println!("--- describe_tools\n{}", texts(&described));

    let path = dir.join("notes.txt").display().to_string();
    let ran = client
        .call_tool(call(
            "execute_code",
            json!({"code": PROGRAM, "input": {"path": path}}),
        ))
        .await?;
    let received = serde_json::to_string(&ran)?;
    println!(
        "--- execute_code ({} bytes received)\n{}",
        received.len(),
        texts(&ran)
    );
    client.cancel().await?;

    let memory = std::fs::read_to_string(dir.join("memory.json")).unwrap_or_default();
    std::fs::remove_dir_all(&dir)?;
    anyhow::ensure!(
        ran.structured_content
            .as_ref()
            .and_then(|s| s["status"].as_str())
            == Some("ok"),
        "the run did not succeed"
    );
    anyhow::ensure!(
        !received.contains("CONFIDENTIAL-BODY"),
        "the file's text reached the client"
    );
    anyhow::ensure!(
        memory.contains("301 lines"),
        "the facts were not stored: {memory}"
    );
    println!(
        "--- ok: {} bytes of file, {} bytes to the client; memory holds the facts",
        text.len(),
        received.len()
    );
    Ok(())
}

fn texts(r: &rmcp::model::CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}
