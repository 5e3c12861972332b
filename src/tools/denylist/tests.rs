//! The denylist's cases: each rule's spellings refused, look-alikes passed,
//! and generated spellings (proptest) of commands hidden in wrappers.

use super::*;
use proptest::prelude::*;
use proptest::sample::select;

fn denied(cmd: &str) -> Option<Denial> {
    Denylist::new(&[]).check(cmd)
}

/// Each must be refused, with the rule named.
const DANGEROUS: &[(&str, &str)] = &[
    ("rm -rf /", RM_ROOT),
    ("rm -r -f /", RM_ROOT),
    ("rm -Rf /", RM_ROOT),
    ("rm -fr /", RM_ROOT),
    ("rm -f -R /", RM_ROOT),
    ("rm --recursive --force /", RM_ROOT),
    ("rm --recur --force /", RM_ROOT),
    ("rm -rf -- /", RM_ROOT),
    ("rm / -rf", RM_ROOT),
    ("rm -rf \"/\"", RM_ROOT),
    ("rm -rf '/'", RM_ROOT),
    ("r\"m\" -rf /", RM_ROOT),
    ("\\rm -rf /", RM_ROOT),
    ("'rm' '-rf' '/'", RM_ROOT),
    ("rm -rf //", RM_ROOT),
    ("rm -rf /./", RM_ROOT),
    ("rm -rf /tmp/../", RM_ROOT),
    ("rm -rf /*", RM_ROOT),
    ("rm -rf /etc", RM_ROOT),
    ("rm -rf /usr/", RM_ROOT),
    ("rm -rf /usr/bin", RM_ROOT),
    ("rm -rf /home/*", RM_ROOT),
    ("rm -rf /boot /var", RM_ROOT),
    ("rm -rf ~", RM_ROOT),
    ("rm -rf ~/", RM_ROOT),
    ("rm -rf ~/*", RM_ROOT),
    ("rm -rf $HOME", RM_ROOT),
    ("rm -rf \"${HOME}/\"", RM_ROOT),
    ("rm -rf \"$DIR\"/*", RM_ROOT),
    ("rm -rf /u*", RM_ROOT),
    ("rm -rf /[a-z]*", RM_ROOT),
    ("rm --no-preserve-root -rf /", NO_PRESERVE_ROOT),
    ("rm -r --no-preserve-root /tmp/x", NO_PRESERVE_ROOT),
    ("/bin/rm -rf /", RM_ROOT),
    ("/usr/bin/rm -rf /", RM_ROOT),
    ("sudo rm -rf /", RM_ROOT),
    ("sudo -u root -- rm -rf /", RM_ROOT),
    ("doas rm -rf /", RM_ROOT),
    ("env FOO=1 rm -rf /", RM_ROOT),
    ("FOO=1 rm -rf /", RM_ROOT),
    ("nice -n 10 nohup timeout 5 rm -rf /", RM_ROOT),
    ("time rm -rf /", RM_ROOT),
    ("command rm -rf /", RM_ROOT),
    ("exec rm -rf /", RM_ROOT),
    ("busybox rm -rf /", RM_ROOT),
    ("echo / | xargs rm -rf", RM_ROOT),
    ("xargs -0 rm -rf /", RM_ROOT),
    ("sh -c \"rm -rf /\"", RM_ROOT),
    ("bash -c 'rm -r -f /'", RM_ROOT),
    ("bash -lc 'sudo rm -rf /'", RM_ROOT),
    ("sh -c \"bash -c 'rm -rf /'\"", RM_ROOT),
    ("eval \"rm -rf /\"", RM_ROOT),
    ("eval rm -rf /", RM_ROOT),
    ("su -c 'rm -rf /'", RM_ROOT),
    ("ssh host rm -rf /", RM_ROOT),
    ("env -S 'rm -rf /'", RM_ROOT),
    ("x=rm; $x -rf /", RM_ROOT),
    ("x=rm y=-rf; $x $y /", RM_ROOT),
    ("export x=rm; $x -rf /", RM_ROOT),
    ("c='rm -rf'; $c /", RM_ROOT),
    ("$CMD -rf /", RM_ROOT),
    ("$(echo rm) -rf /", RM_ROOT),
    ("`which rm` -rf /", RM_ROOT),
    ("$'\\x72\\x6d' -rf /", RM_ROOT),
    ("ls; rm -rf /", RM_ROOT),
    ("true && rm -rf /", RM_ROOT),
    ("false || rm -rf /", RM_ROOT),
    ("ls\nrm -rf /", RM_ROOT),
    ("(rm -rf /)", RM_ROOT),
    ("{ rm -rf /; }", RM_ROOT),
    ("sleep 1 & rm -rf /", RM_ROOT),
    ("if true; then rm -rf /; fi", RM_ROOT),
    ("for i in 1; do rm -rf /; done", RM_ROOT),
    ("echo $(rm -rf /)", RM_ROOT),
    ("echo \"`rm -rf /`\"", RM_ROOT),
    ("cat <(rm -rf /)", RM_ROOT),
    ("echo 'rm -rf /' | sh", RM_ROOT),
    ("printf 'rm -rf /\\n' | bash", RM_ROOT),
    ("sh <<< 'rm -rf /'", RM_ROOT),
    ("bash <<EOF\nrm -rf /\nEOF", RM_ROOT),
    ("cat <<'EOF' | sh\nrm -rf /\nEOF", RM_ROOT),
    ("find / -delete", RM_ROOT),
    ("find / -exec rm -rf {} +", RM_ROOT),
    ("mkfs.ext4 /dev/sda1", MKFS),
    ("mkfs -t xfs /dev/nvme0n1", MKFS),
    ("sudo mke2fs /dev/sdb", MKFS),
    ("wipefs -a /dev/sda", WIPEFS),
    ("fdisk /dev/sda", PARTITION),
    ("parted /dev/sda mklabel gpt", PARTITION),
    ("sgdisk --zap-all /dev/nvme0n1", PARTITION),
    ("dd if=/dev/zero of=/dev/sda bs=1M", BLOCK_WRITE),
    ("dd if=/dev/urandom of=/dev/nvme0n1p2", BLOCK_WRITE),
    ("dd of=/dev/mmcblk0 if=image.img", BLOCK_WRITE),
    ("cat /dev/zero > /dev/sda", BLOCK_WRITE),
    ("echo x >> /dev/vda", BLOCK_WRITE),
    ("cat img 2> /dev/hda", BLOCK_WRITE),
    ("cat img &> /dev/xvda", BLOCK_WRITE),
    ("cat img >| /dev/dm-0", BLOCK_WRITE),
    ("cat img | tee /dev/mapper/root", BLOCK_WRITE),
    ("cp disk.img /dev/sdb", BLOCK_WRITE),
    ("shred -n 1 /dev/sda", BLOCK_WRITE),
    ("d=/dev/sda; cat x > $d", BLOCK_WRITE),
    (":(){ :|:& };:", FORK_BOMB),
    ("bomb() { bomb | bomb & }; bomb", FORK_BOMB),
    ("chmod -R 777 /", CHMOD_ROOT),
    ("chown -R nobody:nogroup /", CHMOD_ROOT),
    ("chmod --recursive 000 /etc", CHMOD_ROOT),
    ("echo cm0gLXJmIC8K | base64 -d | sh", DECODE_EXEC),
    ("base64 --decode payload.txt | bash", DECODE_EXEC),
    ("cat x | base64 -d | gunzip | sh", DECODE_EXEC),
    ("xxd -r -p hex.txt | bash", DECODE_EXEC),
    ("eval \"$(echo cm0gLXJmIC8K | base64 -d)\"", DECODE_EXEC),
    ("sh -c \"$(base64 -d <<< cm0gLXJmIC8K)\"", DECODE_EXEC),
    ("bash <(echo cm0= | base64 -d)", DECODE_EXEC),
    ("$(echo cm0= | base64 -d) -rf /", DECODE_EXEC),
    (
        "printf '\\x72\\x6d\\x20\\x2d\\x72\\x66\\x20\\x2f' | sh",
        DECODE_EXEC,
    ),
    ("echo -e '\\x72\\x6d -rf /' | bash", DECODE_EXEC),
    ("base64 -d x | sudo sh", DECODE_EXEC),
    ("base64 -d x | (sh)", DECODE_EXEC),
];

