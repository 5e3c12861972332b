//! The Kubernetes manifest we ship (deploy/kubernetes/buddy.yaml), checked
//! as far as a test without a cluster can: it parses as YAML; every document
//! is a kind at the API version Kubernetes serves it under; the parts refer
//! to each other by names that exist; every image is ours (built from the
//! Containerfile, at this version) or a pinned official one; every flag it
//! gives buddy is one `buddy --help` or `buddy serve --help` lists; and the
//! probe paths are answered by a real `buddy serve` started with the
//! manifest's own config and flags, without a token.

use crate::support;

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;
use support::serve::Server;
use support::BuddyCmd;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn manifest_text() -> String {
    let path = repo().join("deploy/kubernetes/buddy.yaml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every YAML document of the manifest, as JSON values.
fn documents() -> Vec<Value> {
    let text = manifest_text();
    yaml_serde::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("not YAML: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn name(doc: &Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or("")
}

/// The pod templates' containers, with the workload each belongs to.
fn containers(docs: &[Value]) -> Vec<(&Value, &Value)> {
    docs.iter()
        .filter(|d| matches!(d["kind"].as_str(), Some("Deployment" | "StatefulSet")))
        .flat_map(|d| {
            d["spec"]["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |c| (d, c))
        })
        .collect()
}

/// Whether `image` is buddy's own (a repository named `buddy`).
fn is_buddy(image: &str) -> bool {
    let repo = image.rsplit_once(':').map_or(image, |(r, _)| r);
    repo == "buddy" || repo.ends_with("/buddy")
}

fn buddy_containers(docs: &[Value]) -> Vec<&Value> {
    containers(docs)
        .into_iter()
        .map(|(_, c)| c)
        .filter(|c| is_buddy(c["image"].as_str().unwrap_or("")))
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            s.as_str()
                .unwrap_or_else(|| panic!("not a string: {s}"))
                .to_string()
        })
        .collect()
}

/// `name` as a DNS-1123 label, the form Kubernetes wants for most names.
fn dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[test]
fn every_document_is_a_kind_kubernetes_serves_at_that_api_version() {
    let known = [
        ("ConfigMap", "v1"),
        ("Service", "v1"),
        ("Deployment", "apps/v1"),
        ("StatefulSet", "apps/v1"),
        ("Ingress", "networking.k8s.io/v1"),
    ];
    let docs = documents();
    assert!(docs.len() >= 5, "{docs:?}");
    for d in &docs {
        let kind = d["kind"].as_str().unwrap_or_else(|| panic!("no kind: {d}"));
        let (_, api) = known
            .iter()
            .find(|(k, _)| *k == kind)
            .unwrap_or_else(|| panic!("a kind this test does not know: {kind}"));
        assert_eq!(d["apiVersion"], *api, "{kind} {}", name(d));
        assert!(dns_label(name(d)), "{kind} named {:?}", name(d));
    }
    // The parts the docs promise: serve twice over, a Service for it, and
    // PostgreSQL.
    let deployments = of_kind(&docs, "Deployment");
    let serve = deployments
        .iter()
        .find(|d| name(d) == "buddy")
        .expect("a Deployment named buddy");
    assert_eq!(serve["spec"]["replicas"], 2);
    let postgres = of_kind(&docs, "StatefulSet");
    assert!(
        postgres.iter().any(|s| name(s) == "postgres"),
        "{postgres:?}"
    );

    // Each workload's selector picks its own pods.
    for d in docs
        .iter()
        .filter(|d| matches!(d["kind"].as_str(), Some("Deployment" | "StatefulSet")))
    {
        let wanted = d["spec"]["selector"]["matchLabels"].as_object().unwrap();
        let labels = &d["spec"]["template"]["metadata"]["labels"];
        for (k, v) in wanted {
            assert_eq!(&labels[k], v, "{}: selector {k}", name(d));
        }
    }
    // Each Service selects some workload's pods, on a port they name.
    for s in of_kind(&docs, "Service") {
        let selector = s["spec"]["selector"].as_object().unwrap();
        let (_, pod) = containers(&docs)
            .into_iter()
            .find(|(w, _)| {
                let labels = &w["spec"]["template"]["metadata"]["labels"];
                selector.iter().all(|(k, v)| &labels[k] == v)
            })
            .unwrap_or_else(|| panic!("Service {} selects no pods", name(s)));
        for p in s["spec"]["ports"].as_array().unwrap() {
            if let Some(target) = p["targetPort"].as_str() {
                let named = pod["ports"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|cp| cp["name"] == target);
                assert!(named, "Service {} targets port {target:?}", name(s));
            }
        }
    }
    // The Ingress sends to a Service and port that exist.
    let services = of_kind(&docs, "Service");
    for i in of_kind(&docs, "Ingress") {
        for rule in i["spec"]["rules"].as_array().unwrap() {
            for path in rule["http"]["paths"].as_array().unwrap() {
                let backend = &path["backend"]["service"];
                let service = services
                    .iter()
                    .find(|s| name(s) == backend["name"])
                    .unwrap_or_else(|| panic!("the Ingress names a missing Service: {backend}"));
                let port = &backend["port"]["name"];
                assert!(
                    service["spec"]["ports"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|p| &p["name"] == port),
                    "{backend}"
                );
            }
        }
    }
}

#[test]
fn every_secret_the_pods_read_is_one_the_header_says_to_create() {
    let text = manifest_text();
    // `--from-literal=KEY=…` lines of the header's `kubectl create secret`.
    let documented: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.split("--from-literal=").nth(1))
        .filter_map(|rest| rest.split('=').next())
        .map(str::to_string)
        .collect();
    assert!(
        text.contains("kubectl create secret generic buddy"),
        "the header says how"
    );
    let docs = documents();
    let mut read = BTreeSet::new();
    for (_, c) in containers(&docs) {
        for env in c["env"].as_array().into_iter().flatten() {
            let r = &env["valueFrom"]["secretKeyRef"];
            if r.is_object() {
                assert_eq!(r["name"], "buddy", "{env}");
                read.insert(r["key"].as_str().unwrap().to_string());
            }
        }
    }
    assert!(!read.is_empty());
    let missing: Vec<_> = read.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "read but not in the header: {missing:?}"
    );
}

