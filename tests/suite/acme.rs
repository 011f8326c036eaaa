//! A certificate issued through Pharos by ACME DNS-01 (RFC 8555 section
//! 8.4), end to end on loopback: Let's Encrypt's test server `pebble`
//! resolves through Pharos, and `lego` (both Debian packages) writes the
//! challenge into a zone the store keeps by DNS UPDATE, signed with a
//! TSIG key whose rule allows only ACME challenges; the certificate is
//! issued, and the challenge record is gone afterwards.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::json;

use crate::common;
use common::*;

const TOKEN: &str = "test-token-0123";
const ACME_SECRET: &str = "dGhlIGFjbWUga2V5J3Mgc2VjcmV0LCBhbHNvIDMyIG9jdGV0cw==";

/// pebble, killed when dropped.
struct Pebble(Child);

impl Drop for Pebble {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A self-signed certificate for 127.0.0.1 in `dir` (cert.pem, key.pem),
/// for pebble's API; lego is told to trust it.
fn certificate(dir: &Path) {
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1"])
        .args(["-subj", "/CN=pebble", "-addext", "subjectAltName=IP:127.0.0.1"])
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
}

/// pebble on a free port, resolving through `dns`; its directory URL.
fn start_pebble(pebble: &Path, dir: &Path, dns: SocketAddr) -> (Pebble, String) {
    certificate(dir);
    let listen = format!("127.0.0.1:{}", free_port());
    let config = json!({"pebble": {
        "listenAddress": listen, "managementListenAddress": format!("127.0.0.1:{}", free_port()),
        "certificate": dir.join("cert.pem"), "privateKey": dir.join("key.pem"),
        "httpPort": free_port(), "tlsPort": free_port(), "ocspResponderURL": "", "externalAccountBindingRequired": false
    }});
    std::fs::write(dir.join("pebble.json"), config.to_string()).unwrap();
    let child = Command::new(pebble)
        .arg("-config")
        .arg(dir.join("pebble.json"))
        .args(["-dnsserver", &dns.to_string()])
        // No random pauses, no nonces refused at random: the test is
        // about DNS, not about clients' retries.
        .env("PEBBLE_VA_NOSLEEP", "1")
        .env("PEBBLE_WFE_NONCEREJECT", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pebble = Pebble(child);
    wait_until("pebble listens", || std::net::TcpStream::connect(&listen).is_ok());
    (pebble, format!("https://{listen}/dir"))
}

#[test]
fn lego_gets_a_certificate_by_dns_01_through_a_store_zone_and_cleans_up() {
    let (Some(pebble), Some(lego)) = (require("pebble", "pebble"), require("lego", "lego")) else { return };
    let config = format!(
        "[store]\npath = \"state.sqlite\"\n[[tsig_key]]\nname = \"acme\"\nsecret = \"{ACME_SECRET}\"\n\
         [[store_zones.update]]\nkey = \"acme\"\nat_or_below = \"acme.test.\"\nacme_only = true\n"
    );
    let (pharos, api) = start_with_api(TOKEN, &config);
    let zone = json!({"name": "acme.test", "nameservers": ["ns1.acme.test"]});
    assert_eq!(request("POST", &format!("{api}/v1/zones"), Some(TOKEN), Some(zone)).0, 201);
    let dir = tempfile::tempdir().unwrap();
    let (_pebble, directory) = start_pebble(&pebble, dir.path(), pharos.address);
    let dns = pharos.address.to_string();
    let issued = Command::new(lego)
        .args(["--server", &directory, "--accept-tos", "--email", "ops@acme.test", "--dns", "rfc2136"])
        .args(["--dns.resolvers", &dns, "--dns.disable-cp", "--domains", "www.acme.test"])
        .arg("--path")
        .arg(dir.path().join("lego"))
        .arg("run")
        .env("LEGO_CA_CERTIFICATES", dir.path().join("cert.pem"))
        .env("RFC2136_NAMESERVER", &dns)
        .env("RFC2136_TSIG_KEY", "acme")
        .env("RFC2136_TSIG_SECRET", ACME_SECRET)
        .env("RFC2136_TSIG_ALGORITHM", "hmac-sha256.")
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&issued.stdout), String::from_utf8_lossy(&issued.stderr));
    assert!(issued.status.success(), "lego failed:\n{said}\n{}", pharos.log());
    let certificate = std::fs::read_to_string(dir.path().join("lego/certificates/www.acme.test.crt")).unwrap();
    assert!(certificate.contains("BEGIN CERTIFICATE"), "{certificate}");
    let (_, rrsets) = request("GET", &format!("{api}/v1/zones/acme.test/rrsets"), Some(TOKEN), None);
    assert!(!rrsets.to_string().contains("_acme-challenge"), "the challenge is gone: {rrsets}");
    let events = request("GET", &format!("{api}/v1/events"), Some(TOKEN), None).1.to_string();
    assert!(events.matches("zone acme.test. put").count() >= 2, "set, then removed: {events}");
}
