//! One skill folder read and checked: `SKILL.md` starts with YAML front matter between
//! `---` lines (as Agent Skills write it) and `skill.js` holds the program.
//!
//! ```markdown
//! ---
//! name: weekly-report
//! description: Sum this week's tickets per status and return five lines.
//! servers: [tickets]
//! input_schema:
//!   type: object
//!   properties:
//!     week: {type: string, description: ISO week, e.g. 2026-W48}
//!   required: [week]
//! ---
//! # weekly-report
//! Documentation for the operator and the model.
//! ```
//!
//! Every error names the file and what to fix.

use super::error::{LoadError, Problem, SchemaRefusal};
use super::{
    is_skill_name, name_rule, MAX_DESCRIPTION, MAX_SERVERS, SKILLS_SERVER, SKILL_JS, SKILL_MD,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use toolgate_core::catalog::{ToolId, ToolRecord};

/// The largest SKILL.md read.
pub(crate) const MAX_SKILL_MD_BYTES: u64 = 64 << 10;

/// The front matter of a SKILL.md.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FrontMatter {
    pub name: String,
    pub description: String,
    /// The upstream servers the skill's program calls; it is offered only to callers who
    /// see all of them connected, and its program can call only their tools.
    #[serde(default)]
    pub servers: Vec<String>,
    /// JSON Schema of `input` (an object schema); absent: `{"type": "object"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// Agent Skills' optional fields, accepted and kept out of the way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// A loaded, checked skill.
#[derive(Debug, Clone)]
pub struct Skill {
    /// Its name (the folder's).
    pub name: String,
    /// What it does (the front matter's `description`).
    pub description: String,
    /// The upstreams its program may call.
    pub servers: Vec<String>,
    /// Its input's JSON Schema.
    pub input_schema: Value,
    /// `skill.js`.
    pub code: String,
    /// The markdown after the front matter.
    pub body: String,
    /// Its folder.
    pub dir: PathBuf,
    /// The skill as route sees it: a tool of the server `skills`.
    pub record: Arc<ToolRecord>,
}

/// Reads and checks the skill in `dir`; `max_source` is code mode's program size limit.
pub(crate) fn load(dir: &Path, max_source: usize) -> Result<Skill, LoadError> {
    let folder = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !is_skill_name(&folder) {
        return Err(LoadError::at(dir, Problem::FolderName(name_rule(&folder))));
    }
    let md_path = dir.join(SKILL_MD);
    let md = read_capped(&md_path, MAX_SKILL_MD_BYTES)?;
    let (front, body) =
        split_front_matter(&md).ok_or_else(|| LoadError::at(&md_path, Problem::NoFrontMatter))?;
    let fm: FrontMatter = serde_yaml_ng::from_str(front)
        .map_err(|e| LoadError::at(&md_path, Problem::FrontMatter(e)))?;
    let skill = check(fm, &folder, &md_path)?;
    let js_path = dir.join(SKILL_JS);
    let code = read_capped(&js_path, max_source as u64)?;
    if code.trim().is_empty() {
        return Err(LoadError::at(js_path, Problem::EmptyProgram));
    }
    Ok(Skill {
        code,
        body: body.trim().to_string(),
        dir: dir.to_path_buf(),
        ..skill
    })
}

/// The front matter checked against the folder it is in.
fn check(fm: FrontMatter, folder: &str, file: &Path) -> Result<Skill, LoadError> {
    let at = |problem| LoadError::at(file, problem);
    if fm.name != folder {
        return Err(at(Problem::NameMismatch {
            name: fm.name,
            folder: folder.to_string(),
        }));
    }
    let description = fm.description.trim().to_string();
    if description.is_empty() || description.len() > MAX_DESCRIPTION {
        return Err(at(Problem::Description));
    }
    if fm.servers.len() > MAX_SERVERS {
        return Err(at(Problem::TooManyServers));
    }
    for s in &fm.servers {
        if !toolgate_core::ids::is_simple_name(s) || s == SKILLS_SERVER {
            return Err(at(Problem::Server(s.clone())));
        }
    }
    let input_schema = fm.input_schema.unwrap_or_else(|| json!({"type": "object"}));
    check_schema(&input_schema).map_err(|e| at(Problem::InputSchema(e)))?;
    let mut servers = fm.servers;
    servers.sort();
    servers.dedup();
    Ok(Skill {
        record: Arc::new(record(&fm.name, &description, &input_schema)),
        name: fm.name,
        description,
        servers,
        input_schema,
        code: String::new(),
        body: String::new(),
        dir: PathBuf::new(),
    })
}

/// An input schema must describe an object (execute passes arguments, programs an object)
/// and compile.
pub(crate) fn check_schema(schema: &Value) -> Result<(), SchemaRefusal> {
    let Value::Object(o) = schema else {
        return Err(SchemaRefusal::NotAnObject);
    };
    match o.get("type") {
        None => {}
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => return Err(SchemaRefusal::NotObjectType(other.clone())),
    }
    toolgate_core::exec::compile_schema(schema)?;
    Ok(())
}

/// The skill as a tool record of the server `skills`, so route indexes and ranks it like
/// any tool (name, description, parameters).
pub(crate) fn record(name: &str, description: &str, input_schema: &Value) -> ToolRecord {
    let mut tool = Map::new();
    tool.insert("name".into(), json!(name));
    tool.insert("description".into(), json!(description));
    tool.insert("inputSchema".into(), input_schema.clone());
    tool.insert(
        "annotations".into(),
        json!({"title": format!("skill {name}"), "openWorldHint": true}),
    );
    ToolRecord {
        id: ToolId::new(SKILLS_SERVER, name),
        exposed: format!("{SKILLS_SERVER}_{}", name.replace('.', "_")),
        tool,
    }
}

/// `(front matter, body)` of a file that starts with a `---` line; `None` when it does not.
pub(crate) fn split_front_matter(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..at], &rest[at + line.len()..]));
        }
        at += line.len();
    }
    None
}

