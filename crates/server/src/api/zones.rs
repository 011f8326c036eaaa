//! `/v1/zones`: the zones served, and the records API of those the store
//! keeps (made, changed and deleted here, by DNS UPDATE, or by `ctl`;
//! followed by every node of a fleet through the change log). A zone from
//! a file is listed but changed only in its file.

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use pharos_control::zones;
use pharos_model::zone::{NewZone, RrsetChange, RrsetView, ZoneKind, ZoneView};
use pharos_wire::name;
use pharos_zone::journal::soa_serial;

use crate::api::auth::Author;
use crate::api::{Api, Reply, commit};

/// Every zone served, the files' and the store's, by name.
pub(crate) async fn list(State(api): State<Api>) -> Json<Vec<ZoneView>> {
    let snapshot = api.control.snapshot().load();
    let state = api.control.state();
    let secondaries: Vec<String> = api.control.secondaries().into_iter().map(|secondary| secondary.zone).collect();
    let mut views: Vec<ZoneView> = snapshot
        .zones
        .zones()
        .iter()
        .map(|zone| {
            let name = name::Display(&zone.origin).to_string();
            let kind = match (state.zone(&name).is_some(), secondaries.contains(&name)) {
                (true, _) => ZoneKind::Store,
                (false, true) => ZoneKind::Secondary,
                (false, false) => ZoneKind::File,
            };
            let serial = soa_serial(&zone.soa().rdatas[0]).unwrap_or(0);
            ZoneView { name, kind, serial, signed: zone.signer.is_some() }
        })
        .collect();
    views.sort_by(|a, b| a.name.cmp(&b.name));
    Json(views)
}

/// Makes a store zone, empty or imported from a zone file's text.
pub(crate) async fn make(State(api): State<Api>, Extension(author): Extension<Author>, Json(new): Json<NewZone>) -> Reply<StatusCode> {
    commit(&api, author, move |state| zones::make_zone(state, &new)).await?;
    Ok(StatusCode::CREATED)
}

/// A store zone as master-file text.
pub(crate) async fn text(State(api): State<Api>, Path(name): Path<String>) -> Reply<impl IntoResponse> {
    let state = api.control.state();
    let spec = zones::find_zone(&state, &name)?;
    Ok(([(header::CONTENT_TYPE, "text/dns")], spec.text.clone()))
}

pub(crate) async fn delete(State(api): State<Api>, Extension(author): Extension<Author>, Path(name): Path<String>) -> Reply<StatusCode> {
    commit(&api, author, move |state| zones::delete_zone(state, &name)).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(crate) async fn rrsets(State(api): State<Api>, Path(name): Path<String>) -> Reply<Json<Vec<RrsetView>>> {
    let state = api.control.state();
    Ok(Json(zones::rrsets(zones::find_zone(&state, &name)?)?))
}

/// Replaces or deletes RRsets of a store zone, all or nothing.
pub(crate) async fn change_rrsets(
    State(api): State<Api>,
    Extension(author): Extension<Author>,
    Path(name): Path<String>,
    Json(changes): Json<Vec<RrsetChange>>,
) -> Reply<StatusCode> {
    commit(&api, author, move |state| zones::change_rrsets(state, &name, &changes)).await?;
    Ok(StatusCode::NO_CONTENT)
}