/// `REPO[:TAG]` split, the repository's parts checked as registries and
/// Kubernetes accept them: lowercase, digits, `.`, `_`, `-`, a port on the
/// registry; the tag present, of tag characters, and never `latest`.
fn pinned(image: &str) -> Result<(&str, &str), String> {
    let (repo, tag) = image
        .rsplit_once(':')
        .filter(|(_, t)| !t.contains('/'))
        .ok_or_else(|| format!("{image}: no tag"))?;
    let tag_ok = !tag.is_empty()
        && tag.len() <= 128
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !tag_ok || tag == "latest" {
        return Err(format!("{image}: the tag {tag:?} is not a pinned one"));
    }
    let parts: Vec<&str> = repo.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        let part = if i == 0 && parts.len() > 1 {
            // A registry host may carry a port.
            part.split(':').next().unwrap_or("")
        } else {
            part
        };
        let ok = !part.is_empty()
            && part.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
            });
        if !ok {
            return Err(format!("{image}: {part:?} is not a repository name"));
        }
    }
    Ok((repo, tag))
}

/// An official image (Docker Hub's `library/`) at a version, not a moving
/// name: its tag starts with a digit.
fn pinned_official(image: &str) -> Result<(), String> {
    let (repo, tag) = pinned(image)?;
    if !repo.starts_with("docker.io/library/") {
        return Err(format!(
            "{image}: not an official image (docker.io/library/…)"
        ));
    }
    if !tag.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("{image}: the tag {tag:?} is not a version"));
    }
    Ok(())
}

