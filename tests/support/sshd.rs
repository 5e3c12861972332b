//! A real OpenSSH server for one test: its own config, throw-away host key and
//! client key, on a free loopback port, logging every connection. Logins are as
//! the local user `buddytest` (created once, needs root as in CI), so a command
//! that reports `buddytest` provably went through SSH.

use super::TempDir;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const USER: &str = "buddytest";

pub struct Sshd {
    dir: TempDir,
    child: Child,
    pub port: u16,
    log: PathBuf,
}

fn run(cmd: &mut Command) -> std::process::Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Creates `buddytest` with a home and an unlocked (key-only) account, once.
fn ensure_user() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let uid = run(Command::new("id").arg("-u")).stdout;
        assert_eq!(
            String::from_utf8_lossy(&uid).trim(),
            "0",
            "the SSH tests run sshd and log in as a second local user, which needs root (CI runs as root)"
        );
        let exists = Command::new("id")
            .arg(USER)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !exists {
            // Another test binary may create it at the same moment.
            let _ = Command::new("useradd")
                .args(["-m", "-s", "/bin/bash", USER])
                .output();
        }
        // Without a password field other than `!`, sshd treats it as locked.
        run(Command::new("usermod").args(["-p", "*", USER]));
        std::fs::create_dir_all("/run/sshd").expect("create /run/sshd");
    });
}

fn keygen(path: &Path) {
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "buddy-test", "-f"])
        .arg(path));
}

use super::free_port;

impl Sshd {
    /// Starts sshd and waits until it listens.
    pub fn start() -> Sshd {
        ensure_user();
        let sshd = Path::new("/usr/sbin/sshd");
        assert!(
            sshd.exists(),
            "/usr/sbin/sshd is missing: apt-get install -y openssh-server (.ci/run does)"
        );
        let dir = TempDir::new("sshd");
        keygen(&dir.join("host_key"));
        keygen(&dir.join("client_key"));
        keygen(&dir.join("stranger_key"));
        std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys"))
            .expect("authorized_keys");
        for attempt in 0..5 {
            let port = free_port();
            let config = format!(
                "ListenAddress 127.0.0.1:{port}\n\
                 HostKey {dir}/host_key\n\
                 PidFile {dir}/sshd.pid\n\
                 AuthorizedKeysFile {dir}/authorized_keys\n\
                 PubkeyAuthentication yes\n\
                 PasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\n\
                 UsePAM no\n\
                 StrictModes no\n\
                 PermitRootLogin no\n\
                 AllowUsers {USER}\n\
                 MaxStartups 100\n\
                 LogLevel VERBOSE\n",
                dir = dir.path().display()
            );
            std::fs::write(dir.join("sshd_config"), config).expect("sshd_config");
            let log = dir.join(format!("sshd-{attempt}.log"));
            // `-e` and stderr to a file: with `-E`, the per-connection
            // processes do not log there.
            let log_file = std::fs::File::create(&log).expect("sshd log");
            let mut child = Command::new(sshd)
                .arg("-D")
                .arg("-e")
                .arg("-f")
                .arg(dir.join("sshd_config"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log_file)
                .spawn()
                .expect("start sshd");
            let deadline = Instant::now() + Duration::from_secs(10);
            let within = deadline.saturating_duration_since(Instant::now());
            let listening = super::wait::poll_until(within, || {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                if text.contains("Server listening on") {
                    return Some(true);
                }
                // Ended: most likely the port was taken between probe and bind.
                matches!(child.try_wait(), Ok(Some(_))).then_some(false)
            });
            match listening {
                Some(true) => {
                    return Sshd {
                        dir,
                        child,
                        port,
                        log,
                    }
                }
                Some(false) => {}
                None => panic!(
                    "sshd did not start: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                ),
            }
            let _ = child.kill();
        }
        panic!("sshd would not start on any port");
    }

    /// `buddytest@127.0.0.1:PORT`.
    pub fn destination(&self) -> String {
        format!("{USER}@127.0.0.1:{}", self.port)
    }

    /// The client key sshd accepts.
    pub fn client_key(&self) -> PathBuf {
        self.dir.join("client_key")
    }

    /// A key sshd does not accept.
    pub fn stranger_key(&self) -> PathBuf {
        self.dir.join("stranger_key")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The ssh options a test client needs: this key only, and no known_hosts
    /// (the host key is new each run; nothing is written to ~/.ssh).
    pub fn client_options(&self, key: &Path) -> Vec<String> {
        vec![
            format!("IdentityFile={}", key.display()),
            "IdentitiesOnly=yes".into(),
            "StrictHostKeyChecking=no".into(),
            "UserKnownHostsFile=/dev/null".into(),
            "LogLevel=ERROR".into(),
        ]
    }

    /// `--ssh DEST --ssh-option …` for buddy, with the accepted key.
    pub fn buddy_args(&self) -> Vec<String> {
        self.buddy_args_with(&self.client_options(&self.client_key()))
    }

    pub fn buddy_args_with(&self, options: &[String]) -> Vec<String> {
        let mut args = vec!["--ssh".to_string(), self.destination()];
        for o in options {
            args.push("--ssh-option".into());
            args.push(o.clone());
        }
        args
    }

    /// sshd's log so far.
    pub fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    /// How many TCP connections sshd has accepted.
    pub fn connections(&self) -> usize {
        self.log().matches("Connection from 127.0.0.1").count()
    }

    /// Runs `script` as buddytest on the server side directly (no SSH), for
    /// setup and checks.
    pub fn as_user(script: &str) -> std::process::Output {
        Command::new("runuser")
            .args(["-u", USER, "--", "sh", "-c", script])
            .output()
            .expect("runuser")
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
