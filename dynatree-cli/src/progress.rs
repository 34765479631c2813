//! Progress on stderr (indicatif): a bar with rate and ETA when the total is known, a spinner
//! with the rate otherwise; hidden with `-q` or when stderr is not a terminal.
//!
//! On a terminal the bars leave a margin at the right edge ([`Margin`]), so that clearing
//! them also clears the terminal's echo of Ctrl-C.
//!
//! The rate and the ETA are measured from the first update of a phase (each bar style has its
//! own [`Pace`]), as an average: the updates of a subtree operation come in bursts (a level, a
//! batch), so an instant rate swings by orders of magnitude. The ETA shows only once that
//! average rests on [`ETA_AFTER`] and [`ETA_ITEMS`].

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::style::ProgressTracker;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle, TermLike};

const SPINNER: &str = "{spinner} {msg} {human_pos} {prefix} ({rate}, {elapsed})";
const BAR: &str = "{msg} [{bar:30}] {human_pos}/{human_len} {prefix} ({rate}, {eta})";

/// How long a phase runs before its ETA is shown.
pub const ETA_AFTER: Duration = Duration::from_secs(3);
/// How many units a phase does before its ETA is shown.
pub const ETA_ITEMS: u64 = 20;

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
        Self::with_target(target(quiet), message, unit)
    }

    fn with_target(target: ProgressDrawTarget, message: &str, unit: &str) -> Self {
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(spinner_style());
        bar.set_message(message.to_owned());
        bar.set_prefix(unit.to_owned());
        bar.enable_steady_tick(Duration::from_millis(120));
        Self { bar }
    }

    /// A bar of `total` `unit`s from `start` (done before: an import resumed), with rate and
    /// ETA measured from `start`.
    pub fn bar(quiet: bool, total: u64, start: u64, message: &str, unit: &str) -> Self {
        let bar = ProgressBar::with_draw_target(Some(total), target(quiet));
        bar.set_position(start);
        bar.set_style(bar_style());
        bar.set_message(message.to_owned());
        bar.set_prefix(unit.to_owned());
        Self { bar }
    }

    /// Counts `n` more units.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
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
    /// rate and ETA. Each phase measures its rate afresh.
    pub fn observer(&self) -> impl Fn(&dynatree::ops::OpProgress) + Send + Sync + 'static {
        let bar = self.bar.clone();
        move |p: &dynatree::ops::OpProgress| {
            show_op(&bar, p.op.as_str(), p.phase.as_str(), p.done, p.total)
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

/// Shows how far a subtree operation has come (see [`Progress::observer`]).
fn show_op(bar: &ProgressBar, op: &str, phase: &str, done: u64, total: Option<u64>) {
    let message = format!("{op} ({phase})");
    let new_phase = bar.message() != message;
    if new_phase {
        bar.set_message(message);
        bar.set_prefix("nodes");
    }
    match total {
        Some(total) if new_phase || bar.length() != Some(total) => {
            bar.set_length(total);
            bar.set_style(bar_style());
            bar.reset_elapsed();
        }
        None if new_phase || bar.length().is_some() => {
            bar.unset_length();
            bar.set_style(spinner_style());
            bar.reset_elapsed();
        }
        _ => {}
    }
    bar.set_position(done);
}

/// The style of a spinner: count, rate, time so far.
pub fn spinner_style() -> ProgressStyle {
    ProgressStyle::with_template(SPINNER)
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
        .with_key("rate", Pace::new(Shown::Rate))
}

/// The style of a bar: count of total, rate, time left.
pub fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template(BAR)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
        .with_key("rate", Pace::new(Shown::Rate))
        .with_key("eta", Pace::new(Shown::Eta))
}

fn target(quiet: bool) -> ProgressDrawTarget {
    if quiet || !std::io::stderr().is_terminal() {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::term_like_with_hz(
            Box::new(Margin(console::Term::buffered_stderr())),
            20,
        )
    }
}

/// Columns left free at the right edge of the terminal.
const MARGIN: u16 = 3;

/// A terminal a few columns narrower than it is. indicatif pads each line to the terminal's
/// width, which leaves the cursor in the last column; the terminal's echo of Ctrl-C (`^C`)
/// then wraps to a new line, and clearing the bar clears that line only, leaving the bar's
/// last line above the "interrupted" message. With a margin the echo lands on the bar's line,
/// and is cleared with it.
#[derive(Debug)]
struct Margin<T>(T);

impl<T: TermLike> TermLike for Margin<T> {
    fn width(&self) -> u16 {
        self.0.width().saturating_sub(MARGIN).max(1)
    }
    fn height(&self) -> u16 {
        self.0.height()
    }
    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_up(n)
    }
    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_down(n)
    }
    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_right(n)
    }
    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_left(n)
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.0.write_line(s)
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.0.write_str(s)
    }
    fn clear_line(&self) -> std::io::Result<()> {
        self.0.clear_line()
    }
    fn flush(&self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// What a [`Pace`] prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    Rate,
    Eta,
}

