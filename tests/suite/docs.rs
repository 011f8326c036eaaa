//! The documentation cannot drift from the program: every fenced block of
//! README.md and docs/*.md is run or checked here, in the order a reader
//! meets them, against real servers started from the blocks themselves,
//! and every relative link must name a file. docs/testing.md says how a
//! block is marked:
//!
//! - `sh`: a script run in a copy of the demo's directory; it must exit 0.
//!   `sh background`: each command is started, left running until the test
//!   ends, and waited for until its listeners accept.
//! - `console`: `$ command` lines, each followed by lines its output must
//!   hold in order (`...` stands for any text; `[exit N]` the status).
//! - `toml`: a part of `pharos serve`'s configuration, laid over the demo's
//!   pharos.toml section by section; `toml file=NAME` a whole one, written
//!   to NAME for the blocks after it; `toml dispatcher` `pharos
//!   dispatcher`'s file. Each is read and validated by the program's own
//!   types.
//! - `text`: not typed (output, a synopsis, a layout).
//! - `LANG no-run: REASON`: cannot run here; counted and listed.
//!
//! What a reader types is changed in three ways only: `cargo run --release
//! --` is the built binary (first in PATH as `pharos`), the ports the
//! documentation names are free ones, and `TOKEN` is the API token the
//! first server printed (also in `PHAROS_TOKEN`, as a reader would export
//! it, with `PHAROS_API` naming the moved control port).

use crate::common;

use std::collections::BTreeMap;
use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, require, wait_until};
use pharos_artemis_quic::dispatcher::DispatcherConfig;
use pharos_server::Config;

/// The ports the documentation's servers and commands name, each moved to
/// a free one so that the test runs beside anything else on the machine.
const DOCUMENTED_PORTS: &[u16] = &[5300, 5301, 5302, 5303, 5304, 5305, 5353, 5380, 5381, 5382, 5383, 8080, 8443, 8853];

/// The longest a command may take: dig gives up after 15 s at worst.
const COMMAND_DEADLINE: Duration = Duration::from_secs(30);

/// The demo's control port, where `pharos ctl` finds the API by default.
const DEMO_CONTROL_PORT: u16 = 5380;

#[test]
fn every_block_of_the_documentation_runs_as_written() {
    for (program, package) in [("dig", "bind9-dnsutils"), ("kdig", "knot-dnsutils"), ("curl", "curl")] {
        if require(program, package).is_none() {
            return;
        }
    }
    let started = Instant::now();
    let blocks: Vec<Block> = pages().iter().flat_map(|page| blocks(page)).collect();
    let mut reader = Reader::new();
    let mut failures = Vec::new();
    let mut tally: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut not_run = Vec::new();
    for block in &blocks {
        let outcome = Kind::of(&block.info).and_then(|kind| {
            *tally.entry(kind.name()).or_default() += 1;
            if let Kind::NotRun { reason } = kind {
                not_run.push(format!("{}: {reason}", block.place()));
            }
            reader.take(block, kind)
        });
        if let Err(error) = outcome {
            failures.push(format!("{}: {error}", block.place()));
        }
    }
    eprintln!("{} blocks in {:.1} s: {tally:?}", blocks.len(), started.elapsed().as_secs_f64());
    eprintln!("not run ({}):\n  {}", not_run.len(), not_run.join("\n  "));
    assert!(reader.token.is_some(), "no block started a server that printed its API token (the README's `serve` block)");
    assert!(failures.is_empty(), "{} of {} blocks fail:\n\n{}", failures.len(), blocks.len(), failures.join("\n\n"));
}

#[test]
fn every_relative_link_names_a_file() {
    let broken: Vec<String> = pages()
        .iter()
        .flat_map(|page| {
            let text = std::fs::read_to_string(page).unwrap();
            let directory = page.parent().unwrap().to_path_buf();
            relative_links(&text)
                .into_iter()
                .filter(move |target| !directory.join(target).exists())
                .map(move |target| format!("{}: {target}", page.display()))
        })
        .collect();
    assert!(broken.is_empty(), "links to files that do not exist:\n{}", broken.join("\n"));
}

/// README.md, then the pages of docs/ by name.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "md"))
        .collect();
    docs.sort();
    std::iter::once(root.join("README.md")).chain(docs).collect()
}

/// One fenced block: where it is, its info string and its lines, with the
/// indentation of the fence (a block inside a list item) taken off.
struct Block {
    page: PathBuf,
    line: usize,
    info: String,
    text: String,
}

impl Block {
    fn place(&self) -> String {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        format!("{}:{}", self.page.strip_prefix(root).unwrap_or(&self.page).display(), self.line)
    }
}

