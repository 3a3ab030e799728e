//! Change notices between the processes sharing one database: each commit that matters to
//! waiting claims or readers sends a `NOTIFY` in its transaction (so it is delivered only if
//! the commit is), and each store keeps one connection that `LISTEN`s and hands what the other
//! processes committed to its watchers.

use std::future::poll_fn;
use std::sync::{Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client, Config, NoTls, Notification};

use super::pg;
use turnwise_core::protocol::Millis;
use turnwise_core::store::{Change, Notice, StoreError, Watcher};

/// The payload that tells every process to look again at everything. The commit function
/// (`schema.rs`) builds the others, `[node, ns, id, type, version, due, settled]`, and sends
/// this one instead when they would pass `NOTIFY`'s 8000 bytes.
const MISSED: &str = "*";

/// What one store shares with its listening task.
pub(super) struct Notices {
    /// This store's id, in every payload it sends, so that it skips its own.
    pub(super) node: String,
    /// The channel: one per schema, so that stores in other schemas are not woken.
    pub(super) channel: String,
    watchers: Mutex<Vec<Watcher>>,
    /// Why the listening connection is down, while it is.
    down: Mutex<Option<String>>,
}

impl Notices {
    pub(super) fn new(node: String, channel: String) -> Self {
        Self {
            node,
            channel,
            watchers: Mutex::new(Vec::new()),
            down: Mutex::new(None),
        }
    }

    pub(super) fn watch(&self, watcher: Watcher) {
        self.watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(watcher);
    }

    fn deliver(&self, notice: &Notice) {
        self.watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|w| w(notice));
    }

    /// `Err` while the listening connection is down, saying why.
    pub(super) fn health(&self) -> Result<(), StoreError> {
        match &*self.down.lock().unwrap_or_else(PoisonError::into_inner) {
            None => Ok(()),
            Some(why) => Err(StoreError::new(format!(
                "postgres: the connection to the database is down ({why}); reconnecting"
            ))),
        }
    }

    fn set_down(&self, why: Option<String>) {
        *self.down.lock().unwrap_or_else(PoisonError::into_inner) = why;
    }

    /// Hand one notification to the watchers, unless this store sent it.
    fn received(&self, n: &Notification) {
        if n.payload() == MISSED {
            return self.deliver(&Notice::Missed);
        }
        type Fields = (String, String, String, String, String, Option<Millis>, bool);
        let Ok((node, ns, id, workflow_type, version, due_at_ms, settled)) =
            serde_json::from_str::<Fields>(n.payload())
        else {
            tracing::warn!(
                payload = n.payload(),
                "postgres: an unreadable change notice"
            );
            return self.deliver(&Notice::Missed);
        };
        if node == self.node {
            return;
        }
        self.deliver(&Notice::Changed(Change {
            ns,
            id,
            workflow_type,
            version,
            due_at_ms,
            settled,
        }))
    }
}

/// One listening connection: its client (dropping it closes the connection) and the
/// notifications its driving task receives.
pub(super) struct Listening {
    _client: Client,
    received: mpsc::UnboundedReceiver<Notification>,
}

/// Open a connection and `LISTEN` on the channel.
pub(super) async fn listen(config: &Config, channel: &str) -> Result<Listening, StoreError> {
    let (client, mut connection) = config
        .connect(NoTls)
        .await
        .map_err(pg("connect for change notices"))?;
    let (tx, received) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(message) = poll_fn(|cx| connection.poll_message(cx)).await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if tx.send(n).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    let e = super::failed("the change-notice connection failed", e);
                    tracing::warn!("{e}");
                    return;
                }
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN \"{channel}\""))
        .await
        .map_err(pg("listen for change notices"))?;
    Ok(Listening {
        _client: client,
        received,
    })
}

/// Hand notices to the watchers until the store is dropped; reconnect when the connection
/// drops, and then report [`Notice::Missed`], since commits may have been missed meanwhile.
pub(super) async fn run(notices: Weak<Notices>, config: Config, mut listening: Listening) {
    let mut pause = Duration::from_millis(50);
    loop {
        while let Some(n) = listening.received.recv().await {
            let Some(notices) = notices.upgrade() else {
                return;
            };
            notices.received(&n);
        }
        // The connection is gone: say so, then reconnect.
        loop {
            let Some(shared) = notices.upgrade() else {
                return;
            };
            if shared
                .down
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_none()
            {
                shared.set_down(Some("the listening connection closed".into()));
            }
            let channel = shared.channel.clone();
            drop(shared);
            match listen(&config, &channel).await {
                Ok(l) => {
                    listening = l;
                    pause = Duration::from_millis(50);
                    if let Some(shared) = notices.upgrade() {
                        shared.set_down(None);
                        tracing::info!("postgres: change notices are back");
                        shared.deliver(&Notice::Missed);
                    }
                    break;
                }
                Err(e) => {
                    if let Some(shared) = notices.upgrade() {
                        shared.set_down(Some(e.to_string()));
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
        }
    }
}

/// The channel of the stores whose tables are in `schema`.
pub(super) fn channel(schema: &str) -> String {
    format!("turnwise.{schema}")
}

/// A process-unique id for a store, without a random-number crate: the standard library's
/// randomly keyed hasher over the process id and the time.
pub(super) fn node_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    format!("{:016x}", h.finish())
}