/// A template key (`{rate}`, `{eta}`) measured from the first update the style sees.
#[derive(Debug, Clone)]
struct Pace {
    shown: Shown,
    /// The position and time of the first update.
    start: Option<(u64, Instant)>,
}

impl Pace {
    fn new(shown: Shown) -> Self {
        Self { shown, start: None }
    }
}

impl ProgressTracker for Pace {
    fn clone_box(&self) -> Box<dyn ProgressTracker> {
        Box::new(self.clone())
    }

    fn tick(&mut self, state: &ProgressState, now: Instant) {
        match self.start {
            // Counted down (a bar reused from zero): measure again.
            Some((pos, _)) if state.pos() < pos => self.start = Some((state.pos(), now)),
            Some(_) => {}
            None => self.start = Some((state.pos(), now)),
        }
    }

    fn reset(&mut self, _: &ProgressState, _: Instant) {
        self.start = None;
    }

    fn write(&self, state: &ProgressState, w: &mut dyn std::fmt::Write) {
        let (done, elapsed) = match self.start {
            Some((pos, at)) => (state.pos().saturating_sub(pos), at.elapsed()),
            None => (0, Duration::ZERO),
        };
        let text = match self.shown {
            Shown::Rate => rate_text(done, elapsed),
            Shown::Eta => {
                let left = state.len().map(|len| len.saturating_sub(state.pos()));
                eta_text(done, left, elapsed)
            }
        };
        let _ = w.write_str(&text);
    }
}

/// A rate for people: `done` units in `elapsed`, whole units per second from 10 up, one
/// decimal below (`"4.5/s"`, `"1,234/s"`); `"-/s"` before a second has passed.
pub fn rate_text(done: u64, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    if secs < 1.0 {
        return "-/s".to_owned();
    }
    let rate = done as f64 / secs;
    if rate < 10.0 {
        format!("{rate:.1}/s")
    } else {
        format!("{}/s", grouped(rate.round() as u64))
    }
}

/// The time left for people (`"ETA 3m 20s"`), from the average rate of `done` units in
/// `elapsed`, once it means something: `"ETA -"` before [`ETA_AFTER`] and [`ETA_ITEMS`], or
/// without a total (`left` is `None`).
pub fn eta_text(done: u64, left: Option<u64>, elapsed: Duration) -> String {
    let Some(left) = left else {
        return "ETA -".to_owned();
    };
    if left == 0 {
        return "ETA 0s".to_owned();
    }
    if elapsed < ETA_AFTER || done < ETA_ITEMS {
        return "ETA -".to_owned();
    }
    let secs = left as f64 * elapsed.as_secs_f64() / done as f64;
    format!(
        "ETA {}",
        duration_text(Duration::from_secs_f64(secs.min(1e9)))
    )
}

