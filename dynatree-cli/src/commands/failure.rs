//! What the command line adds to a failed command before it is printed: the paths the
//! command was given, escaped in the library's words, and for a path held by a recorded
//! operation ([`ErrorKind::Locked`]) that operation and the command that finishes it.

use dynatree::ops::{Intent, Operation};
use dynatree::{ErrorKind, Path};

use super::paths::escape_known;
use super::{Ctx, parse_path};
use crate::args::Command;
use crate::error::CliError;

/// The paths a command names (those that parse; a bad one fails the command by itself),
/// with their ancestors (a failure may name the parent of a path).
pub fn paths_of(command: &Command, reserved: char) -> Vec<Path> {
    let texts: Vec<&str> = match command {
        Command::Ls { path, .. }
        | Command::Tree { path, .. }
        | Command::Get { path, .. }
        | Command::Put { path, .. }
        | Command::Rm { path, .. }
        | Command::Readlink { path }
        | Command::Find { path, .. }
        | Command::Du { path }
        | Command::Export { path, .. }
        | Command::Watch { path, .. } => vec![path],
        Command::Mv { from, to, .. } | Command::Cp { from, to, .. } => vec![from, to],
        Command::Ln { target, path, .. } => vec![target, path],
        _ => Vec::new(),
    };
    let mut out: Vec<Path> = Vec::new();
    for text in texts {
        let mut path = parse_path(text, reserved).ok();
        while let Some(p) = path {
            path = p.parent();
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// `e` as it is printed: the command's `paths` escaped in its message and, when the library
/// refused a write because a recorded operation holds the subtree, which operation that is
/// and the command that finishes it.
pub async fn explain(ctx: &Ctx, paths: &[Path], e: CliError) -> CliError {
    let e = e.map_message(|m| escape_known(m, paths));
    if e.kind() != Some(ErrorKind::Locked) {
        return e;
    }
    let resume = ctx.command_line("resume");
    let hint = match ctx.tree.pending().await {
        Ok(intents) => match holder(&intents, paths) {
            Some(i) => format!(
                "; it is {} (operation {}, phase {}): if its command was stopped (Ctrl-C, a crash), run `{resume}` to finish it",
                describe(i),
                i.id,
                i.phase
            ),
            None => format!(
                "; `{}` lists the recorded operations, `{resume}` finishes those whose command was stopped",
                ctx.command_line("pending")
            ),
        },
        // The failure itself is what matters; the hint is best effort.
        Err(_) => format!("; `{resume}` finishes the operations whose command was stopped"),
    };
    e.map_message(|m| format!("{m}{hint}"))
}

/// The recorded operation, among `intents`, that holds one of `paths`: the one whose held
/// subtree (a source, or the destination of a move or copy) contains the path most closely;
/// failing that, one inside a path (a subtree command meets its lock below the path).
pub fn holder<'a>(intents: &'a [Intent], paths: &[Path]) -> Option<&'a Intent> {
    let held = |i: &'a Intent| -> Vec<&'a Path> {
        match i.op {
            Operation::Move | Operation::Copy => vec![&i.from, &i.to],
            Operation::Delete | Operation::Reparent => vec![&i.from],
            _ => Vec::new(),
        }
    };
    let around = intents
        .iter()
        .flat_map(|i| held(i).into_iter().map(move |h| (i, h)))
        .filter(|(_, h)| paths.iter().any(|p| p.starts_with(h)))
        .max_by_key(|(_, h)| h.len())
        .map(|(i, _)| i);
    around.or_else(|| {
        intents.iter().find(|i| {
            held(i)
                .iter()
                .any(|h| paths.iter().any(|p| h.starts_with(p)))
        })
    })
}

/// An operation in words: "the move of /a to /b".
pub fn describe(i: &Intent) -> String {
    let (from, to) = (i.from.escaped(), i.to.escaped());
    match i.op {
        Operation::Move => format!("the move of {from} to {to}"),
        Operation::Copy => format!("the copy of {from} to {to}"),
        Operation::Delete => format!("the deletion of {from}"),
        Operation::Reparent => format!("the deletion of {from}, its children moving to {to}"),
        other => format!("the {other} of {from}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_commands() {
        use clap::Parser;
        let cli = crate::args::Cli::parse_from(["dynatree", "mv", "/a/b%2Fc", "/d/"]);
        let p = |s: &str| Path::parse_escaped(s).unwrap();
        assert_eq!(
            paths_of(&cli.command, '¦'),
            [p("/a/b%2Fc"), p("/a"), p("/"), p("/d")]
        );
        let cli = crate::args::Cli::parse_from(["dynatree", "put", "relative", "{}"]);
        assert!(paths_of(&cli.command, '¦').is_empty());
    }
}
