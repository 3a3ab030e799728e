//! Helpers shared by the runtime's test files.

#![allow(dead_code)]

use std::time::Duration;

/// Bounds every real-time wait of these tests.
pub const GUARD: Duration = Duration::from_secs(10);

/// Poll `check` until it returns `Some`, for at most [`GUARD`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let give_up = tokio::time::Instant::now() + GUARD;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
