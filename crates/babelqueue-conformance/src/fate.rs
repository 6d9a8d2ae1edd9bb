//! The fate of a body on the real runtime (`babelqueue-core` on `memory://`).

/// What happens to `body` on the in-memory runtime with dead-lettering on and `max_attempts` 3.
pub(crate) fn identity(_body: &[u8], _ok: bool) -> Result<(), String> {
    Err("not implemented: the fate half of this case needs the runtime (babelqueue-core)".into())
}
