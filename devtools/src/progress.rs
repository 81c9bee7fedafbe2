//! Progress of the long commands (`import`, `reindex`, `eval`, `bench`) as a live bar, only
//! where a person watches: when standard error is a terminal. Elsewhere (a pipe, a log file, a
//! test) nothing is drawn and each command writes its plain progress lines, as it always has.

use std::io::IsTerminal as _;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar on standard error when it is a terminal, else nothing. Cleared when dropped,
/// so that what the command prints last stands alone.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar towards `total`, or a spinner where the total is not known, drawn with `template`
    /// (indicatif's template language, e.g. `{bar:30} {pos}/{len}`); nothing unless standard
    /// error is a terminal.
    pub fn new(total: Option<u64>, template: &str) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self { bar: None };
        }
        let bar = match total {
            Some(total) => ProgressBar::new(total),
            None => {
                let spinner = ProgressBar::new_spinner();
                spinner.enable_steady_tick(Duration::from_millis(120));
                spinner
            }
        };
        // A template is the caller's constant; were one wrong, the default style still shows.
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        Self { bar: Some(bar) }
    }

    /// Whether a bar is drawn; when not, the caller writes its plain progress lines.
    pub fn shown(&self) -> bool {
        self.bar.is_some()
    }

    /// Moves the bar to `position`.
    pub fn set(&self, position: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(position);
        }
    }

    /// Sets the `{msg}` part of the template.
    pub fn message(&self, message: String) {
        if let Some(bar) = &self.bar {
            bar.set_message(message);
        }
    }

    /// Writes `line` to standard error, above the bar when one is drawn.
    pub fn eprintln(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