/// `45s`, `3m 20s`, `2h 05m`.
fn duration_text(d: Duration) -> String {
    let s = d.as_secs() + u64::from(d.subsec_millis() >= 500);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// `1234567` as `1,234,567`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
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
        let b = Progress::bar(true, 4, 1, "deleting", "objects");
        assert_eq!(b.position(), 1);
        b.inc(3);
        assert_eq!(b.position(), 4);
    }

    #[test]
    fn rates_are_rounded() {
        assert_eq!(rate_text(5, Duration::from_millis(500)), "-/s");
        assert_eq!(rate_text(9, Duration::from_secs(2)), "4.5/s");
        assert_eq!(rate_text(2, Duration::from_secs(3)), "0.7/s");
        assert_eq!(rate_text(1000, Duration::from_secs(3)), "333/s");
        assert_eq!(rate_text(3_703_704, Duration::from_secs(3)), "1,234,568/s");
        assert_eq!(rate_text(0, Duration::from_secs(3)), "0.0/s");
    }

    #[test]
    fn eta_waits_for_a_meaningful_rate() {
        // Too early, too few, or no total: no guess.
        assert_eq!(eta_text(1000, Some(5000), Duration::from_secs(1)), "ETA -");
        assert_eq!(eta_text(5, Some(5000), Duration::from_secs(10)), "ETA -");
        assert_eq!(eta_text(100, None, Duration::from_secs(10)), "ETA -");
        // 100 in 10 s, 4,900 left: 490 s.
        assert_eq!(
            eta_text(100, Some(4900), Duration::from_secs(10)),
            "ETA 8m 10s"
        );
        assert_eq!(eta_text(100, Some(50), Duration::from_secs(4)), "ETA 2s");
        assert_eq!(eta_text(100, Some(0), Duration::from_secs(4)), "ETA 0s");
        assert_eq!(
            eta_text(20, Some(20 * 4000), Duration::from_secs(3)),
            "ETA 3h 20m"
        );
    }

    #[test]
    fn durations_and_numbers() {
        assert_eq!(duration_text(Duration::from_millis(400)), "0s");
        assert_eq!(duration_text(Duration::from_secs(59)), "59s");
        assert_eq!(duration_text(Duration::from_secs(61)), "1m 01s");
        assert_eq!(duration_text(Duration::from_secs(7500)), "2h 05m");
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }

    #[test]
    fn a_phase_measures_its_pace_afresh() {
        let bar = ProgressBar::hidden();
        show_op(&bar, "move", "lock", 3, None);
        assert_eq!(bar.message(), "move (lock)");
        assert_eq!(bar.length(), None);
        show_op(&bar, "move", "copy", 1, Some(10));
        assert_eq!((bar.position(), bar.length()), (1, Some(10)));
        show_op(&bar, "move", "copy", 7, Some(10));
        assert_eq!(bar.position(), 7);
        show_op(&bar, "move", "delete", 2, Some(10));
        assert_eq!(bar.message(), "move (delete)");
        assert_eq!(bar.position(), 2);
    }

    /// Draws a spinner on `screen`, echoes Ctrl-C as a terminal does, then drops the
    /// progress as a command does on its way out; what is left on the screen.
    fn interrupted_on(screen: &Screen, target: ProgressDrawTarget) -> String {
        {
            let p = Progress::with_target(target, "moving", "");
            show_op(&p.handle(), "move", "lock", 3, None);
            // The steady tick draws.
            std::thread::sleep(Duration::from_millis(300));
            assert!(
                screen.text().contains("move (lock) 3 nodes"),
                "{:?}",
                screen.text()
            );
            screen.echo("^C");
        }
        screen.text()
    }

    #[test]
    fn ctrl_c_leaves_no_bar_behind() {
        let screen = Screen::default();
        let target = ProgressDrawTarget::term_like(Box::new(Margin(screen.clone())));
        let left = interrupted_on(&screen, target);
        assert_eq!(left.trim(), "", "{left:?}");
    }

    #[test]
    fn without_a_margin_the_echo_of_ctrl_c_strands_the_bar() {
        // What the margin is for: the bar's line is as wide as the terminal, the echo wraps,
        // and the clear misses the bar's line.
        let screen = Screen::default();
        let target = ProgressDrawTarget::term_like(Box::new(screen.clone()));
        let left = interrupted_on(&screen, target);
        assert!(left.contains("move (lock) 3 nodes"), "{left:?}");
    }

    /// A terminal screen in memory, as much of one as indicatif uses.
    #[derive(Debug, Clone, Default)]
    struct Screen(std::sync::Arc<std::sync::Mutex<ScreenState>>);

    #[derive(Debug, Default)]
    struct ScreenState {
        lines: Vec<String>,
        row: usize,
        col: usize,
    }

    const SCREEN_WIDTH: usize = 120;

    impl Screen {
        fn text(&self) -> String {
            self.0.lock().unwrap().lines.join("\n")
        }

        /// Echoes `text` at the cursor as a terminal does: past the last column it wraps.
        fn echo(&self, text: &str) {
            let mut s = self.0.lock().unwrap();
            for c in text.chars() {
                if s.col >= SCREEN_WIDTH {
                    s.row += 1;
                    s.col = 0;
                }
                s.put(&c.to_string());
            }
        }
    }

    impl ScreenState {
        fn put(&mut self, s: &str) {
            while self.lines.len() <= self.row {
                self.lines.push(String::new());
            }
            let line = &mut self.lines[self.row];
            let mut chars: Vec<char> = line.chars().collect();
            for (i, c) in s.chars().enumerate() {
                let at = self.col + i;
                if at < chars.len() {
                    chars[at] = c;
                } else {
                    chars.resize(at, ' ');
                    chars.push(c);
                }
            }
            self.col += s.chars().count();
            *line = chars.into_iter().collect();
        }
    }

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            SCREEN_WIDTH as u16
        }
        fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
            let mut s = self.0.lock().unwrap();
            s.row = s.row.saturating_sub(n);
            Ok(())
        }
        fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
            self.0.lock().unwrap().row += n;
            Ok(())
        }
        fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
            self.0.lock().unwrap().col += n;
            Ok(())
        }
        fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
            let mut s = self.0.lock().unwrap();
            s.col = s.col.saturating_sub(n);
            Ok(())
        }
        fn write_line(&self, line: &str) -> std::io::Result<()> {
            let mut s = self.0.lock().unwrap();
            s.put(line);
            s.row += 1;
            s.col = 0;
            Ok(())
        }
        fn write_str(&self, text: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().put(text);
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            let mut s = self.0.lock().unwrap();
            let row = s.row;
            if let Some(line) = s.lines.get_mut(row) {
                line.clear();
            }
            s.col = 0;
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
