//! Two network namespaces joined by a veth pair, each with an iptables rule
//! that sends every IPv4 packet arriving from the other into NFQUEUE queue
//! 0 of its own namespace (or without the rules: [`Link::veth`], for
//! xdpgen's test). Deleted when dropped (the veth pair and the rules
//! go with the namespaces). Nothing is created in the caller's namespace.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

pub const CLIENT_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
pub const SERVER_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// The veth ends' names, inside each namespace.
pub const CLIENT_DEVICE: &str = "tail-c";
pub const SERVER_DEVICE: &str = "tail-s";
/// Every namespace this code makes starts with this, then the making
/// process's ID.
const PREFIX: &str = "ptail-";

/// The two namespaces, deleted on drop.
pub struct Link {
    pub client: String,
    pub server: String,
    /// The iptables command that added the queue rules (empty for a
    /// [`Link::veth`]).
    pub iptables: String,
}

fn run(program: &str, args: &[&str]) -> io::Result<()> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| io::Error::new(error.kind(), format!("cannot run {program}: {error}")))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("{program} {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr).trim())))
    }
}

/// Deletes the namespaces left by runs of this code whose process is gone
/// (killed before it could clean up).
pub fn delete_stale() {
    let Ok(entries) = std::fs::read_dir("/run/netns") else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(PREFIX).and_then(|rest| rest.split('-').next()).and_then(|pid| pid.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            eprintln!("netdelay: deleting the stale namespace {name} (its process {pid} is gone)");
            let _ = run("ip", &["netns", "del", &name]);
        }
    }
}

/// Deletes every namespace this process made (for a harness interrupted
/// by a signal).
pub fn delete_own() {
    let Ok(entries) = std::fs::read_dir("/run/netns") else { return };
    let own = format!("{PREFIX}{}-", std::process::id());
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&own) {
            let _ = run("ip", &["netns", "del", &name]);
        }
    }
}

impl Link {
    /// Makes the namespaces, the veth pair, the addresses and the queue
    /// rules. Fails (leaving nothing behind) without root, `ip` or
    /// `iptables`, or in a kernel without namespaces.
    pub fn create() -> io::Result<Link> {
        let mut link = Link::veth()?;
        let mut failures = Vec::new();
        for iptables in ["iptables", "iptables-legacy", "iptables-nft"] {
            let added = [(&link.client, CLIENT_DEVICE), (&link.server, SERVER_DEVICE)].into_iter().try_for_each(|(namespace, device)| {
                let rule = ["-t", "raw", "-A", "PREROUTING", "-i", device, "-j", "NFQUEUE", "--queue-num", "0"];
                run("ip", &[&["netns", "exec", namespace, iptables][..], &rule].concat())
            });
            match added {
                Ok(()) => {
                    link.iptables = iptables.to_owned();
                    return Ok(link);
                }
                Err(error) => failures.push(error.to_string()),
            }
        }
        Err(io::Error::other(format!("cannot add the NFQUEUE rules: {}", failures.join("; "))))
    }

    /// Makes the namespaces, the veth pair (CLIENT_DEVICE and SERVER_DEVICE)
    /// and the addresses, without queue rules (`iptables` stays empty):
    /// packets cross undelayed. Fails (leaving nothing behind) without root
    /// or `ip`, or in a kernel without namespaces.
    pub fn veth() -> io::Result<Link> {
        static MADE: AtomicU32 = AtomicU32::new(0);
        delete_stale();
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_micros();
        let base = format!("{PREFIX}{}-{}-{stamp}", std::process::id(), MADE.fetch_add(1, Ordering::Relaxed));
        let (client, server) = (format!("{base}-c"), format!("{base}-s"));
        run("ip", &["netns", "add", &client])?;
        let link = Link { client, server, iptables: String::new() };
        // From here on, dropping `link` deletes whatever was made.
        run("ip", &["netns", "add", &link.server])?;
        let (c, s) = (&link.client, &link.server);
        run("ip", &["link", "add", CLIENT_DEVICE, "netns", c, "type", "veth", "peer", "name", SERVER_DEVICE, "netns", s])?;
        for (namespace, device, address) in [(c, CLIENT_DEVICE, CLIENT_ADDRESS), (s, SERVER_DEVICE, SERVER_ADDRESS)] {
            run("ip", &["-n", namespace, "addr", "add", &format!("{address}/24"), "dev", device])?;
            run("ip", &["-n", namespace, "link", "set", device, "up"])?;
            run("ip", &["-n", namespace, "link", "set", "lo", "up"])?;
        }
        Ok(link)
    }

    /// `ip netns exec NAMESPACE` before a command (which `ip` execs, so
    /// the child's ID is the command's). The child is killed if the thread
    /// that started it dies, so that a harness killed outright leaves no
    /// servers behind (its namespaces go at the next run: [`delete_stale`]).
    pub fn exec(namespace: &str) -> Command {
        use std::os::unix::process::CommandExt;
        let mut command = Command::new("ip");
        command.args(["netns", "exec", namespace]);
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        command
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        for namespace in [&self.client, &self.server] {
            if let Err(error) = run("ip", &["netns", "del", namespace]) {
                eprintln!("netdelay: cannot delete the namespace {namespace}: {error}");
            }
        }
    }
}

/// Moves the calling thread into `namespace` (threads it spawns afterwards
/// start there too; sockets it opens afterwards belong to it).
pub fn enter(namespace: &str) -> io::Result<()> {
    let file = std::fs::File::open(format!("/run/netns/{namespace}"))?;
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The kernel's TCP counters in the calling thread's namespace (the `Tcp:`
/// line of /proc/net/snmp and the `TcpExt:` line of /proc/net/netstat), by
/// name.
pub fn tcp_counters() -> std::collections::BTreeMap<String, u64> {
    let mut counters = std::collections::BTreeMap::new();
    for file in ["snmp", "netstat"] {
        let text = std::fs::read_to_string(format!("/proc/thread-self/net/{file}")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for pair in lines.chunks(2) {
            let [names, values] = pair else { continue };
            let (Some((kind, names)), Some((_, values))) = (names.split_once(':'), values.split_once(':')) else { continue };
            if kind != "Tcp" && kind != "TcpExt" {
                continue;
            }
            for (name, value) in names.split_whitespace().zip(values.split_whitespace()) {
                if let Ok(value) = value.parse::<u64>() {
                    counters.insert(name.to_owned(), value);
                }
            }
        }
    }
    counters
}

/// Sysctls that shape TCP's loss recovery, read in the calling thread's
/// namespace.
pub fn tcp_settings() -> Vec<(String, String)> {
    let names = ["tcp_congestion_control", "tcp_recovery", "tcp_early_retrans", "tcp_thin_linear_timeouts", "tcp_sack", "tcp_autocorking"];
    names
        .iter()
        .map(|name| {
            let value = std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}")).unwrap_or_default();
            (name.to_string(), value.trim().to_owned())
        })
        .collect()
}
