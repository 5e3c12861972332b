//! `buddy exec`'s user message: the prompt from the arguments, from stdin, or
//! both — `git diff | buddy exec "write a commit message"` sends the prompt
//! followed by the piped text in a `<stdin>` block — and the images of
//! `--image`. Reading is bounded; what the message becomes is decided here
//! and nowhere else.

use super::{AppError, InputError};
use std::io::{IsTerminal, Read};
use std::time::Duration;

/// The most `buddy exec` reads from piped stdin: several times what a large
/// context window holds, so a real prompt or input always fits.
pub const MAX_STDIN_BYTES: u64 = 8 * 1024 * 1024;

/// How long an open stdin may stay silent before buddy says it is waiting
/// for it: a program that starts buddy with a pipe it never closes would
/// otherwise see a hang with no explanation.
const QUIET_STDIN_NOTICE: Duration = Duration::from_secs(3);

/// The user message for `buddy exec` with these prompt words.
pub fn read(words: &[String]) -> Result<String, AppError> {
    let stdin = std::io::stdin();
    let piped = !stdin.is_terminal();
    let prompt = words.join(" ");
    if words == ["-"] || (words.is_empty() && piped) {
        let text = read_stdin(stdin, "the prompt on stdin")?;
        return non_empty(text);
    }
    let prompt = non_empty(prompt)?;
    if !piped {
        return Ok(prompt);
    }
    let input = read_stdin(stdin, "the input piped to buddy exec")?;
    Ok(compose(prompt, &input))
}

/// The images of `exec --image`, in order. Any one that cannot be attached
/// (missing, not an image, too big) stops exec before anything is sent.
pub fn images(paths: &[std::path::PathBuf]) -> Result<Vec<crate::wire::Image>, AppError> {
    paths
        .iter()
        .map(|path| {
            crate::localfile::read_image(path).map_err(|e| {
                AppError::Input(InputError::Invalid {
                    what: format!(
                        "--image {}",
                        crate::text::visible(&path.display().to_string())
                    ),
                    problem: format!("{e}; nothing was sent"),
                })
            })
        })
        .collect()
}

fn non_empty(prompt: String) -> Result<String, AppError> {
    if prompt.trim().is_empty() {
        return Err(AppError::Usage(
            "no prompt given: use `buddy exec \"PROMPT\"` or pipe the prompt on stdin".into(),
        ));
    }
    Ok(prompt)
}

/// The prompt, then the piped text in a delimited block. Input that is only
/// whitespace (an empty pipe, /dev/null) adds nothing.
pub fn compose(prompt: String, input: &str) -> String {
    if input.trim().is_empty() {
        return prompt;
    }
    let mut message = prompt;
    message.push_str("\n\n<stdin>\n");
    message.push_str(input);
    if !input.ends_with('\n') {
        message.push('\n');
    }
    message.push_str("</stdin>");
    message
}

/// All of stdin as text, refused past `MAX_STDIN_BYTES`. `what` names it in
/// errors. When nothing has arrived after a few seconds, one line on stderr
/// says buddy is waiting for it (and how not to).
fn read_stdin(stdin: std::io::Stdin, what: &str) -> Result<String, AppError> {
    let (done, waiting) = std::sync::mpsc::channel::<()>();
    // Files and /dev/null answer at once; only a pipe or socket can keep
    // buddy waiting, so only they get the notice (and its thread).
    let notice = may_wait(&stdin).then(|| {
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                waiting.recv_timeout(QUIET_STDIN_NOTICE)
            {
                eprintln!(
                    "buddy: waiting for stdin to end (it is not a terminal); close it, or run with `< /dev/null` to send no input"
                );
            }
        })
    });
    let mut first = [0u8; 1];
    let mut lock = stdin.lock();
    // Only the first byte can be long in coming; once input flows the
    // notice is moot.
    let first_read = loop {
        match lock.read(&mut first) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => break other,
        }
    };
    drop(done);
    if let Some(notice) = notice {
        let _ = notice.join();
    }
    let head: &[u8] = match first_read {
        Ok(0) => &[],
        Ok(_) => &first,
        Err(e) => return Err(unreadable(what, e.to_string())),
    };
    let rest =
        crate::localfile::read_bounded(lock, MAX_STDIN_BYTES - head.len() as u64).map_err(|e| {
            match e {
                crate::localfile::ReadError::TooBig { .. } => AppError::Input(InputError::TooBig {
                    what: what.to_string(),
                    limit: crate::localfile::size(MAX_STDIN_BYTES),
                }),
                e => unreadable(what, e.to_string()),
            }
        })?;
    let mut bytes = head.to_vec();
    bytes.extend_from_slice(&rest);
    String::from_utf8(bytes).map_err(|_| {
        AppError::Input(InputError::NotText {
            what: what.to_string(),
        })
    })
}

fn unreadable(what: &str, error: String) -> AppError {
    AppError::Input(InputError::Unreadable {
        what: what.to_string(),
        error,
    })
}

/// Whether stdin is a pipe or a socket, whose writer may take its time.
fn may_wait(stdin: &std::io::Stdin) -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileTypeExt;
    let Ok(fd) = stdin.as_fd().try_clone_to_owned() else {
        return true;
    };
    std::fs::File::from(fd).metadata().map_or(true, |m| {
        m.file_type().is_fifo() || m.file_type().is_socket()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn piped_text_follows_the_prompt_in_a_block() {
        assert_eq!(
            compose("explain".into(), "a\nb\n"),
            "explain\n\n<stdin>\na\nb\n</stdin>"
        );
        assert_eq!(
            compose("explain".into(), "no newline"),
            "explain\n\n<stdin>\nno newline\n</stdin>"
        );
    }

    #[test]
    fn empty_or_blank_input_adds_nothing() {
        assert_eq!(compose("hi".into(), ""), "hi");
        assert_eq!(compose("hi".into(), "\n  \n"), "hi");
    }
}
