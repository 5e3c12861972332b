use super::*;
use std::collections::HashMap;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k: &str| map.get(k).cloned()
}

const TWO_PROFILES: &str = r#"
[agent]
model = "a"
[models.a]
api_base_url = "http://a.example/v1"
model = "model-a"
[models.b]
api_base_url = "http://b.example/v1"
api_key = "kb"
model = "model-b"
"#;

fn resolve_text(
    text: &str,
    env: &[(&str, &str)],
    cli: CliOverrides,
) -> Result<Settings, ConfigError> {
    resolve(parse(text, None)?, None, &env_of(env), &cli)
}

#[test]
fn template_parses_and_documents_three_profiles() {
    let f = parse(TEMPLATE, None).expect("template parses");
    for p in ["openai", "ollama", "openrouter"] {
        assert!(f.models.contains_key(p), "{p}");
    }
    assert_eq!(
        f.models["ollama"].api_base_url.as_deref(),
        Some("http://localhost:11434/v1")
    );
    assert!(f.models["ollama"].api_key_env.is_none());
}

#[test]
fn invalid_toml_names_line_and_column() {
    let err = parse("[agent]\nmodel = \n", Some(Path::new("/x/buddy.toml"))).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("config error in /x/buddy.toml line 2, column"),
        "{msg}"
    );
}

#[test]
fn unknown_keys_are_errors() {
    let err = parse("[tools]\nshel_enabled = true\n", None).unwrap_err();
    assert!(err.to_string().contains("shel_enabled"), "{err}");
}

#[test]
fn env_then_cli_precedence() {
    let s = resolve_text(TWO_PROFILES, &[], CliOverrides::default()).unwrap();
    assert_eq!(
        (s.api.profile.as_str(), s.api.model.as_str()),
        ("a", "model-a")
    );
    assert_eq!(s.api.api_key, None);

    let env = [
        ("BUDDY_MODEL", "b"),
        ("BUDDY_BASE_URL", "http://env/v1"),
        ("BUDDY_API_KEY", "kenv"),
    ];
    let s = resolve_text(TWO_PROFILES, &env, CliOverrides::default()).unwrap();
    assert_eq!(s.api.profile, "b");
    assert_eq!(s.api.base_url, "http://env/v1");
    assert_eq!(s.api.api_key.as_deref(), Some("kenv"));

    let cli = CliOverrides {
        model: Some("raw-model-id".into()),
        base_url: Some("http://cli/v1/".into()),
        ..Default::default()
    };
    let s = resolve_text(TWO_PROFILES, &env, cli).unwrap();
    assert_eq!(s.api.profile, "a", "a raw id keeps the configured profile");
    assert_eq!(s.api.model, "raw-model-id");
    assert_eq!(s.api.base_url, "http://cli/v1");
}

#[test]
fn legacy_agent_env_names_are_fallbacks() {
    let s = resolve_text(
        TWO_PROFILES,
        &[("AGENT_MODEL", "b"), ("AGENT_API_KEY", "old")],
        CliOverrides::default(),
    )
    .unwrap();
    assert_eq!(s.api.profile, "b");
    assert_eq!(s.api.api_key.as_deref(), Some("old"));
    let s = resolve_text(
        TWO_PROFILES,
        &[("AGENT_MODEL", "b"), ("BUDDY_MODEL", "a")],
        CliOverrides::default(),
    )
    .unwrap();
    assert_eq!(s.api.profile, "a");
}

#[test]
fn unknown_active_profile_lists_known_ones() {
    let text = TWO_PROFILES.replace("model = \"a\"", "model = \"zzz\"");
    let err = resolve_text(&text, &[], CliOverrides::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown model profile `zzz`; known profiles: a, b"
    );
}

#[test]
fn missing_key_names_the_variable() {
    let text = "[models.x]\napi_base_url = \"http://x/v1\"\napi_key_env = \"X_KEY\"\n";
    let err = resolve_text(text, &[], CliOverrides::default()).unwrap_err();
    assert!(err.to_string().contains("X_KEY"), "{err}");
    let s = resolve_text(text, &[("X_KEY", "secret\n")], CliOverrides::default()).unwrap();
    assert_eq!(s.api.api_key.as_deref(), Some("secret"));
}

