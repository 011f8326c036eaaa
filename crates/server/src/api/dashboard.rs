//! The operator's web page, served by the control listener at `/`: plain
//! HTML, one script, one style sheet and the world map's outline, all built
//! into the binary, so the page needs no network beyond the server itself.
//! These files hold no data and ask for no token; the script asks the
//! control API for everything it shows, with the token the operator typed
//! (kept in the browser's session storage), so the API's token check is
//! the page's too.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

const PAGE: &str = include_str!("dashboard/index.html");
const SCRIPT: &str = include_str!("dashboard/dashboard.js");
const STYLE: &str = include_str!("dashboard/dashboard.css");
/// Natural Earth land, drawn by `scripts/world-map.mjs`.
const WORLD: &str = include_str!("dashboard/world.svg");

/// Scripts and styles from the server only: a value the page shows can never
/// run as code, even if it slipped into the markup.
const POLICY: &str = "default-src 'self'; frame-ancestors 'none'";

/// The page's routes, for any router state.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| served("text/html; charset=utf-8", PAGE)))
        .route("/dashboard/dashboard.js", get(|| served("text/javascript; charset=utf-8", SCRIPT)))
        .route("/dashboard/dashboard.css", get(|| served("text/css; charset=utf-8", STYLE)))
        .route("/dashboard/world.svg", get(|| served("image/svg+xml", WORLD)))
}

async fn served(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, content_type), (header::CONTENT_SECURITY_POLICY, POLICY)], body)
}
