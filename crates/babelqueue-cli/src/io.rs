//! Where the CLI writes: machine output to standard output, always; notes to standard error;
//! progress bars to standard error, only when it is a terminal.

use std::io::{IsTerminal as _, Write};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use comfy_table::{ContentArrangement, Table, presets};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

type Sink = Arc<Mutex<Box<dyn Write + Send>>>;

/// The output streams of a run: the process's own ([`Io::std`]) or in-memory buffers
/// ([`Io::capture`]), for tests and for embedding the CLI.
#[derive(Clone)]
pub struct Io {
    out: Sink,
    err: Sink,
    progress: bool,
    bar: Arc<Mutex<Option<ProgressBar>>>,
}

impl std::fmt::Debug for Io {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io")
            .field("progress", &self.progress)
            .finish_non_exhaustive()
    }
}

/// What a captured run printed (see [`Io::capture`]).
#[derive(Debug, Clone, Default)]
pub struct Captured {
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
}

impl Captured {
    /// Everything written to standard output so far.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&lock(&self.out)).into_owned()
    }
    /// Everything written to standard error so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&lock(&self.err)).into_owned()
    }
}

struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        lock(&self.0).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `text` with U+2028 and U+2029 written as JSON escapes (see [`Io::line`]).
fn escape_line_separators(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(['\u{2028}', '\u{2029}']) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.replace('\u{2028}', "\\u2028")
            .replace('\u{2029}', "\\u2029"),
    )
}

/// A lock that a panicking writer did not make unusable (every write is one call).
fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Io {
    /// The process's standard output and error; progress bars only when standard error is a
    /// terminal.
    pub fn std() -> Io {
        Io::new(
            Box::new(std::io::stdout()),
            Box::new(std::io::stderr()),
            std::io::stderr().is_terminal(),
        )
    }

    /// In-memory streams, and the handle that reads them; never a progress bar.
    ///
    /// ```
    /// let (io, printed) = babelqueue_cli::Io::capture();
    /// # drop(io);
    /// assert_eq!(printed.stdout(), "");
    /// ```
    pub fn capture() -> (Io, Captured) {
        let captured = Captured::default();
        let io = Io::new(
            Box::new(Shared(captured.out.clone())),
            Box::new(Shared(captured.err.clone())),
            false,
        );
        (io, captured)
    }

    fn new(out: Box<dyn Write + Send>, err: Box<dyn Write + Send>, progress: bool) -> Io {
        Io {
            out: Arc::new(Mutex::new(out)),
            err: Arc::new(Mutex::new(err)),
            progress,
            bar: Arc::new(Mutex::new(None)),
        }
    }

    /// One line of machine output. A visible progress bar is hidden while it is written; a
    /// closed standard output (`| head`) is not an error worth a panic, so a failed write is
    /// dropped.
    ///
    /// U+2028 and U+2029 are written as the escapes `\u2028` and `\u2029`: many line splitters
    /// (Python's `str.splitlines`, JavaScript tooling) end a line there, and in a JSON line
    /// they can only stand inside a string, where the escape reads back as the same
    /// character. Only what the CLI prints changes; the wire bytes never do.
    pub(crate) fn line(&self, line: impl AsRef<str>) {
        let line = escape_line_separators(line.as_ref());
        let write = || {
            let mut out = lock(&self.out);
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        };
        match lock(&self.bar).as_ref() {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }

    /// Several machine lines at once (one lock, one flush), escaped as [`line`](Io::line)
    /// escapes them: a window of published messages costs one write, not one per message.
    pub(crate) fn lines<'a>(&self, lines: impl IntoIterator<Item = &'a str>) {
        let mut text = String::new();
        for line in lines {
            text.push_str(&escape_line_separators(line));
            text.push('\n');
        }
        let write = || {
            let mut out = lock(&self.out);
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        };
        match lock(&self.bar).as_ref() {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }

    /// A note for the operator on standard error, prefixed `babelqueue: `.
    pub(crate) fn note(&self, note: impl AsRef<str>) {
        let write = || {
            let mut err = lock(&self.err);
            let _ = writeln!(err, "babelqueue: {}", note.as_ref());
        };
        match lock(&self.bar).as_ref() {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }

    /// Raw text on standard error (clap's usage messages).
    pub(crate) fn err_text(&self, text: &str) {
        let _ = write!(lock(&self.err), "{text}");
    }

    /// Raw text on standard output (help, completion scripts).
    pub(crate) fn out_text(&self, text: &[u8]) {
        let mut out = lock(&self.out);
        let _ = out.write_all(text);
        let _ = out.flush();
    }

    /// A progress bar on standard error (`len` known: a bar; unknown: a spinner), drawn only
    /// when standard error is a terminal. Finish it with [`Io::done`].
    pub(crate) fn progress(&self, len: Option<u64>, message: impl Into<String>) -> ProgressBar {
        let target = if self.progress {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = match len {
            Some(len) => ProgressBar::with_draw_target(Some(len), target).with_style(
                ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({per_sec})")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            ),
            None => ProgressBar::with_draw_target(None, target).with_style(
                ProgressStyle::with_template("{spinner} {msg}: {pos} ({per_sec})")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            ),
        };
        bar.set_message(message.into());
        if self.progress {
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
        }
        *lock(&self.bar) = Some(bar.clone());
        bar
    }

    /// Clears the progress bar.
    pub(crate) fn done(&self) {
        if let Some(bar) = lock(&self.bar).take() {
            bar.finish_and_clear();
        }
    }

    /// Prints `rows` as an aligned table under `header` (`--output human`).
    pub(crate) fn table(&self, header: &[&str], rows: Vec<Vec<String>>) {
        let mut table = Table::new();
        table
            .load_style(presets::ASCII_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Disabled)
            .set_header(header.to_vec());
        for row in rows {
            table.add_row(row);
        }
        self.line(table.to_string());
    }
}
