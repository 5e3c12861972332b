//! `skill`: reads a skill's instructions (its SKILL.md) or a file beside it,
//! on buddy's own machine whatever the target, so skills work the same over
//! SSH and in containers. The system prompt lists the skills by name and
//! description (`agent::prompt`); the body costs context only when the model
//! asks for it. Finding skills on disk is `app::custom`'s job, not this
//! tool's; a path that leaves the skill's folder (`..`, absolute, a symlink
//! out) is refused.

use super::{parse_args, Tool, ToolContext, ToolError, ToolOutput};
use crate::wire::ToolDefinition;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Component, Path, PathBuf};

/// Largest file the tool returns (a SKILL.md or a file beside it).
const MAX_FILE_BYTES: u64 = 256 * 1024;

/// One skill: its name and the folder holding its SKILL.md.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub dir: PathBuf,
}

pub struct SkillTool {
    skills: Vec<Skill>,
    max_output_chars: usize,
}

impl SkillTool {
    pub fn new(skills: Vec<Skill>, max_output_chars: usize) -> SkillTool {
        SkillTool {
            skills,
            max_output_chars,
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// the skill's name as listed
    name: String,
    /// a path relative to the skill's folder (default: SKILL.md)
    #[serde(default)]
    file: Option<String>,
}

/// `rel` as a path inside `dir`, or why not.
fn inside(dir: &Path, rel: &str) -> Result<PathBuf, ToolError> {
    let p = Path::new(rel);
    if p.components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(ToolError::Failed(format!(
            "`{}` is not a path inside the skill's folder",
            crate::text::one_line(rel, 100)
        )));
    }
    let joined = dir.join(p);
    // A symlink may still lead out: compare where both really are.
    let (Ok(real), Ok(base)) = (joined.canonicalize(), dir.canonicalize()) else {
        return Err(ToolError::Failed(format!(
            "no file `{}` in the skill's folder",
            crate::text::one_line(rel, 100)
        )));
    };
    if !real.starts_with(&base) {
        return Err(ToolError::Failed(format!(
            "`{}` leads out of the skill's folder",
            crate::text::one_line(rel, 100)
        )));
    }
    Ok(real)
}

#[async_trait]
impl Tool for SkillTool {
    fn name(&self) -> &'static str {
        "skill"
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition::function(
            "skill",
            "Read a skill listed in the system prompt: its instructions (SKILL.md), or with `file` a file in its folder that the instructions name by relative path.",
            crate::tools::schema::of::<Args>(),
        )
    }

    fn max_output_chars(&self) -> usize {
        self.max_output_chars
    }

    async fn execute(&self, args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let skill = self
            .skills
            .iter()
            .find(|s| s.name == args.name)
            .ok_or_else(|| {
                let names: Vec<&str> = self.skills.iter().map(|s| s.name.as_str()).collect();
                ToolError::Failed(format!(
                    "no skill named `{}`; the skills are: {}",
                    crate::text::one_line(&args.name, 100),
                    names.join(", ")
                ))
            })?;
        let path = inside(&skill.dir, args.file.as_deref().unwrap_or("SKILL.md"))?;
        let bytes = crate::localfile::read_regular(&path, MAX_FILE_BYTES)
            .map_err(|e| ToolError::Failed(format!("cannot read {}: {e}", path.display())))?;
        let text = String::from_utf8_lossy(&bytes);
        let text = match args.file {
            Some(_) => text.into_owned(),
            None => format!(
                "skill folder: {}\n(files it names by relative path: call skill with `file`)\n\n{text}",
                skill.dir.display()
            ),
        };
        Ok(ToolOutput::text(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_skill_folder() {
        let d = std::env::temp_dir().join(format!("buddy-skill-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("s/ref")).unwrap();
        std::fs::write(d.join("s/ref/a.md"), "A").unwrap();
        std::fs::write(d.join("secret"), "S").unwrap();
        std::os::unix::fs::symlink(d.join("secret"), d.join("s/link")).unwrap();
        let s = d.join("s");
        assert!(inside(&s, "ref/a.md").is_ok());
        assert!(inside(&s, "../secret").is_err());
        assert!(inside(&s, "/etc/passwd").is_err());
        assert!(inside(&s, "link").is_err(), "a symlink out is refused");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
