//! Real containers for end-to-end tests of `--container`: a tiny image built
//! locally from the host's static busybox (no registry is needed), one running
//! container per test, and optionally podman's Docker-compatible API service so
//! the `docker` client can be tested without dockerd.
//!
//! Every podman invocation, and the buddy processes the tests start (through
//! [`engine_env`]), use a `containers.conf` of our own, pointed to by
//! `CONTAINERS_CONF`. It works around this machine kind's quirks: root cannot
//! raise rlimits (so fixed default ulimits), crun refuses the hybrid cgroup
//! layout (so runc and cgroupfs) and there is no network to set up (so no
//! network namespace plumbing). Passing any `--ulimit` would replace all the
//! defaults, so none is passed.
//!
//! Everything a test starts is removed on drop, also when the test fails.
//! Missing tools make the tests panic with what to install: they never pass
//! without having run.

use super::{BuddyCmd, TempDir};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The image every test container runs.
pub const IMAGE: &str = "localhost/buddy-test:1";

/// How to get what these tests need (the same line as in `.ci/run`).
const INSTALL_HINT: &str = "apt-get install -y --no-install-recommends podman runc busybox-static";

const CONTAINERS_CONF: &str = "[containers]\n\
default_ulimits = [\"nofile=20000:20000\", \"nproc=4096:4096\"]\n\
netns = \"none\"\n\
[engine]\n\
runtime = \"runc\"\n\
cgroup_manager = \"cgroupfs\"\n";

/// Longest wait for podman's API socket to answer.
const SERVICE_START_TIMEOUT: Duration = Duration::from_secs(30);

/// The `containers.conf` for this test binary, written once (under Cargo's
/// per-target temp dir, so nothing is left in the system temp dir).
pub fn conf_path() -> &'static Path {
    static CONF: OnceLock<PathBuf> = OnceLock::new();
    CONF.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let path = dir.join("buddy-test-containers.conf");
        // Written beside and renamed, so a test binary running at the same time
        // never reads a half-written file.
        let tmp = dir.join(format!("buddy-test-containers.conf.{}", std::process::id()));
        std::fs::write(&tmp, CONTAINERS_CONF)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", tmp.display()));
        std::fs::rename(&tmp, &path)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        path
    })
}

/// Gives a buddy run the engine configuration the test containers need.
pub fn engine_env(cmd: BuddyCmd) -> BuddyCmd {
    cmd.env("CONTAINERS_CONF", conf_path())
}

/// `podman` with our `containers.conf`; panics (saying what to install) when
/// podman is missing.
pub fn podman() -> Command {
    require_podman();
    let mut c = Command::new("podman");
    c.env("CONTAINERS_CONF", conf_path()).stdin(Stdio::null());
    c
}

fn require_podman() {
    static CHECKED: OnceLock<()> = OnceLock::new();
    CHECKED.get_or_init(|| {
        let out = Command::new("podman")
            .arg("--version")
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => panic!(
                "`podman --version` failed ({}): {}\nThe container tests need podman: {INSTALL_HINT}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => panic!(
                "cannot run podman ({e}); the container tests need it: {INSTALL_HINT}"
            ),
        }
    });
}

