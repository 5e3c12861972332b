//! The `buddy` binary: parse arguments, start a small runtime, hand over to the
//! library, and turn what it returns into an exit code (errors as one line
//! on stderr).

fn main() {
    // The sandbox wrapper (see host::sandbox) confines itself and becomes the
    // command: before clap, which must not know it, and before any thread.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == buddy::host::sandbox::ENTRY)
    {
        std::process::exit(buddy::host::sandbox::wrapper_main(&args[2..]));
    }
    // `buddy --version` alone is asked by scripts and package checks many times
    // over; answering it before clap builds its command tree halves its cost
    // (docs/PERFORMANCE.md). Any other argument goes through clap as usual.
    if buddy::cli::asks_only_version(&args) {
        println!("{}", buddy::cli::VERSION_LINE);
        return;
    }
    // Before any thread exists: keys in buddy's own environment must not be
    // readable from /proc/PID/environ by the commands it runs.
    buddy::procenv::scrub(buddy::procenv::looks_secret);
    // The environment and working directory, read once for the whole command.
    buddy::process::facts();
    let cli = buddy::cli::parse_args(args);
    // One thread is plenty for one conversation: the work is waiting on the
    // network and on child processes, and a single-threaded runtime starts
    // faster and uses less memory. `serve` carries many at once, so it gets a
    // thread per core.
    let serving = matches!(cli.command, Some(buddy::cli::Command::Serve(_)));
    let mut builder = if serving {
        // Before the runtime's threads exist, when it costs no wait.
        buddy::serve::descriptors::reserve();
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(buddy::app::EXIT_FAILURE);
        }
    };
    let no_color = cli.global.no_color;
    let code = match runtime.block_on(buddy::app::run(cli)) {
        Ok(exit) => exit.code(),
        Err(e) => {
            let style = buddy::ui::style::Style::detect(
                !no_color,
                &buddy::ui::terminal::Terminal::detect(),
            );
            // The last line of defence for keys a server or a file echoed.
            let line = buddy::redact::text(&e.to_string()).into_owned();
            eprintln!("{} {}", style.error("error:"), buddy::text::visible(&line));
            for hint in e.hints() {
                eprintln!("{}", buddy::redact::text(&hint));
            }
            e.exit_code()
        }
    };
    // The last spans go out with a short bound; a failure nobody was told
    // of yet is told once, here.
    if let Some(warning) = runtime.block_on(buddy::telemetry::flush(buddy::telemetry::EXIT_FLUSH)) {
        eprintln!("warning: {}", buddy::text::visible(&warning));
    }
    // Do not wait for blocking tasks (a pending terminal read, say) on the way out.
    runtime.shutdown_background();
    std::process::exit(code);
}
