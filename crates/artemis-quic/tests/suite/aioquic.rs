//! Interop: aioquic as a second client reads the replica's service_ttl and
//! moves to its preferred address with real path validation (RFC 9000
//! 9.6), which the replica sees as datagrams arriving at its own address.
//! Skips loudly without aioquic, and fails under CI=true.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pharos_artemis_quic::replica::{Replica, ReplicaConfig};

fn python_has_aioquic() -> bool {
    Command::new("python3").args(["-c", "import aioquic"]).status().is_ok_and(|status| status.success())
}

#[tokio::test]
async fn aioquic_reads_service_ttl_and_moves_to_the_preferred_address() {
    if !python_has_aioquic() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "aioquic is required under CI (scripts/test.sh installs it)");
        eprintln!("SKIPPED: aioquic is not installed (pip install aioquic==1.7.2)");
        return;
    }
    let replica = Replica::bind(&ReplicaConfig {
        replica_id: 5,
        service_address: "127.0.0.50".parse().unwrap(),
        preferred_address: "127.0.0.51:0".parse().unwrap(),
        service_ttl: Duration::from_secs(300),
        server_name: "svc.example.test".into(),
    })
    .unwrap();
    let port = replica.local_addr().unwrap().port();
    let arrivals = replica.arrivals();
    tokio::spawn(replica.serve(|_| {}));

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/aioquic_client.py");
    let output = tokio::task::spawn_blocking(move || {
        Command::new("python3").arg(script).args(["127.0.0.50", &port.to_string(), "svc.example.test", "127.0.0.51"]).output().unwrap()
    })
    .await
    .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let expected = concat!(
        r#"{"service_ttl": 300, "before": "hello from replica 5\nping", "#,
        r#""after": "hello from replica 5\nping", "path": "127.0.0.51"}"#,
        "\n"
    );
    assert_eq!(stdout, expected);
    assert!(arrivals.at_service_address() > 0, "the handshake came through the service address");
    assert!(arrivals.elsewhere() > 0, "aioquic's later datagrams came to the preferred address");
}
