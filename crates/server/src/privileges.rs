//! Giving up root once it is no longer needed: a server started as root
//! (by its unit, or by hand) binds its ports and attaches its XDP programs
//! first, then becomes `server.user` and `server.group` with no
//! capabilities left. What it still does with the kernel needs none: the
//! fast path's maps are written through descriptors it already holds
//! (Linux 6.5 and later check privileges when a map or program is made,
//! not when an open map is updated). The files it made as root in its
//! state directory (the store, a generated certificate, a fleet node's
//! cache) become the user's first, so that the next start, `pharos key`
//! and `pharos check` run as that user can open them.

use std::path::PathBuf;

use nix::unistd::{Gid, Group, Uid, User, getegid, geteuid, setgid, setgroups, setuid};

use crate::config::Config;
use crate::driver::state_cache;

/// Why the server cannot run as the configured user.
#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    #[error("server.user = {0:?}: no such user")]
    NoUser(String),
    #[error("server.group = {0:?}: no such group")]
    NoGroup(String),
    #[error("cannot look up {what} {name:?}")]
    Lookup { what: &'static str, name: String, source: nix::errno::Errno },
    #[error("server.user = {user:?}: started as uid {uid}, not root, so it cannot become another user")]
    NotRoot { user: String, uid: Uid },
    #[error("cannot become user {user} ({uid}) and group {gid}")]
    Switch { user: String, uid: Uid, gid: Gid, source: nix::errno::Errno },
    #[error("cannot hand {} to user {user}", path.display())]
    HandOver { path: PathBuf, user: String, source: std::io::Error },
}

/// Becomes the configured user and group if started as root; says once
/// that it stays root if none is configured.
pub fn drop_privileges(config: &Config) -> Result<(), PrivilegeError> {
    let server = &config.server;
    let Some(name) = &server.user else {
        if geteuid().is_root() {
            tracing::warn!("running as root: set server.user to run as an unprivileged user once the ports are bound");
        }
        return Ok(());
    };
    let user = User::from_name(name).map_err(|source| PrivilegeError::Lookup { what: "user", name: name.clone(), source })?;
    let user = user.ok_or_else(|| PrivilegeError::NoUser(name.clone()))?;
    let gid = match &server.group {
        Some(group) => group_id(group)?,
        None => user.gid,
    };
    if !geteuid().is_root() {
        return match geteuid() == user.uid && getegid() == gid {
            true => Ok(()),
            false => Err(PrivilegeError::NotRoot { user: name.clone(), uid: geteuid() }),
        };
    }
    for path in files_made(config).iter().filter(|path| path.exists()) {
        let handed = std::os::unix::fs::chown(path, Some(user.uid.as_raw()), Some(gid.as_raw()));
        handed.map_err(|source| PrivilegeError::HandOver { path: path.clone(), user: name.clone(), source })?;
    }
    // The group first: once the user is not root, it may not change it.
    let switched = setgroups(&[gid]).and_then(|()| setgid(gid)).and_then(|()| setuid(user.uid));
    switched.map_err(|source| PrivilegeError::Switch { user: name.clone(), uid: user.uid, gid, source })?;
    tracing::info!(user = %name, uid = %user.uid, gid = %gid, "running as an unprivileged user, every port bound");
    Ok(())
}

fn group_id(name: &str) -> Result<Gid, PrivilegeError> {
    let group = Group::from_name(name).map_err(|source| PrivilegeError::Lookup { what: "group", name: name.to_string(), source })?;
    Ok(group.ok_or_else(|| PrivilegeError::NoGroup(name.to_string()))?.gid)
}

/// The files the server may have made at start: the SQLite store with its
/// write-ahead log and index, a generated certificate and key, a fleet
/// node's cached state.
fn files_made(config: &Config) -> Vec<PathBuf> {
    let store = config
        .store
        .path
        .iter()
        .flat_map(|store| ["", "-wal", "-shm", "-journal"].map(|suffix| PathBuf::from(format!("{}{suffix}", store.display()))));
    let certificate = config.state_directory().map(pharos_transport::generated_certificate_files).into_iter().flatten();
    store.chain(certificate).chain(state_cache::files(config)).collect()
}
