//! Every ```toml block of README.md and docs/**/*.md is a configuration that works:
//! `toolgate check --config-only` accepts it, with the environment variables it names set
//! (`${VAR}`) and the files it names made (`guided.route_examples`, `*_dir` folders), in a
//! folder of its own. A block that is deliberately partial says so on the line before its
//! fence: `<!-- check: skip (why) -->`; a block of Codex's `[mcp_servers]` is another
//! program's file and is skipped as such. A failure names the file and line, and says why.

mod common;

use common::toolgate;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One fenced TOML block of a Markdown file.
#[derive(Debug)]
struct Block {
    /// The file, relative to the repository.
    file: String,
    /// The line of the opening fence, 1-based.
    line: usize,
    text: String,
    /// `Some(reason)` when marked `<!-- check: skip (reason) -->`.
    skip: Option<String>,
}

/// The marker that exempts the next block, with its reason.
const SKIP: &str = "<!-- check: skip";

/// The ```toml blocks of `markdown`, each with its line and skip marker; a marker without
/// a reason, or a block never closed, is an error naming the line.
fn blocks(file: &str, markdown: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let fence = lines[i].trim_start();
        let info = fence.strip_prefix("```").map(str::trim);
        if info.is_none_or(|info| !info.eq_ignore_ascii_case("toml")) {
            // Another language's block: step over it whole, so its body is never read as Markdown.
            if info.is_some() {
                i += 1;
                while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                    i += 1;
                }
            }
            i += 1;
            continue;
        }
        let start = i;
        let marker = lines[..start]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim())
            .filter(|l| l.starts_with(SKIP));
        let skip = match marker {
            None => None,
            Some(m) => {
                let reason = m
                    .trim_start_matches(SKIP)
                    .trim_end_matches("-->")
                    .trim()
                    .trim_start_matches('(')
                    .trim_end_matches(')')
                    .trim();
                if reason.is_empty() {
                    return Err(format!(
                        "{file}:{}: `{SKIP} -->` without a reason: write `{SKIP} (why this block is partial) -->`",
                        start
                    ));
                }
                Some(reason.to_string())
            }
        };
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            body.push(lines[i]);
            i += 1;
        }
        if i == lines.len() {
            return Err(format!(
                "{file}:{}: a ```toml block that never closes",
                start + 1
            ));
        }
        out.push(Block {
            file: file.to_string(),
            line: start + 1,
            text: body.join("\n") + "\n",
            skip,
        });
        i += 1;
    }
    Ok(out)
}

/// `${NAME}` references of `text` (not `$${` escapes).
fn variables(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(pos) = rest.find("${") {
        let escaped = rest[..pos].ends_with('$');
        let after = &rest[pos + 2..];
        let Some(end) = after.find('}') else { break };
        let name = &after[..end];
        if !escaped
            && !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            out.push(name.to_string());
        }
        rest = &after[end + 1..];
    }
    out.sort();
    out.dedup();
    out
}

/// A value a variable of this name plausibly holds: an address for `*URL`/`*ENDPOINT`, a
/// number for `*PORT`, else 64 hex digits (a token, a key, a secret of any length asked).
fn value_for(name: &str) -> String {
    let upper = name.to_ascii_uppercase();
    if upper.ends_with("URL") || upper.ends_with("ENDPOINT") || upper.ends_with("HOST") {
        "http://127.0.0.1:9".into()
    } else if upper.ends_with("PORT") {
        "9".into()
    } else {
        "0123456789abcdef".repeat(4)
    }
}

/// Makes the files and folders `config` names, relative to `dir` as toolgate reads them.
fn provide_files(config: &toml::Table, dir: &Path) {
    fn walk(value: &toml::Value, key: &str, dir: &Path) {
        match value {
            toml::Value::Table(t) => t.iter().for_each(|(k, v)| walk(v, k, dir)),
            toml::Value::String(s) if key == "route_examples" => {
                let path = dir.join(s);
                if let Some(parent) = path.parent() {
                    let _ = std::fs::create_dir_all(parent);
                }
                let line = r#"{"query": "an example task", "expected": ["demo/example"]}"#;
                std::fs::write(&path, format!("{line}\n")).unwrap();
            }
            toml::Value::String(s) if key.ends_with("_dir") => {
                let _ = std::fs::create_dir_all(dir.join(s));
            }
            _ => {}
        }
    }
    walk(&toml::Value::Table(config.clone()), "", dir);
}

