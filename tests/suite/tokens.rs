//! The control API's named tokens against the real server: a read-only
//! token refused every write route the OpenAPI document lists, a token
//! scoped to one service refused every other target, each change logged
//! with the token that asked, `pharos ctl` making, listing and revoking
//! tokens, failed authentications counted and a guessing source slowed,
//! and the API over TLS to `curl --cacert` and `pharos ctl --cacert`.
//! (A token revoked on one node of a fleet is refused by all three:
//! tests/suite/fleet.rs.)

use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::common;
use common::declarations::Declarations;
use common::*;

const TOKEN: &str = "test-token-0123";
const SERVICE: &str = "svc.example.test";

/// A server with the API and one service, and its API's base URL.
fn start() -> (Pharos, String) {
    start_with_api(TOKEN, &format!("[store]\npath = \"state.sqlite\"\n{}", Declarations::europe_service().toml()))
}

/// Makes the token `name` with `scope` through the bootstrap token;
/// returns its secret.
fn make_token(api: &str, name: &str, scope: &str) -> String {
    let (status, made) = request("POST", &format!("{api}/v1/tokens"), Some(TOKEN), Some(json!({ "name": name, "scope": scope })));
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["scope"], scope);
    made["token"].as_str().unwrap().to_owned()
}

/// Every operation the OpenAPI document lists that is not a GET: its
/// method and a concrete path.
fn documented_writes(api: &str) -> Vec<(String, String)> {
    let (status, document) = request("GET", &format!("{api}/openapi.json"), None, None);
    assert_eq!(status, 200);
    let mut writes = Vec::new();
    for (path, operations) in document["paths"].as_object().unwrap() {
        for method in operations.as_object().unwrap().keys().filter(|key| !matches!(key.as_str(), "parameters" | "get")) {
            let concrete = path.replace("{name}", SERVICE).replace("{id}", "fra");
            writes.push((method.to_uppercase(), concrete));
        }
    }
    writes
}

#[test]
fn a_read_only_token_reads_and_is_refused_every_documented_write() {
    let (_pharos, api) = start();
    let reader = make_token(&api, "dashboard", "read");
    let (status, services) = request("GET", &format!("{api}/v1/services/{SERVICE}"), Some(&reader), None);
    assert_eq!(status, 200, "{services}");
    let before = request("GET", &format!("{api}/v1/export"), Some(TOKEN), None);
    let writes = documented_writes(&api);
    assert!(writes.len() >= 15, "the document lists the write routes: {writes:?}");
    for (method, path) in &writes {
        let (status, refused) = request(method, &format!("{api}{path}"), Some(&reader), Some(json!({})));
        assert_eq!(status, 403, "{method} {path} answers a read-only token {status}: {refused}");
        assert!(refused["error"].as_str().unwrap().contains("dashboard"), "the error is JSON naming the token: {refused}");
    }
    assert_eq!(request("GET", &format!("{api}/v1/export"), Some(TOKEN), None), before, "nothing changed");
    assert_eq!(request("GET", &format!("{api}/v1/tokens"), Some(&reader), None).0, 403, "tokens are an admin's to list");
    for token in [None, Some("wrong")] {
        let (status, refused) = request("GET", &format!("{api}/v1/services"), token, None);
        assert_eq!(status, 401, "{refused}");
        assert_eq!(refused["field"], "Authorization");
    }
}

