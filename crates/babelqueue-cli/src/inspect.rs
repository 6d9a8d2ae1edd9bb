//! `babelqueue inspect`: classify one body; exit 3 when it is poison.

use babelqueue::Envelope;
use babelqueue::envelope::{RawJson, Verdict, classify, poison_cause};
use tokio::io::AsyncReadExt as _;

use crate::POISON;
use crate::args::{InspectArgs, Output};
use crate::io::Io;

/// The bytes of `file`, or of standard input for `-`.
pub(crate) async fn read(file: &str) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    if file == "-" {
        tokio::io::stdin()
            .read_to_end(&mut body)
            .await
            .map_err(|e| format!("cannot read standard input: {e}"))?;
    } else {
        body = tokio::fs::read(file)
            .await
            .map_err(|e| format!("cannot read {file}: {e}"))?;
    }
    Ok(body)
}

pub(crate) async fn run(io: &Io, args: InspectArgs) -> Result<u8, String> {
    let body = read(&args.file).await?;
    let verdict = classify(&body);
    let verdict_name = match verdict {
        Verdict::Ok => "ok",
        Verdict::NoIdentity => "no_identity",
        Verdict::Poison(_) => "poison",
    };
    // The verdict's cause, with the member named where one member is at fault.
    let cause = poison_cause(&body, true).map(|c| {
        babelqueue::envelope::check_publishable(&body)
            .err()
            .map_or_else(|| c.to_string(), |refused| refused.to_string())
    });
    let decoded = Envelope::decode_checked(&body);
    let (envelope, warnings) = match &decoded {
        Ok(d) => (
            d.envelope
                .encode()
                .unwrap_or_else(|e| RawJson::string(&e.to_string()).into_string()),
            d.warnings.iter().map(ToString::to_string).collect(),
        ),
        Err(_) => ("null".to_owned(), Vec::new()),
    };
    let urn = decoded
        .as_ref()
        .map_or_else(|_| String::new(), |d| d.envelope.urn().into_owned());
    match args.output.output {
        Output::Json => io.line(format!(
            "{{\"verdict\":\"{verdict_name}\",\"poison_cause\":{},\"urn\":{},\"warnings\":[{}],\"envelope\":{envelope}}}",
            cause
                .as_deref()
                .map_or_else(RawJson::null, RawJson::string),
            RawJson::string(&urn),
            warnings
                .iter()
                .map(|w| RawJson::string(w).into_string())
                .collect::<Vec<_>>()
                .join(",")
        )),
        Output::Human => {
            let mut rows = vec![
                vec!["verdict".to_owned(), verdict_name.to_owned()],
                vec!["poison cause".to_owned(), cause.unwrap_or_default()],
                vec!["urn".to_owned(), urn],
            ];
            rows.extend(warnings.into_iter().map(|w| vec!["warning".to_owned(), w]));
            rows.push(vec!["envelope".to_owned(), envelope]);
            io.table(&["FIELD", "VALUE"], rows);
        }
    }
    Ok(if matches!(verdict, Verdict::Poison(_)) {
        POISON
    } else {
        0
    })
}