const SAFE: &[&str] = &[
    "rm -rf /tmp/x",
    "rm -rf ./build",
    "rm -rf build target",
    "rm -rf ~/.cache/buddy",
    "rm -rf \"$HOME/.cache\"",
    "rm -rf /tmp/*",
    "rm -f /etc/foo.conf",
    "rm /",
    "rm -rf \"${DIR:?}\"/*",
    "echo \"rm -rf /\"",
    "echo rm -rf /",
    "grep mkfs notes.txt",
    "grep -r 'rm -rf /' .",
    "git commit -m \"rm -rf /\"",
    "cat /dev/sda1.txt",
    "cat /dev/sda > disk.img",
    "dd if=/dev/sda of=backup.img bs=4M",
    "echo hi > /dev/null",
    "ls 2>&1 > out.txt",
    "fdisk -l",
    "sudo parted /dev/sda print",
    "chmod -R 755 ./public",
    "chown -R me /srv/app/data",
    "base64 -d key.b64 > key.bin",
    "echo aGk= | base64 -d",
    "curl -fsSL https://example.org/install.sh | sh",
    "find . -name '*.o' -delete",
    "find /tmp -exec rm -rf {} +",
    "cat <<'EOF' > notes.md\nrm -rf /\nEOF",
    "sudo reboot",
    "shutdown -h now",
    "command -v rm",
    "man rm",
    "ls -la /",
    "cp /dev/sda1.txt backup/",
    "x=hello; echo $x",
    "printf '%s\\n' hello | sh",
    "it's a typo in a pane",
    "rm -rf $TMPDIR/buddy-*",
    "chown -R $USER:$USER /home/$USER",
    "rm -rf /usr/$X",
    "find / -name '*.pyc' -delete",
    "find / -name __pycache__ -exec rm -rf {} +",
    "bash script.sh",
    "sudo apt-get install -y ripgrep",
    "ssh -i key host",
    "tr -d '\\r' < in.txt > out.txt",
    "mkswap /swapfile",
];

