//! The operator's web page: served without a token and holding no data,
//! while the API calls it makes (the query counts, the events) ask for the
//! token; and the page in a real browser, Debian's Chromium, headless,
//! driven over the DevTools protocol: it loads the page from a running
//! server, logs in with the token, and finds in the DOM the services,
//! replicas, split, query count, data centers, explanation and events the
//! API gives; a wrong token is refused. Screenshots go to
//! `$PHAROS_SCREENSHOT_DIR` (`docs` refreshes those of docs/dashboard.md), else to a
//! temporary directory.

use std::net::{IpAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use domain::base::iana::Rtype;
use headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption;
use headless_chrome::{Browser, LaunchOptions, Tab};
use serde_json::Value;

use crate::common;
use common::declarations::Declarations;
use common::*;

const TOKEN: &str = "dashboard-token";
const CHROMIUM: &str = "/usr/bin/chromium";
/// Queries the test sends from each region's clients.
const EUROPE_QUERIES: u16 = 40;
const ASIA_QUERIES: u16 = 20;

fn skip(message: &str) {
    assert!(std::env::var_os("CI").is_none(), "{message}; CI is set, so this is a failure");
    eprintln!("\n*** SKIP: {message}. ***\n");
}

/// Three data centers; app.example.test split by region between them (the
/// americas, a continent of MaxMind's test database (tests/data), all
/// to iad), and api.example.test weighted 3:1, its replica sin-1 down
/// (nothing listens on its probed port) and iad-1 up (`listener` does).
fn config(listener: &TcpListener) -> String {
    let port = listener.local_addr().unwrap().port();
    let mmdb = pharos_test_data::fixture("maxmind-test-GeoIP2-Country-Test.mmdb");
    assert!(mmdb.is_file(), "the shared test data is expected at {}", mmdb.display());
    // Resolvers tallied: the split says how their caches skew it.
    let geo = format!("[metrics]\nresolver_view = true\n[geo]\ndatabase = {:?}\n", mmdb.display().to_string());
    let datacenters = [("fra", 50.1, 8.7), ("iad", 38.9, -77.4), ("sin", 1.35, 103.8)]
        .map(|(id, latitude, longitude)| format!("[[datacenter]]\nid = {id:?}\nlatitude = {latitude}\nlongitude = {longitude}\n"))
        .concat();
    let declarations = Declarations::new()
        .region(1, "europe", &["198.51.100.0/24"])
        .region(2, "asia", &["203.0.113.0/24"])
        .region_by(3, "americas", "continents = [\"NA\"]")
        .service("app.example.test")
        .policy("region-probabilities")
        .replica("fra", "192.0.2.41")
        .line("datacenter = \"fra\"")
        .replica("iad", "192.0.2.42")
        .line("datacenter = \"iad\"")
        .replica("sin", "192.0.2.43")
        .line("datacenter = \"sin\"")
        .probabilities("europe", &[("fra", 0.8, 60), ("iad", 0.2, 60)])
        .probabilities("asia", &[("sin", 0.9, 60), ("fra", 0.1, 60)])
        .probabilities("americas", &[("iad", 1.0, 60)])
        .service("api.example.test")
        .policy("weighted")
        .line(&format!("health = {{ kind = \"tcp\", port = {port}, interval_ms = 200, timeout_ms = 150, rise = 1, fall = 1 }}"))
        .replica("iad-1", "127.0.0.1")
        .line("datacenter = \"iad\"\nweight = 3")
        .replica("sin-1", "127.0.0.2")
        .line("datacenter = \"sin\"");
    geo + &datacenters + &declarations.toml()
}

/// The browser, headless; as root it cannot sandbox its renderers.
fn browser() -> Browser {
    let options = LaunchOptions::default_builder()
        .path(Some(PathBuf::from(CHROMIUM)))
        .headless(true)
        .sandbox(false)
        .window_size(Some((1400, 1900)))
        .idle_browser_timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    Browser::new(options).unwrap()
}

/// The value of a JavaScript expression in the page.
fn evaluate(tab: &Tab, expression: &str) -> Value {
    tab.evaluate(expression, false).unwrap().value.unwrap_or(Value::Null)
}

/// The text of the first element `selector` finds, once there is one.
fn text_of(tab: &Tab, selector: &str) -> String {
    let read = || evaluate(tab, &format!("document.querySelector({selector:?})?.textContent"));
    match read() {
        Value::String(text) => text,
        // Not drawn yet: the browser's own wait, polled with its deadline.
        _ => {
            tab.wait_for_element(selector).unwrap();
            read().as_str().unwrap().to_string()
        }
    }
}

/// The page's way of writing a share.
fn percent(share: f64) -> String {
    format!("{:.1} %", 100.0 * share)
}

fn log_in(tab: &Tab, api: &str, token: &str) {
    tab.navigate_to(&format!("{api}/")).unwrap().wait_until_navigated().unwrap();
    tab.wait_for_element("#token").unwrap().click().unwrap();
    tab.type_str(token).unwrap().press_key("Enter").unwrap();
}

fn screenshot(tab: &Tab, directory: &Path, name: &str) {
    let png = tab.capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{name}: {} bytes", png.len());
    std::fs::write(directory.join(name), png).unwrap();
}

/// Sends `count` queries for app.example.test from a client in `subnet`.
fn ask_from(pharos: &Pharos, subnet: &str, count: u16) {
    let asked = Asked::new(pharos.address);
    let address: IpAddr = subnet.parse().unwrap();
    for id in 0..count {
        asked.ask(&ecs_query(id, "app.example.test", Rtype::A, Some((address, 24))));
    }
}

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
    let expected = [
        "region europe put",
        "service svc.example.test put",
        "datacenter ams put by token admin",
        "token admin: PUT /v1/datacenters/ams -> 200",
    ];
    assert_eq!(texts, expected, "oldest first, each change asked for through the API with the token that asked");
}

