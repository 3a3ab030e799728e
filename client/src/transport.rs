//! Sending one request and reading its whole answer: through the client's own connections to
//! a plain `http://` server ([`pool`](super::pool)), or through reqwest for everything else.
//! A failed exchange becomes [`Error::Transport`] here, its cause kept as the source. Retrying
//! is not done here but in [`retry`](super::retry), which also reads `Retry-After`.

use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use reqwest::{Method, Url};

use super::pool::Direct;
use super::Http;
use turnwise_core::protocol::error::{Error, Result, Source};
use turnwise_core::protocol::Lease;

/// The W3C trace context header, sent on every request ([`turnwise_core::trace`]).
pub(super) const TRACEPARENT: &str = "traceparent";

/// Whether a route may be sent again after a `429`, a `5xx` or a transport failure (the
/// rules are in `retry.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Retry {
    Yes,
    Once,
}

/// One request, as [`Http::send`] sends it.
pub(super) struct Call<'a> {
    pub(super) method: Method,
    pub(super) path: &'static str,
    pub(super) query: Vec<(&'static str, String)>,
    /// The body, serialized once: every try sends these bytes.
    pub(super) body: Option<Bytes>,
    pub(super) retry: Retry,
    pub(super) timeout: Duration,
    /// The lease of a turn route, to fill [`Error::LeaseLost`].
    pub(super) lease: Option<&'a Lease>,
}

/// An answer, from either way of sending.
pub(super) struct Reply {
    pub(super) status: u16,
    /// The `Retry-After` header as sent (`retry.rs` reads it).
    pub(super) retry_after: Option<HeaderValue>,
    pub(super) body: Bytes,
}

/// What one try ends with: an answer, or the transport error and whether it may be retried.
pub(super) type Outcome = std::result::Result<Reply, (Error, bool)>;

impl Http {
    /// The URL of a call, and its request target when this client sends on its own.
    pub(super) fn url(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<(Url, Option<hyper::Uri>)> {
        if query.is_empty() {
            if let Some((_, url, target)) = self.config.fixed.iter().find(|(p, ..)| *p == path) {
                return Ok((url.clone(), target.clone()));
            }
        }
        let url = self.config.build_url(path, query)?;
        let target = self.direct.as_ref().and_then(|_| Direct::target(&url));
        Ok((url, target))
    }

    /// One try of `call`: over the client's own connections when it has them for this URL,
    /// through reqwest otherwise (and to follow a redirect).
    pub(super) async fn try_once(
        &self,
        call: &Call<'_>,
        url: &Url,
        target: Option<&hyper::Uri>,
        traceparent: Option<&HeaderValue>,
    ) -> Outcome {
        let (Some(direct), Some(target)) = (&self.direct, target) else {
            return self.via_reqwest(call, url, call.timeout, traceparent).await;
        };
        let sent = Instant::now();
        match direct
            .send(
                &call.method,
                target,
                call.body.as_ref(),
                traceparent,
                call.timeout,
            )
            .await
        {
            // reqwest follows redirects: let it, from the start, in the time left.
            Ok(r) if (300..400).contains(&r.status) => {
                let left = call.timeout.saturating_sub(sent.elapsed());
                self.via_reqwest(call, url, left, traceparent).await
            }
            Ok(r) => Ok(Reply {
                status: r.status,
                retry_after: r.headers.get(RETRY_AFTER).cloned(),
                body: r.body,
            }),
            Err(e) => Err((transport(call, e), true)),
        }
    }

    /// One try of `call` through reqwest within `timeout`.
    async fn via_reqwest(
        &self,
        call: &Call<'_>,
        url: &Url,
        timeout: Duration,
        traceparent: Option<&HeaderValue>,
    ) -> Outcome {
        let mut request = self
            .client
            .request(call.method.clone(), url.clone())
            .timeout(timeout);
        if let Some(traceparent) = traceparent {
            request = request.header(TRACEPARENT, traceparent.clone());
        }
        if let Some(body) = &call.body {
            request = request
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(body.clone());
        }
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let retry_after = response.headers().get(RETRY_AFTER).cloned();
                match response.bytes().await {
                    Ok(body) => Ok(Reply {
                        status,
                        retry_after,
                        body,
                    }),
                    Err(e) => Err((transport(call, e), true)),
                }
            }
            Err(e) => {
                let retry = !e.is_builder();
                Err((transport(call, e), retry))
            }
        }
    }
}

/// A failed exchange as [`Error::Transport`]: the call, then every cause in the chain; `e`
/// stays the error's source.
pub(super) fn transport<E>(call: &Call<'_>, e: E) -> Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    let mut message = format!("{} {}: {e}", call.method, call.path);
    let mut source = e.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    Error::Transport {
        message,
        source: Some(Source::new(e)),
    }
}
