//! `babelqueue publish`: envelopes out, one JSON line each; `--raw` sends a body as it is.

use babelqueue::envelope::{RawJson, check_publishable};
use babelqueue::send::{self, Purpose};
use babelqueue::{App, Headers, Outgoing, Transport};

use crate::args::PublishArgs;
use crate::{CliResult, Session, close, seconds};

/// Envelopes per `App::publish_batch` call of `publish --count`: one window of the
/// transport's pipelined publish (RabbitMQ's publisher confirms in flight at once, the same
/// 1 024 its `publish_batch` keeps; two Redis script calls of 500; Kafka delivery reports).
/// Each window is confirmed by the broker before its lines are printed and the next is built,
/// so what the CLI printed is what the broker confirmed, and a failure names how many that
/// was. 1 024 envelopes of a few hundred bytes hold well under a megabyte.
pub(crate) const PUBLISH_WINDOW: u64 = 1024;

pub(crate) async fn run(session: &Session, args: PublishArgs) -> CliResult {
    // A raw body is read and checked before anything connects.
    let raw = if args.raw {
        Some(raw_body(&args).await?)
    } else {
        None
    };
    let transport = session.connect(&args.url.url).await?;
    let result = match raw {
        Some(body) => publish_raw(session, transport.as_ref(), &args, &body).await,
        None => match App::builder_arc(transport.clone())
            .queue(args.queue.clone())
            .build()
        {
            Ok(app) => publish_all(session, &app, args).await,
            Err(e) => Err(e.to_string()),
        },
    };
    session.io().done();
    close(session.io(), transport.as_ref()).await;
    result
}

/// The `--raw` body, from `--body-file` or standard input, checked with the verdict its
/// consumers run unless `--allow-poison`.
async fn raw_body(args: &PublishArgs) -> Result<Vec<u8>, String> {
    let file = args
        .body_file
        .as_ref()
        .map_or_else(|| "-".to_owned(), |p| p.display().to_string());
    let body = crate::inspect::read(&file).await?;
    if !args.allow_poison
        && let Err(refused) = check_publishable(&body)
    {
        return Err(format!(
            "refusing to publish a body every consumer would dead-letter as poison: {refused} \
             (--allow-poison sends it anyway)"
        ));
    }
    Ok(body)
}

/// Sends `body` unchanged, `--count` times, with `--delay` and `--header` where given; prints
/// one line per body sent (`{"queue", "bytes"}`).
async fn publish_raw(
    session: &Session,
    transport: &dyn Transport,
    args: &PublishArgs,
    body: &[u8],
) -> CliResult {
    let io = session.io();
    let headers: Headers = args.headers.iter().cloned().collect();
    let capabilities = transport.capabilities();
    let delay = args.delay.map(|d| seconds(d, "delay")).transpose()?;
    let bar = (args.count > 1).then(|| io.progress(Some(args.count), "publishing"));
    let line = format!(
        "{{\"queue\":{},\"bytes\":{}}}",
        RawJson::string(&args.queue),
        body.len()
    );
    // A plain body repeated goes out in windows, as envelopes do.
    if let (None, true, Some(publisher)) =
        (delay, headers.is_empty(), capabilities.batch_publisher())
    {
        let mut confirmed = 0;
        while confirmed < args.count && session.shutdown().exit().is_none() {
            let take = (args.count - confirmed).min(PUBLISH_WINDOW);
            let bodies = vec![body; usize::try_from(take).unwrap_or(usize::MAX)];
            publisher
                .publish_batch(&args.queue, &bodies)
                .await
                .map_err(|e| failed(confirmed, args.count, take, &e))?;
            io.lines((0..take).map(|_| line.as_str()));
            confirmed += take;
            if let Some(bar) = &bar {
                bar.inc(take);
            }
        }
        return Ok(());
    }
    for sent in 0..args.count {
        if session.shutdown().exit().is_some() {
            break;
        }
        // A delayed body goes without headers, as it always has from here.
        let mut asked = Outgoing::new(&args.queue, body);
        match delay {
            Some(delay) => asked = asked.delay(delay),
            None if !headers.is_empty() => asked = asked.headers(&headers),
            None => {}
        }
        let outgoing = send::shape(Purpose::Publish, &asked, capabilities.send_parts())
            .map_err(|_| format!("the {} transport cannot delay a message", transport.name()))?;
        let result = transport.send(&outgoing).await;
        result.map_err(|e| failed(sent, args.count, 1, &e))?;
        io.line(&line);
        if let Some(bar) = &bar {
            bar.inc(1);
        }
    }
    Ok(())
}