/// Runs `toolgate check --config-only` on one block; `Err` says why it failed.
fn check(block: &Block) -> Result<(), String> {
    let dir = tempfile::Builder::new()
        .prefix("toolgate-docs-")
        .tempdir()
        .unwrap();
    let config = dir.path().join("toolgate.toml");
    std::fs::write(&config, &block.text).unwrap();
    if let Ok(table) = block.text.parse::<toml::Table>() {
        provide_files(&table, dir.path());
    }
    let mut cmd = Command::new(toolgate());
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .current_dir(dir.path())
        .args(["check", "--config-only", "--config"])
        .arg(&config);
    let vars = variables(&block.text);
    for v in &vars {
        cmd.env(v, value_for(v));
    }
    let out = cmd.output().unwrap();
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr).replace(&dir.path().display().to_string(), ".");
    Err(format!(
        "{}:{}: `toolgate check --config-only` refused this block ({}; variables set: {}):\n  {}\n  The block:\n{}  Fix the example, or mark a deliberately partial one with `{SKIP} (why) -->` on the line before its fence.",
        block.file,
        block.line,
        out.status,
        if vars.is_empty() { "none".into() } else { vars.join(", ") },
        said.trim().replace('\n', "\n  "),
        block.text.lines().map(|l| format!("    | {l}\n")).collect::<String>(),
    ))
}

/// README.md and every Markdown file under docs/, relative to the repository.
fn markdown_files(repo: &Path) -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("README.md")];
    let mut stack = vec![repo.join("docs")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p.strip_prefix(repo).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_toml_block_of_the_readme_and_docs_passes_check() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut failures = Vec::new();
    let (mut checked, mut skipped) = (0, Vec::new());
    for file in markdown_files(&repo) {
        let name = file.display().to_string();
        let text = std::fs::read_to_string(repo.join(&file)).unwrap();
        let found = match blocks(&name, &text) {
            Ok(b) => b,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        for mut block in found {
            // Codex's own config.toml (the README's client snippet), not toolgate's.
            let codex =
                (block.text.parse::<toml::Table>()).is_ok_and(|t| t.contains_key("mcp_servers"));
            if codex && block.skip.is_none() {
                block.skip = Some("Codex's config.toml ([mcp_servers]), not toolgate's".into());
            }
            if let Some(reason) = &block.skip {
                skipped.push(format!("{}:{} ({reason})", block.file, block.line));
                continue;
            }
            checked += 1;
            if let Err(e) = check(&block) {
                failures.push(e);
            }
        }
    }
    eprintln!(
        "{checked} TOML blocks checked; {} skipped: {skipped:?}",
        skipped.len()
    );
    assert!(checked > 0, "no ```toml block found in README.md or docs/");
    assert!(
        failures.is_empty(),
        "{} of {checked} TOML blocks do not pass check:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// The checker can fail: a block with a mistake is refused with its file and line, a
/// skip needs a reason, and variables and named files are provided.
#[test]
fn the_checker_reports_a_broken_block_by_file_and_line() {
    let md = "# T\n\n```toml\n[gateway]\nlisten = 127.0.0.1:8377\n```\n\n<!-- check: skip (a fragment) -->\n```toml\nrename = {}\n```\n\n```toml\n[guided]\nroute_examples = \"ex/route.jsonl\"\n[upstreams.a]\ncommand = \"x\"\nenv = { TOKEN = \"${SOME_TOKEN}\" }\n[upstreams.b]\nurl = \"${B_URL}/mcp\"\n```\n";
    let found = blocks("docs/x.md", md).unwrap();
    assert_eq!(found.len(), 3);
    assert_eq!((found[0].line, found[1].line, found[2].line), (3, 9, 13));
    assert_eq!(found[1].skip.as_deref(), Some("a fragment"));
    let e = check(&found[0]).unwrap_err();
    assert!(e.starts_with("docs/x.md:3:") && e.contains("listen"), "{e}");
    check(&found[2]).unwrap_or_else(|e| panic!("variables and files are provided: {e}"));
    let e = blocks("docs/y.md", "<!-- check: skip -->\n```toml\na = 1\n```\n").unwrap_err();
    assert!(
        e.contains("docs/y.md:1") && e.contains("without a reason"),
        "{e}"
    );
    let e = blocks("docs/z.md", "```toml\na = 1\n").unwrap_err();
    assert!(e.contains("never closes"), "{e}");
}