#[test]
fn a_token_scoped_to_one_service_changes_it_and_nothing_else_and_the_log_names_it() {
    let (_pharos, api) = start();
    let writer = make_token(&api, "svc-writer", &format!("write:service={SERVICE}"));
    let (_, service) = request("GET", &format!("{api}/v1/services/{SERVICE}"), Some(&writer), None);
    let (status, reply) = request("PUT", &format!("{api}/v1/services/{SERVICE}"), Some(&writer), Some(service.clone()));
    assert_eq!(status, 200, "{reply}");
    let mut other = service.clone();
    other["name"] = json!("other.example.test");
    let refused = [
        ("PUT", "/v1/services/other.example.test", Some(other)),
        ("DELETE", "/v1/services/other.example.test", None),
        ("DELETE", "/v1/regions/europe", None),
        ("POST", "/v1/reload", None),
        ("POST", "/v1/zones/example.test/keys", Some(json!({ "step": "roll-zsk" }))),
        ("POST", "/v1/tokens", Some(json!({ "name": "mine", "scope": "admin" }))),
    ];
    for (method, path, body) in refused {
        let (status, reply) = request(method, &format!("{api}{path}"), Some(&writer), body);
        assert_eq!(status, 403, "{method} {path}: {reply}");
    }
    // A zone's scope reaches its keys (this zone is not signed: the route
    // itself answers, not the token check).
    let zone_writer = make_token(&api, "zone-writer", "write:zone=example.test");
    let (status, reply) =
        request("POST", &format!("{api}/v1/zones/example.test/keys"), Some(&zone_writer), Some(json!({ "step": "roll-zsk" })));
    assert!(![401, 403].contains(&status), "{status}: {reply}");
    let (status, events) = request("GET", &format!("{api}/v1/events"), Some(&writer), None);
    assert_eq!(status, 200);
    let texts: Vec<&str> =
        events.as_array().unwrap().iter().filter(|event| event["kind"] == "audit").map(|event| event["text"].as_str().unwrap()).collect();
    assert!(texts.contains(&"token admin: POST /v1/tokens -> 201"), "{texts:?}");
    assert!(texts.contains(&format!("token svc-writer: PUT /v1/services/{SERVICE} -> 200").as_str()), "{texts:?}");
    assert!(texts.contains(&"token svc-writer: DELETE /v1/regions/europe -> 403"), "refusals are logged too: {texts:?}");
    let listed = ctl(&api, TOKEN, &["events"]);
    assert!(stdout(&listed).contains(&format!("token svc-writer: PUT /v1/services/{SERVICE} -> 200")), "{}", stdout(&listed));
}