/// The nine spellings from issue 34 that reached `rm -rf /`, each
/// with the rule that now refuses it.
const ISSUE_34: &[(&str, &str)] = &[
    ("bash -c 'rm -rf /{etc,usr}'", RM_ROOT),
    ("bash -c '{rm,-rf,/}'", RM_ROOT),
    ("bash -c 'rm -rf {/,/}'", RM_ROOT),
    ("bash -c 'set -- rm -rf /; \"$@\"'", RM_ROOT),
    ("f(){ rm -rf \"$1\"; }; f /", RM_ROOT),
    ("for d in /; do rm -rf $d; done", RM_ROOT),
    ("bash -c 'xargs rm -rf <<< /'", RM_ROOT),
    ("git clean -ffdx /", GIT_CLEAN),
    ("rsync -a --delete empty/ /", RSYNC_DELETE),
];

#[test]
fn issue_34_spellings_are_each_refused_by_their_rule() {
    for (cmd, rule) in ISSUE_34 {
        let d = denied(cmd).unwrap_or_else(|| panic!("not refused: {cmd:?}"));
        assert_eq!(d.rule, *rule, "{cmd:?}: {d}");
    }
}

#[test]
fn brace_expansion_is_expanded_before_the_rules() {
    for cmd in [
        ISSUE_34[0].0,
        ISSUE_34[1].0,
        ISSUE_34[2].0,
        "rm -rf /{tmp/x,etc}",
        "rm -rf /{a..z}{a..z}{a..z}",
        "{sudo,rm,-rf,/}",
        "rm -rf /{,tmp}",
    ] {
        let d = denied(cmd).unwrap_or_else(|| panic!("not refused: {cmd:?}"));
        assert!(d.rule == RM_ROOT || d.rule == TOO_BIG, "{cmd:?}: {d}");
    }
    assert_eq!(denied("rm -rf /{a..z}{a..z}{a..z}").unwrap().rule, TOO_BIG);
    for cmd in [
        "rm -rf build/{debug,release}",
        "rm -rf '/{etc,usr}'",
        "echo {1..100}",
        "mkdir -p src/{a,b}/tests",
        "find . -exec rm {} +",
        "x=/{etc,usr}; echo $x",
    ] {
        assert_eq!(denied(cmd), None, "{cmd:?}");
    }
}

#[test]
fn positional_parameters_set_in_the_script_are_followed() {
    for cmd in [
        ISSUE_34[3].0,
        "set rm -rf /; $@",
        "set -e -- x /; shift; rm -rf \"$1\"",
        "set -- / ; rm -rf \"$@\"",
        "sh -c 'rm -rf \"$1\"' sh /",
        "bash -c '\"$0\" -rf /' rm",
    ] {
        assert_eq!(
            denied(cmd).map(|d| d.rule),
            Some(RM_ROOT.to_string()),
            "{cmd:?}"
        );
    }
    assert_eq!(denied("set -- ls -la; \"$@\""), None);
    assert_eq!(denied("sh -c 'echo \"$1\"' sh hello"), None);
}