async fn publish_all(session: &Session, app: &App, args: PublishArgs) -> CliResult {
    let io = session.io();
    let data = RawJson::parse(&args.data).map_err(|e| format!("--data is not JSON: {e}"))?;
    let headers: Headers = args.headers.into_iter().collect();
    let urn = args.urn.unwrap_or_default();
    let envelope = |app: &App| {
        let mut builder = app.envelope(&urn).data_raw(data.clone());
        if let Some(trace_id) = &args.trace_id {
            builder = builder.trace_id(trace_id.clone());
        }
        builder.build().map_err(|e| e.to_string())
    };
    let bar = (args.count > 1).then(|| io.progress(Some(args.count), "publishing"));
    // A signal stops the loop between two publishes: what was printed was sent.
    let stopping = || session.shutdown().exit().is_some();
    // Plain envelopes go out in windows (`App::publish_batch`: pipelined, confirms in flight,
    // where the broker allows); a delayed or header-carrying publish is one call per envelope.
    if args.delay.is_none() && headers.is_empty() {
        let mut confirmed = 0;
        while confirmed < args.count && !stopping() {
            let take = (args.count - confirmed).min(PUBLISH_WINDOW);
            let batch = (0..take)
                .map(|_| envelope(app))
                .collect::<Result<Vec<_>, _>>()?;
            app.publish_batch(&args.queue, &batch)
                .await
                .map_err(|e| failed(confirmed, args.count, take, &e))?;
            let lines = batch
                .iter()
                .map(|sent| sent.encode().map_err(|e| e.to_string()))
                .collect::<Result<Vec<_>, _>>()?;
            io.lines(lines.iter().map(String::as_str));
            confirmed += take;
            if let Some(bar) = &bar {
                bar.inc(take);
            }
        }
        return Ok(());
    }
    for sent in 0..args.count {
        if stopping() {
            break;
        }
        let envelope = envelope(app)?;
        match args.delay {
            Some(delay) => {
                app.publish_delayed(&args.queue, &envelope, seconds(delay, "delay")?)
                    .await
            }
            None => app.publish_envelope(&args.queue, &envelope, &headers).await,
        }
        .map_err(|e| failed(sent, args.count, 1, &e))?;
        io.line(envelope.encode().map_err(|e| e.to_string())?);
        if let Some(bar) = &bar {
            bar.inc(1);
        }
    }
    Ok(())
}

/// The error of a publish that failed after `confirmed` of `asked` messages were confirmed (and
/// printed); the `in_flight` of the failed call may have reached the broker in part.
fn failed(confirmed: u64, asked: u64, in_flight: u64, error: &dyn std::fmt::Display) -> String {
    let unknown = if in_flight == 1 {
        "the one in flight may have reached the queue".to_owned()
    } else {
        format!("some of the {in_flight} in flight may have reached the queue")
    };
    format!(
        "publishing failed after {confirmed} of {asked} messages were confirmed (their lines are \
         printed; {unknown}, so publishing again may duplicate them): {error}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_says_how_many_were_confirmed() {
        let text = failed(2048, 20_000, 1024, &"connection reset");
        assert!(
            text.starts_with("publishing failed after 2048 of 20000 messages were confirmed"),
            "{text}"
        );
        assert!(text.contains("some of the 1024 in flight"), "{text}");
        assert!(text.ends_with(": connection reset"), "{text}");
        assert!(failed(0, 1, 1, &"x").contains("the one in flight"));
    }
}