fn ctl(api: &str, token: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pharos")).args(["ctl", "--api", api, "--token", token]).args(args).output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn ctl_makes_lists_and_revokes_tokens_and_a_revoked_token_is_refused_at_once() {
    let (_pharos, api) = start();
    let made = ctl(&api, TOKEN, &["token", "create", "ci", "--scope", "write:service=svc.example.test,zone=example.test"]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let secret = stdout(&made).lines().last().unwrap().to_owned();
    assert_eq!(secret.len(), 43, "256 bits in unpadded base64url: {secret:?}");
    let read = ctl(&api, &secret, &["services"]);
    assert!(read.status.success(), "{}", String::from_utf8_lossy(&read.stderr));
    // A secret is base64url: one in 64 starts with '-', still a token.
    let hyphen = ctl(&api, "-Gnot-a-flag", &["services"]);
    assert!(String::from_utf8_lossy(&hyphen.stderr).contains("401"), "{}", String::from_utf8_lossy(&hyphen.stderr));
    let listed = stdout(&ctl(&api, TOKEN, &["token", "list"]));
    assert!(listed.contains("ci") && listed.contains("active") && listed.contains("zone=example.test"), "{listed}");
    assert!(!listed.contains(&secret), "the secret is shown once only");
    let again = ctl(&api, TOKEN, &["token", "create", "ci", "--scope", "read"]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("409"), "a name is taken once");
    let bad_scope = ctl(&api, TOKEN, &["token", "create", "x", "--scope", "write:host=a"]);
    assert!(!bad_scope.status.success() && String::from_utf8_lossy(&bad_scope.stderr).contains("service=NAME or zone=NAME"));
    assert!(ctl(&api, TOKEN, &["token", "revoke", "ci"]).status.success());
    let refused = ctl(&api, &secret, &["services"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("401 Unauthorized: this token has been revoked"), "{refused:?}");
    assert!(stdout(&ctl(&api, TOKEN, &["token", "list"])).contains("revoked"));
    let events = stdout(&ctl(&api, TOKEN, &["events"]));
    assert!(events.contains("token ci made") && events.contains("token ci revoked"), "{events}");
}

/// The value of the sample `name` (labels included) in the text of
/// the metrics listener at `metrics`.
fn sample(metrics: &str, name: &str) -> f64 {
    let (status, text) = request("GET", &format!("{metrics}/metrics"), None, None);
    assert_eq!(status, 200);
    let text = text.as_str().unwrap().to_owned();
    text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok()).unwrap_or(0.0)
}

#[test]
fn failed_authentications_are_counted_and_a_source_presenting_wrong_tokens_is_refused_for_a_while() {
    let metrics = format!("127.0.0.1:{}", free_port());
    let (_pharos, api) = start_with_api(TOKEN, &format!("[metrics]\nlisten = \"{metrics}\""));
    let metrics = format!("http://{metrics}");
    for _ in 0..5 {
        assert_eq!(request("GET", &format!("{api}/v1/regions"), None, None).0, 401, "a missing token is not a guess: never slowed");
    }
    for attempt in 1..=4 {
        let (status, refused) = request("GET", &format!("{api}/v1/regions"), Some("guess"), None);
        assert_eq!(status, 401, "attempt {attempt}: {refused}");
    }
    // The fourth wrong token in a row shuts the source out for two
    // seconds, whatever it presents next.
    let (status, refused) = request("GET", &format!("{api}/v1/regions"), Some(TOKEN), None);
    assert_eq!(status, 429, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("try again in 2 s"), "{refused}");
    assert_eq!(sample(&metrics, "pharos_api_auth_failures_total{reason=\"missing\"}"), 5.0);
    assert_eq!(sample(&metrics, "pharos_api_auth_failures_total{reason=\"wrong\"}"), 4.0);
    assert_eq!(sample(&metrics, "pharos_api_auth_throttled_total"), 1.0);
}

#[test]
fn the_api_answers_over_tls_to_curl_and_ctl_trusting_its_certificate() {
    let (pharos, api) = start_with_api(TOKEN, "tls = true\n[store]\npath = \"state.sqlite\"");
    let port = api.rsplit(':').next().unwrap();
    let certificate = pharos.config.parent().unwrap().join("pharos-tls-certificate.pem");
    let url = format!("https://localhost:{port}/v1/regions");
    // A client that connects and never begins its handshake holds up no
    // other (which gives up after 5 s, before that one's 10 s run out).
    let _stalled = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    let curl = |extra: &[&str]| {
        let mut command = Command::new("curl");
        command.args(["--silent", "--show-error", "--max-time", "5", "--resolve", &format!("localhost:{port}:127.0.0.1")]);
        command.args(["--header", &format!("Authorization: Bearer {TOKEN}")]).args(extra).output().unwrap()
    };
    let answered = curl(&["--cacert", certificate.to_str().unwrap(), "--write-out", "\n%{http_code}", &url]);
    assert!(answered.status.success(), "{}", String::from_utf8_lossy(&answered.stderr));
    let text = stdout(&answered);
    let (body, status) = text.rsplit_once('\n').unwrap();
    assert_eq!(status, "200", "{text}");
    assert!(serde_json::from_str::<Value>(body).unwrap().is_array(), "{body}");
    let untrusted = curl(&[&url]);
    assert!(!untrusted.status.success(), "a client that does not trust the certificate fails the handshake");
    let plain = curl(&[&format!("http://127.0.0.1:{port}/v1/regions")]);
    assert!(!plain.status.success() || !stdout(&plain).contains('['), "no plain HTTP: {}", stdout(&plain));
    let https = format!("https://localhost:{port}");
    let through_ctl = Command::new(env!("CARGO_BIN_EXE_pharos"))
        .args(["ctl", "--api", &https, "--token", TOKEN, "regions"])
        .env("PHAROS_CACERT", &certificate)
        .output()
        .unwrap();
    assert!(through_ctl.status.success(), "{}", String::from_utf8_lossy(&through_ctl.stderr));
    let refused = ctl(&https, TOKEN, &["regions"]);
    assert!(!refused.status.success(), "the web's roots do not hold a self-signed certificate");
}
