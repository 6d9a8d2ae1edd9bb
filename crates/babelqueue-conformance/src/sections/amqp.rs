//! `rabbitmq` (scope `amqp`): the produce-side AMQP 0-9-1 projection, from the transport
//! crate's pure `BasicProperties` builder.

use babelqueue_core::Headers;
use babelqueue_transport_amqp::projection::{properties, properties_json};
use serde_json::Value;

use super::Ctx;
use crate::Case;
use crate::check::strict_equal;

/// `rabbitmq/property_projection`: the fixture's properties and native-typed headers.
pub(super) fn property_projection(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let body = ctx.fixture(c, "envelope_file")?;
    let props = properties(&body, &Headers::new()).map_err(|e| e.to_string())?;
    let view = properties_json(&props);
    for (block, field) in [("properties", "properties"), ("headers", "headers")] {
        let Some(Value::Object(want)) = c.get(field) else {
            return Err(format!("case has no `{field}` object"));
        };
        for (name, expected) in want {
            match view[block].get(name) {
                None => return Err(format!("{block}.{name} is absent, expected {expected}")),
                // Type-strict: the string "1" is not the integer 1.
                Some(got) if strict_equal(got, expected) => {}
                Some(got) => return Err(format!("{block}.{name} is {got}, expected {expected}")),
            }
        }
    }
    Ok(())
}
