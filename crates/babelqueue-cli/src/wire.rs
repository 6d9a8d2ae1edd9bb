//! What crossed the wire, as JSON members of the CLI's lines: a body byte for byte, the
//! members of an envelope as they came, a delivery's headers, facts and broker view.

use babelqueue::envelope::{Object, RawJson};
use babelqueue::{Count, Declared, Delivery, Facts, Headers, Transport, transport::BrokerView};
use base64::Engine as _;

/// `"body":TEXT` when `body` is UTF-8, else `"body_base64":STANDARD-PADDED-BASE64`: either reads
/// back to the exact bytes.
pub(crate) fn body_member(body: &[u8]) -> String {
    match std::str::from_utf8(body) {
        Ok(text) => format!("\"body\":{}", RawJson::string(text)),
        Err(_) => format!(
            "\"body_base64\":\"{}\"",
            base64::engine::general_purpose::STANDARD.encode(body)
        ),
    }
}

/// The top-level members of `body` as they came (unknown ones too; a repeated name shows its
/// last value, as every SDK reads it), or `null` when the body is not a JSON object.
pub(crate) fn members(body: &[u8]) -> String {
    std::str::from_utf8(body)
        .ok()
        .and_then(|text| Object::parse(text).ok())
        .map_or_else(|| "null".to_owned(), |object| object.to_raw().into_string())
}

fn string_or_null(value: Option<&str>) -> String {
    value.map_or_else(|| "null".to_owned(), |v| RawJson::string(v).into_string())
}

/// The headers as a JSON object.
pub(crate) fn headers(headers: &Headers) -> String {
    let members: Vec<String> = headers
        .iter()
        .map(|(k, v)| format!("{}:{}", RawJson::string(k), RawJson::string(v)))
        .collect();
    format!("{{{}}}", members.join(","))
}

/// The facts a transport reported, as a JSON object (`null` for what it did not report).
pub(crate) fn facts(facts: &Facts) -> String {
    let declared = match &facts.declared_version {
        Declared::Absent => "null".to_owned(),
        Declared::Null => "{\"null\":true}".to_owned(),
        Declared::Text(text) => format!("{{\"text\":{}}}", RawJson::string(text)),
        Declared::Integer(n) => format!("{{\"integer\":{n}}}"),
        Declared::Float(f) if f.is_finite() => format!("{{\"float\":{f}}}"),
        Declared::Float(f) => format!("{{\"float\":{}}}", RawJson::string(&f.to_string())),
        Declared::Bool(b) => format!("{{\"bool\":{b}}}"),
        other => format!("{{\"other\":{}}}", RawJson::string(&format!("{other:?}"))),
    };
    let count = match facts.count {
        None => "null".to_owned(),
        Some(Count::Redelivered(n)) => format!("{{\"redelivered\":{n}}}"),
        Some(Count::Carried(n)) => format!("{{\"carried\":{n}}}"),
        Some(Count::CarriedOrBody {
            carried,
            redelivered,
        }) => format!(
            "{{\"carried\":{},\"redelivered\":{redelivered}}}",
            carried.map_or_else(|| "null".to_owned(), |c| c.to_string())
        ),
    };
    format!(
        "{{\"urn\":{},\"declared_version\":{declared},\"count\":{count},\"native_attempts\":{},\
         \"original_queue\":{},\"poison_always_dead_lettered\":{},\"attempts_not_counted\":{}}}",
        string_or_null(facts.urn.as_deref()),
        facts.count.map_or(0, |c| c.native()),
        string_or_null(facts.original_queue.as_deref()),
        facts.poison_always_dead_lettered,
        facts.attempts_not_counted,
    )
}

/// What the broker knows of `delivery` (its transport's [`Inspector`](babelqueue::Inspector)),
/// as a JSON object; `null` when the transport cannot say.
pub(crate) fn broker(transport: &dyn Transport, delivery: &Delivery) -> String {
    let Some(inspector) = transport.capabilities().inspector() else {
        return "null".to_owned();
    };
    let BrokerView {
        id,
        redelivered,
        properties,
        ..
    } = inspector.inspect(delivery);
    let properties: Vec<String> = properties
        .iter()
        .map(|(k, v)| format!("{}:{}", RawJson::string(k), RawJson::string(v)))
        .collect();
    format!(
        "{{\"id\":{},\"redelivered\":{},\"properties\":{{{}}}}}",
        string_or_null(id.as_deref()),
        redelivered.map_or_else(|| "null".to_owned(), |r| r.to_string()),
        properties.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_reads_back_to_its_exact_bytes() {
        for body in [
            &b"{\"job\":\"urn:a\",\"data\":{\"s\":\"\\u2028 \xe2\x80\xa8 \xc3\xa9\"}}"[..],
            b"",
            b"\xff\xfe{garbage",
            b"line\nbreak\ttab \"quote\" \\",
        ] {
            let line: serde_json::Value =
                serde_json::from_str(&format!("{{{}}}", body_member(body))).unwrap();
            let back = match (line.get("body"), line.get("body_base64")) {
                (Some(text), None) => text.as_str().unwrap().as_bytes().to_vec(),
                (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                    .decode(b64.as_str().unwrap())
                    .unwrap(),
                other => panic!("{other:?}"),
            };
            assert_eq!(back, body);
        }
    }

    #[test]
    fn members_show_every_top_level_member_unknown_ones_too() {
        assert_eq!(
            members(br#"{"job":"urn:a","x-ext":[1,2],"data":{"n":1e400}}"#),
            r#"{"job":"urn:a","x-ext":[1,2],"data":{"n":1e400}}"#
        );
        assert_eq!(members(b"[1]"), "null");
        assert_eq!(members(b"\xff"), "null");
    }
}