#[test]
fn unknown_parameters_or_text_as_a_command_are_refused_as_unknown() {
    for cmd in [
        "\"$@\"",
        "$1 -rf /tmp/x",
        "f(){ \"$@\"; }; f $@",
        "eval \"$CMD\"",
        "eval \"$1\"",
        "sh -c \"$1\"",
        "bash -c \"$SCRIPT\"",
    ] {
        let d = denied(cmd).unwrap_or_else(|| panic!("not refused: {cmd:?}"));
        assert_eq!(d.rule, UNKNOWN_CMD, "{cmd:?}: {d}");
    }
    // A substitution's commands are checked, as `cmd | sh` is.
    assert_eq!(denied("eval \"$(ssh-agent -s)\""), None);
    assert_eq!(denied("echo \"$1\" \"$@\""), None);
}

#[test]
fn function_bodies_are_checked_with_each_calls_words() {
    for cmd in [
        ISSUE_34[4].0,
        "f(){ \"$@\"; }; f rm -rf /",
        "f() { g \"$1\"; }; g() { rm -rf \"$1\"; }; f /etc",
        "f() rm -rf /; echo",
        "wipe() { for d in \"$@\"; do rm -rf \"$d\"; done; }; wipe /tmp/x /usr",
    ] {
        assert_eq!(
            denied(cmd).map(|d| d.rule),
            Some(RM_ROOT.to_string()),
            "{cmd:?}"
        );
    }
    // Endless recursion cannot be followed to the end: refused.
    assert_eq!(
        denied("f(){ f; }; f").map(|d| d.rule),
        Some(TOO_DEEP.to_string())
    );
    for cmd in [
        "f(){ rm -rf \"$1\"; }; f build",
        "greet() { echo \"hello $1\"; }; greet world",
        "run() { \"$@\"; }; run cargo test",
        "lines() { wc -l \"$@\"; }",
    ] {
        assert_eq!(denied(cmd), None, "{cmd:?}");
    }
}

#[test]
fn for_loops_check_their_body_with_each_word() {
    for cmd in [
        ISSUE_34[5].0,
        "for d in /tmp/x /etc; do rm -rf \"$d\"; done",
        "for d in /{etc,usr}; do rm -rf $d; done",
        "for d in a b; do\n  for e in /; do rm -rf $e; done\ndone",
        "for x in 1; do while true; do echo; done; rm -rf /; done",
        "set -- /; for d; do rm -rf $d; done",
        "for d in x; do echo; done; rm -rf /",
    ] {
        assert_eq!(
            denied(cmd).map(|d| d.rule),
            Some(RM_ROOT.to_string()),
            "{cmd:?}"
        );
    }
    for cmd in [
        "for f in *.rs; do wc -l \"$f\"; done",
        "for d in build target; do rm -rf \"$d\"; done",
        "for i in {1..5}; do echo $i; done",
        "for ((i=0; i<3; i++)); do echo $i; done",
    ] {
        assert_eq!(denied(cmd), None, "{cmd:?}");
    }
    assert_eq!(
        denied("for i in {1..1000}; do for j in {1..1000}; do echo; done; done").map(|d| d.rule),
        Some(TOO_BIG.to_string())
    );
}

#[test]
fn here_strings_and_documents_feeding_xargs_are_its_words() {
    for cmd in [
        ISSUE_34[6].0,
        "xargs rm -rf <<< /",
        "xargs rm -rf <<EOF\n/etc\nEOF",
        "xargs -0 sudo rm -rf <<< '/usr'",
    ] {
        assert_eq!(
            denied(cmd).map(|d| d.rule),
            Some(RM_ROOT.to_string()),
            "{cmd:?}"
        );
    }
    assert_eq!(denied("xargs rm -rf <<< build"), None);
    assert_eq!(
        denied("xargs sh -c <<< \"$(echo cm0= | base64 -d)\"").map(|d| d.rule),
        Some(DECODE_EXEC.to_string())
    );
}

#[test]
fn git_clean_with_force_outside_the_tree_is_refused() {
    for cmd in [
        ISSUE_34[7].0,
        "git clean -fdx ~",
        "git clean --force -d /etc",
        "git -C / clean -ffdx",
        "git --work-tree=/ clean -fdx",
        "git clean -fd ../other",
        "sudo git clean -fdx -- /",
    ] {
        assert_eq!(
            denied(cmd).map(|d| d.rule),
            Some(GIT_CLEAN.to_string()),
            "{cmd:?}"
        );
    }
    for cmd in [
        "git clean -fd",
        "git clean -fdx build/",
        "git clean -n /",
        "git clean -ndx ~",
        "git -C ../other clean -fd",
        "git status /",
    ] {
        assert_eq!(denied(cmd), None, "{cmd:?}");
    }
}

