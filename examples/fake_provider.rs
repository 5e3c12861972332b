//! The tests' fake OpenAI-compatible server as a standalone program, for benchmarks
//! and manual runs:
//!
//! ```text
//! cargo run --release --example fake_provider -- --script FILE.json [--repeat]
//! ```
//!
//! It prints the base URL (`http://127.0.0.1:PORT/v1`) as the first line of stdout
//! and serves until killed. The script format is documented on
//! `fake_provider::parse_script`; for example
//! `[{"text":"hello"}, {"tool_calls":[{"id":"c1","name":"run_shell","arguments":"{\"command\":\"true\"}"}]}, {"status":500,"body":"boom"}]`.

// The server code lives with the tests; this program only wraps it.
#[allow(dead_code)]
#[path = "../tests/support/fake_provider.rs"]
mod fake_provider;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: fake_provider --script FILE.json [--repeat]";

struct Args {
    script: PathBuf,
    repeat: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut script = None;
    let mut repeat = false;
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--script") => {
                let path = args.next().ok_or("--script needs a file")?;
                script = Some(PathBuf::from(path));
            }
            Some("--repeat") => repeat = true,
            Some("-h" | "--help") => return Err(String::new()),
            _ => return Err(format!("unexpected argument {arg:?}")),
        }
    }
    let script = script.ok_or("--script FILE.json is required")?;
    Ok(Args { script, repeat })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(why) => {
            if !why.is_empty() {
                eprintln!("fake_provider: {why}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let text = match std::fs::read_to_string(&args.script) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("fake_provider: cannot read {}: {e}", args.script.display());
            return ExitCode::from(2);
        }
    };
    let script = match fake_provider::parse_script(&text) {
        Ok(script) => script,
        Err(e) => {
            eprintln!("fake_provider: {}: {e}", args.script.display());
            return ExitCode::from(2);
        }
    };
    let provider = if args.repeat {
        fake_provider::FakeProvider::start_repeating(script)
    } else {
        fake_provider::FakeProvider::start(script)
    };
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "{}", provider.base_url())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    drop(stdout);
    // The server runs on its own thread; this one only keeps the process alive.
    loop {
        std::thread::park();
    }
}
