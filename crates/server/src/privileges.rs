//! Giving up root once it is no longer needed: a server started as root
//! (by its unit, or by hand) binds its ports and attaches its XDP programs
//! first, then becomes `server.user` and `server.group` with no
//! capabilities left. What it still does with the kernel needs none: the
//! fast path's maps are written through descriptors it already holds
//! (Linux 6.5 and later check privileges when a map or program is made,
//! not when an open map is updated).

use nix::unistd::{Gid, Group, Uid, User, getegid, geteuid, setgid, setgroups, setuid};

use crate::config::ServerConfig;

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
}

/// Becomes the configured user and group if started as root; says once
/// that it stays root if none is configured.
pub fn drop_privileges(server: &ServerConfig) -> Result<(), PrivilegeError> {
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