#[test]
fn rsync_deleting_in_a_system_directory_is_refused() {
    for cmd in [
        ISSUE_34[8].0,
        "rsync -a --delete-after x/ /etc/",
        "rsync -av --del --exclude .git src/ ~",
        "rsync -a --delete x/ host:/",
        "rsync --remove-source-files -a /usr/ backup/",
        "rsync -e ssh --delete-excluded -r a/ /var",
    ] {
        assert_eq!(
            denied(cmd).map(|d| d.rule),
            Some(RSYNC_DELETE.to_string()),
            "{cmd:?}"
        );
    }
    for cmd in [
        "rsync -a src/ dst/",
        "rsync -a --delete src/ dst/",
        "rsync -a / backup/",
        "rsync -a --delete --exclude / src/ dst/",
        "rsync --remove-source-files -a out/ /srv/archive/",
        "rsync /",
    ] {
        assert_eq!(denied(cmd), None, "{cmd:?}");
    }
}

#[test]
fn dangerous_variants_are_refused() {
    let mut count = 0;
    for (cmd, rule) in DANGEROUS {
        let d = denied(cmd).unwrap_or_else(|| panic!("not refused: {cmd:?}"));
        assert_eq!(d.rule, *rule, "{cmd:?}: {d}");
        count += 1;
    }
    assert!(count >= 40);
}

#[test]
fn look_alikes_pass() {
    for cmd in SAFE {
        assert_eq!(denied(cmd), None, "{cmd:?}");
    }
    assert!(SAFE.len() >= 20);
}

/// One shell spelling of the word `w`: plain, quoted whole, every
/// character escaped, or quoted in part.
fn spell(w: &str, how: u8) -> String {
    match how % 6 {
        0 => format!("'{w}'"),
        1 => format!("\"{w}\""),
        2 => w.chars().map(|c| format!("\\{c}")).collect(),
        3 if w.len() > 1 => format!("{}''{}", &w[..1], &w[1..]),
        4 if w.len() > 1 => format!("\"{}\"{}", &w[..1], &w[1..]),
        _ => w.to_string(),
    }
}

/// `text` as one word for `sh -c` / `eval`: in single quotes when it has
/// none and `single` asks for them, else in double quotes with `"`, `\`,
/// `$` and backticks escaped.
fn as_one_word(text: &str, single: bool) -> String {
    if single && !text.contains('\'') {
        format!("'{text}'")
    } else {
        let escaped: String = text
            .chars()
            .map(|c| match c {
                '"' | '\\' | '$' | '`' => format!("\\{c}"),
                c => c.to_string(),
            })
            .collect();
        format!("\"{escaped}\"")
    }
}

/// `rm` with recursive flags and a dangerous target, in one of its
/// spellings: flags apart or together, long or short, before or after the
/// target, `--` or not, each word quoted its own way.
fn rm_root() -> impl Strategy<Value = String> {
    let flag_sets: &[&[&str]] = &[
        &["-rf"],
        &["-fr"],
        &["-Rf"],
        &["-r", "-f"],
        &["-f", "-R"],
        &["-r"],
        &["-R"],
        &["--recursive", "--force"],
        &["--force", "--recursive"],
        &["-rfv"],
        &["-v", "-r", "-i"],
    ];
    (
        select(flag_sets.to_vec()),
        select(vec!["rm", "/bin/rm", "/usr/bin/rm"]),
        select(vec![
            "/", "//", "/.", "/./", "/*", "/usr", "/etc/", "~", "/tmp/..",
        ]),
        prop::collection::vec(any::<u8>(), 5),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(flags, name, target, how, target_first, dashes)| {
            let mut words = vec![spell(name, how[0])];
            let flags: Vec<String> = flags
                .iter()
                .zip(how[1..].iter().cycle())
                .map(|(f, h)| spell(f, *h))
                .collect();
            // A glob or `~` quoted is no longer one.
            let target = if target.contains(['*', '~']) {
                target.to_string()
            } else {
                spell(target, how[4])
            };
            if target_first {
                words.push(target);
                words.extend(flags);
            } else {
                words.extend(flags);
                if dashes {
                    words.push("--".into());
                }
                words.push(target);
            }
            words.join(" ")
        })
}

