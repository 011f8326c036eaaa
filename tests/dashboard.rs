//! The operator's web page: served without a token and holding no data,
//! while the API calls it makes (the query counts, the events) ask for the
//! token.

use domain::base::iana::Rtype;

mod common;
use common::declarations::Declarations;
use common::*;

const TOKEN: &str = "dashboard-token";

/// A GET without a token: the status, the content type and the body.
fn fetch_plain(url: &str) -> (u16, String, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let response = agent.get(url).call().unwrap();
    let content_type = response.headers().get("content-type").map(|value| value.to_str().unwrap().to_string()).unwrap_or_default();
    (response.status().as_u16(), content_type, response.into_body().read_to_string().unwrap())
}

fn queries_counted(api: &str) -> u64 {
    let minutes = request("GET", &format!("{api}/v1/queries"), Some(TOKEN), None).1;
    minutes["minutes"].as_array().unwrap().iter().map(|minute| minute["queries"].as_u64().unwrap()).sum()
}

#[test]
fn the_page_needs_no_token_and_the_query_counts_and_events_behind_it_do() {
    let (pharos, api) = start_with_api(TOKEN, &Declarations::europe_service().toml());
    for (path, kind, holds) in [
        ("/", "text/html", "dashboard.js"),
        ("/dashboard/dashboard.js", "text/javascript", "sessionStorage"),
        ("/dashboard/dashboard.css", "text/css", ".bar"),
        ("/dashboard/world.svg", "image/svg+xml", "class=\"land\""),
    ] {
        let (status, content_type, body) = fetch_plain(&format!("{api}{path}"));
        assert_eq!((status, content_type.split(';').next().unwrap()), (200, kind), "{path}");
        assert!(body.contains(holds) && !body.contains("svc.example.test"), "{path} holds no data");
    }
    for path in ["/v1/queries", "/v1/events"] {
        assert_eq!(request("GET", &format!("{api}{path}"), None, None).0, 401, "{path} asks for the token");
    }

    let before = queries_counted(&api);
    let asked = Asked::new(pharos.address);
    for id in 0..7 {
        asked.ask(&query_bytes(id, "www.example.test", Rtype::A));
    }
    // Counted once answered, a moment after the answer left.
    wait_until("the queries are counted", || queries_counted(&api) - before >= 7);
    assert_eq!(queries_counted(&api) - before, 7, "every query, and no other");

    let datacenter = serde_json::json!({ "id": "ams", "latitude": 52.4, "longitude": 4.9 });
    assert_eq!(request("PUT", &format!("{api}/v1/datacenters/ams"), Some(TOKEN), Some(datacenter)).0, 200);
    let events = request("GET", &format!("{api}/v1/events"), Some(TOKEN), None).1;
    let texts: Vec<&str> = events.as_array().unwrap().iter().map(|event| event["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["region europe put", "service svc.example.test put", "datacenter ams put"], "oldest first");
}
