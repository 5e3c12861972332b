//! The user's own prompt files: custom slash commands (`*.md` in
//! `.buddy/commands/` and `CONFIG/commands/`) and skills (folders with a
//! `SKILL.md` in `.buddy/skills/`, `.agents/skills/` and `CONFIG/skills/`).
//! A project's own folders count only when the project is trusted (its
//! buddy.toml, or the directory itself, trusted with `buddy trust`): a
//! cloned repository must not put words in the user's mouth or the system
//! prompt. A project's command or skill wins over the user's of the same
//! name. Everything read is bounded (file size, count, the prompt list).
//!
//! This module only finds and reads; expanding a command is
//! `ui::repl::commands::expand`, serving a skill's body is `tools::skill`,
//! listing skills in the system prompt is `skills_prompt` here.

use crate::text::one_line;
use crate::tools::skill::Skill;
use crate::ui::repl::commands::{Custom, NAMES};
use std::path::{Path, PathBuf};

/// Largest prompt file read (a command, a SKILL.md's frontmatter).
const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Most commands, and most skills, taken from all places together.
const MAX_ENTRIES: usize = 200;
/// Most skills listed in the system prompt, and its bytes at most.
pub const PROMPT_SKILLS: usize = 50;
pub const PROMPT_BYTES: usize = 8 * 1024;
/// Characters of a description kept.
const DESCRIPTION_CHARS: usize = 200;

pub struct Found {
    pub commands: Vec<Custom>,
    pub skills: Vec<Skill>,
    /// One line each: shadowed names, unreadable files, what was cut.
    pub notes: Vec<String>,
}

/// The folders to look in, project first (it wins).
fn places(cwd: &Path, config_dir: Option<&Path>, trusted: bool, what: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if trusted {
        out.push(cwd.join(".buddy").join(what));
        if what == "skills" {
            out.push(cwd.join(".agents").join(what));
        }
    }
    if let Some(c) = config_dir {
        out.push(c.join(what));
    }
    out
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn read_text(path: &Path, notes: &mut Vec<String>) -> Option<String> {
    match crate::localfile::read_regular(path, MAX_FILE_BYTES) {
        Ok(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Err(e) => {
            notes.push(format!(
                "skipped {}: {}",
                crate::text::visible(&path.display().to_string()),
                one_line(&e.to_string(), 200)
            ));
            None
        }
    }
}

/// Entries of `dir` sorted by name; none when it does not exist.
fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    v.sort();
    v
}

pub fn find(cwd: &Path, config_dir: Option<&Path>, trusted: bool) -> Found {
    let mut notes = Vec::new();
    let mut commands: Vec<Custom> = Vec::new();
    for dir in places(cwd, config_dir, trusted, "commands") {
        for path in sorted_entries(&dir) {
            if path.extension().and_then(|e| e.to_str()) != Some("md") {
                continue;
            }
            let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            let name = format!("/{stem}");
            if !valid_name(stem) || commands.iter().any(|c| c.name == name) {
                continue;
            }
            if NAMES.contains(&name.as_str()) || name == "/skills" {
                notes.push(format!(
                    "custom command {name} ({}) has the name of a built-in command and is not used; rename the file",
                    crate::text::visible(&path.display().to_string())
                ));
                continue;
            }
            if commands.len() >= MAX_ENTRIES {
                notes.push(format!(
                    "more than {MAX_ENTRIES} custom commands: the rest are not used"
                ));
                break;
            }
            let Some(text) = read_text(&path, &mut notes) else {
                continue;
            };
            let (fields, body) = crate::frontmatter::split(&text);
            let description = crate::frontmatter::get(&fields, "description")
                .map(|d| one_line(d, DESCRIPTION_CHARS))
                .unwrap_or_else(|| "custom command".into());
            commands.push(Custom {
                name,
                description,
                body: body.trim().to_string(),
            });
        }
    }
    let mut skills: Vec<Skill> = Vec::new();
    for dir in places(cwd, config_dir, trusted, "skills") {
        for folder in sorted_entries(&dir) {
            let file = folder.join("SKILL.md");
            if !file.is_file() {
                continue;
            }
            if skills.len() >= MAX_ENTRIES {
                notes.push(format!(
                    "more than {MAX_ENTRIES} skills: the rest are not used"
                ));
                break;
            }
            let Some(text) = read_text(&file, &mut notes) else {
                continue;
            };
            let (fields, _) = crate::frontmatter::split(&text);
            let folder_name = folder
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let name = crate::frontmatter::get(&fields, "name")
                .unwrap_or(&folder_name)
                .to_string();
            if !valid_name(&name) {
                notes.push(format!(
                    "skipped skill {}: its name must be letters, digits, - and _",
                    crate::text::visible(&file.display().to_string())
                ));
                continue;
            }
            if skills.iter().any(|s| s.name == name) {
                continue;
            }
            let description = crate::frontmatter::get(&fields, "description")
                .map(|d| one_line(d, DESCRIPTION_CHARS))
                .unwrap_or_default();
            skills.push(Skill {
                name,
                description,
                dir: folder,
            });
        }
    }
    Found {
        commands,
        skills,
        notes,
    }
}

/// The skills as the system prompt lists them: at most `PROMPT_SKILLS`
/// and `PROMPT_BYTES`, with a line saying how many were left out.
pub fn skills_prompt(skills: &[Skill]) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    let mut out = String::from(
        "Skills (instructions for particular tasks; before doing such a task, read its skill with the `skill` tool):\n",
    );
    let mut listed = 0;
    for s in skills.iter().take(PROMPT_SKILLS) {
        let line = if s.description.is_empty() {
            format!("- {}\n", s.name)
        } else {
            format!("- {}: {}\n", s.name, s.description)
        };
        if out.len() + line.len() > PROMPT_BYTES {
            break;
        }
        out.push_str(&line);
        listed += 1;
    }
    if listed < skills.len() {
        out.push_str(&format!(
            "- ({} more not listed; the skill tool names them all)\n",
            skills.len() - listed
        ));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_list_is_bounded_and_says_what_it_left_out() {
        let skills: Vec<Skill> = (0..80)
            .map(|i| Skill {
                name: format!("s{i}"),
                description: "d".repeat(150),
                dir: PathBuf::from("/x"),
            })
            .collect();
        let text = skills_prompt(&skills).unwrap();
        assert!(text.len() <= PROMPT_BYTES + 100, "{}", text.len());
        assert!(text.contains("more not listed"), "{text}");
        assert!(skills_prompt(&[]).is_none());
    }
}
