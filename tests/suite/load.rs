//! Load-aware selection through the real server: loads pushed to the API
//! and probed from real HTTP endpoints feed MyXDNS's algorithms I and II,
//! whose tables (worked out by hand here) are installed by the control
//! loop and steer DNS answers.

use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener};

use domain::base::iana::Rtype;
use domain::rdata::A;
use serde_json::{Value, json};

use crate::common;
use common::*;

const TOKEN: &str = "load-token";

fn start_with_services(services: &str) -> (Pharos, String) {
    start_with_api(TOKEN, &format!("[load]\nsmoothing = 1.0\n{services}"))
}

fn call(method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
    request(method, url, Some(TOKEN), body)
}

/// The installed default table of `service`, replica -> probability.
fn default_table(api: &str, service: &str) -> Value {
    let (_, spec) = call("GET", &format!("{api}/v1/services/{service}"), None);
    let table = &spec["probabilities"]["default"];
    json!({ "a": table["a"]["probability"], "b": table["b"]["probability"] })
}

fn first_answer(pharos: &Pharos, name: &str) -> IpAddr {
    let response = udp_query(pharos.address, name, Rtype::A).expect("an answer");
    IpAddr::V4(response.answer().unwrap().limit_to::<A>().next().unwrap().unwrap().data().addr())
}

/// An HTTP server on `ip` answering every request with `body`.
fn load_endpoint(ip: &str, port: u16, body: &'static str) {
    let listener = TcpListener::bind((ip, port)).unwrap();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut request = [0u8; 2048];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
        }
    });
}

const REPLICAS: &str = r#"
[[service.replica]]
id = "a"
address = "192.0.2.1"
[[service.replica]]
id = "b"
address = "192.0.2.2"
"#;

#[test]
fn pushed_loads_drive_algorithm_one() {
    let services = format!(
        "[[service]]\nname = \"app.example.test\"\npolicy = \"region-probabilities\"\n\
         load_control = {{ algorithm = \"I\", threshold = 0.5, interval_ms = 200, ranks = {{ default = {{ a = 1, b = 2 }} }} }}\n{REPLICAS}"
    );
    let (pharos, api) = start_with_services(&services);
    let load = |replica: &str, value: f64| {
        call("PUT", &format!("{api}/v1/services/app.example.test/replicas/{replica}/load"), Some(json!({ "load": value })))
    };
    // a, the better-ranked, is overloaded: everything goes to b.
    assert_eq!(load("a", 0.9).0, 200);
    assert_eq!(load("b", 0.1).0, 200);
    wait_until("algorithm I moves everyone to b", || default_table(&api, "app.example.test") == json!({ "a": 0.0, "b": 1.0 }));
    assert_eq!(first_answer(&pharos, "app.example.test"), "192.0.2.2".parse::<IpAddr>().unwrap());
    // a recovers: as the best rank that is not overloaded, it takes everything.
    assert_eq!(load("a", 0.2).0, 200);
    wait_until("algorithm I moves everyone back to a", || default_table(&api, "app.example.test") == json!({ "a": 1.0, "b": 0.0 }));
    assert_eq!(first_answer(&pharos, "app.example.test"), "192.0.2.1".parse::<IpAddr>().unwrap());
    let (_, status) = call("GET", &format!("{api}/v1/load"), None);
    assert_eq!(status["runs"][0]["loads"], json!({ "a": 0.2, "b": 0.1 }), "{status}");
    // Bad reports change nothing.
    let (code, reply) = load("a", -1.0);
    assert_eq!((code, reply["field"].as_str()), (422, Some("load")), "{reply}");
    assert_eq!(load("zz", 0.5).0, 404);
}

#[test]
fn probed_loads_drive_algorithm_two_with_damping() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    load_endpoint("127.0.0.21", port, "0.5\n");
    load_endpoint("127.0.0.22", port, "0.1\n");
    let services = format!(
        "[[service]]\nname = \"app.example.test\"\npolicy = \"region-probabilities\"\n\
         load_probe = {{ kind = \"http\", port = {port}, path = \"/load\", interval_ms = 100, timeout_ms = 90 }}\n\
         load_control = {{ algorithm = \"II\", interval_ms = 300, smoothing = 0.5, max_step = 0.2, ranks = {{ default = {{ a = 1, b = 2 }} }} }}\n\
         [service.probabilities.default]\na = {{ probability = 1.0 }}\nb = {{ probability = 0.0 }}\n\
         [[service.replica]]\nid = \"a\"\naddress = \"192.0.2.1\"\nprobe_address = \"127.0.0.21\"\n\
         [[service.replica]]\nid = \"b\"\naddress = \"192.0.2.2\"\nprobe_address = \"127.0.0.22\"\n"
    );
    let (_pharos, api) = start_with_services(&services);
    // a at 0.5 weighs (0.6 - 0.5) / (0.6 - 0.4) = 0.5, over rank 1; b at 0.1
    // weighs 1, over rank 2: 0.5 and 0.5, so the target is half each.
    let mut run = Value::Null;
    wait_until("a round with both probed loads", || {
        run = call("GET", &format!("{api}/v1/load"), None).1["runs"][0].clone();
        run["loads"] == json!({ "a": 0.5, "b": 0.1 })
    });
    assert_eq!(run["targets"]["default"], json!({ "a": 0.5, "b": 0.5 }), "{run}");
    // Each round moves half the way to the target, but at most 0.2.
    let before = run["previous"]["default"]["a"].as_f64().unwrap();
    let after = run["installed"]["default"]["a"].as_f64().unwrap();
    let expected = before + ((0.5 - before) * 0.5).clamp(-0.2, 0.2);
    assert!((after - expected).abs() < 1e-9, "{before} -> {after}, expected {expected}: {run}");
    wait_until("damping converges on the target", || {
        let table = default_table(&api, "app.example.test");
        (table["a"].as_f64().unwrap() - 0.5).abs() < 0.01
    });
}
