//! Skills test helpers: the `greet` skill, writing skill folders, and a code-mode gateway
//! with a skills folder.

use super::code::setup_with;
use super::TestDir;
use std::path::PathBuf;

pub const GREET_MD: &str = "---
name: greet
description: Greet a person by name through the alpha echo service.
servers: [alpha]
input_schema:
  type: object
  properties:
    who: {type: string, description: The person's name}
  required: [who]
---
# greet
Says hello.
";
pub const GREET_JS: &str = "const r = await tools.alpha.echo({message: 'hi ' + input.who});
return {said: r.arguments.message};";

/// Writes `skills/<name>/SKILL.md` and `skill.js`.
pub fn write_skill(dir: &TestDir, name: &str, md: &str, js: &str) -> PathBuf {
    let folder = dir.path("skills").join(name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("SKILL.md"), md).unwrap();
    std::fs::write(folder.join("skill.js"), js).unwrap();
    folder
}

/// Code mode with skills on, `greet` installed; `extra` goes under `[code]`, `more` after.
pub fn skills_setup(extra: &str, more: &str) -> (TestDir, PathBuf) {
    // A generous deadline: a skill run from a program starts a second worker.
    let (dir, _) = setup_with(10_000, &format!("skills_dir = \"skills\"\n{extra}"));
    write_skill(&dir, "greet", GREET_MD, GREET_JS);
    let path = dir.path("toolgate.toml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(more);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}