/// A block whose closing fence has not come yet, and its fence's indentation.
struct Opened<'t> {
    line: usize,
    indent: usize,
    info: String,
    lines: Vec<&'t str>,
}

fn blocks(page: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(page).unwrap();
    let mut found = Vec::new();
    let mut open: Option<Opened> = None;
    for (index, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => open = Some(Opened { line: index + 1, indent, info: info.trim().to_string(), lines: Vec::new() }),
            (Some(_), Some("")) => {
                let Opened { line, info, lines, .. } = open.take().unwrap();
                found.push(Block { page: page.to_path_buf(), line, info, text: lines.join("\n") + "\n" });
            }
            (Some(block), _) => block.lines.push(line.get(block.indent..).unwrap_or(line.trim_start())),
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "{}: a fenced block is never closed", page.display());
    found
}

/// The targets of `[text](target)` links outside fenced blocks that are
/// files of the repository, without their `#fragment`.
fn relative_links(text: &str) -> Vec<String> {
    let mut inside_block = false;
    let mut links = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            inside_block = !inside_block;
        }
        if inside_block {
            continue;
        }
        for (start, _) in line.match_indices("](") {
            let rest = &line[start + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split('#').next().unwrap();
            if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
                links.push(target.to_string());
            }
        }
    }
    links
}

