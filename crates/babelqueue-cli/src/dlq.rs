//! `babelqueue dlq …`: list, show, retry, remove and redrive dead-lettered messages.
//!
//! A signal does not cut these short: a run that drained messages restores them before the
//! process exits (130/143).

use std::collections::BTreeSet;

use babelqueue::envelope::{Object, RawJson, check_publishable};
use babelqueue::redrive::{self, Entry, Redrive, RedriveItem, Removed};
use babelqueue::{App, Envelope, Transport};
use base64::Engine as _;

use crate::args::{ByIdArgs, DlqCommand, DlqTarget, Output, RedriveArgs, RetryArgs};
use crate::io::Io;
use crate::{CliResult, Session, close, wire};

/// One dead-letter entry, its fields as raw JSON (`null` when absent).
struct Record {
    /// The id tools address it by ([`redrive::EntryIds`]).
    id: String,
    urn: String,
    message_id: Option<String>,
    reason: RawJson,
    error: RawJson,
    attempts: RawJson,
    original_queue: RawJson,
    /// Why a consumer would refuse the body, when it would.
    poison: Option<String>,
    body: Vec<u8>,
}

/// A raw JSON value as a table cell: strings unquoted, `null` empty.
fn cell(value: &RawJson) -> String {
    match value.as_string() {
        Some(s) => s.into_owned(),
        None if value.is_null() => String::new(),
        None => value.as_str().to_owned(),
    }
}

impl Record {
    fn of(entry: &Entry) -> Record {
        let body = entry.body.as_slice();
        let envelope = Envelope::decode_lenient(body).envelope;
        let block = envelope
            .dead_letter()
            .and_then(|b| Object::parse(b.as_str()).ok());
        let field = |k: &str| {
            block
                .as_ref()
                .and_then(|b| b.get(k).cloned())
                .unwrap_or_else(RawJson::null)
        };
        Record {
            id: entry.id.clone(),
            urn: envelope.urn().into_owned(),
            message_id: envelope.message_id().map(|id| id.into_owned()),
            reason: field("reason"),
            error: field("error"),
            attempts: field("attempts"),
            original_queue: field("original_queue"),
            // The verdict a consumer runs, identity required: a record without a URN is not
            // an envelope either.
            poison: check_publishable(body).err().map(|e| e.to_string()),
            body: body.to_vec(),
        }
    }

    /// One JSON line: the body exactly (`body` when UTF-8, else `body_base64`).
    fn json(&self) -> String {
        format!(
            "{{\"id\":{},\"urn\":{},\"message_id\":{},\"reason\":{},\"error\":{},\"attempts\":{},\"original_queue\":{},\"readable\":{},\"poison_cause\":{},{}}}",
            RawJson::string(&self.id),
            RawJson::string(&self.urn),
            self.message_id
                .as_deref()
                .map_or_else(RawJson::null, RawJson::string),
            self.reason,
            self.error,
            self.attempts,
            self.original_queue,
            self.poison.is_none(),
            self.poison
                .as_deref()
                .map_or_else(RawJson::null, RawJson::string),
            wire::body_member(&self.body),
        )
    }

    /// A table row. An entry that is not an envelope says so where its URN would be, and why
    /// where its error would be, rather than showing an empty row.
    fn row(&self) -> Vec<String> {
        let urn = if self.urn.is_empty() && self.poison.is_some() {
            "(not an envelope)".to_owned()
        } else {
            self.urn.clone()
        };
        let error = match (cell(&self.error), &self.poison) {
            (error, Some(why)) if error.is_empty() => why.clone(),
            (error, _) => error,
        };
        vec![
            self.id.clone(),
            urn,
            cell(&self.reason),
            cell(&self.attempts),
            cell(&self.original_queue),
            error,
        ]
    }

    /// The body for people: the text when it is UTF-8, else `base64:` and its base64.
    fn shown_body(&self) -> String {
        match std::str::from_utf8(&self.body) {
            Ok(text) => text.to_owned(),
            Err(_) => format!(
                "base64:{}",
                base64::engine::general_purpose::STANDARD.encode(&self.body)
            ),
        }
    }
}

const RECORD_HEADER: &[&str] = &["ID", "URN", "REASON", "ATTEMPTS", "ORIGINAL_QUEUE", "ERROR"];

