//! PostgreSQL from the system's packages, started by a test (or
//! benches/store.rs, which includes this file) in a temporary directory on
//! loopback and stopped on drop.
//!
//! PostgreSQL refuses to run as root, so its directory belongs to the
//! `postgres` user and its programs run as that user (`runuser`). Missing
//! binaries skip the test with a note, and fail it under CI (`CI` set):
//! `.ci/run` installs `postgresql`. Uses nothing else of `support`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The newest installed PostgreSQL's programs, or `None` after a note (a
/// failure under CI).
fn pg_bin(test: &str) -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path().join("bin"))
                .collect()
        })
        .unwrap_or_default();
    versions.retain(|b| b.join("initdb").is_file() && b.join("pg_ctl").is_file());
    versions.sort();
    if let Some(bin) = versions.pop() {
        if Command::new("runuser")
            .args(["-u", "postgres", "--", "true"])
            .status()
            .is_ok_and(|s| s.success())
        {
            return Some(bin);
        }
    }
    missing(
        test,
        "PostgreSQL, or the postgres user to run it (apt-get install postgresql; .ci/run does)",
    )
}

/// Skips (`None`, with a note) for want of `what`; fails under CI.
pub fn missing<T>(test: &str, what: &str) -> Option<T> {
    let why = format!("{what} is missing");
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {why}");
    }
    eprintln!("{test}: skipped: {why}");
    None
}

pub use super::free_port;

/// A PostgreSQL server of the test's own.
pub struct Postgres {
    bin: PathBuf,
    dir: PathBuf,
    pub port: u16,
}

impl Postgres {
    /// initdb, then start on a free loopback port with its socket in its
    /// directory; `None` when PostgreSQL is not installed (outside CI).
    pub fn start(test: &str) -> Option<Postgres> {
        let bin = pg_bin(test)?;
        let dir = std::env::temp_dir().join(format!(
            "buddy-pg-{test}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        chown_postgres(&dir);
        let data = dir.join("data");
        let out = as_postgres(&bin.join("initdb"))
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(&data)
            .output()
            .expect("run initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        let pg = Postgres { bin, dir, port };
        pg.pg_ctl("start");
        Some(pg)
    }

    /// `pg_ctl ACTION` (start, stop, restart), waiting until it is done;
    /// a stop or restart is `-m fast`: sessions are ended, as by an
    /// administrator's restart.
    fn pg_ctl(&self, action: &str) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=on",
            self.port,
            self.dir.display()
        );
        let out = as_postgres(&self.bin.join("pg_ctl"))
            .args(["-w", "-t", "60", "-m", "fast", "-D"])
            .arg(self.dir.join("data"))
            .args(["-l"])
            .arg(self.dir.join("log"))
            .args(["-o", &opts, action])
            .output()
            .expect("run pg_ctl");
        assert!(
            out.status.success(),
            "pg_ctl {action} failed: {}{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
    }

    /// Stops the server (its clients' connections are closed).
    pub fn stop(&self) {
        self.pg_ctl("stop");
    }

    /// Starts it again after [`Postgres::stop`], on the same port.
    pub fn start_again(&self) {
        self.pg_ctl("start");
    }

    /// Stops and starts it, on the same port.
    pub fn restart(&self) {
        self.pg_ctl("restart");
    }

    /// A URL `buddy serve --store` takes.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// One value (the first column of the first row) of `sql`, via psql.
    pub fn query(&self, sql: &str) -> String {
        let out = as_postgres(&self.bin.join("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
            ])
            .args(["-d", "postgres", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The server's log, for a failure's message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = as_postgres(&self.bin.join("pg_ctl"))
            .args(["-m", "immediate", "-D"])
            .arg(self.dir.join("data"))
            .arg("stop")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn as_postgres(program: &Path) -> Command {
    let mut c = Command::new("runuser");
    c.args(["-u", "postgres", "--"]).arg(program);
    // Its own working directory: postgres cannot enter the test's.
    c.current_dir("/");
    c
}

fn chown_postgres(dir: &Path) {
    let ok = Command::new("chown")
        .args(["postgres:postgres"])
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "chown postgres {}", dir.display());
}
