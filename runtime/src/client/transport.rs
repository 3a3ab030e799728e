//! Sending one request and reading its whole answer: through the client's own connections to
//! a plain `http://` server ([`pool`](super::pool)), or through reqwest for everything else.
//! Retrying is not done here but in [`retry`](super::retry).

use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::header::{HeaderValue, CONTENT_TYPE};
use reqwest::{Method, Url};

use super::errors::transport;
use super::pool::Direct;
use super::retry::{retry_after, Retry};
use super::Http;
use crate::protocol::error::{Error, Result};
use crate::protocol::Lease;

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
    /// The `Retry-After` header, read.
    pub(super) retry_after: Option<Duration>,
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
    ) -> Outcome {
        let (Some(direct), Some(target)) = (&self.direct, target) else {
            return self.via_reqwest(call, url, call.timeout).await;
        };
        let sent = Instant::now();
        match direct
            .send(&call.method, target, call.body.as_ref(), call.timeout)
            .await
        {
            // reqwest follows redirects: let it, from the start, in the time left.
            Ok(r) if (300..400).contains(&r.status) => {
                let left = call.timeout.saturating_sub(sent.elapsed());
                self.via_reqwest(call, url, left).await
            }
            Ok(r) => Ok(Reply {
                status: r.status,
                retry_after: retry_after(&r.headers),
                body: r.body,
            }),
            Err(e) => Err((transport(call, e), true)),
        }
    }

    /// One try of `call` through reqwest within `timeout`.
    async fn via_reqwest(&self, call: &Call<'_>, url: &Url, timeout: Duration) -> Outcome {
        let mut request = self
            .client
            .request(call.method.clone(), url.clone())
            .timeout(timeout);
        if let Some(body) = &call.body {
            request = request
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(body.clone());
        }
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let retry_after = retry_after(response.headers());
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