pub(crate) async fn run(session: &Session, command: DlqCommand) -> CliResult {
    let (url, target) = match &command {
        DlqCommand::List(a) => (a.url.url.as_str(), &a.target),
        DlqCommand::Redrive(a) => (a.dlq.url.url.as_str(), &a.dlq.target),
        DlqCommand::Show(a) | DlqCommand::Remove(a) => (a.url(), &a.target),
        DlqCommand::Retry(a) => (a.by_id.url(), &a.by_id.target),
    };
    let transport = session.connect(url).await?;
    let dlq = match dlq_name(transport.clone(), target) {
        Ok(dlq) => dlq,
        Err(e) => {
            close(session.io(), transport.as_ref()).await;
            return Err(e);
        }
    };
    let io = session.io();
    let result = match command {
        DlqCommand::List(a) => {
            list(io, transport.as_ref(), &dlq, a.max, a.target.output.output).await
        }
        DlqCommand::Show(a) => show(io, transport.as_ref(), &dlq, &a).await,
        DlqCommand::Retry(a) => retry(io, transport.as_ref(), &dlq, a).await,
        DlqCommand::Remove(a) => remove(io, transport.as_ref(), &dlq, &a).await,
        DlqCommand::Redrive(a) => redrive_all(io, transport.as_ref(), &dlq, a).await,
    };
    io.done();
    close(io, transport.as_ref()).await;
    result
}

/// `--dlq`, else the name the runtime gives the dead-letter queue of `--queue` on this broker.
fn dlq_name(
    transport: std::sync::Arc<dyn Transport>,
    target: &DlqTarget,
) -> Result<String, String> {
    if let Some(dlq) = &target.dlq {
        return Ok(dlq.clone());
    }
    let app = App::builder_arc(transport)
        .queue(target.queue.clone())
        .build()
        .map_err(|e| e.to_string())?;
    Ok(babelqueue::dead_letter_queue(
        app.policy(),
        &target.queue,
        app.transport().capabilities().dead_letter_namer(),
    ))
}

/// Says, on standard error, that reading `dlq` takes its messages and gives them back.
fn warn_if_draining(io: &Io, transport: &dyn Transport, dlq: &str) {
    if transport.capabilities().browser().is_none() {
        io.note(format!(
            "the {} transport cannot browse a queue: reading {dlq} drains it and restores every \
             message in order (a consumer of {dlq} could see them meanwhile)",
            transport.name()
        ));
    }
}

async fn list(
    io: &Io,
    transport: &dyn Transport,
    dlq: &str,
    max: usize,
    output: Output,
) -> CliResult {
    warn_if_draining(io, transport, dlq);
    let entries = redrive::entries(transport, dlq, max)
        .await
        .map_err(|e| e.to_string())?;
    print_records(io, &entries, output);
    io.note(format!("{} message(s) in {dlq}", entries.len()));
    Ok(())
}

fn print_records(io: &Io, entries: &[Entry], output: Output) {
    let records = entries.iter().map(Record::of);
    match output {
        Output::Json => records.for_each(|r| io.line(r.json())),
        Output::Human => io.table(RECORD_HEADER, records.map(|r| r.row()).collect()),
    }
}

/// Says which of `ids` were not among `found`; `Err` when any was missing.
fn missing(ids: &[String], found: &BTreeSet<String>, dlq: &str) -> CliResult {
    let absent: Vec<&str> = ids
        .iter()
        .filter(|id| !found.contains(*id))
        .map(String::as_str)
        .collect();
    if absent.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "no entry with this id in {dlq}: {} (`dlq list` prints every entry's id)",
            absent.join(", ")
        ))
    }
}

async fn show(io: &Io, transport: &dyn Transport, dlq: &str, args: &ByIdArgs) -> CliResult {
    warn_if_draining(io, transport, dlq);
    let wanted: BTreeSet<&str> = args.ids.iter().map(String::as_str).collect();
    let mut entries = redrive::entries(transport, dlq, 0)
        .await
        .map_err(|e| e.to_string())?;
    entries.retain(|entry| wanted.contains(entry.id.as_str()));
    match args.target.output.output {
        Output::Json => print_records(io, &entries, Output::Json),
        Output::Human => {
            for record in entries.iter().map(Record::of) {
                let mut rows: Vec<Vec<String>> = RECORD_HEADER
                    .iter()
                    .zip(record.row())
                    .map(|(k, v)| vec![k.to_lowercase(), v])
                    .collect();
                rows.push(vec!["body".to_owned(), record.shown_body()]);
                io.table(&["FIELD", "VALUE"], rows);
            }
        }
    }
    let found = entries.into_iter().map(|entry| entry.id).collect();
    missing(&args.ids, &found, dlq)
}

fn item_line(item: &RedriveItem) -> String {
    format!(
        "{{\"id\":{},\"message_id\":{},\"urn\":{},\"to\":{},\"redriven\":{},\"skipped\":{}}}",
        RawJson::string(&item.id),
        RawJson::string(&item.message_id),
        RawJson::string(&item.urn),
        RawJson::string(&item.to),
        item.redriven,
        item.skipped
            .as_deref()
            .map_or_else(RawJson::null, RawJson::string),
    )
}

