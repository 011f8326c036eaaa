//! Every command explains itself: `--help` of `pharos` and of each of its
//! subcommands, walked through the binary, gives every subcommand,
//! argument and flag a one-line description.

use std::process::Command;

/// The help text of `pharos PATH... --help`.
fn help(path: &[String]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_pharos")).args(path).arg("--help").output().unwrap();
    assert!(output.status.success(), "pharos {} --help failed: {}", path.join(" "), String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// How far clap indents a description it puts on the line below its
/// entry, when the two do not fit on one line.
const NEXT_LINE_INDENT: usize = 10;

/// The entries of the "Commands:", "Arguments:" and "Options:" sections:
/// (section, name, description). An entry is indented by 2 or 6; its
/// description follows the name after two or more spaces, or is the line
/// below, indented by [`NEXT_LINE_INDENT`].
fn entries(text: &str) -> Vec<(String, String, String)> {
    let mut section = String::new();
    let mut found: Vec<(String, String, String)> = Vec::new();
    for line in text.lines() {
        if !line.starts_with(' ') {
            section = line.trim_end_matches(':').to_string();
            continue;
        }
        if !["Commands", "Arguments", "Options"].contains(&section.as_str()) {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let entry = line.trim();
        match found.last_mut() {
            Some((_, _, description)) if indent >= NEXT_LINE_INDENT && description.is_empty() => *description = entry.to_string(),
            _ => {
                let (name, description) = entry.split_once("  ").unwrap_or((entry, ""));
                found.push((section.clone(), name.trim().to_string(), description.trim().to_string()));
            }
        }
    }
    found
}

#[test]
fn every_subcommand_argument_and_flag_has_a_description() {
    let mut to_walk: Vec<Vec<String>> = vec![Vec::new()];
    let mut walked = 0;
    let mut undescribed = Vec::new();
    while let Some(path) = to_walk.pop() {
        walked += 1;
        for (section, name, description) in entries(&help(&path)) {
            if description.is_empty() {
                undescribed.push(format!("pharos {} ({section}): {name}", path.join(" ")));
            }
            if section == "Commands" && name != "help" {
                to_walk.push(path.iter().cloned().chain([name]).collect());
            }
        }
    }
    assert!(walked > 15, "only {walked} commands walked: is the help format still parsed?");
    assert!(undescribed.is_empty(), "entries with no description:\n{}", undescribed.join("\n"));
}