#[test]
fn the_dashboard_shows_in_chromium_what_the_api_knows_and_refuses_a_wrong_token() {
    if !Path::new(CHROMIUM).exists() {
        return skip("no chromium (Debian package chromium)");
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (pharos, api) = start_with_api(TOKEN, &config(&listener));
    let get = |path: &str| request("GET", &format!("{api}{path}"), Some(TOKEN), None).1;
    let sin_down = |health: Value| health.as_array().unwrap().iter().any(|entry| entry["replica"] == "sin-1" && entry["up"] == false);
    wait_until("sin-1 is probed down", || sin_down(get("/v1/health")));
    ask_from(&pharos, "198.51.100.0", EUROPE_QUERIES);
    ask_from(&pharos, "203.0.113.0", ASIA_QUERIES);
    // Counted once answered, a moment after the answer left; the queries
    // received before the answers they led to.
    let answers = |split: &Value| split["splits"].as_array().unwrap().iter().map(|entry| entry["answers"].as_u64().unwrap()).sum::<u64>();
    wait_until("every answer is counted", || answers(&get("/v1/split")) == u64::from(EUROPE_QUERIES + ASIA_QUERIES));
    let split = get("/v1/split");
    let queries = queries_counted(&api);

    let browser = browser();
    let tab = browser.new_tab().unwrap();
    log_in(&tab, &api, TOKEN);

    // Services and replicas, with their health.
    let api_service = ".service[data-service='api.example.test']";
    assert!(text_of(&tab, api_service).contains("weighted"));
    assert_eq!(text_of(&tab, &format!("{api_service} tr[data-replica='sin-1'] td:nth-child(5)")), "down");
    assert_eq!(text_of(&tab, &format!("{api_service} tr[data-replica='iad-1'] td:nth-child(5)")), "up");
    assert!(text_of(&tab, ".service[data-service='app.example.test']").contains("region-probabilities, TTL"));

    // The split, configured against realized, as the API measured it.
    let europe = split["splits"].as_array().unwrap().iter().find(|entry| entry["region"] == "europe").unwrap();
    assert_eq!(europe["answers"], u64::from(EUROPE_QUERIES));
    let shown = ".split[data-service='app.example.test'][data-region='europe']";
    let heading = text_of(&tab, &format!("{shown} h3"));
    assert!(heading.contains(&format!("{EUROPE_QUERIES} answers")), "{heading}");
    assert!(heading.contains("1 resolvers, the busiest with 100.0 % of the answers"), "one socket asked: {heading}");
    for share in europe["replicas"].as_array().unwrap() {
        let row = format!("{shown} .bar-row[data-replica={}]", share["replica"]);
        assert_eq!(text_of(&tab, &format!("{row} .configured-share")), percent(share["configured"].as_f64().unwrap()));
        assert_eq!(text_of(&tab, &format!("{row} .realized-share")), percent(share["realized"].as_f64().unwrap()));
        assert_eq!(text_of(&tab, &format!("{row} .cached-share")), percent(share["cached"].as_f64().unwrap()));
    }
    assert_eq!(text_of(&tab, &format!("{shown} .bar-row[data-replica='fra'] .configured-share")), "80.0 %");

    // The query rate: every query of the hour, in the minute under way.
    assert!(queries >= u64::from(EUROPE_QUERIES + ASIA_QUERIES));
    assert!(text_of(&tab, "#rate-total").starts_with(&format!("{queries} queries in the last hour")));

    // The map: each data center, and where each region's clients go: the
    // americas (placed by their continent) by a line to iad, as configured.
    for datacenter in ["fra", "iad", "sin"] {
        tab.wait_for_element(&format!("#map circle[data-datacenter='{datacenter}']")).unwrap();
    }
    assert_eq!(text_of(&tab, "#map .region-label"), "americas");
    assert_eq!(evaluate(&tab, "document.querySelectorAll('#map line.flow').length"), 1);
    let flows = evaluate(&tab, "[...document.querySelectorAll('#flows tbody tr')].map(row => row.textContent).join('\\n')");
    let flows = flows.as_str().unwrap();
    assert!(flows.contains("americasapp.example.testiad100.0 % configured") && flows.contains("europeapp.example.testfra"), "{flows}");

    // The zones served: the demo's file.
    let zones = evaluate(&tab, "[...document.querySelectorAll('#zones tbody tr')].map(row => row.textContent).join('\\n')");
    assert!(zones.as_str().unwrap().starts_with("example.test.a file"), "{zones}");

    // Health transitions and changes.
    let events = text_of(&tab, "#events");
    assert!(events.contains("api.example.test replica sin-1 down") && events.contains("service app.example.test put"), "{events}");

    // An explanation: the same decision as the API's.
    tab.wait_for_element("#explain-name").unwrap().click().unwrap();
    tab.type_str("app.example.test").unwrap();
    tab.wait_for_element("#explain-client").unwrap().click().unwrap();
    tab.type_str("198.51.100.7").unwrap().press_key("Enter").unwrap();
    let explained = get("/v1/explain?name=app.example.test&client=198.51.100.7");
    let first = explained["answer"][0][0].as_str().unwrap();
    assert!(text_of(&tab, "#explained-answer").starts_with(&format!("Answer: {first} (")), "{explained}");
    assert!(text_of(&tab, "#explained-answer").contains("region 1"));

    let directory = std::env::var_os("PHAROS_SCREENSHOT_DIR").map(PathBuf::from);
    let scratch = tempfile::tempdir().unwrap();
    let directory = directory.as_deref().unwrap_or(scratch.path());
    screenshot(&tab, directory, "dashboard.png");

    // A wrong token: the API refuses it and the page says so, showing nothing.
    let refused = browser.new_tab().unwrap();
    log_in(&refused, &api, "not-the-token");
    assert!(text_of(&refused, "#login-error:not([hidden])").contains("wrong bearer token"));
    assert_eq!(evaluate(&refused, "getComputedStyle(document.getElementById('board')).display"), "none");
    assert_eq!(evaluate(&refused, "document.querySelectorAll('.service').length"), 0);
    screenshot(&refused, directory, "dashboard-refused.png");
    drop(listener);
}