/// A way to hide a command inside another.
#[derive(Debug, Clone)]
enum Layer {
    /// A wrapper program or an assignment before the command.
    Prefix(&'static str),
    /// `sh -c '…'` and other shells.
    ShellC(&'static str, bool),
    Eval(bool),
    /// `true && …`, `( … )`, `{ …; }`, `if`, `for`.
    List(&'static str, &'static str),
    /// `f() { …; }; f`.
    Function,
    /// `echo "$( … )"` (spaced: `$((` would read as arithmetic).
    Substitution,
    /// `sh <<< '…'`.
    HereString(bool),
    /// `sh <<'E'` … `E`.
    HereDocument,
}

fn layer() -> impl Strategy<Value = Layer> {
    prop_oneof![
        select(vec![
            "sudo",
            "sudo -u root --",
            "doas",
            "env A=1",
            "nice -n 5",
            "timeout 10",
            "nohup",
            "command",
            "FOO=bar",
        ])
        .prop_map(Layer::Prefix),
        (select(vec!["sh", "bash", "dash", "zsh"]), any::<bool>())
            .prop_map(|(sh, single)| Layer::ShellC(sh, single)),
        any::<bool>().prop_map(Layer::Eval),
        select(vec![
            ("true && ", ""),
            ("false || ", ""),
            ("( ", " )"),
            ("{ ", "; }"),
            ("if true; then ", "; fi"),
            ("for i in 1 2; do ", "; done"),
            ("ls; ", ""),
        ])
        .prop_map(|(open, close)| Layer::List(open, close)),
        Just(Layer::Function),
        Just(Layer::Substitution),
        any::<bool>().prop_map(Layer::HereString),
        Just(Layer::HereDocument),
    ]
}

/// `cmd` hidden in `layers`, innermost first. A prefix needs a simple
/// command after it, so a compound one is first handed to `sh -c`.
fn hide(cmd: String, layers: &[Layer]) -> String {
    let mut cmd = cmd;
    let mut simple = true;
    for (depth, l) in layers.iter().enumerate() {
        (cmd, simple) = match l {
            Layer::Prefix(p) if simple => (format!("{p} {cmd}"), true),
            Layer::Prefix(p) => (format!("{p} sh -c {}", as_one_word(&cmd, true)), true),
            Layer::ShellC(sh, single) => (format!("{sh} -c {}", as_one_word(&cmd, *single)), true),
            Layer::Eval(single) => (format!("eval {}", as_one_word(&cmd, *single)), true),
            Layer::List(open, close) => (format!("{open}{cmd}{close}"), false),
            Layer::Function => (format!("f{depth}() {{ {cmd}; }}; f{depth}"), false),
            Layer::Substitution => (format!("echo \"$( {cmd} )\""), true),
            Layer::HereString(single) => (format!("sh <<< {}", as_one_word(&cmd, *single)), true),
            Layer::HereDocument => (format!("sh <<'E{depth}'\n{cmd}\nE{depth}\n"), false),
        };
    }
    cmd
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn rm_rf_root_hidden_in_any_wrapper_or_substitution_is_refused(
        cmd in rm_root(),
        layers in prop::collection::vec(layer(), 0..4),
    ) {
        let cmd = hide(cmd, &layers);
        let d = denied(&cmd);
        prop_assert_eq!(d.map(|d| d.rule), Some(RM_ROOT.to_string()), "{}", cmd);
    }
}

proptest! {
    #[test]
    fn any_text_is_answered_without_a_panic(text in any::<String>()) {
        let _ = Denylist::new(std::slice::from_ref(&text)).check(&text);
        let _ = denied(&text);
    }

    #[test]
    fn shell_like_text_is_answered_without_a_panic(
        text in "[a-z0-9 /~*?=.,{}()\\[\\]|&;<>$'\"`\\\\#!\n-]{0,120}",
    ) {
        if let Some(d) = denied(&text) {
            let line = d.to_string();
            prop_assert!(!line.contains('\n'), "{}", line);
        }
    }
}

/// Assignments after a keyword belong to the command that follows, as at
/// the start of a line (proptest found `if true; then FOO=bar rm -rf /; fi`
/// passing).
#[test]
fn assignments_after_a_keyword_do_not_hide_the_command() {
    for cmd in [
        "if true; then FOO=bar 'rm' '-rf' '/'; fi",
        "while true; do A=1 B=2 rm -rf /; done",
        "if true; then x=rm; fi; $x -rf /",
        "if false; then :; else LC_ALL=C rm -rf /; fi",
    ] {
        assert_eq!(
            denied(cmd).map(|d| d.rule),
            Some(RM_ROOT.to_string()),
            "{cmd}"
        );
    }
}

/// A wrapper's options are read up to its command only: the command's own
/// `-v`, `-e`, `-p` or `-c` does not make the wrapper run nothing (proptest
/// found `command rm -v -r -i /` passing).
#[test]
fn wrapper_options_are_read_before_the_command_only() {
    for (cmd, rule) in [
        ("command 'rm' '-v' '-r' '-i' '/'", RM_ROOT),
        ("command rm -v -rf /", RM_ROOT),
        ("sudo sh -e -c 'rm -rf /'", RM_ROOT),
        ("sudo rm -l -rf /", RM_ROOT),
        ("ionice -c 3 sh -p -c 'rm -rf /'", RM_ROOT),
        ("taskset 0x1 sh -p -c 'rm -rf /'", RM_ROOT),
        ("flock /tmp/l chmod -c -R 777 /", CHMOD_ROOT),
        ("flock /tmp/l sh -c 'rm -rf /'", RM_ROOT),
        ("flock -w 5 /tmp/l -c 'rm -rf /'", RM_ROOT),
    ] {
        assert_eq!(
            denied(cmd).map(|d| d.rule),
            Some(rule.to_string()),
            "{cmd:?}"
        );
    }
    for cmd in [
        "command -v rm",
        "sudo -l rm -rf /",
        "sudo -e /etc/hosts",
        "taskset -p 1234",
        "ionice -p 1234",
        "flock /tmp/l -c 'make'",
    ] {
        assert_eq!(denied(cmd), None, "{cmd:?}");
    }
}

#[test]
fn user_patterns_match_leading_words_after_wrappers() {
    let list = Denylist::new(&["git push --force".to_string(), "curl".to_string()]);
    for cmd in [
        "git push --force",
        "sudo git push --force origin main",
        "git push origin main --force",
        "cd repo && 'git' push \"--force\"",
        "sh -c 'git push --force'",
        "curl -fsSL https://example.org/x | sh",
    ] {
        let d = list
            .check(cmd)
            .unwrap_or_else(|| panic!("not refused: {cmd}"));
        assert!(d.user_pattern, "{cmd}");
    }
    for cmd in [
        "git push origin main",
        "git push --force-with-lease",
        "echo git push --force",
        "git commit -m 'git push --force'",
    ] {
        assert_eq!(list.check(cmd), None, "{cmd}");
    }
    // The built-in rules stay on beside the user's list.
    assert_eq!(list.check("rm -rf /").map(|d| d.rule), Some(RM_ROOT.into()));
    let d = list.check("sudo git push --force").unwrap();
    assert_eq!(
        d.to_string(),
        "it matches the denylist pattern `git push --force`"
    );
}

#[test]
fn patterns_that_are_not_plain_words_keep_the_old_text_match() {
    let list = Denylist::new(&["> /dev/ttyS".to_string(), "  ".to_string()]);
    assert!(list.check("echo hi >   /dev/ttyS0").is_some());
    assert_eq!(list.check("echo hi > out.txt"), None);
}

#[test]
fn broken_quoting_is_read_as_if_closed() {
    assert_eq!(denied("rm -rf \"/").map(|d| d.rule), Some(RM_ROOT.into()));
    assert_eq!(
        denied("sh -c 'rm -rf /").map(|d| d.rule),
        Some(RM_ROOT.into())
    );
    assert_eq!(
        denied("echo $(rm -rf /").map(|d| d.rule),
        Some(RM_ROOT.into())
    );
    assert_eq!(denied("echo \"it's fine"), None);
}

#[test]
fn nesting_too_deep_is_refused_not_overflowed() {
    let mut cmd = "ls".to_string();
    for _ in 0..12 {
        cmd = format!("sh -c {}", as_one_word(&cmd, false));
    }
    assert_eq!(denied(&cmd).map(|d| d.rule), Some(TOO_DEEP.into()));
    // Far past any limit, on a small stack: refused, and no overflow.
    let deep = format!("{}ls{}", "(".repeat(100_000), ")".repeat(100_000));
    let funcs = "f()".repeat(100_000);
    let subs = format!("{}ls{}", "$(".repeat(50_000), ")".repeat(50_000));
    let rule = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            [deep, funcs, subs]
                .iter()
                .map(|c| denied(c).map(|d| d.rule))
                .collect::<Vec<_>>()
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(rule, vec![Some(TOO_DEEP.to_string()); 3]);
}

#[test]
fn the_reason_names_the_rule_and_shows_the_match_safely() {
    let d = denied("rm -rf \"/\x1b[2J\"/..").unwrap();
    assert_eq!(d.rule, RM_ROOT);
    assert!(!d.to_string().contains('\x1b'), "{d}");
    let d = denied("rm -rf \"$D\"/*").unwrap();
    assert_eq!(
        d.to_string(),
        "it is recursive removal of / or a system directory (`rm -r $…/*`)"
    );
}

/// Inputs that stress one part each, at `n` bytes or a little more.
fn stress_inputs(n: usize) -> Vec<(&'static str, String)> {
    let rep = |unit: &str| unit.repeat(n / unit.len() + 1);
    vec![
        ("commands", rep("ls -la src; ")),
        ("one long word", rep("a")),
        ("quoted pieces", rep("a\"b\"'c'")),
        ("pipes", rep("a | ")),
        ("unclosed braces", rep("{")),
        ("brace lists", rep("{a,b}")),
        ("substitutions", rep("$(")),
        ("variables", rep("x=1; $x ")),
        ("functions", rep("f() { :; }; ")),
        ("calls", format!("f() {{ {}; }}; {}", rep("a"), rep("f; "))),
        ("here-document", format!("cat <<E\n{}E\n", rep("line\n"))),
        (
            "for words",
            format!("for i in {}; do echo $i; done", rep("x ")),
        ),
        ("unclosed quotes", rep("a'\"")),
        ("one-word sequences", rep("{1..1}")),
    ]
}

/// Time per input grows with its length, not faster: every stress input
/// is checked (denylist, read-only, parse) at 100 KB and 1 MB, and the
/// larger may take at most 30 times as long (linear is 10, quadratic 100).
/// Timing, so not in the default run: `cargo test --profile suite --lib
/// check_time_is_linear -- --ignored --nocapture` prints the figures.
#[test]
#[ignore]
fn check_time_is_linear_in_the_length_of_the_input() {
    let time = |text: &str| {
        let start = std::time::Instant::now();
        let _ = denied(text);
        let _ = crate::shell::readonly::is_read_only(text);
        let _ = crate::shell::parse(text);
        start.elapsed()
    };
    let mut slow = Vec::new();
    for ((name, small), (_, big)) in stress_inputs(100_000)
        .into_iter()
        .zip(stress_inputs(1_000_000))
    {
        // The best of three: the machine is shared.
        let t_small = (0..3).map(|_| time(&small)).min().unwrap_or_default();
        let t_big = (0..3).map(|_| time(&big)).min().unwrap_or_default();
        let ratio = t_big.as_secs_f64() / t_small.as_secs_f64().max(1e-6);
        println!(
            "{name:16} 100 KB {:>9.2} ms   1 MB {:>9.2} ms   x{ratio:.1}",
            t_small.as_secs_f64() * 1e3,
            t_big.as_secs_f64() * 1e3
        );
        if ratio > 30.0 && t_big.as_millis() > 20 {
            slow.push(name);
        }
    }
    assert!(slow.is_empty(), "not linear: {slow:?}");
}

#[test]
fn words_that_multiply_themselves_are_too_large_not_gigabytes() {
    // Each assignment doubles the value: 2^30 bytes if nothing stopped it.
    let doubling = format!("x=aaaaaaaa; {}echo $x", "x=$x$x; ".repeat(30));
    let started = std::time::Instant::now();
    assert_eq!(denied(&doubling).map(|d| d.rule), Some(TOO_BIG.to_string()));
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    // A few doublings are ordinary text.
    assert_eq!(denied("x=ab; x=$x$x; x=$x$x; echo $x"), None);
}

#[test]
fn the_budget_of_words_follows_the_length_of_the_line() {
    // 8 bytes doubled 18 times: 2 MiB of words out of a line of 160 bytes,
    // over the 1 MiB any line may build.
    let short = format!("x=aaaaaaaa; {}echo $x", "x=$x$x; ".repeat(18));
    assert_eq!(denied(&short).map(|d| d.rule), Some(TOO_BIG.to_string()));
    // As many bytes written out are a long line, within its own budget.
    let long = format!("echo {}", "a".repeat(2 << 20));
    assert_eq!(denied(&long).map(|d| d.rule), None);
}