/// What a block's info string says to do with it.
enum Kind<'a> {
    Script,
    Background,
    Console,
    Config,
    ConfigFile { name: &'a str },
    Dispatcher,
    Text,
    NotRun { reason: &'a str },
}

impl<'a> Kind<'a> {
    fn of(info: &'a str) -> Result<Kind<'a>, String> {
        if let Some((_, reason)) = info.split_once("no-run:") {
            let reason = reason.trim();
            return if reason.is_empty() { Err("`no-run:` without a reason".into()) } else { Ok(Kind::NotRun { reason }) };
        }
        Ok(match info.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["sh"] => Kind::Script,
            ["sh", "background"] => Kind::Background,
            ["console"] => Kind::Console,
            ["toml"] => Kind::Config,
            ["toml", file] if file.starts_with("file=") => Kind::ConfigFile { name: &file["file=".len()..] },
            ["toml", "dispatcher"] => Kind::Dispatcher,
            ["text"] => Kind::Text,
            _ => {
                return Err(format!(
                    "info string {info:?} is none this test knows: mark the block sh, sh background, console, toml, \
                     toml file=NAME, toml dispatcher, text, or LANG no-run: REASON (docs/testing.md)"
                ));
            }
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Kind::Script => "sh",
            Kind::Background => "sh background",
            Kind::Console => "console",
            Kind::Config => "toml",
            Kind::ConfigFile { .. } => "toml file",
            Kind::Dispatcher => "toml dispatcher",
            Kind::Text => "text",
            Kind::NotRun { .. } => "no-run",
        }
    }
}

/// The reader at a terminal: a copy of the demo's directory to work in,
/// the servers it started, and the token the first one printed.
struct Reader {
    directory: tempfile::TempDir,
    ports: Vec<(u16, u16)>,
    demo: toml::Table,
    running: Vec<(Child, PathBuf)>,
    token: Option<String>,
}

impl Reader {
    fn new() -> Reader {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let directory = tempfile::tempdir().unwrap();
        let ports: Vec<(u16, u16)> = DOCUMENTED_PORTS.iter().map(|&port| (port, free_port())).collect();
        let demo_text = std::fs::read_to_string(root.join("pharos.toml")).unwrap();
        let reader = Reader { directory, ports, demo: demo_text.parse().unwrap(), running: Vec::new(), token: None };
        std::fs::write(reader.path("pharos.toml"), reader.moved(&demo_text)).unwrap();
        std::fs::create_dir(reader.path("zones")).unwrap();
        std::fs::copy(root.join("zones/example.test.zone"), reader.path("zones/example.test.zone")).unwrap();
        std::fs::create_dir(reader.path("bin")).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_pharos"), reader.path("bin/pharos")).unwrap();
        reader
    }

    fn path(&self, name: &str) -> PathBuf {
        self.directory.path().join(name)
    }

    fn take(&mut self, block: &Block, kind: Kind) -> Result<(), String> {
        match kind {
            Kind::Script => self.run(&format!("set -euo pipefail\n{}", block.text)).and_then(expect_status(0)),
            Kind::Background => commands(&block.text).iter().try_for_each(|command| self.start(command)),
            Kind::Console => console(&block.text)?.iter().try_for_each(|step| self.check(step)),
            Kind::Config => self.check_part_of_config(&block.text),
            Kind::ConfigFile { name } => self.check_config_file(name, &block.text),
            Kind::Dispatcher => DispatcherConfig::parse(&block.text).map(drop).map_err(|error| format!("not a dispatcher file: {error}")),
            Kind::Text | Kind::NotRun { .. } => Ok(()),
        }
    }

    /// `text` as the reader's machine sees it: the ports moved, the binary
    /// built by this test, the token printed.
    fn moved(&self, text: &str) -> String {
        let mut text = text.replace("cargo run --release -- ", "pharos ");
        for &(documented, free) in &self.ports {
            // ADDRESS:PORT, dig's -p PORT, nsupdate's `server ADDRESS PORT`.
            for before in [":", "-p ", "127.0.0.1 "] {
                text = replace_number(&text, &format!("{before}{documented}"), &format!("{before}{free}"));
            }
        }
        match &self.token {
            Some(token) => text.replace("TOKEN", token),
            None => text,
        }
    }

    fn port(&self, documented: u16) -> u16 {
        self.ports.iter().find(|(port, _)| *port == documented).unwrap().1
    }

    fn command(&self, script: &str) -> Command {
        let mut command = Command::new("bash");
        let path = std::env::join_paths(
            std::iter::once(self.path("bin")).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
        )
        .unwrap();
        command
            .arg("-c")
            .arg(self.moved(script))
            .current_dir(self.directory.path())
            .env("PATH", path)
            .env("PHAROS_API", format!("http://127.0.0.1:{}", self.port(DEMO_CONTROL_PORT)))
            .stdin(Stdio::null());
        if let Some(token) = &self.token {
            command.env("PHAROS_TOKEN", token);
        }
        command
    }

    /// Runs `script` to its end (within [`COMMAND_DEADLINE`]): its status
    /// and its output, standard error after standard output.
    fn run(&self, script: &str) -> Result<(ExitStatus, String), String> {
        let output = self.path("output");
        let file = File::create(&output).unwrap();
        let mut child = self.command(script).stdout(file.try_clone().unwrap()).stderr(file).spawn().unwrap();
        let deadline = Instant::now() + COMMAND_DEADLINE;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("`{}` still runs after {COMMAND_DEADLINE:?}", self.moved(script.trim())));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Ok((status, std::fs::read_to_string(&output).unwrap()))
    }

    /// Starts `command` in the background and waits until every TCP
    /// listener it names accepts; the first API token a server prints
    /// becomes `TOKEN`.
    fn start(&mut self, command: &str) -> Result<(), String> {
        let listeners = self.listeners(&self.moved(command))?;
        if listeners.is_empty() {
            return Err(format!("`{command}` names no listener to wait for"));
        }
        // A port left where the documentation put it could be taken by
        // anything else on the machine.
        if let Some(address) = listeners.iter().find(|address| !self.ports.iter().any(|&(_, free)| free == address.port())) {
            return Err(format!("{address}: add port {} to DOCUMENTED_PORTS, so that it moves to a free one", address.port()));
        }
        // Two pages' servers on one documented port: the second could not
        // bind, and the first would answer for it.
        if let Some(taken) = listeners.iter().find(|address| TcpStream::connect_timeout(address, Duration::from_secs(1)).is_ok()) {
            return Err(format!("{taken} already answers before `{command}` starts: an earlier block's server has its documented port"));
        }
        let log = self.path(&format!("background-{}.log", self.running.len()));
        let file = File::create(&log).unwrap();
        let child = self.command(&format!("exec {command}")).stdout(file.try_clone().unwrap()).stderr(file).spawn().unwrap();
        self.running.push((child, log.clone()));
        let (child, _) = self.running.last_mut().unwrap();
        let mut exited = None;
        wait_until(&format!("`{command}` accepts on {listeners:?}"), || {
            exited = child.try_wait().unwrap();
            exited.is_some() || listeners.iter().all(|address| TcpStream::connect_timeout(address, Duration::from_secs(1)).is_ok())
        });
        let log = std::fs::read_to_string(&log).unwrap();
        if let Some(status) = exited {
            return Err(format!("`{command}` exited ({status}) before it listened:\n{log}"));
        }
        if self.token.is_none() {
            self.token = log.lines().find_map(|line| line.split_once("kept in the store): ")).map(|(_, token)| token.trim().to_string());
        }
        Ok(())
    }

    /// The TCP addresses a background command listens on: its `--listen`
    /// flags, and for `serve --config FILE` every listener of that file.
    fn listeners(&self, command: &str) -> Result<Vec<SocketAddr>, String> {
        let words: Vec<&str> = command.split_whitespace().collect();
        let mut addresses: Vec<String> = words.windows(2).filter(|pair| pair[0] == "--listen").map(|pair| pair[1].to_string()).collect();
        if let Some(pair) = words.windows(2).find(|pair| pair[0] == "--config") {
            let text = std::fs::read_to_string(self.path(pair[1])).map_err(|error| format!("{}: {error}", pair[1]))?;
            let file: toml::Table = text.parse().map_err(|error| format!("{}: {error}", pair[1]))?;
            for (section, key) in
                [("server", "listen"), ("control", "listen"), ("tls", "listen"), ("tls", "https_listen"), ("http", "listen")]
            {
                match file.get(section).and_then(|section| section.get(key)) {
                    Some(toml::Value::String(address)) => addresses.push(address.clone()),
                    Some(toml::Value::Array(list)) => {
                        addresses.extend(list.iter().filter_map(|address| address.as_str()).map(String::from))
                    }
                    _ => {}
                }
            }
        }
        addresses.iter().map(|address| address.parse().map_err(|error| format!("listener {address:?}: {error}"))).collect()
    }

    fn check(&self, step: &Step) -> Result<(), String> {
        let (status, output) = self.run(&format!("set -o pipefail\n{}", step.command))?;
        expect_status(step.status)((status, output.clone()))?;
        let mut lines = output.lines().map(squeeze);
        for expected in &step.expected {
            if !lines.any(|line| matches(expected, &line)) {
                return Err(format!("`{}`: no line matches {expected:?} (in order) in its output:\n{output}", self.moved(&step.command)));
            }
        }
        Ok(())
    }

    /// A part of the configuration, laid over the demo's section by
    /// section (a section it names replaces the demo's), must be one the
    /// server reads and accepts.
    fn check_part_of_config(&self, text: &str) -> Result<(), String> {
        let part: toml::Table = text.parse().map_err(|error| format!("not TOML: {error}"))?;
        let mut whole = self.demo.clone();
        whole.extend(part);
        self.check_config_file("checked.toml", &toml::to_string(&whole).unwrap())
    }

    /// A whole configuration, written to `name` for the blocks after it.
    fn check_config_file(&self, name: &str, text: &str) -> Result<(), String> {
        let path = self.path(name);
        std::fs::write(&path, self.moved(text)).unwrap();
        let config = Config::from_file(&path).map_err(|error| format!("{error:#}"))?;
        config.validate().map_err(|error| format!("refused: {error:#}"))
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        for (child, _) in &mut self.running {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn expect_status(expected: i32) -> impl Fn((ExitStatus, String)) -> Result<(), String> {
    move |(status, output)| {
        if status.code() == Some(expected) { Ok(()) } else { Err(format!("exited {status}, not {expected}:\n{output}")) }
    }
}

/// `text` with `from` replaced by `to` where no digit follows, so that
/// port 5300 does not also move 53001.
fn replace_number(text: &str, from: &str, to: &str) -> String {
    let mut result = String::new();
    let mut rest = text;
    while let Some(start) = rest.find(from) {
        let after = &rest[start + from.len()..];
        result.push_str(&rest[..start]);
        result.push_str(if after.starts_with(|c: char| c.is_ascii_digit()) { from } else { to });
        rest = after;
    }
    result + rest
}

/// The commands of a script, a line ending in `\` joined to the next.
fn commands(text: &str) -> Vec<String> {
    let joined = text.replace("\\\n", " ");
    joined.lines().map(str::trim).filter(|line| !line.is_empty() && !line.starts_with('#')).map(String::from).collect()
}

/// One `$ command` of a console block and what its output must hold.
struct Step {
    command: String,
    expected: Vec<String>,
    status: i32,
}

fn console(text: &str) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    let mut continued = false;
    for line in text.lines() {
        match (line.strip_prefix("$ "), steps.last_mut()) {
            (Some(command), _) => steps.push(Step { command: command.to_string(), expected: Vec::new(), status: 0 }),
            (None, Some(step)) if continued => step.command = format!("{} {}", step.command.trim_end_matches('\\'), line.trim()),
            (None, Some(step)) => match line.trim().strip_prefix("[exit ").and_then(|rest| rest.strip_suffix(']')) {
                Some(status) => step.status = status.parse().map_err(|_| format!("{line:?}: [exit N] takes a number"))?,
                None if line.trim().is_empty() || line.trim() == "..." => {}
                None => step.expected.push(squeeze(line)),
            },
            (None, None) => return Err(format!("output {line:?} before any `$ command`")),
        }
        continued = line.ends_with('\\');
    }
    Ok(steps)
}

/// A line with its runs of white space made one space, as dig's tabs and
/// the documentation's spaces are the same to a reader.
fn squeeze(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `line` is what `expected` shows, `...` standing for any text.
fn matches(expected: &str, line: &str) -> bool {
    let parts: Vec<&str> = expected.split("...").collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !line.starts_with(first) {
        return false;
    }
    let mut rest = &line[first.len()..];
    if parts.len() == 1 {
        return rest.is_empty();
    }
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}
