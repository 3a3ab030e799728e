//! The request id: made for every request, read by the later layers from the request's
//! extensions, and answered in `x-request-id`.
//!
//! A client's own `x-request-id` is not kept (so `tower_http::request_id`, which keeps it, does
//! not do this job): the id names the server's log lines and error envelopes, so the server
//! alone makes it.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

/// The id of the request it is an extension of.
#[derive(Clone, Debug)]
pub(super) struct RequestId(String);

impl RequestId {
    /// The id of `req`, or `""` outside the [`assign`] layer.
    pub(super) fn of(req: &Request) -> &str {
        req.extensions()
            .get::<RequestId>()
            .map_or("", |id| id.0.as_str())
    }
}

/// Give the request a new id, and answer it in `x-request-id`.
pub(super) async fn assign(mut req: Request, next: Next) -> Response {
    let id = generate();
    req.extensions_mut().insert(RequestId(id.clone()));
    let mut res = next.run(req).await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut().insert("x-request-id", v);
    }
    res
}

/// A request id: `req_` and 24 hex digits, unique within the process and unlikely to repeat
/// across restarts.
pub(crate) fn generate() -> String {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        format!("req_{:016x}", h.finish())
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // `format!("{prefix}{n:08x}")` without the formatting machinery, once per request.
    let mut id = String::with_capacity(prefix.len() + 16);
    id.push_str(prefix);
    push_hex(&mut id, n, 8);
    id
}

/// `n` in lowercase hex, with leading zeros up to `min_digits`.
fn push_hex(out: &mut String, n: u64, min_digits: usize) {
    let digits = (n.checked_ilog2().map_or(1, |b| b / 4 + 1) as usize).max(min_digits);
    for i in (0..digits).rev() {
        let nibble = if i < 16 { (n >> (4 * i)) & 0xf } else { 0 };
        out.push(char::from(b"0123456789abcdef"[nibble as usize]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_as_format_writes_it() {
        for n in [
            0,
            1,
            0xf,
            0x10,
            0xdead_beef,
            0xffff_ffff,
            0x1_0000_0000,
            u64::MAX,
        ] {
            for min in [0, 8, 16, 20] {
                let mut s = String::new();
                push_hex(&mut s, n, min);
                assert_eq!(s, format!("{n:0min$x}"), "{n} {min}");
            }
        }
        let id = generate();
        assert!(id.starts_with("req_") && id.len() == 4 + 16 + 8, "{id}");
    }
}
