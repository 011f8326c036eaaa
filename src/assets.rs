//! `pharos generate-assets DIR`: the man pages and shell completions the
//! Debian package ships (scripts/package.sh), made from the command line's
//! own definition so that they say what the binary beside them accepts.
//! Hidden: an operator never needs it.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use clap_complete::Shell;

#[derive(Args)]
pub struct AssetsArgs {
    /// Directory to write into: man/ gets one page per command
    /// (pharos.1, pharos-serve.1, ...), completions/ one script per shell.
    dir: PathBuf,
}

/// The command the completions complete: the binary's name, as the shells
/// look it up.
const BINARY: &str = "pharos";

/// The shells whose completion directories Debian has (bash-completion,
/// zsh's vendor-completions, fish's vendor_completions.d).
const SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

pub fn run(args: AssetsArgs, command: clap::Command) -> anyhow::Result<()> {
    let man = created(&args.dir.join("man"))?;
    clap_mangen::generate_to(command.clone(), &man).with_context(|| format!("writing man pages into {}", man.display()))?;
    let completions = created(&args.dir.join("completions"))?;
    let offered = without_hidden_subcommands(&command);
    for shell in SHELLS {
        let written = clap_complete::generate_to(shell, &mut offered.clone(), BINARY, &completions)
            .with_context(|| format!("writing {shell} completions into {}", completions.display()))?;
        println!("{}", written.display());
    }
    println!("{}", man.display());
    Ok(())
}

/// The command as a shell should complete it. clap_complete offers hidden
/// subcommands too (clap issue 1335; clap_mangen leaves them out), and a
/// clap command cannot lose a subcommand, so the root is made again from
/// its own arguments and its visible subcommands.
fn without_hidden_subcommands(command: &clap::Command) -> clap::Command {
    clap::Command::new(BINARY)
        .version(env!("CARGO_PKG_VERSION"))
        .about(command.get_about().cloned().unwrap_or_default())
        .args(command.get_arguments().cloned())
        .subcommands(command.get_subcommands().filter(|subcommand| !subcommand.is_hide_set()).cloned())
}

fn created(dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir.to_path_buf())
}