fn read_capped(path: &Path, max: u64) -> Result<String, LoadError> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => LoadError::at(path, Problem::Missing),
        _ => LoadError::at(path, Problem::Read(e)),
    })?;
    if meta.len() > max {
        return Err(LoadError::at(
            path,
            Problem::TooLarge {
                bytes: meta.len(),
                limit: max,
            },
        ));
    }
    std::fs::read_to_string(path).map_err(|e| LoadError::at(path, Problem::Read(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str, md: &str, js: &str) -> (super::super::TempDir, PathBuf) {
        let d = super::super::TempDir::new();
        let dir = d.0.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(SKILL_MD), md).unwrap();
        if !js.is_empty() {
            std::fs::write(dir.join(SKILL_JS), js).unwrap();
        }
        (d, dir)
    }

    #[test]
    fn a_good_skill_loads() {
        let md = "---\nname: sum\ndescription: Add two numbers twice.\nservers: [alpha]\ninput_schema:\n  type: object\n  properties:\n    a: {type: integer}\n  required: [a]\n---\n# sum\nDocs.\n";
        let (_d, dir) = folder("sum", md, "return input.a * 2");
        let s = load(&dir, 1000).unwrap();
        assert_eq!(s.name, "sum");
        assert_eq!(s.servers, vec!["alpha"]);
        assert_eq!(s.input_schema["required"], json!(["a"]));
        assert_eq!(s.body, "# sum\nDocs.");
        assert_eq!(s.record.id.to_string(), "skills/sum");
        assert_eq!(s.record.description(), "Add two numbers twice.");
    }

    #[test]
    fn bad_skills_say_which_file_and_what_to_fix() {
        let ok_js = "return 1";
        for (name, md, js, expect) in [
            ("a", "no front matter", ok_js, "no front matter"),
            ("a", "---\nname: b\ndescription: x\n---\n", ok_js, "the folder is \"a\""),
            ("a", "---\nname: a\n---\n", ok_js, "description"),
            ("a", "---\nname: a\ndescription: x\nserver: [s]\n---\n", ok_js, "unknown field `server`"),
            ("a", "---\nname: a\ndescription: x\ninput_schema: {type: string}\n---\n", ok_js, "input_schema"),
            ("a", "---\nname: a\ndescription: x\ninput_schema: {type: object, properties: {x: {type: 5}}}\n---\n", ok_js, "does not compile"),
            ("a", "---\nname: a\ndescription: x\nservers: [\"../x\"]\n---\n", ok_js, "servers"),
            ("a", "---\nname: a\ndescription: x\n---\n", "", "skill.js: missing"),
            ("a", "---\nname: a\ndescription: x\n---\n", "   ", "empty"),
            (".hidden", "---\nname: .hidden\ndescription: x\n---\n", ok_js, "not a skill name"),
        ] {
            let (_d, dir) = folder(name, md, js);
            let e = load(&dir, 1000).unwrap_err().to_string();
            assert!(e.contains(expect), "{md:?}: {e}");
            assert!(e.contains(&dir.display().to_string()), "names the file: {e}");
        }
        let (_d, dir) = folder(
            "a",
            "---\nname: a\ndescription: x\n---\n",
            &"x".repeat(2000),
        );
        assert!(load(&dir, 1000)
            .unwrap_err()
            .to_string()
            .contains("limit is 1000"));
    }

    #[test]
    fn front_matter_is_between_the_first_two_rules() {
        assert_eq!(
            split_front_matter("---\na: 1\n---\nbody\n---\n"),
            Some(("a: 1\n", "body\n---\n"))
        );
        assert_eq!(
            split_front_matter("---\r\na: 1\r\n---\r\nb"),
            Some(("a: 1\r\n", "b"))
        );
        assert_eq!(split_front_matter("a: 1\n---\n"), None);
        assert_eq!(split_front_matter("---\na: 1\n"), None);
    }
}