#[test]
fn two_key_sources_are_an_error() {
    let text = "[models.x]\napi_base_url = \"http://x/v1\"\napi_key = \"k\"\napi_key_env = \"K\"\n";
    let err = resolve_text(text, &[], CliOverrides::default()).unwrap_err();
    assert!(err.to_string().contains("more than one"), "{err}");
}

#[test]
fn key_file_is_read_and_trimmed() {
    let dir = std::env::temp_dir().join(format!("buddy-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("key");
    std::fs::write(&key, "filekey\n").unwrap();
    let text = format!(
        "[models.x]\napi_base_url = \"http://x/v1\"\napi_key_file = \"{}\"\n",
        key.display()
    );
    let s = resolve_text(&text, &[], CliOverrides::default()).unwrap();
    assert_eq!(s.api.api_key.as_deref(), Some("filekey"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn empty_file_falls_back_to_builtin_profiles_and_defaults() {
    let s = resolve_text("", &[("OPENAI_API_KEY", "k")], CliOverrides::default()).unwrap();
    assert_eq!(s.api.profile, "openai");
    assert_eq!(s.agent.max_iterations, 20);
    assert!(s.agent.parallel_tools);
    assert_eq!(s.network.max_retries, 3);
    assert_eq!(s.network.idle_timeout_secs, 600);
    assert_eq!(s.network.max_answer_bytes, 8 * 1024 * 1024);
    assert!(s.tools.shell_confirm);
}

#[test]
fn search_path_order() {
    let env = env_of(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "/xdg")]);
    let p = search_path(Path::new("/w"), &env);
    let want: Vec<PathBuf> = [
        "/w/buddy.toml",
        "/w/agent.toml",
        "/xdg/buddy/buddy.toml",
        "/h/.config/agent/agent.toml",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    assert_eq!(p, want);
}

#[test]
fn debug_output_never_shows_the_key() {
    let s = resolve_text(
        TWO_PROFILES,
        &[("BUDDY_API_KEY", "sk-very-secret")],
        CliOverrides::default(),
    )
    .unwrap();
    assert!(!format!("{s:?}").contains("sk-very-secret"));
}

#[test]
fn discovery_entries_are_normalised_and_kept_on_loopback() {
    assert_eq!(
        loopback_base_url("127.0.0.1:8080").as_deref(),
        Ok("http://127.0.0.1:8080/v1")
    );
    assert_eq!(
        loopback_base_url("localhost:11434").as_deref(),
        Ok("http://127.0.0.1:11434/v1")
    );
    assert_eq!(
        loopback_base_url("http://[::1]:1234/api/v1/").as_deref(),
        Ok("http://[::1]:1234/api/v1")
    );
    assert_eq!(
        loopback_base_url("http://127.0.0.2:8000").as_deref(),
        Ok("http://127.0.0.2:8000/v1")
    );
    for bad in [
        "http://10.0.0.1:8080/v1",
        "https://127.0.0.1:8080/v1",
        "example.com:8080",
        "127.0.0.1",
        "127.0.0.1:0",
        "127.0.0.1:99999",
        "::1:8080",
    ] {
        let err = loopback_base_url(bad).unwrap_err().to_string();
        assert!(err.contains(bad), "{err}");
    }
    let text = "[discovery]\nlocal_servers = [\"192.168.1.2:11434\"]\n";
    let err = resolve_text(text, &[("OPENAI_API_KEY", "k")], CliOverrides::default()).unwrap_err();
    assert!(err.to_string().contains("not on loopback"), "{err}");
}

#[test]
fn the_template_probes_the_usual_local_servers() {
    let f = parse(TEMPLATE, None).expect("template parses");
    assert_eq!(f.discovery.servers().unwrap(), DEFAULT_LOCAL_SERVERS);
    assert_eq!(
        ConfigFile::default().discovery.servers().unwrap(),
        DEFAULT_LOCAL_SERVERS
    );
    let off = parse("[discovery]\nlocal_servers = []\n", None).unwrap();
    assert!(off.discovery.servers().unwrap().is_empty());
}

#[test]
fn discovery_only_when_nothing_was_picked() {
    let template = parse(TEMPLATE, None).unwrap();
    let none = CliOverrides::default();
    assert!(may_discover(&template, &env_of(&[]), &none));
    assert!(may_discover(&ConfigFile::default(), &env_of(&[]), &none));
    let m = CliOverrides {
        model: Some("openai".into()),
        ..Default::default()
    };
    assert!(!may_discover(&template, &env_of(&[]), &m));
    let url = CliOverrides {
        base_url: Some("http://127.0.0.1:1/v1".into()),
        ..Default::default()
    };
    assert!(!may_discover(&template, &env_of(&[]), &url));
    for var in [
        "BUDDY_MODEL",
        "AGENT_MODEL",
        "BUDDY_BASE_URL",
        "AGENT_BASE_URL",
    ] {
        assert!(
            !may_discover(&template, &env_of(&[(var, "x")]), &none),
            "{var}"
        );
    }
    let chosen = parse(TWO_PROFILES, None).unwrap();
    assert!(!may_discover(&chosen, &env_of(&[]), &none));
}

#[test]
fn a_found_local_server_is_a_keyless_default_profile() {
    let local = LocalServer {
        base_url: "http://127.0.0.1:8080/v1".into(),
        model: "smollm2".into(),
        context_limit: Some(4096),
    };
    let cli = CliOverrides {
        local: Some(local.clone()),
        ..Default::default()
    };
    let s = resolve_text(TEMPLATE, &[], cli).unwrap();
    assert_eq!(s.api.profile, "local");
    assert_eq!(s.api.base_url, "http://127.0.0.1:8080/v1");
    // The window the server reported is the one budgeted with.
    assert_eq!(s.api.context_limit, Some(4096));
    assert_eq!(s.api.model, "smollm2");
    assert!(s.api.api_key.is_none());
    assert!(s.profiles.contains(&"local".to_string()));

    // A raw model id keeps the local profile; a profile name still wins.
    let cli = CliOverrides {
        local: Some(local.clone()),
        model: Some("other-model".into()),
        ..Default::default()
    };
    let s = resolve_text(TEMPLATE, &[], cli).unwrap();
    assert_eq!(
        (s.api.profile.as_str(), s.api.model.as_str()),
        ("local", "other-model")
    );

    // An existing `local` profile is left alone.
    let text = format!("{TWO_PROFILES}[models.local]\napi_base_url = \"http://x/v1\"\n");
    let cli = CliOverrides {
        local: Some(local),
        ..Default::default()
    };
    let s = resolve_text(&text, &[], cli).unwrap();
    assert_eq!(s.api.profile, "local-2");
}

#[test]
fn an_explicit_profile_takes_a_raw_model_id() {
    let cli = CliOverrides {
        profile: Some("b".into()),
        model: Some("model-z".into()),
        ..Default::default()
    };
    let s = resolve_text(TWO_PROFILES, &[], cli).unwrap();
    assert_eq!(
        (s.api.profile.as_str(), s.api.model.as_str()),
        ("b", "model-z")
    );
}

fn temp_file(label: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("buddy-cfg-{label}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("buddy.toml");
    std::fs::write(&path, bytes).unwrap();
    path
}

fn load_path(path: &Path) -> Result<(ConfigFile, Option<PathBuf>), ConfigError> {
    let cli = CliOverrides {
        config: Some(path.to_path_buf()),
        ..Default::default()
    };
    load_file(Path::new("/nonexistent"), &env_of(&[]), &cli, None)
}

#[test]
fn invalid_utf8_names_the_file_line_and_column() {
    let path = temp_file("utf8", b"[agent]\nmodel = \"ab\xe9\"\n");
    let msg = load_path(&path).unwrap_err().to_string();
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    assert_eq!(
        msg,
        format!(
            "config error in {} line 2, column 12: invalid UTF-8 (byte 0xe9); save the file as UTF-8",
            path.display()
        )
    );
}

#[test]
fn a_huge_key_name_gives_one_short_line() {
    let key = "k".repeat(10 * 1024 * 1024);
    let text = format!("[agent]\n{key} = 1\n");
    let msg = parse(&text, Some(Path::new("/x/buddy.toml")))
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with("config error in /x/buddy.toml line 2, column 1: "),
        "{}",
        &msg[..100]
    );
    assert!(msg.chars().count() < 400, "{} chars", msg.chars().count());
    assert!(!msg.contains('\n'));
}

#[test]
fn devices_fifos_and_huge_files_are_refused_at_once() {
    let msg = load_path(Path::new("/dev/zero")).unwrap_err().to_string();
    assert_eq!(
        msg,
        "config error: cannot read /dev/zero: it is a character device, not a regular file"
    );
    let big = temp_file("big", &vec![b'#'; MAX_CONFIG_BYTES as usize + 1]);
    let msg = load_path(&big).unwrap_err().to_string();
    assert!(msg.ends_with("it is larger than 1 MiB"), "{msg}");
    let fifo = big.with_file_name("fifo.toml");
    let _ = std::fs::remove_file(&fifo);
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // Without the check this blocks forever waiting for a writer.
    let msg = load_path(&fifo).unwrap_err().to_string();
    assert!(
        msg.ends_with("it is a FIFO (named pipe), not a regular file"),
        "{msg}"
    );
    std::fs::remove_dir_all(big.parent().unwrap()).unwrap();
}

#[test]
fn a_near_miss_of_a_profile_is_named_but_an_exact_name_is_not() {
    let text = "[agent]\nmodel = \"openai\"\n[models.openai]\napi_base_url = \"https://api.openai.com/v1\"\napi_key_env = \"OPENAI_API_KEY\"\n[models.ollama]\napi_base_url = \"http://127.0.0.1:11434/v1\"\n";
    let cli = |m: &str| CliOverrides {
        model: Some(m.into()),
        ..CliOverrides::default()
    };
    let err = resolve_text(text, &[], cli("olama")).unwrap_err();
    assert!(
        matches!(&err, ConfigError::NearMiss { suggestion, .. } if suggestion == "ollama"),
        "{err}"
    );
    // The profile itself, without its key: the key is what is missing.
    let err = resolve_text(text, &[], cli("openai")).unwrap_err();
    assert!(matches!(err, ConfigError::MissingKey { .. }), "{err}");
    // A model id far from every profile falls through as before.
    let err = resolve_text(text, &[], cli("gpt-5.1")).unwrap_err();
    assert!(matches!(err, ConfigError::MissingKey { .. }), "{err}");
}

#[test]
fn a_base_url_elsewhere_gets_no_profile_key() {
    let text = "[agent]\nmodel = \"b\"\n[models.b]\napi_base_url = \"http://b.example/v1\"\napi_key = \"kb\"\n";
    let with_url = |u: &str| CliOverrides {
        base_url: Some(u.into()),
        ..CliOverrides::default()
    };
    let s = resolve_text(text, &[], with_url("http://127.0.0.1:8080/v1")).unwrap();
    assert_eq!(s.api.api_key, None);
    // The same server, spelled differently, keeps its key.
    let s = resolve_text(text, &[], with_url("http://B.EXAMPLE:80/v1/")).unwrap();
    assert_eq!(s.api.api_key.as_deref(), Some("kb"));
    // BUDDY_API_KEY goes wherever the user points.
    let s = resolve_text(
        text,
        &[("BUDDY_API_KEY", "user")],
        with_url("http://127.0.0.1:8080/v1"),
    )
    .unwrap();
    assert_eq!(s.api.api_key.as_deref(), Some("user"));
    assert!(same_server(
        "http://[::1]:8080/v1",
        Some("http://[::1]:8080")
    ));
    assert!(!same_server(
        "http://[::1]:8080/v1",
        Some("http://[::1]:8081")
    ));
    assert!(!same_server("https://a/v1", Some("http://a/v1")));
}

#[test]
fn a_profiles_price_is_read_and_a_negative_one_refused() {
    let priced = TWO_PROFILES.replace(
        "model = \"model-a\"",
        "model = \"model-a\"\nprice = { input = 2.0, output = 8.0, cached_input = 0.5 }",
    );
    let s = resolve_text(&priced, &[], CliOverrides::default()).unwrap();
    assert_eq!(
        s.api.price,
        Some(PriceConfig {
            input: 2.0,
            output: 8.0,
            cached_input: Some(0.5)
        })
    );
    let plain = resolve_text(TWO_PROFILES, &[], CliOverrides::default()).unwrap();
    assert_eq!(plain.api.price, None);
    let negative = TWO_PROFILES.replace(
        "model = \"model-a\"",
        "model = \"model-a\"\nprice = { input = -1.0, output = 8.0 }",
    );
    let e = resolve_text(&negative, &[], CliOverrides::default()).unwrap_err();
    assert!(e.to_string().contains("models.a.price"), "{e}");
    let typo = TWO_PROFILES.replace(
        "model = \"model-a\"",
        "model = \"model-a\"\nprice = { input = 1.0, output = 8.0, cache = 0.1 }",
    );
    assert!(resolve_text(&typo, &[], CliOverrides::default()).is_err());
}

/// The spellings of an attacker's host in front of the profile's own that the
/// third attack campaign tried (issue 44): each is either refused, or sends
/// no credential of the profile's, or is really the profile's own server.
const HOSTILE_SPELLINGS: &[&str] = &[
    "https://attacker.example\\@api.openai.com/v1",
    "https://attacker.example\\@api.openai.com:443/v1",
    "HTTPS://ATTACKER.EXAMPLE\\@API.OPENAI.COM/v1",
    "https:\\\\attacker.example\\@api.openai.com/v1",
    "\\https://attacker.example\\@api.openai.com/v1",
    "https://attacker.example\\\\@api.openai.com/v1",
    "https://attacker.example:443\\@api.openai.com/v1",
    "https://attacker.example\t@api.openai.com/v1",
    "https://attacker.example\n@api.openai.com/v1",
    "https://attacker.example/\n@api.openai.com/v1",
    "https://att\tacker.example\\@api.openai.com/v1",
    "https://user:pass@api.openai.com/v1",
    "https://api.openai.com@attacker.example/v1",
    "https://attacker.example/@api.openai.com/v1",
    "https://attacker.example%40api.openai.com/v1",
    "https://attacker.example#@api.openai.com/v1",
    "https://attacker.example?@api.openai.com/v1",
    "https://api.openai.com.attacker.example/v1",
    "https://[::1]\\@api.openai.com/v1",
];

/// The credentials a profile can hold, each as a config.
const CREDENTIAL_PROFILES: &[(&str, &str)] = &[
    ("OPENAI_API_KEY", "api_key_env = \"OPENAI_API_KEY\""),
    (
        "ANTHROPIC_API_KEY",
        "api_key_env = \"ANTHROPIC_API_KEY\"\napi = \"messages\"",
    ),
    ("literal api_key", "api_key = \"sk-literal-key-123456\""),
    ("login", "auth = \"login\""),
];

#[test]
fn no_spelling_of_another_host_gets_a_profiles_credential() {
    let secrets = [
        ("OPENAI_API_KEY", "sk-openai-secret-123456"),
        ("ANTHROPIC_API_KEY", "sk-ant-secret-123456"),
    ];
    let mut tried = 0;
    for (kind, key_line) in CREDENTIAL_PROFILES {
        let text = format!(
            "[agent]\nmodel = \"p\"\n[models.p]\napi_base_url = \"https://api.openai.com/v1\"\nmodel = \"m\"\n{key_line}\n"
        );
        for spelling in HOSTILE_SPELLINGS {
            for by in ["flag", "BUDDY_BASE_URL", "AGENT_BASE_URL"] {
                tried += 1;
                let mut env: Vec<(&str, &str)> = secrets.to_vec();
                let mut cli = CliOverrides::default();
                match by {
                    "flag" => cli.base_url = Some(spelling.to_string()),
                    var => env.push((var, spelling)),
                }
                let Ok(s) = resolve_text(&text, &env, cli) else {
                    continue;
                };
                let to = url::Url::parse(&s.api.base_url).expect("an accepted URL parses");
                let credential = s.api.api_key.is_some() || s.api.login.is_some();
                assert!(
                    !credential || to.host_str() == Some("api.openai.com"),
                    "{kind} by {by} went to {:?} for {spelling:?}",
                    to.host_str()
                );
            }
        }
    }
    assert_eq!(
        tried,
        CREDENTIAL_PROFILES.len() * HOSTILE_SPELLINGS.len() * 3
    );
}

#[test]
fn a_base_url_with_user_info_a_backslash_or_a_control_character_is_refused() {
    let text = "[agent]\nmodel = \"p\"\n[models.p]\napi_base_url = \"https://api.openai.com/v1\"\napi_key = \"k\"\n";
    for url in [
        "https://a.example\\@api.openai.com/v1",
        "https://a.example\t@api.openai.com/v1",
        "https://api.openai.com/v1\n",
        "https://user@api.openai.com/v1",
        "https://:pw@api.openai.com/v1",
        "ftp://api.openai.com/v1",
    ] {
        let cli = CliOverrides {
            base_url: Some(url.into()),
            ..CliOverrides::default()
        };
        let err = resolve_text(text, &[], cli).unwrap_err().to_string();
        assert!(err.contains("--base-url"), "{err}");
        assert!(!err.contains('\n') && !err.contains('\t'), "{err}");
        // The same in the profile itself is refused, naming the key.
        let profile = text.replace(
            "https://api.openai.com/v1",
            &url.replace('\\', "\\\\")
                .replace('\t', "\\t")
                .replace('\n', "\\n"),
        );
        let err = resolve_text(&profile, &[], CliOverrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("models.p.api_base_url"), "{err}");
    }
    // Upper case and a written default port are the same server, and fine.
    let cli = CliOverrides {
        base_url: Some("HTTPS://API.OPENAI.COM:443/v1".into()),
        ..CliOverrides::default()
    };
    let s = resolve_text(text, &[], cli).unwrap();
    assert_eq!(s.api.api_key.as_deref(), Some("k"));
}

#[test]
fn every_credential_variable_is_hidden_from_children() {
    let text = "[models.p]\napi_base_url = \"http://x.example/v1\"\napi_key_env = \"MY_PROFILE_KEY\"\n\
                [mcp_servers.m]\nurl = \"http://127.0.0.1:1/mcp\"\nbearer_token_env = \"MY_MCP_TOKEN\"\n\
                [tools]\nhide_env = [\"EXTRA\"]\n";
    let hidden = credential_env(&parse(text, None).unwrap());
    for name in SECRET_ENV.iter().chain(KEY_ENV.iter()).chain(&[
        "MY_PROFILE_KEY",
        "MY_MCP_TOKEN",
        "EXTRA",
        "AGENT_API_KEY",
    ]) {
        assert!(hidden.iter().any(|h| h == name), "{name} in {hidden:?}");
    }
}

#[test]
fn compact_at_is_a_share_of_the_window_within_its_range() {
    let at = |line: &str| {
        resolve_text(
            &TWO_PROFILES.replacen("[agent]\n", &format!("[agent]\n{line}\n"), 1),
            &[],
            CliOverrides::default(),
        )
    };
    assert_eq!(at("").unwrap().agent.compact_at, 0.8);
    assert!(at("").unwrap().agent.auto_compact);
    assert_eq!(at("compact_at = 0.5").unwrap().agent.compact_at, 0.5);
    assert_eq!(at("compact_at = 0.1").unwrap().agent.compact_at, 0.1);
    assert_eq!(at("compact_at = 0.95").unwrap().agent.compact_at, 0.95);
    // The older name still reads.
    assert_eq!(at("compact_threshold = 0.6").unwrap().agent.compact_at, 0.6);
    assert!(!at("auto_compact = false").unwrap().agent.auto_compact);
    for bad in ["0.05", "0.99", "1.0", "0", "-0.5", "nan"] {
        let err = at(&format!("compact_at = {bad}")).unwrap_err().to_string();
        assert!(
            err.contains("agent.compact_at is") && err.contains("from 0.1 to 0.95"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn ui_notify_settings_default_and_need_a_program() {
    let with = |section: &str| {
        resolve_text(
            &format!("{TWO_PROFILES}\n{section}"),
            &[],
            CliOverrides::default(),
        )
    };
    let s = with("").unwrap();
    assert_eq!(s.ui.notify_after, 10);
    assert_eq!(s.ui.notify, None);
    let s = with("[ui]\nnotify_after = 0\nnotify = [\"notify-send\", \"buddy\"]").unwrap();
    assert_eq!(s.ui.notify_after, 0);
    assert_eq!(
        s.ui.notify.as_deref(),
        Some(&["notify-send".to_string(), "buddy".to_string()][..])
    );
    for bad in ["notify = []", "notify = [\" \"]"] {
        let err = with(&format!("[ui]\n{bad}")).unwrap_err().to_string();
        assert!(
            err.contains("ui.notify must name a program"),
            "{bad}: {err}"
        );
    }
    let err = with("[ui]\nnotify_afterr = 1").unwrap_err().to_string();
    assert!(err.contains("notify_afterr"), "{err}");
}