fn item_row(item: &RedriveItem) -> Vec<String> {
    let result = match &item.skipped {
        None => "redriven".to_owned(),
        Some(why) => format!("kept: {why}"),
    };
    vec![item.id.clone(), item.urn.clone(), item.to.clone(), result]
}

const ITEM_HEADER: &[&str] = &["ID", "URN", "TO", "RESULT"];

/// Runs `options` over `dlq`, printing the items `shown` accepts (JSON as they happen, a table
/// at the end).
async fn run_redrive(
    io: &Io,
    transport: &dyn Transport,
    dlq: &str,
    options: &Redrive,
    output: Output,
    shown: &(dyn Fn(&RedriveItem) -> bool + Sync),
) -> Result<Vec<RedriveItem>, String> {
    let bar = io.progress(None, format!("redriving {dlq}"));
    let mut rows = Vec::new();
    let mut on_item = |item: &RedriveItem| {
        bar.inc(1);
        if !shown(item) {
            return;
        }
        match output {
            Output::Json => io.line(item_line(item)),
            Output::Human => rows.push(item_row(item)),
        }
    };
    let report = redrive::redrive(transport, dlq, options, &mut on_item).await;
    io.done();
    if output == Output::Human {
        io.table(ITEM_HEADER, rows);
    }
    let report = report.map_err(|e| e.to_string())?;
    io.note(format!(
        "{} redriven, {} kept in {dlq}",
        report.redriven, report.skipped
    ));
    Ok(report.items)
}

async fn redrive_all(
    io: &Io,
    transport: &dyn Transport,
    dlq: &str,
    args: RedriveArgs,
) -> CliResult {
    let mut options = Redrive::new().max(args.dlq.max).dry_run(args.dry_run);
    if let Some(urn) = args.select {
        options = options.select(move |envelope| envelope.urn() == urn);
    }
    if let Some(to) = args.to {
        options = options.to_queue(to);
    }
    let output = args.dlq.target.output.output;
    run_redrive(io, transport, dlq, &options, output, &|_| true).await?;
    Ok(())
}

async fn retry(io: &Io, transport: &dyn Transport, dlq: &str, args: RetryArgs) -> CliResult {
    let ids = args.by_id.ids;
    let mut options = Redrive::new().ids(ids.iter().cloned());
    if let Some(to) = args.to {
        options = options.to_queue(to);
    }
    let wanted: BTreeSet<String> = ids.iter().cloned().collect();
    let output = args.by_id.target.output.output;
    let items = run_redrive(io, transport, dlq, &options, output, &|item| {
        wanted.contains(&item.id)
    })
    .await?;
    let found: BTreeSet<String> = items
        .iter()
        .filter(|i| wanted.contains(&i.id))
        .map(|i| i.id.clone())
        .collect();
    missing(&ids, &found, dlq)?;
    let kept: Vec<String> = items
        .iter()
        .filter(|i| wanted.contains(&i.id) && !i.redriven)
        .map(|i| match &i.skipped {
            Some(why) => format!("{} ({why})", i.id),
            None => i.id.clone(),
        })
        .collect();
    if kept.is_empty() {
        Ok(())
    } else {
        Err(format!("kept in {dlq}, not retried: {}", kept.join(", ")))
    }
}

fn removed_line(r: &Removed) -> String {
    format!(
        "{{\"id\":{},\"message_id\":{},\"urn\":{},\"reason\":{},\"removed\":true}}",
        RawJson::string(&r.id),
        RawJson::string(&r.message_id),
        RawJson::string(&r.urn),
        RawJson::string(&r.reason),
    )
}

async fn remove(io: &Io, transport: &dyn Transport, dlq: &str, args: &ByIdArgs) -> CliResult {
    let output = args.target.output.output;
    let bar = io.progress(None, format!("removing from {dlq}"));
    let mut on_removed = |r: &Removed| {
        bar.inc(1);
        if output == Output::Json {
            io.line(removed_line(r));
        }
    };
    let removed = redrive::remove(transport, dlq, &args.ids, &mut on_removed).await;
    io.done();
    let removed = removed.map_err(|e| e.to_string())?;
    if output == Output::Human {
        io.table(
            &["ID", "URN", "REASON"],
            removed
                .iter()
                .map(|r| vec![r.id.clone(), r.urn.clone(), r.reason.clone()])
                .collect(),
        );
    }
    io.note(format!("{} removed from {dlq}", removed.len()));
    let found = removed.into_iter().map(|r| r.id).collect();
    missing(&args.ids, &found, dlq)
}
