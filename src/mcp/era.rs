//! Which revision of MCP a connection speaks, chosen per server when it is
//! connected and kept for that connection. The 2026-07-28 revision dropped
//! the `initialize` handshake: a client asks `server/discover`, and every
//! request then carries its version and capabilities in `_meta` (HTTP adds
//! the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers). An older
//! server answers that probe with an error, and is then spoken to with
//! `initialize` at the newest revision that still has one, 2025-11-25, as
//! the revision's backward-compatibility section asks. Sending `initialize`
//! with 2026-07-28 would be neither: a modern server ignores it and an old
//! one does not know the version.
//!
//! The probe, the fallback on the same connection, the per-request `_meta`
//! and headers, `input_required` retries and list caching are the SDK's
//! (rmcp 3.11, `ClientLifecycleMode::Auto`); this module only picks the
//! versions and reads back which one a connection settled on. It does not
//! own the transports (`http.rs`, `lines.rs`) nor what a server asks of the
//! user (`elicit.rs`).

use rmcp::model::ProtocolVersion;
use rmcp::service::ClientLifecycleMode;

/// The revision a modern server is spoken to in.
pub const MODERN: ProtocolVersion = ProtocolVersion::V_2026_07_28;
/// The revision an older server is offered in `initialize`: the newest that
/// still has the handshake.
pub const LEGACY: ProtocolVersion = ProtocolVersion::LATEST_WITH_INITIALIZE;

/// Probe with `server/discover`, fall back to `initialize` at [`LEGACY`].
pub fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![MODERN],
        legacy_version: Some(LEGACY),
    }
}

/// `initialize` at [`LEGACY`] alone, for a server that answered the probe
/// with something that is neither an error nor a discovery result.
pub fn handshake() -> ClientLifecycleMode {
    ClientLifecycleMode::Initialize
}

/// Whether a failed start means the server answered `server/discover` with
/// a result of another kind: an older server that answers whatever it does
/// not know with an empty result, which the SDK's probe does not take for a
/// refusal.
pub fn answered_discover_oddly(e: &rmcp::service::ClientInitializeError) -> bool {
    matches!(
        e,
        rmcp::service::ClientInitializeError::ExpectedInitResult(Some(_))
    )
}

/// The revision a connection settled on, as `/mcp` and `buddy mcp get` show
/// it: the version the server agreed to, whichever way it was agreed.
pub fn of(info: Option<&rmcp::model::ServerPeerInfo>) -> Option<String> {
    info.map(|i| crate::text::one_line(i.protocol_version.as_str(), 40))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fallback_offers_a_revision_with_a_handshake_and_the_probe_one_without() {
        assert!(LEGACY.has_initialize());
        assert!(!MODERN.has_initialize());
        match lifecycle() {
            ClientLifecycleMode::Auto {
                preferred_versions,
                legacy_version,
            } => {
                assert_eq!(preferred_versions, vec![ProtocolVersion::V_2026_07_28]);
                assert_eq!(legacy_version, Some(ProtocolVersion::V_2025_11_25));
            }
            other => panic!("not a probe with a fallback: {other:?}"),
        }
    }
}