#[test]
fn images_are_ours_at_this_version_or_pinned_official_ones() {
    let containerfile = std::fs::read_to_string(repo().join("Containerfile"))
        .expect("the Containerfile buddy's image is built from");
    let docs = documents();
    let mut ours = 0;
    for (_, c) in containers(&docs) {
        let image = c["image"]
            .as_str()
            .unwrap_or_else(|| panic!("no image: {c}"));
        if is_buddy(image) {
            let (_, tag) = pinned(image).unwrap();
            assert_eq!(tag, env!("CARGO_PKG_VERSION"), "{image}: this version");
            assert!(
                containerfile.contains(&format!("-t {image} ")),
                "the Containerfile's build line makes {image}"
            );
            ours += 1;
        } else {
            pinned_official(image).unwrap();
        }
    }
    assert!(ours >= 1, "the manifest runs buddy");
    // The Containerfile builds from pinned official images too.
    let bases: Vec<&str> = containerfile
        .lines()
        .filter_map(|l| l.strip_prefix("FROM "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(!bases.is_empty());
    for base in bases {
        pinned_official(base).unwrap();
    }
    // And the checks refuse what they should.
    for bad in [
        "postgres",
        "postgres:latest",
        "docker.io/library/postgres:bookworm",
        "quay.io/x/postgres:17",
        "Registry/buddy:1",
    ] {
        assert!(pinned_official(bad).is_err(), "{bad}");
    }
}

/// The flags a help text lists: each `--name` in it.
fn listed_flags(help: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in help.match_indices("--") {
        let name: String = help[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if !name.is_empty() {
            out.insert(format!("--{name}"));
        }
    }
    out
}

fn help(cmd: &BuddyCmd, args: &[&str]) -> BTreeSet<String> {
    let out = cmd.rerun(args);
    out.assert_success();
    listed_flags(&out.stdout)
}

/// The flag lists come from the built binary, so a flag the manifest uses
/// before buddy has it (`--store`, with the PostgreSQL store) fails here
/// until it exists.
#[test]
fn every_flag_the_manifest_gives_buddy_is_one_buddy_lists() {
    let cmd = BuddyCmd::new();
    let global = help(&cmd, &["--help"]);
    let serve = help(&cmd, &["serve", "--help"]);
    assert!(
        serve.contains("--listen") && global.contains("--config"),
        "{serve:?}"
    );
    let docs = documents();
    for c in buddy_containers(&docs) {
        let args = strings(&c["args"]);
        let at = args
            .iter()
            .position(|a| a == "serve")
            .unwrap_or_else(|| panic!("buddy is run as `serve`: {args:?}"));
        let defined: BTreeSet<String> = c["env"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect();
        for (i, arg) in args.iter().enumerate() {
            // `$(NAME)` is filled in by Kubernetes from the container's env.
            for (j, _) in arg.match_indices("$(") {
                let var = arg[j + 2..].split(')').next().unwrap_or("");
                assert!(defined.contains(var), "{arg}: {var} is not in env");
            }
            let Some(flag) = arg
                .strip_prefix("--")
                .map(|f| f.split('=').next().unwrap_or(f))
            else {
                continue;
            };
            let flag = format!("--{flag}");
            let (list, which) = if i < at {
                (&global, "buddy --help")
            } else {
                (&serve, "buddy serve --help")
            };
            assert!(list.contains(&flag), "{flag} is not in `{which}`: {list:?}");
        }
    }
}

#[test]
fn the_probe_paths_are_answered_by_serve_with_the_manifests_config_and_no_token() {
    let docs = documents();
    let config = of_kind(&docs, "ConfigMap")
        .into_iter()
        .find_map(|m| m["data"]["buddy.toml"].as_str())
        .expect("the ConfigMap's buddy.toml");
    let cmd = BuddyCmd::new();
    let config_path = cmd.work_dir().join("manifest-buddy.toml");
    std::fs::write(&config_path, config).unwrap();
    for c in buddy_containers(&docs) {
        let args = strings(&c["args"]);
        let listen = args
            .iter()
            .find_map(|a| a.strip_prefix("--listen="))
            .expect("--listen=ADDR");
        let port: u16 = listen.rsplit_once(':').unwrap().1.parse().unwrap();
        let http = c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "http")
            .expect("a port named http");
        assert_eq!(
            http["containerPort"], port,
            "the probes' port is the one serve listens on"
        );
        // The manifest's own balancer flags, on this machine's loopback
        // (the store is the pg engineer's flag, the listen address ours).
        let mut extra: Vec<String> = vec![
            format!("--config={}", config_path.display()),
            "--token=deploy-test-token".into(),
        ];
        extra.extend(
            args.iter()
                .filter(|a| a.starts_with("--public-host=") || a.starts_with("--trusted-proxy="))
                .cloned(),
        );
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let cmd = BuddyCmd::new()
            .env("BUDDY_API_KEY", "sk-deploy-test")
            .env("BUDDY_SERVE_TOKEN", "");
        let server = Server::start(&cmd, &extra);
        let anon = server.client();
        let mut paths = BTreeSet::new();
        for probe in ["readinessProbe", "livenessProbe"] {
            let get = &c[probe]["httpGet"];
            assert_eq!(get["port"], "http", "{probe}");
            paths.insert(
                get["path"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{probe} path"))
                    .to_string(),
            );
        }
        for path in paths {
            // The kubelet sends the pod's address as Host, and no token.
            let r = anon.request("GET", &path, &[("Host", &format!("10.1.2.3:{port}"))], None);
            assert_eq!((r.status, r.body.as_str()), (200, "ok"), "{path}");
        }
        // And the server really wants its token elsewhere.
        assert_eq!(anon.get("/api/sessions").status, 401);
    }
}
