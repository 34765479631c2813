//! Progress on stderr (indicatif): a bar with rate and ETA when the total is known, a spinner
//! with the rate otherwise; hidden with `-q` or when stderr is not a terminal.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

const SPINNER: &str = "{spinner} {msg} {human_pos} {prefix} ({per_sec}, {elapsed})";
const BAR: &str = "{msg} [{bar:30}] {human_pos}/{human_len} {prefix} ({per_sec}, ETA {eta})";

/// A progress indicator of a long command, cleared when dropped. [`Progress::handle`] gives a
/// clone of the bar for callbacks.
///
/// # Examples
///
/// ```ignore
/// let p = Progress::spinner(false, "walking", "nodes");
/// p.inc(1);
/// p.finish();
/// ```
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A spinner counting `unit`s (no total known).
    pub fn spinner(quiet: bool, message: &str, unit: &str) -> Self {
        let bar = ProgressBar::with_draw_target(None, target(quiet));
        bar.set_style(
            ProgressStyle::with_template(SPINNER)
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(message.to_owned());
        bar.set_prefix(unit.to_owned());
        bar.enable_steady_tick(Duration::from_millis(120));
        Self { bar }
    }

    /// A bar of `total` `unit`s with rate and ETA.
    pub fn bar(quiet: bool, total: u64, message: &str, unit: &str) -> Self {
        let bar = ProgressBar::with_draw_target(Some(total), target(quiet));
        bar.set_style(
            ProgressStyle::with_template(BAR)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_message(message.to_owned());
        bar.set_prefix(unit.to_owned());
        Self { bar }
    }

    /// Counts `n` more units.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    /// Sets the count.
    pub fn set_position(&self, n: u64) {
        self.bar.set_position(n);
    }

    /// How many units were counted.
    #[cfg(test)]
    pub fn position(&self) -> u64 {
        self.bar.position()
    }

    /// Whether nothing is drawn (quiet, or stderr is not a terminal).
    #[cfg(test)]
    pub fn is_hidden(&self) -> bool {
        self.bar.is_hidden()
    }

    /// A callback for [`dynatree::Tree::on_progress`]: the phase of a subtree operation as
    /// the message, its nodes as the count, and once the phase's total is known a bar with
    /// rate and ETA.
    pub fn observer(&self) -> impl Fn(&dynatree::OpProgress) + Send + Sync + 'static {
        let bar = self.bar.clone();
        move |p: &dynatree::OpProgress| {
            bar.set_message(format!("{} ({})", p.op, p.phase));
            bar.set_prefix("nodes");
            match p.total {
                Some(total) if bar.length() != Some(total) => {
                    bar.set_length(total);
                    bar.set_style(
                        ProgressStyle::with_template(BAR)
                            .unwrap_or_else(|_| ProgressStyle::default_bar())
                            .progress_chars("=> "),
                    );
                    bar.reset_eta();
                }
                None if bar.length().is_some() => {
                    bar.unset_length();
                    bar.set_style(
                        ProgressStyle::with_template(SPINNER)
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                }
                _ => {}
            }
            bar.set_position(p.done);
        }
    }

    /// A handle on the same bar, for callbacks that must own one.
    pub fn handle(&self) -> ProgressBar {
        self.bar.clone()
    }

    /// Removes the indicator from the terminal.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // Also on an early return (an error, Ctrl-C): leave the terminal line clean.
        self.bar.finish_and_clear();
    }
}

fn target(quiet: bool) -> ProgressDrawTarget {
    if quiet || !std::io::stderr().is_terminal() {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_hides_and_still_counts() {
        let p = Progress::spinner(true, "walking", "nodes");
        assert!(p.is_hidden());
        p.inc(3);
        p.inc(2);
        assert_eq!(p.position(), 5);
        p.finish();
        let b = Progress::bar(true, 4, "deleting", "objects");
        b.set_position(4);
        assert_eq!(b.position(), 4);
    }
}