/// Runs `cmd` and returns its output; panics with its stderr unless it succeeds.
fn checked(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({})\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Builds [`IMAGE`] unless it exists (from an earlier run, or another test
/// binary); once per test binary.
pub fn ensure_image() {
    static BUILT: OnceLock<()> = OnceLock::new();
    // A panic leaves the lock empty, so the next test tries again and fails
    // with its own clear message.
    BUILT.get_or_init(|| {
        if image_exists() {
            return;
        }
        let dir = TempDir::new("image");
        let tar = build_rootfs_tar(&dir);
        let out = podman()
            .arg("import")
            .arg("--quiet")
            .arg(&tar)
            .arg(IMAGE)
            .output()
            .unwrap_or_else(|e| panic!("cannot run podman import: {e}"));
        // Another test binary may have imported it at the same time.
        if !out.status.success() && !image_exists() {
            panic!(
                "podman import {} {IMAGE} failed ({}): {}",
                tar.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    });
}

fn image_exists() -> bool {
    podman()
        .args(["image", "exists", IMAGE])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// A root filesystem (busybox and its applets, `/etc/passwd`, `/tmp`) as a tar
/// file in `dir`.
fn build_rootfs_tar(dir: &TempDir) -> PathBuf {
    let busybox = static_busybox();
    let root = dir.join("rootfs");
    for sub in ["bin", "etc", "root", "tmp"] {
        let path = root.join(sub);
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
    }
    let bin = root.join("bin");
    std::fs::copy(&busybox, bin.join("busybox"))
        .unwrap_or_else(|e| panic!("cannot copy {}: {e}", busybox.display()));
    let list = checked(Command::new(&busybox).arg("--list"), "busybox --list");
    let applets = String::from_utf8_lossy(&list.stdout).into_owned();
    // A link named `busybox` would replace the binary with a link to itself.
    for applet in applets
        .lines()
        .map(str::trim)
        .filter(|a| !a.is_empty() && *a != "busybox")
    {
        let link = bin.join(applet);
        std::os::unix::fs::symlink("busybox", &link)
            .unwrap_or_else(|e| panic!("cannot link {}: {e}", link.display()));
    }
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n",
    )
    .expect("write etc/passwd");
    std::fs::write(root.join("etc/group"), "root:x:0:\nnogroup:x:65534:\n")
        .expect("write etc/group");
    // World-writable and sticky, like any /tmp.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(root.join("tmp"), std::fs::Permissions::from_mode(0o1777))
        .expect("chmod tmp");
    let tar = dir.join("rootfs.tar");
    checked(
        Command::new("tar")
            .arg("-C")
            .arg(&root)
            .arg("-cf")
            .arg(&tar)
            .arg("."),
        "tar (packing the test image's root filesystem)",
    );
    tar
}

/// The host's busybox, which must be statically linked: the image has no libc.
fn static_busybox() -> PathBuf {
    let path = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("no busybox on this host; the container tests build their image from it: {INSTALL_HINT}")
        });
    let elf =
        std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    assert!(
        !has_interpreter(&elf),
        "{} is dynamically linked and cannot run in the test image; install the static one: {INSTALL_HINT}",
        path.display()
    );
    path
}

/// Whether a 64-bit little-endian ELF file names a program interpreter (is
/// dynamically linked).
fn has_interpreter(elf: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        elf.get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| {
        elf.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    if elf.get(..4) != Some(b"\x7fELF".as_slice()) {
        return false;
    }
    let (Some(phoff), Some(size), Some(count)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38)) else {
        return false;
    };
    (0..usize::from(count))
        .any(|i| u32_at(phoff as usize + i * usize::from(size)) == Some(PT_INTERP))
}

/// A name no other test, test binary or earlier run uses.
fn unique_name(label: &str) -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("buddy-test-{label}-{}-{n}-{nanos:x}", std::process::id())
}

/// A container of [`IMAGE`], removed (forcibly, at once) on drop.
pub struct Container {
    name: String,
    id: String,
}

impl Container {
    /// Starts a container running `sleep 1000`, so it stays up for the test.
    pub fn start() -> Container {
        Container::launch(&["run", "-d", "--rm"])
    }

    /// Creates a container without starting it (it exists, but is not running).
    pub fn created() -> Container {
        Container::launch(&["create"])
    }

    fn launch(how: &[&str]) -> Container {
        ensure_image();
        let name = unique_name("ctr");
        let out = checked(
            podman()
                .args(how)
                .args(["--name", &name, IMAGE, "sleep", "1000"]),
            &format!("podman {} {name}", how.join(" ")),
        );
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(id.len() >= 12, "podman printed no container id: {id:?}");
        Container { name, id }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The container's hostname: podman's default, the short id.
    pub fn hostname(&self) -> &str {
        &self.id[..12]
    }

    /// Runs `sh -c script` in the container with `podman exec`, bypassing buddy.
    pub fn exec(&self, script: &str) -> Output {
        podman()
            .args(["exec", &self.name, "sh", "-c", script])
            .output()
            .unwrap_or_else(|e| panic!("cannot run podman exec: {e}"))
    }

    /// The bytes of the file at `path` in the container; panics if it cannot be
    /// read.
    pub fn read(&self, path: &str) -> Vec<u8> {
        checked(
            podman().args(["exec", &self.name, "cat", "--", path]),
            &format!("podman exec {} cat {path}", self.name),
        )
        .stdout
    }

    /// Copies this host's tmux, the libraries it links and the C.UTF-8
    /// locale (tmux refuses to start without a UTF-8 one) into the container,
    /// so it can host a shared pane. No terminfo: bare images have none.
    pub fn install_tmux(&self) {
        let tmux = Path::new("/usr/bin/tmux");
        assert!(tmux.exists(), "tmux is missing: apt-get install -y tmux");
        let ldd = checked(Command::new("ldd").arg(tmux), "ldd /usr/bin/tmux");
        let mut files = vec![tmux.to_path_buf(), PathBuf::from("/usr/lib/locale/C.utf8")];
        for word in String::from_utf8_lossy(&ldd.stdout).split_whitespace() {
            if word.starts_with('/') {
                files.push(PathBuf::from(word));
            }
        }
        for f in files {
            let dest = f.display().to_string();
            let parent = f.parent().map_or("/".into(), |d| d.display().to_string());
            checked(
                podman().args(["exec", &self.name, "mkdir", "-p", &parent]),
                "mkdir in the container",
            );
            checked(
                podman().args(["cp", &dest, &format!("{}:{dest}", self.name)]),
                &format!("podman cp {dest}"),
            );
        }
    }

    /// Whether `path` exists in the container.
    pub fn exists(&self, path: &str) -> bool {
        podman()
            .args(["exec", &self.name, "test", "-e", path])
            .status()
            .unwrap_or_else(|e| panic!("cannot run podman exec: {e}"))
            .success()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // Best effort; a failure here must not hide the test's own panic.
        let _ = Command::new("podman")
            .env("CONTAINERS_CONF", conf_path())
            .args(["rm", "-f", "-t", "0", &self.name])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// `podman system service` on a socket of its own, answering the Docker API, so
/// the real `docker` client can reach the test containers (same storage as
/// podman's). Killed on drop.
pub struct DockerService {
    dir: TempDir,
    socket: PathBuf,
    child: Child,
}

impl DockerService {
    pub fn start() -> DockerService {
        require_docker_client();
        let dir = TempDir::new("docker-api");
        let socket = dir.join("podman.sock");
        let log_path = dir.join("service.log");
        let log = std::fs::File::create(&log_path).expect("create service log");
        let child = podman()
            .args(["system", "service", "--time=0"])
            .arg(format!("unix://{}", socket.display()))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start podman system service: {e}"));
        let mut service = DockerService { dir, socket, child };
        service.wait_ready(&log_path);
        service
    }

    /// The `DOCKER_HOST` value, `unix://…/podman.sock`.
    pub fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// Gives a buddy run this service as its Docker daemon.
    pub fn apply(&self, cmd: BuddyCmd) -> BuddyCmd {
        engine_env(cmd)
            .env("DOCKER_HOST", self.host())
            .env("DOCKER_CONFIG", self.dir.join("docker-config"))
    }

    /// The `docker` client against this service (its config kept in our temp dir).
    pub fn docker(&self) -> Command {
        let mut c = Command::new("docker");
        c.env("DOCKER_HOST", self.host())
            .env("DOCKER_CONFIG", self.dir.join("docker-config"))
            .stdin(Stdio::null());
        c
    }

    /// Waits until the API answers `/_ping`, then checks that the client talks
    /// to it.
    fn wait_ready(&mut self, log: &Path) {
        let ready = super::wait::poll_until(SERVICE_START_TIMEOUT, || {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "podman system service exited ({status}): {}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            self.pings().then_some(())
        });
        assert!(
            ready.is_some(),
            "podman system service did not answer on {} within {SERVICE_START_TIMEOUT:?}: {}",
            self.socket.display(),
            std::fs::read_to_string(log).unwrap_or_default()
        );
        let out = checked(
            self.docker()
                .args(["version", "--format", "{{.Server.Version}}"]),
            "docker version (against podman's API socket)",
        );
        assert!(
            !String::from_utf8_lossy(&out.stdout).trim().is_empty(),
            "docker version printed no server version"
        );
    }

    fn pings(&self) -> bool {
        let Ok(mut s) = UnixStream::connect(&self.socket) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"GET /_ping HTTP/1.0\r\nHost: d\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut reply = String::new();
        let _ = s.read_to_string(&mut reply);
        reply.starts_with("HTTP/1.") && reply.contains(" 200 ")
    }
}

impl Drop for DockerService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn require_docker_client() {
    match Command::new("docker")
        .arg("--version")
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "`docker --version` failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!(
            "cannot run the docker client ({e}); the docker-engine test needs it on PATH (the client only: podman serves the API)"
        ),
    }
}
